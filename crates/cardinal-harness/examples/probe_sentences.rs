//! Experiment (issue 14, docs/calibration.md "probe-v1 read sentence by sentence"): probe-v1's
//! reading (block 14 of the 1.5B judge) averaged over each sentence of the answer instead of
//! the whole answer, written as JSON lines for `scripts/experiments/probe_sentences.py`.
//!
//! ```text
//! cargo run -p cardinal-harness --example probe_sentences -- \
//!     --split dev --framing full --out .cardinal/exp/sentences-dev-full.jsonl
//! ```
//!
//! `--category rule_violation` reads only that category's items (the header-only control).
//!
//! Resumable: items already in the output file are skipped. Not part of the product.
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use cardinal_dataset::calibration::{load_calibration_dir, Category, Split};
use cardinal_judge::checks::CheckFraming;
use cardinal_kb::KnowledgeBase;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The answer cut after each sentence, so each piece but the first starts with the whitespace
/// before its sentence (where the tokenizer splits anyway); the pieces join to `span`.
fn pieces(span: &str) -> Vec<String> {
    let mut ends: Vec<usize> = cardinal_kb::text::sentences(span)
        .iter()
        .map(|s| s.as_ptr() as usize - span.as_ptr() as usize + s.len())
        .filter(|&e| e > 0 && e <= span.len())
        .collect();
    ends.dedup();
    if ends.last() != Some(&span.len()) {
        ends.push(span.len());
    }
    let mut out = Vec::new();
    let mut from = 0;
    for e in ends {
        if e > from && span.is_char_boundary(e) {
            out.push(span[from..e].to_string());
            from = e;
        }
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let split = match arg(&args, "--split").as_deref() {
        Some("dev") => Split::Dev,
        Some("test") => Split::Test,
        _ => return Err("--split dev|test".into()),
    };
    let framing = match arg(&args, "--framing").as_deref() {
        Some("full") => CheckFraming::FullCard,
        Some("header") => CheckFraming::HeaderOnly,
        _ => return Err("--framing full|header".into()),
    };
    let out: PathBuf = arg(&args, "--out").ok_or("--out FILE")?.into();
    let category: Option<Category> = match arg(&args, "--category") {
        None => None,
        Some(c) => Some(
            serde_json::from_value(serde_json::Value::String(c.clone()))
                .map_err(|_| format!("--category: unknown category {c:?}"))?,
        ),
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let kb = KnowledgeBase::load(&root.join("data/kb"))?;
    let (items, diags) = load_calibration_dir(&root.join("data/calibration"))?;
    if !diags.is_empty() {
        return Err(format!("calibration corpus problems:\n{diags}").into());
    }
    let done: HashSet<String> = std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("item_id")?.as_str().map(String::from))
        .collect();
    let (gguf, sha256) =
        cardinal_harness::models::local_gguf("qwen2.5-coder-1.5b", &cardinal_harness::Silent)?;
    let model = cardinal_llm_local::LocalModel::load(
        &gguf,
        cardinal_llm_local::LocalOptions {
            sha256: Some(sha256),
            context_size: 4096,
            ..Default::default()
        },
    )?;
    let mut sink = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)?;
    let todo: Vec<_> = items
        .iter()
        .filter(|li| li.item.split == split && !done.contains(&li.item.id))
        .filter(|li| category.is_none_or(|c| li.item.category == c))
        .collect();
    let t0 = std::time::Instant::now();
    for (k, li) in todo.iter().enumerate() {
        let it = &li.item;
        if !it.cited.iter().any(|id| kb.get(id).is_some()) {
            continue;
        }
        let input = cardinal_harness::calibration::item_input(&kb, it);
        let plan = cardinal_judge::probe::plan(&input, framing);
        let parts = pieces(&plan.span);
        let states =
            model.span_piece_states(&plan.messages, &parts, cardinal_judge::probe::LAYER)?;
        let row = serde_json::json!({
            "item_id": it.id,
            "framing": if framing == CheckFraming::FullCard { "full_card" } else { "header_only" },
            "pieces": parts.iter().zip(&states).map(|(p, (n, mean))| serde_json::json!({
                "text": p, "tokens": n, "mean": mean,
            })).collect::<Vec<_>>(),
        });
        writeln!(sink, "{row}")?;
        sink.flush()?;
        eprintln!(
            "{}/{} {} ({} sentences) {:.0} s",
            k + 1,
            todo.len(),
            it.id,
            parts.len(),
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::pieces;

    #[test]
    fn pieces_join_to_the_answer_and_start_with_the_space() {
        let a = "Call 555-0177 now [x.en]. Keep the bottle. Then rest.";
        let p = pieces(a);
        assert_eq!(p.concat(), a);
        assert_eq!(p.len(), 3);
        assert!(p[1].starts_with(' '));
    }
}
