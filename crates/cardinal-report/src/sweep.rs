//! The sweep page: the run's aggregate (`report.json`), its per-case records (`records.jsonl`)
//! and, when present, its manifest (`manifest.json`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cardinal_eval::{check_gates, Aggregate, BaselineDiff, GateConfig, SliceDim};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ReportError, Result};
use crate::json::{fmt_num, parse, read_optional, read_required, Node};
use crate::plots::{self, Bar, BarChart, Mark};

/// The aggregate a sweep writes.
pub const REPORT_JSON: &str = "report.json";
/// One record per case.
pub const RECORDS_JSONL: &str = "records.jsonl";
/// The run manifest (any JSON object), optional.
pub const MANIFEST_JSON: &str = "manifest.json";

/// What the sweep page shows besides the run directory's files. Everything is optional.
#[derive(Debug, Clone, Default)]
pub struct SweepOptions {
    /// Card id → card text (the knowledge base), to link the answer's `[card-id]` citations
    /// and the retrieved cards to their text. Cards not in the map are shown by id only.
    pub card_texts: BTreeMap<String, String>,
    /// The comparison with a baseline (`cardinal_eval::compare`): deltas per slice and key.
    pub baseline: Option<BaselineDiff>,
    /// The gates the run was checked against; the page re-checks them on the aggregate and
    /// shows which failed. `None`: the page says no gate was supplied.
    pub gates: Option<GateConfig>,
    /// Page title (default: `Cardinal sweep — <run directory name>`).
    pub title: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Input views: read-only, tolerant of fields added later.

/// The part of a record's `scores` the page needs (`cardinal_eval::CaseScores`, read leniently).
#[derive(Debug, Clone, Deserialize)]
struct ScoresView {
    case_id: String,
    #[serde(default)]
    lang: String,
    #[serde(default)]
    case_type: String,
    #[serde(default)]
    scores: BTreeMap<String, f64>,
    #[serde(default)]
    errors: BTreeSet<String>,
}

/// A retrieved card: `[id, fused_score]` today; an object with `card_id` (or `id`) later.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum RetrievedEntry {
    Pair(String, f64),
    Object(Value),
}

impl RetrievedEntry {
    fn id_and_score(&self) -> (String, Option<f64>) {
        match self {
            RetrievedEntry::Pair(id, s) => (id.clone(), Some(*s)),
            RetrievedEntry::Object(v) => (
                v.get("card_id")
                    .or_else(|| v.get("id"))
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
                v.get("fused_score")
                    .or_else(|| v.get("score"))
                    .and_then(Value::as_f64),
            ),
        }
    }
}

/// One line of `records.jsonl` (the CLI's private `Record`), read leniently.
#[derive(Debug, Clone, Deserialize)]
struct RecordView {
    scores: ScoresView,
    #[serde(default)]
    question: Option<String>,
    #[serde(default)]
    gold: Vec<String>,
    #[serde(default)]
    retrieved: Vec<RetrievedEntry>,
    #[serde(default)]
    answer: String,
    #[serde(default)]
    citations: Vec<String>,
    #[serde(default)]
    refused: bool,
    #[serde(default)]
    trace: Value,
    #[serde(default)]
    judge: BTreeMap<String, Value>,
}

/// Records of `path`; a torn last line (an interrupted write) is skipped and reported.
fn load_records(path: &Path) -> Result<(Vec<RecordView>, Vec<String>)> {
    let Some(text) = read_optional(path)? else {
        return Ok((
            Vec::new(),
            vec![format!(
                "no {RECORDS_JSONL} in the run directory: the per-case table is empty"
            )],
        ));
    };
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let mut out = Vec::with_capacity(lines.len());
    let mut notes = Vec::new();
    for (k, &(i, line)) in lines.iter().enumerate() {
        match serde_json::from_str::<RecordView>(line) {
            Ok(r) => out.push(r),
            Err(_) if k + 1 == lines.len() && !text.ends_with('\n') => notes.push(format!(
                "{RECORDS_JSONL}: the last line ({}) is incomplete (an interrupted write) and was skipped",
                i + 1
            )),
            Err(source) => {
                return Err(ReportError::JsonLine {
                    path: path.to_path_buf(),
                    line: i + 1,
                    source,
                })
            }
        }
    }
    Ok((out, notes))
}

// ---------------------------------------------------------------------------------------------
// The page model (what the template sees).

#[derive(Debug, Serialize)]
struct Page {
    kind: &'static str,
    title: String,
    run_dir: String,
    n_cases: usize,
    n_records: usize,
    notes: Vec<String>,
    manifest: Option<Node>,
    summary: Summary,
    gates: Option<Vec<GateRow>>,
    legend: Vec<Swatch>,
    metrics: Vec<MetricBlock>,
    lang_deltas: Vec<LangDeltaRow>,
    baseline: Option<BaselineView>,
    judge: Vec<JudgeCountRow>,
    keys: Vec<KeyHead>,
    filters: Filters,
    cases: Vec<CaseView>,
    cards: Vec<CardView>,
    config: String,
}

#[derive(Debug, Serialize)]
struct Swatch {
    label: String,
    color: String,
}

#[derive(Debug, Serialize)]
struct Summary {
    refused: usize,
    answered: usize,
    refusals_by: Vec<CountRow>,
    wrongly_refused: usize,
    wrongly_answered: usize,
    judge_errors: usize,
    judge_errors_by_key: Vec<CountRow>,
    judge_errors_by_slice: Vec<CountRow>,
    gate_status: &'static str,
    regressions: Option<usize>,
}

#[derive(Debug, Serialize)]
struct CountRow {
    label: String,
    count: usize,
    of: usize,
}

#[derive(Debug, Serialize)]
struct GateRow {
    key: String,
    floor: String,
    actual: String,
    n: usize,
    pass: bool,
    message: String,
}

#[derive(Debug, Serialize)]
struct MetricBlock {
    key: String,
    anchor: String,
    scale: &'static str,
    svg: String,
    errors: usize,
    rows: Vec<MetricRow>,
}

#[derive(Debug, Serialize)]
struct MetricRow {
    slice: String,
    mean: String,
    ci: String,
    n: usize,
    n_cases: usize,
    errors: usize,
    baseline: String,
    delta: String,
    status: String,
}

#[derive(Debug, Serialize)]
struct LangDeltaRow {
    key: String,
    pair: String,
    means: String,
    n: String,
    delta: String,
    p: String,
    indicative: bool,
}

#[derive(Debug, Serialize)]
struct BaselineView {
    tolerance: String,
    regressions: usize,
    columns: Vec<String>,
    rows: Vec<BaselineRow>,
}

#[derive(Debug, Serialize)]
struct BaselineRow {
    status: String,
    bad: bool,
    good: bool,
    cells: Vec<String>,
    extra: Vec<Node>,
}

#[derive(Debug, Serialize)]
struct JudgeCountRow {
    dimension: String,
    by_status: Vec<CountRow>,
    not_judged: usize,
}

#[derive(Debug, Serialize)]
struct KeyHead {
    key: String,
    short: String,
}

#[derive(Debug, Serialize)]
struct Filters {
    langs: Vec<String>,
    types: Vec<String>,
    failed_keys: Vec<String>,
}

#[derive(Debug, Serialize)]
struct CaseView {
    id: String,
    lang: String,
    case_type: String,
    refused: bool,
    refusal_reason: Option<String>,
    failed: Vec<String>,
    errors: Vec<String>,
    failed_attr: String,
    errors_attr: String,
    cells: Vec<Cell>,
    question: Option<String>,
    gold: Vec<CardRef>,
    retrieved_columns: Vec<String>,
    retrieved: Vec<RetrievedView>,
    answer: Vec<Segment>,
    citations: Vec<CardRef>,
    dropped_citations: Vec<CardRef>,
    scores: Vec<ScoreView>,
    judge: Vec<JudgeView>,
    latency_ms: Option<String>,
}

#[derive(Debug, Serialize)]
struct Cell {
    text: String,
    class: &'static str,
}

#[derive(Debug, Serialize)]
struct CardRef {
    id: String,
    anchor: Option<String>,
}

#[derive(Debug, Serialize)]
struct RetrievedView {
    rank: usize,
    card: CardRef,
    fused: String,
    gold: bool,
    cited: bool,
    extra: Vec<Node>,
}

#[derive(Debug, Serialize)]
struct Segment {
    text: String,
    cite: Option<CardRef>,
}

#[derive(Debug, Serialize)]
struct ScoreView {
    key: String,
    value: String,
    verdict: &'static str,
}

#[derive(Debug, Serialize)]
struct JudgeView {
    dimension: String,
    status: String,
    score: Option<String>,
    rationale: Option<String>,
    tables: Vec<NamedNode>,
    other: Option<Node>,
    raw: Option<Node>,
}

#[derive(Debug, Serialize)]
struct NamedNode {
    name: String,
    node: Node,
}

#[derive(Debug, Serialize)]
struct CardView {
    anchor: String,
    id: String,
    text: String,
}

// ---------------------------------------------------------------------------------------------

/// The judge dimensions known today; any key a record's `judge` object carries is one too.
const JUDGE_KEYS: [&str; 3] = ["groundedness", "faithfulness", "hallucination"];

/// Display order of the keys this crate knows; other keys follow alphabetically.
const KEY_ORDER: [&str; 9] = [
    "retrieval_hit_at_k",
    "retrieval_recall_at_k",
    "retrieval_ndcg_at_k",
    "citation_coverage",
    "citation_correctness",
    "refusal_correctness",
    "groundedness",
    "faithfulness",
    "hallucination",
];

/// Keys never plotted or judged as pass/fail (timings vary run to run).
const UNSCORED_KEYS: [&str; 1] = ["latency_ms"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scale {
    /// 0–1; a case fails the key at 0.
    Unit,
    /// A judge key on 0–1 (a probability); a case fails it below 0.5.
    JudgeUnit,
    /// The judge's 1–5; a case fails the key in the low bin (1–2).
    Judge,
    /// Anything else; never a failure.
    Other,
}

impl Scale {
    fn name(self) -> &'static str {
        match self {
            Scale::Unit => "0–1",
            Scale::JudgeUnit => "judge 0–1",
            Scale::Judge => "judge 1–5",
            Scale::Other => "value",
        }
    }

    fn fails(self, v: f64) -> bool {
        match self {
            Scale::Unit => v <= 0.0,
            Scale::JudgeUnit => v < 0.5,
            Scale::Judge => v < 2.5,
            Scale::Other => false,
        }
    }

    fn fmt(self, v: f64) -> String {
        match self {
            Scale::Judge => fmt_num(v, 2),
            _ => fmt_num(v, 3),
        }
    }
}

fn short_key(key: &str) -> String {
    match key {
        "retrieval_hit_at_k" => "hit@k".into(),
        "retrieval_recall_at_k" => "recall@k".into(),
        "retrieval_ndcg_at_k" => "nDCG@k".into(),
        "citation_coverage" => "cite cov".into(),
        "citation_correctness" => "cite ok".into(),
        "refusal_correctness" => "refusal ok".into(),
        "groundedness" => "grounded".into(),
        "faithfulness" => "faithful".into(),
        "hallucination" => "halluc.".into(),
        other => other.replace('_', " "),
    }
}

fn ordered_keys(keys: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut keys: Vec<String> = keys
        .into_iter()
        .filter(|k| !UNSCORED_KEYS.contains(&k.as_str()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    keys.sort_by_key(|k| {
        (
            KEY_ORDER
                .iter()
                .position(|x| x == k)
                .unwrap_or(KEY_ORDER.len()),
            k.clone(),
        )
    });
    keys
}

fn slice_label(dim: SliceDim, value: Option<&str>) -> String {
    match (dim, value) {
        (SliceDim::Overall, _) | (_, None) => "all".into(),
        (SliceDim::GoldLabelled, Some("adversarial")) => "gold·advers.".into(),
        (SliceDim::GoldLabelled, Some(v)) => format!("gold·{v}"),
        (_, Some(v)) => v.to_string(),
    }
}

fn group_of(dim: SliceDim) -> usize {
    match dim {
        SliceDim::Overall => 0,
        SliceDim::Lang => 1,
        SliceDim::CaseType => 2,
        SliceDim::GoldLabelled => 3,
    }
}

/// Splits an answer into text and `[card-id]` citation segments.
fn segments(answer: &str, anchor_of: &dyn Fn(&str) -> Option<String>) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut rest = answer;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else { break };
        let inner = after[..close].trim();
        let is_id = !inner.is_empty()
            && inner.contains('.')
            && inner
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        if is_id {
            text.push_str(&rest[..open]);
            if !text.is_empty() {
                out.push(Segment {
                    text: std::mem::take(&mut text),
                    cite: None,
                });
            }
            out.push(Segment {
                text: format!("[{inner}]"),
                cite: Some(CardRef {
                    id: inner.to_string(),
                    anchor: anchor_of(inner),
                }),
            });
            rest = &after[close + 1..];
        } else {
            // Not a citation: keep the bracket as text and scan on from the next character
            // (so `[[a.en]]` still finds `[a.en]`).
            text.push_str(&rest[..open + 1]);
            rest = after;
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        out.push(Segment { text, cite: None });
    }
    out
}

fn status_of(v: &Value) -> String {
    v.get("status")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string()
}

/// Fields of a judge outcome shown as raw material (collapsed), not as checks.
const JUDGE_RAW: [&str; 3] = ["raw", "raw_outputs", "calls"];

fn judge_view(dimension: &str, v: &Value) -> JudgeView {
    let score = v.get("score").and_then(|s| match s {
        Value::Number(n) => n.as_f64().map(|x| fmt_num(x, 3)),
        Value::String(s) => Some(s.clone()),
        _ => None,
    });
    let rationale = v
        .get("rationale")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut tables = Vec::new();
    let mut known: Vec<&str> = vec!["status", "score", "rationale"];
    known.extend(JUDGE_RAW);
    if let Some(map) = v.as_object() {
        for (k, field) in map {
            if known.contains(&k.as_str()) {
                continue;
            }
            let is_checks = match field {
                Value::Array(items) => !items.is_empty() && items.iter().all(Value::is_object),
                Value::Object(m) => !m.is_empty() && m.values().all(Value::is_object),
                _ => false,
            };
            if is_checks {
                let node = match field {
                    // A map of checks: one row per check, its name first.
                    Value::Object(m) => Node::of(&Value::Array(
                        m.iter()
                            .map(|(name, check)| {
                                let mut row = serde_json::Map::new();
                                row.insert("check".into(), Value::String(name.clone()));
                                if let Value::Object(c) = check {
                                    row.extend(c.clone());
                                }
                                Value::Object(row)
                            })
                            .collect(),
                    )),
                    other => Node::of(other),
                };
                tables.push(NamedNode {
                    name: k.clone(),
                    node,
                });
            }
        }
    }
    let table_names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
    let mut skip = known.clone();
    skip.extend(table_names);
    let other = Node::of_object_except(v, &skip);
    let raw = v.as_object().and_then(|m| {
        let raw: serde_json::Map<String, Value> = m
            .iter()
            .filter(|(k, _)| JUDGE_RAW.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (!raw.is_empty()).then(|| Node::of(&Value::Object(raw)))
    });
    JudgeView {
        dimension: dimension.to_string(),
        status: status_of(v),
        score,
        rationale,
        tables,
        other,
        raw,
    }
}

/// Renders the sweep page of `run_dir`.
pub(crate) fn render(run_dir: &Path, opts: &SweepOptions) -> Result<String> {
    let agg: Aggregate = read_required(
        &run_dir.join(REPORT_JSON),
        "the sweep's aggregate, written by `cardinal eval`",
    )?;
    let (records, mut notes) = load_records(&run_dir.join(RECORDS_JSONL))?;
    let manifest_path = run_dir.join(MANIFEST_JSON);
    let manifest = match read_optional(&manifest_path)? {
        Some(text) => Some(Node::of(&parse::<Value>(&manifest_path, &text)?)),
        None => None,
    };
    let page = build(run_dir, &agg, &records, manifest, &mut notes, opts)?;
    crate::html::render("sweep.html", &page)
}

fn build(
    run_dir: &Path,
    agg: &Aggregate,
    records: &[RecordView],
    manifest: Option<Node>,
    notes: &mut Vec<String>,
    opts: &SweepOptions,
) -> Result<Page> {
    let run_name = run_dir
        .canonicalize()
        .unwrap_or_else(|_| run_dir.to_path_buf())
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| run_dir.display().to_string());

    // Keys and their scales.
    let mut judge_keys: BTreeSet<String> = JUDGE_KEYS.iter().map(|k| k.to_string()).collect();
    for r in records {
        judge_keys.extend(r.judge.keys().cloned());
    }
    let mut all_keys: BTreeSet<String> = BTreeSet::new();
    for s in &agg.slices {
        all_keys.extend(s.metrics.keys().cloned());
        all_keys.extend(s.errors.keys().cloned());
    }
    for r in records {
        all_keys.extend(r.scores.scores.keys().cloned());
        all_keys.extend(r.scores.errors.iter().cloned());
    }
    let keys = ordered_keys(all_keys);
    // A judge key is on the 1–5 scale when every recorded score is an integer in 1..=5 (or,
    // without records, when some mean is above 1); any key whose values all lie in [0, 1] is on
    // the unit scale; anything else is a plain value.
    let scale_of = |key: &str| -> Scale {
        let values: Vec<f64> = records
            .iter()
            .filter_map(|r| r.scores.scores.get(key).copied())
            .collect();
        let means: Vec<f64> = agg
            .slices
            .iter()
            .filter_map(|s| s.metrics.get(key).map(|m| m.mean))
            .collect();
        let in_unit = values.iter().chain(&means).all(|v| (0.0..=1.0).contains(v));
        if judge_keys.contains(key) {
            let one_to_five = if values.is_empty() {
                means.iter().any(|m| *m > 1.0) && means.iter().all(|m| (1.0..=5.0).contains(m))
            } else {
                values
                    .iter()
                    .all(|v| v.fract() == 0.0 && (1.0..=5.0).contains(v))
            };
            if one_to_five {
                return Scale::Judge;
            }
            if in_unit {
                return Scale::JudgeUnit;
            }
            return Scale::Other;
        }
        if in_unit {
            Scale::Unit
        } else {
            Scale::Other
        }
    };
    let scales: BTreeMap<&str, Scale> = keys.iter().map(|k| (k.as_str(), scale_of(k))).collect();

    // Baseline entries by (slice, key).
    let baseline_value = opts.baseline.as_ref().map(|d| {
        d.entries
            .iter()
            .map(|e| ((e.slice.clone(), e.key.clone()), e))
            .collect::<BTreeMap<_, _>>()
    });

    // Gates.
    let gate_rows = opts.gates.as_ref().map(|g| {
        let failures = check_gates(agg, g);
        g.gates()
            .into_iter()
            .map(|(key, floor)| {
                let m = agg.metric("overall", key);
                let failure = failures.iter().find(|f| f.key == key);
                GateRow {
                    key: key.to_string(),
                    floor: fmt_num(floor, 3),
                    actual: m.map_or("— (no case carries it)".into(), |m| fmt_num(m.mean, 3)),
                    n: m.map_or(0, |m| m.n),
                    pass: failure.is_none(),
                    message: failure.map(|f| f.message.clone()).unwrap_or_default(),
                }
            })
            .collect::<Vec<_>>()
    });
    let gate_floor: BTreeMap<&str, f64> = opts
        .gates
        .as_ref()
        .map(|g| g.gates().into_iter().collect())
        .unwrap_or_default();

    // Metric blocks.
    let mut metrics = Vec::new();
    for key in &keys {
        let scale = scales.get(key.as_str()).copied().unwrap_or(Scale::Other);
        let mut bars = Vec::new();
        let mut rows = Vec::new();
        let mut errors = 0;
        for s in &agg.slices {
            let slice_errors = s.errors.get(key).copied().unwrap_or(0);
            if s.dim == SliceDim::Overall {
                errors = slice_errors;
            }
            let base = baseline_value
                .as_ref()
                .and_then(|b| b.get(&(s.name.clone(), key.clone())));
            let Some(m) = s.metrics.get(key) else {
                if slice_errors > 0 || base.is_some() {
                    rows.push(MetricRow {
                        slice: s.name.clone(),
                        mean: "—".into(),
                        ci: "—".into(),
                        n: 0,
                        n_cases: s.n_cases,
                        errors: slice_errors,
                        baseline: base.and_then(|e| e.baseline).map_or("—".into(), |b| {
                            format!("{} (n={})", scale.fmt(b.mean), b.n)
                        }),
                        delta: "—".into(),
                        status: base.map_or(String::new(), |e| e.status.label().to_string()),
                    });
                }
                continue;
            };
            let baseline_mean = base.and_then(|e| e.baseline).map(|b| b.mean);
            bars.push(Bar {
                label: slice_label(s.dim, s.value.as_deref()),
                group: group_of(s.dim),
                mean: m.mean,
                ci: m.ci.map(|c| (c.low, c.high)),
                n: m.n,
                marks: baseline_mean
                    .map(|v| Mark { value: v, color: 0 })
                    .into_iter()
                    .collect(),
            });
            rows.push(MetricRow {
                slice: s.name.clone(),
                mean: scale.fmt(m.mean),
                ci: m.ci.map_or("n < 2: none".into(), |c| {
                    format!("[{}, {}]", scale.fmt(c.low), scale.fmt(c.high))
                }),
                n: m.n,
                n_cases: s.n_cases,
                errors: slice_errors,
                baseline: base.and_then(|e| e.baseline).map_or("—".into(), |b| {
                    format!("{} (n={})", scale.fmt(b.mean), b.n)
                }),
                delta: base
                    .and_then(|e| e.delta)
                    .map_or("—".into(), |d| format!("{d:+.3}")),
                status: base.map_or(String::new(), |e| {
                    let mut s = e.status.label().to_string();
                    if e.n_changed {
                        s.push_str(", n changed");
                    }
                    s
                }),
            });
        }
        let y_range = match scale {
            Scale::Unit | Scale::JudgeUnit => (0.0, 1.12),
            Scale::Judge => (0.0, 5.6),
            Scale::Other => {
                let top = bars
                    .iter()
                    .map(|b| b.ci.map_or(b.mean, |c| c.1).max(b.mean))
                    .fold(0.0f64, f64::max);
                (0.0f64.min(top), if top > 0.0 { top * 1.15 } else { 1.0 })
            }
        };
        let svg = if bars.is_empty() {
            String::new()
        } else {
            plots::bar_chart(&BarChart {
                title: key,
                y_desc: if scale == Scale::Judge {
                    "mean score"
                } else {
                    "mean"
                },
                y_range,
                bars: &bars,
                rule: gate_floor.get(key.as_str()).copied(),
            })?
        };
        metrics.push(MetricBlock {
            key: key.clone(),
            anchor: format!("metric-{}", metrics.len()),
            scale: scale.name(),
            svg,
            errors,
            rows,
        });
    }

    // Language differences.
    let lang_deltas = agg
        .lang_deltas
        .iter()
        .map(|d| {
            let scale = scales.get(d.key.as_str()).copied().unwrap_or(Scale::Other);
            LangDeltaRow {
                key: d.key.clone(),
                pair: format!("{} − {}", d.lang_a, d.lang_b),
                means: format!("{} vs {}", scale.fmt(d.mean_a), scale.fmt(d.mean_b)),
                n: format!("{} / {}", d.n_a, d.n_b),
                delta: format!("{:+.3}", d.delta),
                p: fmt_num(d.p_value, 4),
                indicative: d.indicative,
            }
        })
        .collect();

    // Baseline table (known columns, then whatever else an entry carries).
    let baseline = opts.baseline.as_ref().map(baseline_view);

    // Cards referenced by the run, with their text.
    let mut referenced: BTreeSet<&str> = BTreeSet::new();
    for r in records {
        referenced.extend(r.gold.iter().map(String::as_str));
        referenced.extend(r.citations.iter().map(String::as_str));
        for e in &r.retrieved {
            if let RetrievedEntry::Pair(id, _) = e {
                referenced.insert(id.as_str());
            }
        }
    }
    let mut cards = Vec::new();
    let mut anchors: BTreeMap<String, String> = BTreeMap::new();
    let mut add_card = |id: &str, cards: &mut Vec<CardView>| {
        if anchors.contains_key(id) {
            return;
        }
        if let Some(text) = opts.card_texts.get(id) {
            let anchor = format!("card-{}", cards.len());
            anchors.insert(id.to_string(), anchor.clone());
            cards.push(CardView {
                anchor,
                id: id.to_string(),
                text: text.clone(),
            });
        }
    };
    for id in referenced {
        add_card(id, &mut cards);
    }
    for r in records {
        for e in &r.retrieved {
            add_card(&e.id_and_score().0, &mut cards);
        }
        for s in segments(&r.answer, &|_| None) {
            if let Some(c) = s.cite {
                add_card(&c.id, &mut cards);
            }
        }
    }
    let anchor_of = |id: &str| anchors.get(id).cloned();
    let card_ref = |id: &str| CardRef {
        id: id.to_string(),
        anchor: anchor_of(id),
    };

    // Cases.
    let mut cases = Vec::with_capacity(records.len());
    let mut failed_keys: BTreeSet<String> = BTreeSet::new();
    for r in records {
        let s = &r.scores;
        let mut failed = Vec::new();
        let mut cells = Vec::new();
        let mut scores = Vec::new();
        for key in &keys {
            let scale = scales.get(key.as_str()).copied().unwrap_or(Scale::Other);
            if s.errors.contains(key) {
                cells.push(Cell {
                    text: "error".into(),
                    class: "err",
                });
                scores.push(ScoreView {
                    key: key.clone(),
                    value: "judge error (no verdict; not scored)".into(),
                    verdict: "error",
                });
            } else if let Some(&v) = s.scores.get(key) {
                let fails = scale.fails(v);
                if fails {
                    failed.push(key.clone());
                }
                cells.push(Cell {
                    text: scale.fmt(v),
                    class: if fails { "fail" } else { "ok" },
                });
                scores.push(ScoreView {
                    key: key.clone(),
                    value: scale.fmt(v),
                    verdict: if fails {
                        "fail"
                    } else if scale == Scale::Other {
                        "info"
                    } else {
                        "pass"
                    },
                });
            } else {
                cells.push(Cell {
                    text: "—".into(),
                    class: "na",
                });
            }
        }
        failed_keys.extend(failed.iter().cloned());
        let errors: Vec<String> = s.errors.iter().cloned().collect();
        let trace_cards: BTreeMap<String, &Value> = r
            .trace
            .pointer("/retrieval/cards")
            .and_then(Value::as_array)
            .map(|cards| {
                cards
                    .iter()
                    .filter_map(|c| Some((c.get("card_id")?.as_str()?.to_string(), c)))
                    .collect()
            })
            .unwrap_or_default();
        const SHOWN: [&str; 3] = ["card_id", "rank", "fused_score"];
        let mut retrieved_columns: Vec<String> = Vec::new();
        for c in trace_cards.values() {
            if let Some(m) = c.as_object() {
                for k in m.keys() {
                    if !SHOWN.contains(&k.as_str()) && !retrieved_columns.contains(k) {
                        retrieved_columns.push(k.clone());
                    }
                }
            }
        }
        let retrieved = r
            .retrieved
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let (id, fused) = e.id_and_score();
                let detail = trace_cards.get(&id).copied();
                let rank = detail
                    .and_then(|d| d.get("rank"))
                    .and_then(Value::as_u64)
                    .map_or(i + 1, |r| r as usize);
                RetrievedView {
                    rank,
                    gold: r.gold.contains(&id),
                    cited: r.citations.contains(&id),
                    fused: fused.map_or("—".into(), |f| fmt_num(f, 4)),
                    extra: retrieved_columns
                        .iter()
                        .map(|c| detail.and_then(|d| d.get(c)).map_or(Node::Null, Node::of))
                        .collect(),
                    card: card_ref(&id),
                }
            })
            .collect();
        let trace_str = |p: &str| r.trace.pointer(p).and_then(Value::as_str);
        let refusal_reason = r.trace.pointer("/refusal_reason").and_then(|v| match v {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        });
        let dropped = r
            .trace
            .pointer("/dropped_citations")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(&card_ref)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        cases.push(CaseView {
            id: s.case_id.clone(),
            lang: s.lang.clone(),
            case_type: s.case_type.clone(),
            refused: r.refused,
            refusal_reason,
            failed_attr: failed.join(" "),
            errors_attr: errors.join(" "),
            failed,
            errors,
            cells,
            question: r
                .question
                .clone()
                .or_else(|| trace_str("/question").map(str::to_string)),
            gold: r.gold.iter().map(|g| card_ref(g)).collect(),
            retrieved_columns,
            retrieved,
            answer: segments(&r.answer, &anchor_of),
            citations: r.citations.iter().map(|c| card_ref(c)).collect(),
            dropped_citations: dropped,
            scores,
            judge: r.judge.iter().map(|(d, v)| judge_view(d, v)).collect(),
            latency_ms: s
                .scores
                .get("latency_ms")
                .copied()
                .or_else(|| r.trace.pointer("/timings/total_ms").and_then(Value::as_f64))
                .map(|v| fmt_num(v, 0)),
        });
    }

    // Summary counts: refusals and judge errors, never hidden.
    let refused = records.iter().filter(|r| r.refused).count();
    let mut refusals_by = Vec::new();
    for (dim, pick) in [
        (
            "lang",
            (|r: &RecordView| r.scores.lang.clone()) as fn(&RecordView) -> String,
        ),
        ("type", |r: &RecordView| r.scores.case_type.clone()),
    ] {
        let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for r in records {
            let e = counts.entry(pick(r)).or_default();
            e.1 += 1;
            if r.refused {
                e.0 += 1;
            }
        }
        refusals_by.extend(counts.into_iter().map(|(v, (c, of))| CountRow {
            label: format!("{dim}:{v}"),
            count: c,
            of,
        }));
    }
    let refusal_score = |r: &RecordView| r.scores.scores.get("refusal_correctness").copied();
    let wrongly_refused = records
        .iter()
        .filter(|r| r.refused && refusal_score(r) == Some(0.0))
        .count();
    let wrongly_answered = records
        .iter()
        .filter(|r| !r.refused && refusal_score(r) == Some(0.0))
        .count();
    let overall = agg.overall();
    let judge_errors_by_key: Vec<CountRow> = overall
        .map(|o| {
            o.errors
                .iter()
                .map(|(k, &c)| CountRow {
                    label: k.clone(),
                    count: c,
                    of: o.n_cases,
                })
                .collect()
        })
        .unwrap_or_default();
    let judge_errors_by_slice = agg
        .slices
        .iter()
        .filter(|s| s.dim != SliceDim::Overall)
        .map(|s| CountRow {
            label: s.name.clone(),
            count: s.errors.values().sum(),
            of: s.n_cases,
        })
        .collect();
    let judge_errors = judge_errors_by_key.iter().map(|c| c.count).sum();
    let record_errors: usize = records.iter().map(|r| r.scores.errors.len()).sum();
    if !records.is_empty() && record_errors != judge_errors {
        notes.push(format!(
            "the records carry {record_errors} judge error(s), the aggregate counts {judge_errors}: \
             {REPORT_JSON} and {RECORDS_JSONL} are not from the same sweep state"
        ));
    }
    if !records.is_empty() && records.len() != agg.n_cases {
        notes.push(format!(
            "{RECORDS_JSONL} has {} record(s), {REPORT_JSON} aggregates {} case(s)",
            records.len(),
            agg.n_cases
        ));
    }

    // Judge outcome counts per dimension.
    let mut dims: BTreeSet<&str> = BTreeSet::new();
    for r in records {
        dims.extend(r.judge.keys().map(String::as_str));
    }
    let judge = dims
        .into_iter()
        .map(|d| {
            let mut by: BTreeMap<String, usize> = BTreeMap::new();
            let mut not_judged = 0;
            for r in records {
                match r.judge.get(d) {
                    Some(v) => *by.entry(status_of(v)).or_default() += 1,
                    None => not_judged += 1,
                }
            }
            JudgeCountRow {
                dimension: d.to_string(),
                by_status: by
                    .into_iter()
                    .map(|(label, count)| CountRow {
                        label,
                        count,
                        of: records.len(),
                    })
                    .collect(),
                not_judged,
            }
        })
        .collect();

    let gate_status = match &gate_rows {
        None => "not supplied",
        Some(rows) if rows.is_empty() => "none active",
        Some(rows) if rows.iter().all(|g| g.pass) => "pass",
        Some(_) => "FAILED",
    };
    let langs: BTreeSet<String> = records.iter().map(|r| r.scores.lang.clone()).collect();
    let types: BTreeSet<String> = records.iter().map(|r| r.scores.case_type.clone()).collect();
    let legend = [
        ("overall", 0usize),
        ("language", 1),
        ("case type", 2),
        ("gold-labelled cases of the type (gold·)", 3),
    ]
    .into_iter()
    .map(|(label, i)| Swatch {
        label: label.into(),
        color: plots::hex(plots::GROUP_COLORS[i]),
    })
    .chain(opts.baseline.as_ref().map(|_| Swatch {
        label: "baseline mean (bar-wide line)".into(),
        color: plots::hex(plots::MARK_COLORS[0]),
    }))
    .chain((!gate_floor.is_empty()).then(|| Swatch {
        label: "gate floor on the overall mean".into(),
        color: plots::hex(plots::RULE_COLOR),
    }))
    .collect();

    let c = &agg.config;
    Ok(Page {
        kind: "sweep",
        title: opts
            .title
            .clone()
            .unwrap_or_else(|| format!("Cardinal sweep — {run_name}")),
        run_dir: run_name,
        n_cases: agg.n_cases,
        n_records: records.len(),
        notes: std::mem::take(notes),
        manifest,
        summary: Summary {
            refused,
            answered: records.len() - refused,
            refusals_by,
            wrongly_refused,
            wrongly_answered,
            judge_errors,
            judge_errors_by_key,
            judge_errors_by_slice,
            gate_status,
            regressions: opts
                .baseline
                .as_ref()
                .map(|d| d.regressions().count()),
        },
        gates: gate_rows,
        legend,
        metrics,
        lang_deltas,
        baseline,
        judge,
        keys: keys
            .iter()
            .map(|k| KeyHead {
                key: k.clone(),
                short: short_key(k),
            })
            .collect(),
        filters: Filters {
            langs: langs.into_iter().collect(),
            types: types.into_iter().collect(),
            failed_keys: ordered_keys(failed_keys),
        },
        cases,
        cards,
        config: format!(
            "{:.0} % percentile-bootstrap intervals ({} resamples, seed {}); language differences by permutation test ({} permutations), indicative when n < {} or p ≥ {}",
            c.confidence * 100.0,
            c.bootstrap_resamples,
            c.seed,
            c.permutations,
            c.indicative_min_n,
            c.alpha
        ),
    })
}

fn baseline_view(d: &BaselineDiff) -> BaselineView {
    const KNOWN: [&str; 9] = [
        "slice",
        "key",
        "direction",
        "baseline",
        "current",
        "delta",
        "status",
        "regressed",
        "n_changed",
    ];
    // Fields a newer `DiffEntry` carries (a paired test's verdict...) are shown as extra
    // columns; they are read through JSON so this page needs no change to show them.
    let value = serde_json::to_value(d).unwrap_or(Value::Null);
    let entries = value
        .get("entries")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut extra_cols: Vec<String> = Vec::new();
    for e in &entries {
        if let Some(m) = e.as_object() {
            for k in m.keys() {
                if !KNOWN.contains(&k.as_str()) && !extra_cols.contains(k) {
                    extra_cols.push(k.clone());
                }
            }
        }
    }
    let mut columns: Vec<String> = ["slice", "key", "baseline", "current", "delta", "status"]
        .into_iter()
        .map(String::from)
        .collect();
    columns.extend(extra_cols.iter().cloned());
    let side = |v: Option<cardinal_eval::BaselineValue>| {
        v.map_or("—".to_string(), |v| {
            format!("{} (n={})", fmt_num(v.mean, 4), v.n)
        })
    };
    let rows = d
        .entries
        .iter()
        .zip(entries.iter())
        .map(|(e, raw)| {
            let mut status = e.status.label().to_string();
            if e.n_changed {
                status.push_str(", n changed");
            }
            BaselineRow {
                bad: e.regressed,
                good: e.status == cardinal_eval::DiffStatus::Improved,
                cells: vec![
                    e.slice.clone(),
                    e.key.clone(),
                    side(e.baseline),
                    side(e.current),
                    e.delta.map_or("—".into(), |x| format!("{x:+.4}")),
                    status.clone(),
                ],
                status,
                extra: extra_cols
                    .iter()
                    .map(|c| raw.get(c).map_or(Node::Null, Node::of))
                    .collect(),
            }
        })
        .collect();
    BaselineView {
        tolerance: fmt_num(d.tolerance, 4),
        regressions: d.regressions().count(),
        columns,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_are_split_out_of_the_answer() {
        let anchor = |id: &str| (id == "a.en").then(|| "card-0".to_string());
        let s = segments("Do this [a.en]. Not [x] or [b.en ] <b>", &anchor);
        let texts: Vec<&str> = s.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(
            texts,
            ["Do this ", "[a.en]", ". Not [x] or ", "[b.en]", " <b>"]
        );
        assert_eq!(
            s[1].cite.as_ref().unwrap().anchor.as_deref(),
            Some("card-0")
        );
        assert_eq!(s[3].cite.as_ref().unwrap().anchor, None);
        assert!(segments("", &anchor).is_empty());
        assert_eq!(segments("a [ unclosed", &anchor)[0].text, "a [ unclosed");
        let nested = segments("x [[a.en]] y", &anchor);
        let texts: Vec<&str> = nested.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(texts, ["x [", "[a.en]", "] y"]);
    }

    #[test]
    fn key_order_puts_known_keys_first() {
        let k = ordered_keys(
            ["zeta", "faithfulness", "retrieval_hit_at_k", "latency_ms"]
                .into_iter()
                .map(String::from),
        );
        assert_eq!(k, ["retrieval_hit_at_k", "faithfulness", "zeta"]);
    }

    #[test]
    fn judge_checks_are_found_generically() {
        let v = serde_json::json!({
            "status": "scored", "score": 4, "rationale": "ok",
            "checks": [{"name": "cites", "probability": 0.93}],
            "by_claim": {"c1": {"verdict": "supported", "p": 0.8}},
            "attempts": 1, "raw": "{}", "calls": []
        });
        let j = judge_view("faithfulness", &v);
        assert_eq!(j.status, "scored");
        assert_eq!(j.score.as_deref(), Some("4"));
        let names: Vec<&str> = j.tables.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["by_claim", "checks"]);
        assert!(matches!(&j.other, Some(Node::Map { entries }) if entries.len() == 1));
        assert!(j.raw.is_some());
    }
}
