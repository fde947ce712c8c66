//! `cardinal data check`, `cardinal kb lint`, `cardinal kb stats`.

use std::path::Path;

use anyhow::Result;
use cardinal_dataset::{CaseType, LoadedCase, Stats};
use cardinal_kb::{ChunkerConfig, Diagnostics, KnowledgeBase, Lang};

use crate::Outcome;

/// Load the KB and the cases leniently: everything that parses, plus every problem.
fn load_all(data: &Path) -> Result<(KnowledgeBase, Vec<LoadedCase>, Diagnostics)> {
    let (kb, mut diags) = KnowledgeBase::load_lenient(&data.join("kb"))?;
    let (cases, case_diags) = cardinal_dataset::load_case_dir(&data.join("cases"))?;
    diags.extend(case_diags);
    Ok((kb, cases, diags))
}

fn report(diags: Diagnostics, ok_line: String) -> Outcome {
    if diags.is_empty() {
        println!("{ok_line}");
        Outcome::Pass
    } else {
        let n = diags.len();
        for d in diags.sorted().iter() {
            eprintln!("{d}");
        }
        eprintln!("{n} problem(s) found");
        Outcome::InputError
    }
}

pub fn check(data: &Path) -> Result<Outcome> {
    let (kb, cases, mut diags) = load_all(data)?;
    diags.extend(cardinal_dataset::check(&kb, &cases));
    let (items, item_diags) =
        cardinal_dataset::calibration::load_calibration_dir(&data.join("calibration"))?;
    diags.extend(item_diags);
    diags.extend(cardinal_dataset::calibration::check_calibration(
        &kb, &cases, &items,
    ));
    // The corpus-level gate (counts, spreads, shortcut baselines, split, second labels, header
    // non-contradiction), once every item is valid.
    let corpus_problems = if diags.is_empty() {
        cardinal_harness::corpus::check(&kb, &items).problems
    } else {
        Vec::new()
    };
    for p in &corpus_problems {
        diags.push(cardinal_kb::Diagnostic::new(
            data.join("calibration"),
            0,
            "corpus",
            p.clone(),
        ));
    }
    let gold = cases.iter().filter(|c| c.case.has_gold()).count();
    Ok(report(
        diags,
        format!(
            "data check ok: {} cards, {} topics, {} cases ({gold} with gold), {} calibration items; every gold and cited id resolves",
            kb.len(),
            kb.topics().len(),
            cases.len(),
            items.len()
        ),
    ))
}

pub fn lint(data: &Path) -> Result<Outcome> {
    let (kb, mut diags) = KnowledgeBase::load_lenient(&data.join("kb"))?;
    diags.extend(cardinal_kb::lint::lint_kb(&kb)?);
    // Cases and calibration answers are synthetic too: same checks on their text.
    for sub in ["cases", "calibration"] {
        let dir = data.join(sub);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().and_then(|x| x.to_str()) == Some("jsonl"))
            .collect();
        files.sort();
        for f in files {
            // Encoding problems are `data check`'s to report; lint reads the text as decoded.
            let (text, _) = cardinal_kb::read_data_file(&f)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", f.display()))?;
            diags.extend(cardinal_kb::lint::lint_text(&f, &text));
        }
    }
    Ok(report(
        diags,
        format!(
            "kb lint ok: {} cards, plus case and calibration files; synthetic-only invariant holds",
            kb.len()
        ),
    ))
}

pub fn stats(data: &Path, json: bool) -> Result<Outcome> {
    let (kb, cases, mut diags) = load_all(data)?;
    diags.extend(cardinal_dataset::check(&kb, &cases));
    if !diags.is_empty() {
        for d in diags.sorted().iter() {
            eprintln!("{d}");
        }
        eprintln!("kb stats: the data has problems; fix them first (`cardinal data check`)");
        return Ok(Outcome::InputError);
    }
    let s = cardinal_dataset::stats(&kb, &cases, &ChunkerConfig::default());
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", render_stats(&s));
    }
    Ok(Outcome::Pass)
}

fn render_stats(s: &Stats) -> String {
    let mut out = String::new();
    out.push_str("Knowledge base\n");
    out.push_str(&format!(
        "  {:<8} {:>6} {:>7} {:>7} {:>6}\n",
        "lang", "cards", "chunks", "claims", "rules"
    ));
    for (lang, k) in &s.kb {
        out.push_str(&format!(
            "  {:<8} {:>6} {:>7} {:>7} {:>6}\n",
            lang.tag(),
            k.cards,
            k.chunks,
            k.claims,
            k.rules
        ));
    }
    out.push_str(&format!(
        "  topics: {} ({} in all three languages, {} with a medication-safety rule)\n\n",
        s.topics, s.topics_complete, s.topics_with_safety_rule
    ));
    out.push_str("Cases (total / with gold / with 2+ gold)\n");
    out.push_str(&format!("  {:<8}", "lang"));
    for t in CaseType::ALL {
        out.push_str(&format!(" {:>14}", t.as_str()));
    }
    out.push_str(&format!(" {:>8}\n", "total"));
    for lang in Lang::ALL {
        let Some(row) = s.cases.get(&lang) else {
            continue;
        };
        out.push_str(&format!("  {:<8}", lang.tag()));
        let mut total = 0;
        for t in CaseType::ALL {
            let c = row.get(&t).cloned().unwrap_or_default();
            total += c.cases;
            out.push_str(&format!(
                " {:>14}",
                format!("{}/{}/{}", c.cases, c.with_gold, c.multi_gold)
            ));
        }
        out.push_str(&format!(" {total:>8}\n"));
    }
    out.push_str(&format!(
        "  total: {} cards, {} cases\n",
        s.total_cards(),
        s.total_cases()
    ));
    out
}
