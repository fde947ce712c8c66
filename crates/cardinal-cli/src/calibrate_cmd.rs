//! `cardinal calibrate`: the judge against the human-labelled corpus in `data/calibration/`.
//!
//! Anchoring order: the labels are committed first; the judge's scores go to a separate file
//! (`judge-scores.json`) that records the sha256 of every labels file it was produced against.
//! A report is only computed when those hashes still match the labels on disk; otherwise the
//! command refuses (exit 2) and asks for a re-run of the judge. The bins, the agreement gate and
//! the gated dimensions are frozen in `cardinal_eval::calibration`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cardinal_dataset::calibration::{load_calibration_dir, Category, LoadedItem};
use cardinal_eval::calibration::{
    agreement, passes_gate, Agreement, Pair, AGREEMENT_GATE, BINS, GATED_DIMENSIONS,
};
use cardinal_eval::Bin;
use cardinal_judge::{build_prompt_framed, Dimension, Framing, Judge, JudgeInput, JudgeOutcome};
use cardinal_kb::{Card, KnowledgeBase};
use cardinal_llm::ChatModel;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ask_cmd::{model_for, LlmArgs};
use crate::progress::Progress;
use crate::Outcome;

/// Version of `judge-scores.json`.
const SCORES_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, clap::Args)]
pub struct CalibrateArgs {
    /// The judge model (`--llm`, default the local 1.5B model) and its options.
    #[command(flatten)]
    pub llm: LlmArgs,
    /// Directory of the labelled corpus (default: <data>/calibration).
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Output directory: judge-scores.json, calibration.md, calibration.json.
    #[arg(long, default_value = ".cardinal/calibration")]
    pub out: PathBuf,
    /// Do not run the judge: report from this judge-scores file (refused if the labels changed
    /// since it was written).
    #[arg(long)]
    pub from_scores: Option<PathBuf>,
    /// Print the corpus balance (items, categories, bins, failures per language) and exit.
    #[arg(long)]
    pub balance: bool,
    /// Only the first N items of each labels file (quick looks; the report says so).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Print the balance as JSON (with --balance).
    #[arg(long)]
    pub json: bool,
}

/// The sha256 of one labels file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelsHash {
    pub file: String,
    pub sha256: String,
}

/// One judgement of one item.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ItemScore {
    pub item_id: String,
    pub lang: String,
    pub category: Category,
    pub dimension: String,
    pub framing: Framing,
    pub outcome: JudgeOutcome,
}

/// `judge-scores.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScoresFile {
    pub schema_version: u32,
    pub judge_model: String,
    /// The labels the scores were produced against.
    pub labels: Vec<LabelsHash>,
    /// `--limit` of the run (first N items per labels file), if any.
    pub limit: Option<usize>,
    pub scores: Vec<ItemScore>,
}

fn labels_hashes(dir: &Path) -> Result<Vec<LabelsHash>> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|x| x.to_str()) == Some("jsonl"))
        .collect();
    files.sort();
    for p in files {
        let bytes = fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
        out.push(LabelsHash {
            file: p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            sha256: Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        });
    }
    Ok(out)
}

/// Refuse to compare scores with labels that changed since scoring.
pub fn check_anchor(scored_against: &[LabelsHash], now: &[LabelsHash]) -> Result<()> {
    if scored_against == now {
        return Ok(());
    }
    let mut what = String::new();
    let old: BTreeMap<&str, &str> = scored_against
        .iter()
        .map(|h| (h.file.as_str(), h.sha256.as_str()))
        .collect();
    let new: BTreeMap<&str, &str> = now
        .iter()
        .map(|h| (h.file.as_str(), h.sha256.as_str()))
        .collect();
    for (f, sha) in &old {
        match new.get(f) {
            None => {
                let _ = writeln!(what, "  {f}: scored against {sha}, now missing");
            }
            Some(n) if n != sha => {
                let _ = writeln!(what, "  {f}: scored against {sha}, now {n}");
            }
            _ => {}
        }
    }
    for (f, sha) in &new {
        if !old.contains_key(f) {
            let _ = writeln!(what, "  {f}: new since scoring ({sha})");
        }
    }
    bail!(
        "the labels changed since the judge scored them:\n{what}the scores no longer measure \
         these labels; re-run `cardinal calibrate` (without --from-scores) to re-anchor"
    )
}

pub fn calibrate(data: &Path, args: &CalibrateArgs) -> Result<Outcome> {
    let dir = args
        .labels
        .clone()
        .unwrap_or_else(|| data.join("calibration"));
    let (items, diags) = load_calibration_dir(&dir)?;
    if !diags.is_empty() {
        bail!("the calibration corpus has problems (run `cardinal data check`):\n{diags}");
    }
    if items.is_empty() {
        bail!("no calibration items in {}", dir.display());
    }
    if args.balance {
        return balance(&items, args.json);
    }
    let now = labels_hashes(&dir)?;
    let scores = match &args.from_scores {
        Some(path) => {
            let text =
                fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let file: ScoresFile = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a judge-scores file", path.display()))?;
            if file.schema_version != SCORES_SCHEMA_VERSION {
                bail!(
                    "{}: schema_version {} (this cardinal reads {SCORES_SCHEMA_VERSION})",
                    path.display(),
                    file.schema_version
                );
            }
            check_anchor(&file.labels, &now)
                .with_context(|| format!("{} cannot be compared", path.display()))?;
            file
        }
        None => {
            let kb = KnowledgeBase::load(&data.join("kb"))?;
            let mut items = items.clone();
            crate::keep_first_per_file(&mut items, args.limit, |li| &li.path);
            let file = run_judge(&kb, &items, &now, args)?;
            fs::create_dir_all(&args.out)
                .with_context(|| format!("creating {}", args.out.display()))?;
            let path = args.out.join("judge-scores.json");
            fs::write(&path, serde_json::to_string_pretty(&file)?)
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("judge scores: {}", path.display());
            file
        }
    };
    let report = build_report(&items, &scores)?;
    fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let md = render_markdown(&report);
    fs::write(args.out.join("calibration.md"), &md)?;
    fs::write(
        args.out.join("calibration.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    print!("{}", render_terminal(&report));
    eprintln!("report: {}", args.out.join("calibration.md").display());
    let failed: Vec<&GateRow> = report.gate.iter().filter(|g| !g.pass).collect();
    for g in &failed {
        eprintln!(
            "calibration gate failed: {} binned agreement {} < {AGREEMENT_GATE} (n = {})",
            g.dimension,
            g.agreement
                .map(|a| format!("{a:.3}"))
                .unwrap_or_else(|| "n/a".into()),
            g.n
        );
    }
    Ok(if failed.is_empty() {
        Outcome::Pass
    } else {
        Outcome::GateFailed
    })
}

/// The judgements to make, in the order they are made: every groundedness judgement, then
/// every faithfulness one, then the header-only faithfulness control on rule-violation items;
/// within each phase, items ordered by (language, cited ids, item id).
///
/// The order never changes a score (each call is independent, temperature 0); it is chosen for
/// speed: consecutive prompts then share their longest prefix — the rubric (the system
/// message), the language line and often the same cards — which the local runtime does not
/// process again (prefix KV reuse). Interleaving dimensions per item would switch the rubric on
/// every call and lose all of it.
fn judgement_plan(items: &[LoadedItem]) -> Vec<(&LoadedItem, Dimension, Framing)> {
    let mut ordered: Vec<&LoadedItem> = items.iter().collect();
    ordered.sort_by(|a, b| {
        (a.item.lang.tag(), &a.item.cited, &a.item.id).cmp(&(
            b.item.lang.tag(),
            &b.item.cited,
            &b.item.id,
        ))
    });
    let mut plan = Vec::new();
    for (dim, framing) in [
        (Dimension::Groundedness, Framing::Standard),
        (Dimension::Faithfulness, Framing::Standard),
        (Dimension::Faithfulness, Framing::HeaderOnlyControl),
    ] {
        for li in &ordered {
            if framing == Framing::HeaderOnlyControl && li.item.category != Category::RuleViolation
            {
                continue;
            }
            plan.push((*li, dim, framing));
        }
    }
    plan
}

/// Run the judge over the items in [`judgement_plan`] order: groundedness and faithfulness
/// with their own framings, plus the header-only faithfulness control on rule-violation items.
fn run_judge(
    kb: &KnowledgeBase,
    items: &[LoadedItem],
    labels: &[LabelsHash],
    args: &CalibrateArgs,
) -> Result<ScoresFile> {
    let model = model_for(args.llm.llm, &args.llm)?
        .context("the judge needs a model: --llm local, local-small or openai")?;
    let judge = Judge::new(model.clone() as Arc<dyn ChatModel>);
    let plan = judgement_plan(items);
    let mut bar = Progress::new("judgements");
    let mut scores = Vec::with_capacity(plan.len());
    for (i, (li, dim, framing)) in plan.iter().enumerate() {
        let it = &li.item;
        let cited: Vec<&Card> = it
            .cited
            .iter()
            .filter_map(|id| kb.get(id).map(|f| &f.card))
            .collect();
        let input =
            JudgeInput::resolve(&it.question, &it.answer, it.lang, &it.cited, &cited, |id| {
                kb.get(id).map(|f| &f.card)
            });
        let outcome = match build_prompt_framed(*dim, &input, *framing) {
            Ok(messages) => judge.score_messages(&messages),
            Err(reason) => JudgeOutcome::NotApplicable { reason },
        };
        scores.push(ItemScore {
            item_id: it.id.clone(),
            lang: it.lang.tag().to_string(),
            category: it.category,
            dimension: dim.name().to_string(),
            framing: *framing,
            outcome,
        });
        bar.update(i + 1, plan.len());
    }
    let st = model.stats();
    eprintln!(
        "cache: {} hit(s), {} model call(s)",
        st.hits, st.model_calls
    );
    Ok(ScoresFile {
        schema_version: SCORES_SCHEMA_VERSION,
        judge_model: judge.model_id(),
        labels: labels.to_vec(),
        limit: args.limit,
        scores,
    })
}

/// One row of the agreement tables.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgreementRow {
    pub dimension: String,
    /// `all` or a language tag.
    pub slice: String,
    /// Judgements that failed (judge_error): not in n, never a score.
    pub judge_errors: usize,
    #[serde(flatten)]
    pub stats: Agreement,
}

/// The ADR-0029 control on rule-violation items.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ControlRow {
    pub slice: String,
    pub full_card: Agreement,
    pub header_only: Agreement,
}

/// Gate verdict of one gated dimension (over all languages).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateRow {
    pub dimension: String,
    pub agreement: Option<f64>,
    pub n: usize,
    pub threshold: f64,
    pub pass: bool,
}

/// `calibration.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CalibrationReport {
    pub judge_model: String,
    pub labels: Vec<LabelsHash>,
    pub limit: Option<usize>,
    pub rows: Vec<AgreementRow>,
    pub control: Vec<ControlRow>,
    pub gate: Vec<GateRow>,
}

fn build_report(items: &[LoadedItem], file: &ScoresFile) -> Result<CalibrationReport> {
    let by_id: BTreeMap<&str, &LoadedItem> =
        items.iter().map(|li| (li.item.id.as_str(), li)).collect();
    let human = |id: &str, dim: &str| -> Result<u8> {
        let li = by_id
            .get(id)
            .with_context(|| format!("judge scores name item {id}, which is not in the labels"))?;
        Ok(match dim {
            "groundedness" => li.item.labels.groundedness.score,
            "faithfulness" => li.item.labels.faithfulness.score,
            other => bail!("judge scores carry an ungated dimension {other}"),
        })
    };
    // (dimension, framing, slice) -> pairs; errors per (dimension, slice).
    let mut pairs: BTreeMap<(String, Framing, String), Vec<Pair>> = BTreeMap::new();
    let mut control_pairs: BTreeMap<(Framing, String), Vec<Pair>> = BTreeMap::new();
    let mut errors: BTreeMap<(String, String), usize> = BTreeMap::new();
    for s in &file.scores {
        let h = human(&s.item_id, &s.dimension)?;
        for slice in ["all".to_string(), s.lang.clone()] {
            match &s.outcome {
                JudgeOutcome::Scored { score, .. } => {
                    let p = Pair {
                        item_id: s.item_id.clone(),
                        human: h,
                        judge: score.get(),
                    };
                    if s.category == Category::RuleViolation && s.dimension == "faithfulness" {
                        control_pairs
                            .entry((s.framing, slice.clone()))
                            .or_default()
                            .push(p.clone());
                    }
                    if s.framing == Framing::Standard {
                        pairs
                            .entry((s.dimension.clone(), s.framing, slice))
                            .or_default()
                            .push(p);
                    }
                }
                JudgeOutcome::Failed { .. } if s.framing == Framing::Standard => {
                    *errors.entry((s.dimension.clone(), slice)).or_default() += 1;
                }
                _ => {}
            }
        }
    }
    let mut slices: Vec<String> = vec!["all".into()];
    let mut langs: Vec<String> = file.scores.iter().map(|s| s.lang.clone()).collect();
    langs.sort();
    langs.dedup();
    slices.extend(langs);
    let mut rows = Vec::new();
    for dim in GATED_DIMENSIONS {
        for slice in &slices {
            let key = (dim.to_string(), Framing::Standard, slice.clone());
            let p = pairs.get(&key).cloned().unwrap_or_default();
            rows.push(AgreementRow {
                dimension: dim.to_string(),
                slice: slice.clone(),
                judge_errors: errors
                    .get(&(dim.to_string(), slice.clone()))
                    .copied()
                    .unwrap_or(0),
                stats: agreement(&p, &format!("{dim}/{slice}")),
            });
        }
    }
    let control = slices
        .iter()
        .map(|slice| {
            let get = |f: Framing| {
                control_pairs
                    .get(&(f, slice.clone()))
                    .cloned()
                    .unwrap_or_default()
            };
            ControlRow {
                slice: slice.clone(),
                full_card: agreement(&get(Framing::Standard), &format!("control/full/{slice}")),
                header_only: agreement(
                    &get(Framing::HeaderOnlyControl),
                    &format!("control/header/{slice}"),
                ),
            }
        })
        .collect();
    let gate = GATED_DIMENSIONS
        .iter()
        .map(|dim| {
            let row = rows
                .iter()
                .find(|r| r.dimension == *dim && r.slice == "all");
            let (agreement, n, pass) = match row {
                Some(r) => (r.stats.agreement, r.stats.n, passes_gate(&r.stats)),
                None => (None, 0, false),
            };
            GateRow {
                dimension: dim.to_string(),
                agreement,
                n,
                threshold: AGREEMENT_GATE,
                pass,
            }
        })
        .collect();
    Ok(CalibrationReport {
        judge_model: file.judge_model.clone(),
        labels: file.labels.clone(),
        limit: file.limit,
        rows,
        control,
        gate,
    })
}

fn fmt_opt(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.3}")).unwrap_or_else(|| "n/a".into())
}

fn fmt_ci(a: &Agreement) -> String {
    a.ci.map(|c| format!("[{:.3}, {:.3}]", c.low, c.high))
        .unwrap_or_else(|| "n/a".into())
}

fn confusion(a: &Agreement) -> String {
    let c = a.confusion;
    format!(
        "L:{}/{}/{} M:{}/{}/{} H:{}/{}/{}",
        c[0][0], c[0][1], c[0][2], c[1][0], c[1][1], c[1][2], c[2][0], c[2][1], c[2][2]
    )
}

fn render_markdown(r: &CalibrationReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Judge calibration\n");
    let _ = writeln!(s, "- judge: `{}`", r.judge_model);
    for h in &r.labels {
        let _ = writeln!(s, "- labels `{}`: sha256 `{}`", h.file, h.sha256);
    }
    if let Some(n) = r.limit {
        let _ = writeln!(
            s,
            "- subset: first {n} items of each labels file (`--limit`)"
        );
    }
    let _ = writeln!(
        s,
        "- bins: 1–2 low, 3 mid, 4–5 high; gate: binned agreement ≥ {AGREEMENT_GATE} on {}\n",
        GATED_DIMENSIONS.join(", ")
    );
    let _ = writeln!(s, "## Gate\n");
    for g in &r.gate {
        let _ = writeln!(
            s,
            "- `{}`: agreement {} (n = {}) — **{}**",
            g.dimension,
            fmt_opt(g.agreement),
            g.n,
            if g.pass { "pass" } else { "FAIL" }
        );
    }
    let _ = writeln!(s, "\n## Agreement\n");
    let _ = writeln!(
        s,
        "| dimension | slice | n | judge errors | binned agreement | 95 % CI | quadratic κ (1–5) |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- |");
    for row in &r.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.dimension,
            row.slice,
            row.stats.n,
            row.judge_errors,
            fmt_opt(row.stats.agreement),
            fmt_ci(&row.stats),
            fmt_opt(row.stats.kappa_quadratic)
        );
    }
    let _ = writeln!(
        s,
        "\n## Confusion matrices (rows: human bin, columns: judge bin)\n"
    );
    for row in &r.rows {
        let c = row.stats.confusion;
        let _ = writeln!(
            s,
            "**{} / {}** (n = {})\n\n| human \\ judge | low | mid | high |\n| --- | --- | --- | --- |",
            row.dimension, row.slice, row.stats.n
        );
        for (i, b) in BINS.iter().enumerate() {
            let _ = writeln!(s, "| {:?} | {} | {} | {} |", b, c[i][0], c[i][1], c[i][2]);
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "## ADR-0029 control: faithfulness on rule-violation items\n\n\
         The same judge and rubric, framed with the full cited cards (rules included) vs the \
         cards' headers only. The difference is what reading the rules is worth.\n"
    );
    let _ = writeln!(
        s,
        "| slice | n full | agreement full card | n header | agreement header only |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- |");
    for c in &r.control {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            c.slice,
            c.full_card.n,
            fmt_opt(c.full_card.agreement),
            c.header_only.n,
            fmt_opt(c.header_only.agreement)
        );
    }
    let _ = writeln!(s, "\n## Largest disagreements\n");
    for row in r.rows.iter().filter(|r| r.slice == "all") {
        let _ = writeln!(s, "**{}**\n", row.dimension);
        if row.stats.worst.is_empty() {
            let _ = writeln!(s, "- none\n");
        }
        for p in &row.stats.worst {
            let _ = writeln!(s, "- `{}`: human {}, judge {}", p.item_id, p.human, p.judge);
        }
        let _ = writeln!(s);
    }
    s
}

fn render_terminal(r: &CalibrationReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "judge: {}", r.judge_model);
    let _ = writeln!(
        s,
        "{:<13} {:<7} {:>4} {:>5} {:>9} {:<16} {:>7}  confusion (human L/M/H rows: judge L/M/H)",
        "dimension", "slice", "n", "errs", "agreement", "95% CI", "kappa_q"
    );
    for row in &r.rows {
        let _ = writeln!(
            s,
            "{:<13} {:<7} {:>4} {:>5} {:>9} {:<16} {:>7}  {}",
            row.dimension,
            row.slice,
            row.stats.n,
            row.judge_errors,
            fmt_opt(row.stats.agreement),
            fmt_ci(&row.stats),
            fmt_opt(row.stats.kappa_quadratic),
            confusion(&row.stats)
        );
    }
    let _ = writeln!(s, "ADR-0029 control (faithfulness, rule-violation items):");
    for c in &r.control {
        let _ = writeln!(
            s,
            "  {:<7} full card {} (n={})  header only {} (n={})",
            c.slice,
            fmt_opt(c.full_card.agreement),
            c.full_card.n,
            fmt_opt(c.header_only.agreement),
            c.header_only.n
        );
    }
    for g in &r.gate {
        let _ = writeln!(
            s,
            "gate {}: {} (n={}) >= {} ? {}",
            g.dimension,
            fmt_opt(g.agreement),
            g.n,
            g.threshold,
            if g.pass { "pass" } else { "FAIL" }
        );
    }
    s
}

/// Items per language: categories, label bins per gated dimension, failures (either gated
/// label in the low bin) and rule-violation items.
fn balance(items: &[LoadedItem], json: bool) -> Result<Outcome> {
    let mut table: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let bin_name = |s: u8| match Bin::of(s) {
        Some(Bin::Low) => "low",
        Some(Bin::Mid) => "mid",
        Some(Bin::High) => "high",
        None => "invalid",
    };
    for li in items {
        let it = &li.item;
        let e = table.entry(it.lang.tag().to_string()).or_default();
        *e.entry("items".into()).or_default() += 1;
        let cat = serde_json::to_value(it.category)?
            .as_str()
            .unwrap_or_default()
            .to_string();
        *e.entry(format!("category:{cat}")).or_default() += 1;
        let (g, f) = (it.labels.groundedness.score, it.labels.faithfulness.score);
        *e.entry(format!("groundedness:{}", bin_name(g)))
            .or_default() += 1;
        *e.entry(format!("faithfulness:{}", bin_name(f)))
            .or_default() += 1;
        if Bin::of(g) == Some(Bin::Low) || Bin::of(f) == Some(Bin::Low) {
            *e.entry("failures".into()).or_default() += 1;
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&table)?);
        return Ok(Outcome::Pass);
    }
    let keys: std::collections::BTreeSet<&String> = table.values().flat_map(|m| m.keys()).collect();
    let langs: Vec<&String> = table.keys().collect();
    print!("{:<34}", "");
    for l in &langs {
        print!("{l:>8}");
    }
    println!();
    for k in keys {
        print!("{k:<34}");
        for l in &langs {
            print!("{:>8}", table[*l].get(k).copied().unwrap_or(0));
        }
        println!();
    }
    Ok(Outcome::Pass)
}
