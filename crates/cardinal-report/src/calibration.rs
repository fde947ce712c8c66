//! The calibration page: `calibration.json` (written by `cardinal calibrate`), with
//! `judge-scores.json` beside it and the human labels when supplied.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use cardinal_eval::calibration::{Agreement, AGREEMENT_GATE, GATED_DIMENSIONS};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ReportError, Result};
use crate::json::{fmt_num, parse, read_optional, read_required, Node};
use crate::plots::{self, Bar, BarChart, Mark, ScatterPoint};

/// The calibration report a calibration run writes.
pub const CALIBRATION_JSON: &str = "calibration.json";
/// Every judgement of the run, beside it.
pub const JUDGE_SCORES_JSON: &str = "judge-scores.json";

/// What the calibration page shows besides the output directory's files.
#[derive(Debug, Clone, Default)]
pub struct CalibrationOptions {
    /// The labelled corpus (`data/calibration/`: `*.jsonl`, one item per line with `id`,
    /// `question`, `answer`, `labels.<dimension>.{score, rationale}`). Without it the page
    /// has no human rationales and no judge-vs-human scatter (unless the report carries the
    /// pairs itself).
    pub labels_dir: Option<PathBuf>,
    /// Page title (default: `Cardinal judge calibration — <directory name>`).
    pub title: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Input views.

#[derive(Debug, Clone, Deserialize)]
struct RowView {
    dimension: String,
    slice: String,
    #[serde(default)]
    judge_errors: usize,
    #[serde(flatten)]
    stats: Agreement,
}

/// Fields of a row this page shows in its own way; any other field is shown generically.
const ROW_FIELDS: [&str; 10] = [
    "dimension",
    "slice",
    "judge_errors",
    "n",
    "agreement",
    "ci",
    "confusion",
    "kappa_quadratic",
    "worst",
    "pairs",
];

#[derive(Debug, Clone, Deserialize)]
struct ControlView {
    slice: String,
    full_card: Agreement,
    header_only: Agreement,
}

#[derive(Debug, Clone, Deserialize)]
struct GateView {
    dimension: String,
    #[serde(default)]
    agreement: Option<f64>,
    #[serde(default)]
    n: usize,
    #[serde(default = "default_threshold")]
    threshold: f64,
    #[serde(default)]
    pass: bool,
}

fn default_threshold() -> f64 {
    AGREEMENT_GATE
}

#[derive(Debug, Clone, Deserialize)]
struct PairView {
    item_id: String,
    human: u8,
    judge: u8,
}

#[derive(Debug, Clone, Deserialize)]
struct JudgeScoreView {
    item_id: String,
    #[serde(default)]
    lang: String,
    #[serde(default)]
    category: Option<String>,
    dimension: String,
    #[serde(default)]
    framing: Option<String>,
    #[serde(default)]
    outcome: Value,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ScoresFileView {
    #[serde(default)]
    scores: Vec<JudgeScoreView>,
}

/// One labelled item (read leniently: only what the page shows).
#[derive(Debug, Clone, Deserialize)]
struct LabelView {
    id: String,
    #[serde(default)]
    question: Option<String>,
    #[serde(default)]
    answer: Option<String>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, HumanLabel>,
}

#[derive(Debug, Clone, Deserialize)]
struct HumanLabel {
    score: u8,
    #[serde(default)]
    rationale: Option<String>,
}

fn load_labels(dir: &Path) -> Result<BTreeMap<String, LabelView>> {
    let io = |source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|x| x.to_str()) == Some("jsonl"))
        .collect();
    files.sort();
    let mut out = BTreeMap::new();
    for path in files {
        let text = fs::read_to_string(&path).map_err(|source| ReportError::Io {
            path: path.clone(),
            source,
        })?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let item: LabelView =
                serde_json::from_str(line).map_err(|source| ReportError::JsonLine {
                    path: path.clone(),
                    line: i + 1,
                    source,
                })?;
            out.insert(item.id.clone(), item);
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The page model.

#[derive(Debug, Serialize)]
struct Page {
    kind: &'static str,
    title: String,
    dir: String,
    judge_model: String,
    limit: Option<String>,
    labels: Option<Node>,
    notes: Vec<String>,
    gate_threshold: String,
    gate: Vec<GateRow>,
    legend: Vec<Swatch>,
    dimensions: Vec<DimBlock>,
    control: Vec<ControlRow>,
    extras: Vec<NamedNode>,
}

#[derive(Debug, Serialize)]
struct Swatch {
    label: String,
    color: String,
}

#[derive(Debug, Serialize)]
struct GateRow {
    dimension: String,
    agreement: String,
    n: usize,
    threshold: String,
    pass: bool,
}

#[derive(Debug, Serialize)]
struct DimBlock {
    name: String,
    gated: bool,
    chart: String,
    slices: Vec<SliceBlock>,
}

#[derive(Debug, Serialize)]
struct SliceBlock {
    slice: String,
    n: usize,
    judge_errors: usize,
    agreement: String,
    ci: String,
    kappa: String,
    kappa_ci: Option<String>,
    at_gate: Option<bool>,
    heatmap: String,
    scatter: Option<String>,
    scatter_n: usize,
    refs: Vec<RefView>,
    extra: Option<Node>,
    worst: Vec<WorstView>,
}

#[derive(Debug, Serialize)]
struct RefView {
    label: String,
    value: String,
    color: String,
}

#[derive(Debug, Serialize)]
struct WorstView {
    item_id: String,
    human: u8,
    judge: u8,
    gap: u8,
    category: Option<String>,
    question: Option<String>,
    answer: Option<String>,
    human_rationale: Option<String>,
    judge_rationale: Option<String>,
}

#[derive(Debug, Serialize)]
struct ControlRow {
    slice: String,
    full: String,
    header: String,
    full_kappa: String,
    header_kappa: String,
}

#[derive(Debug, Serialize)]
struct NamedNode {
    name: String,
    node: Node,
}

// ---------------------------------------------------------------------------------------------

/// A reference agreement found in data this crate does not know by name (shortcut baselines,
/// a human inter-annotator ceiling...): an object with a numeric `agreement`, or a number in
/// [0, 1] under a key naming an agreement or a ceiling.
fn collect_refs(label: &str, v: &Value, depth: usize, out: &mut Vec<(String, f64)>) {
    let name_of = |o: &serde_json::Map<String, Value>| {
        ["name", "label", "baseline", "kind", "method"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str))
            .map(str::to_string)
    };
    match v {
        Value::Number(n) => {
            let last = label.rsplit('.').next().unwrap_or(label);
            if let Some(x) = n.as_f64() {
                if (0.0..=1.0).contains(&x)
                    && (last.contains("agreement") || last.contains("ceiling"))
                {
                    out.push((label.to_string(), x));
                }
            }
        }
        Value::Object(o) => {
            if let Some(x) = o.get("agreement").and_then(Value::as_f64) {
                let label = match name_of(o) {
                    Some(n) => format!("{label}: {n}"),
                    None => label.to_string(),
                };
                out.push((label, x));
            } else if depth < 3 {
                for (k, child) in o {
                    collect_refs(&format!("{label}.{k}"), child, depth + 1, out);
                }
            }
        }
        Value::Array(items) if depth < 3 => {
            for (i, child) in items.iter().enumerate() {
                let label = match child.as_object().and_then(name_of) {
                    Some(_) => label.to_string(),
                    None => format!("{label}[{i}]"),
                };
                collect_refs(&label, child, depth + 1, out);
            }
        }
        _ => {}
    }
}

fn interval(ci: Option<cardinal_eval::Interval>) -> String {
    ci.map_or("n < 2: none".into(), |c| {
        format!("[{}, {}]", fmt_num(c.low, 3), fmt_num(c.high, 3))
    })
}

fn opt_num(x: Option<f64>, undefined: &str) -> String {
    x.map_or(undefined.to_string(), |x| fmt_num(x, 3))
}

/// Renders the calibration page of `dir`.
pub(crate) fn render(dir: &Path, opts: &CalibrationOptions) -> Result<String> {
    let cal_path = dir.join(CALIBRATION_JSON);
    let cal: Value = read_required(
        &cal_path,
        "the calibration report, written by `cardinal calibrate`",
    )?;
    let scores_path = dir.join(JUDGE_SCORES_JSON);
    let scores: Option<ScoresFileView> = match read_optional(&scores_path)? {
        Some(text) => Some(parse(&scores_path, &text)?),
        None => None,
    };
    let labels = match &opts.labels_dir {
        Some(d) => Some(load_labels(d)?),
        None => None,
    };
    let page = build(dir, &cal_path, &cal, scores.as_ref(), labels.as_ref(), opts)?;
    crate::html::render("calibration.html", &page)
}

fn field<T: serde::de::DeserializeOwned>(path: &Path, cal: &Value, key: &str) -> Result<T> {
    serde_json::from_value(cal.get(key).cloned().unwrap_or(Value::Null)).map_err(|source| {
        ReportError::Json {
            path: path.to_path_buf(),
            source,
        }
    })
}

fn build(
    dir: &Path,
    cal_path: &Path,
    cal: &Value,
    scores: Option<&ScoresFileView>,
    labels: Option<&BTreeMap<String, LabelView>>,
    opts: &CalibrationOptions,
) -> Result<Page> {
    let dir_name = dir
        .canonicalize()
        .unwrap_or_else(|_| dir.to_path_buf())
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let raw_rows: Vec<Value> =
        field::<Option<Vec<Value>>>(cal_path, cal, "rows")?.unwrap_or_default();
    let mut rows = Vec::with_capacity(raw_rows.len());
    for r in &raw_rows {
        let row: RowView =
            serde_json::from_value(r.clone()).map_err(|source| ReportError::Json {
                path: cal_path.to_path_buf(),
                source,
            })?;
        rows.push((row, r));
    }
    let control: Vec<ControlView> =
        field::<Option<Vec<ControlView>>>(cal_path, cal, "control")?.unwrap_or_default();
    let gate: Vec<GateView> =
        field::<Option<Vec<GateView>>>(cal_path, cal, "gate")?.unwrap_or_default();
    let mut notes = Vec::new();
    if scores.is_none() {
        notes.push(format!(
            "no {JUDGE_SCORES_JSON} in the directory: the judge's rationales are not shown"
        ));
    }
    if labels.is_none() {
        notes.push(
            "the human labels were not supplied (labels directory): no human rationales, and the \
             scatter is drawn only where the report itself carries the item pairs"
                .into(),
        );
    }

    // Judge outcomes (standard framing) by (dimension, item).
    let mut judge_by: BTreeMap<(String, String), &JudgeScoreView> = BTreeMap::new();
    if let Some(s) = scores {
        for j in &s.scores {
            if j.framing.as_deref().is_none_or(|f| f == "standard") {
                judge_by.insert((j.dimension.clone(), j.item_id.clone()), j);
            }
        }
    }

    // Reference agreements at the top level: arrays of objects naming a dimension and a slice.
    const TOP_FIELDS: [&str; 6] = ["judge_model", "labels", "limit", "rows", "control", "gate"];
    let mut top_refs: BTreeMap<(String, String), Vec<(String, f64)>> = BTreeMap::new();
    let mut extras = Vec::new();
    if let Some(map) = cal.as_object() {
        for (k, v) in map {
            if TOP_FIELDS.contains(&k.as_str()) {
                continue;
            }
            extras.push(NamedNode {
                name: k.clone(),
                node: Node::of(v),
            });
            if let Value::Array(items) = v {
                for item in items {
                    let (Some(d), Some(s)) = (
                        item.get("dimension").and_then(Value::as_str),
                        item.get("slice").and_then(Value::as_str),
                    ) else {
                        continue;
                    };
                    let mut stripped = item.clone();
                    if let Some(o) = stripped.as_object_mut() {
                        o.remove("dimension");
                        o.remove("slice");
                    }
                    let mut found = Vec::new();
                    collect_refs(k, &stripped, 1, &mut found);
                    top_refs
                        .entry((d.to_string(), s.to_string()))
                        .or_default()
                        .extend(found);
                }
            }
        }
    }

    // Reference colours: one per label across the page.
    let mut ref_colors: BTreeMap<String, usize> = BTreeMap::new();
    let mut ref_color = |label: &str| -> usize {
        let next = ref_colors.len() + 1;
        *ref_colors.entry(label.to_string()).or_insert(next)
    };

    // Dimensions in first-appearance order.
    let mut dim_names: Vec<String> = Vec::new();
    for (r, _) in &rows {
        if !dim_names.contains(&r.dimension) {
            dim_names.push(r.dimension.clone());
        }
    }
    let mut dimensions = Vec::new();
    for dim in &dim_names {
        let gated = GATED_DIMENSIONS.contains(&dim.as_str());
        let mut bars = Vec::new();
        let mut slices = Vec::new();
        for (row, raw) in rows.iter().filter(|(r, _)| &r.dimension == dim) {
            let a = &row.stats;
            let extra_value: serde_json::Map<String, Value> = raw
                .as_object()
                .map(|o| {
                    o.iter()
                        .filter(|(k, _)| !ROW_FIELDS.contains(&k.as_str()))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default();
            let mut refs = Vec::new();
            for (k, v) in &extra_value {
                collect_refs(k, v, 0, &mut refs);
            }
            if let Some(more) = top_refs.get(&(row.dimension.clone(), row.slice.clone())) {
                refs.extend(more.iter().cloned());
            }
            let kappa_ci = extra_value.iter().find_map(|(k, v)| {
                (k.contains("kappa") && k.ends_with("ci"))
                    .then(|| serde_json::from_value::<cardinal_eval::Interval>(v.clone()).ok())
                    .flatten()
                    .map(|c| interval(Some(c)))
            });
            let marks: Vec<Mark> = refs
                .iter()
                .map(|(label, value)| Mark {
                    value: *value,
                    color: ref_color(label),
                })
                .collect();
            if let Some(ag) = a.agreement {
                bars.push(Bar {
                    label: row.slice.clone(),
                    group: if row.slice == "all" { 0 } else { 1 },
                    mean: ag,
                    ci: a.ci.map(|c| (c.low, c.high)),
                    n: a.n,
                    marks: marks.clone(),
                });
            }
            // The scatter's pairs: from the report when it carries them, else joined from the
            // judge scores and the labels.
            let pairs: Vec<ScatterPoint> = match raw.get("pairs") {
                Some(p) => serde_json::from_value::<Vec<PairView>>(p.clone())
                    .map_err(|source| ReportError::Json {
                        path: cal_path.to_path_buf(),
                        source,
                    })?
                    .into_iter()
                    .map(|p| ScatterPoint {
                        id: format!("{dim}/{}", p.item_id),
                        human: p.human,
                        judge: p.judge,
                    })
                    .collect(),
                None => match labels {
                    Some(labels) => judge_by
                        .iter()
                        .filter(|((d, _), j)| {
                            d == dim && (row.slice == "all" || j.lang == row.slice)
                        })
                        .filter_map(|((_, id), j)| {
                            let judge = j.outcome.get("score")?.as_u64()?;
                            let human = labels.get(id)?.labels.get(dim)?.score;
                            Some(ScatterPoint {
                                id: format!("{dim}/{id}"),
                                human,
                                judge: u8::try_from(judge).ok()?,
                            })
                        })
                        .filter(|p| (1..=5).contains(&p.human) && (1..=5).contains(&p.judge))
                        .collect(),
                    None => Vec::new(),
                },
            };
            let title = format!("{dim} · {}", row.slice);
            let scatter = if pairs.is_empty() {
                None
            } else {
                Some(plots::scatter(&format!("{title}: judge vs human"), &pairs)?)
            };
            if !pairs.is_empty() && pairs.len() != a.n {
                notes.push(format!(
                    "{title}: the scatter has {} item(s), the report's n is {} (the labels or the judge scores changed since the report)",
                    pairs.len(),
                    a.n
                ));
            }
            let worst = a
                .worst
                .iter()
                .map(|p| {
                    let label = labels.and_then(|l| l.get(&p.item_id));
                    let judged = judge_by.get(&(dim.clone(), p.item_id.clone()));
                    WorstView {
                        item_id: p.item_id.clone(),
                        human: p.human,
                        judge: p.judge,
                        gap: p.human.abs_diff(p.judge),
                        category: label
                            .and_then(|l| l.category.clone())
                            .or_else(|| judged.and_then(|j| j.category.clone())),
                        question: label.and_then(|l| l.question.clone()),
                        answer: label.and_then(|l| l.answer.clone()),
                        human_rationale: label
                            .and_then(|l| l.labels.get(dim))
                            .and_then(|h| h.rationale.clone()),
                        judge_rationale: judged
                            .and_then(|j| j.outcome.get("rationale"))
                            .and_then(Value::as_str)
                            .map(str::to_string),
                    }
                })
                .collect();
            slices.push(SliceBlock {
                slice: row.slice.clone(),
                n: a.n,
                judge_errors: row.judge_errors,
                agreement: opt_num(a.agreement, "— (n = 0)"),
                ci: interval(a.ci),
                kappa: opt_num(a.kappa_quadratic, "undefined"),
                kappa_ci,
                at_gate: a.agreement.map(|x| x >= AGREEMENT_GATE),
                heatmap: plots::heatmap(&format!("{title}: human × judge bin"), &a.confusion)?,
                scatter_n: pairs.len(),
                scatter,
                refs: refs
                    .iter()
                    .map(|(label, value)| RefView {
                        label: label.clone(),
                        value: fmt_num(*value, 3),
                        color: plots::hex(
                            plots::MARK_COLORS[ref_color(label) % plots::MARK_COLORS.len()],
                        ),
                    })
                    .collect(),
                extra: (!extra_value.is_empty()).then(|| Node::of(&Value::Object(extra_value))),
                worst,
            });
        }
        let chart = if bars.is_empty() {
            String::new()
        } else {
            plots::bar_chart(&BarChart {
                title: &format!("{dim}: binned agreement with 95 % CI"),
                y_desc: "agreement",
                y_range: (0.0, 1.12),
                bars: &bars,
                rule: Some(AGREEMENT_GATE),
            })?
        };
        dimensions.push(DimBlock {
            name: dim.clone(),
            gated,
            chart,
            slices,
        });
    }

    let mut legend = vec![
        Swatch {
            label: "all items".into(),
            color: plots::hex(plots::GROUP_COLORS[0]),
        },
        Swatch {
            label: "one language".into(),
            color: plots::hex(plots::GROUP_COLORS[1]),
        },
        Swatch {
            label: format!("agreement gate {}", fmt_num(AGREEMENT_GATE, 2)),
            color: plots::hex(plots::RULE_COLOR),
        },
    ];
    legend.extend(ref_colors.iter().map(|(label, &i)| Swatch {
        label: label.clone(),
        color: plots::hex(plots::MARK_COLORS[i % plots::MARK_COLORS.len()]),
    }));

    Ok(Page {
        kind: "calibration",
        title: opts
            .title
            .clone()
            .unwrap_or_else(|| format!("Cardinal judge calibration — {dir_name}")),
        dir: dir_name,
        judge_model: cal
            .get("judge_model")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string(),
        limit: cal
            .get("limit")
            .and_then(Value::as_u64)
            .map(|l| l.to_string()),
        labels: cal.get("labels").map(Node::of),
        notes,
        gate_threshold: fmt_num(AGREEMENT_GATE, 2),
        gate: gate
            .iter()
            .map(|g| GateRow {
                dimension: g.dimension.clone(),
                agreement: opt_num(g.agreement, "— (n = 0)"),
                n: g.n,
                threshold: fmt_num(g.threshold, 2),
                pass: g.pass,
            })
            .collect(),
        legend,
        dimensions,
        control: control
            .iter()
            .map(|c| ControlRow {
                slice: c.slice.clone(),
                full: format!(
                    "{} {} (n={})",
                    opt_num(c.full_card.agreement, "—"),
                    interval(c.full_card.ci),
                    c.full_card.n
                ),
                header: format!(
                    "{} {} (n={})",
                    opt_num(c.header_only.agreement, "—"),
                    interval(c.header_only.ci),
                    c.header_only.n
                ),
                full_kappa: opt_num(c.full_card.kappa_quadratic, "undefined"),
                header_kappa: opt_num(c.header_only.kappa_quadratic, "undefined"),
            })
            .collect(),
        extras,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reference_agreements_are_found_generically() {
        let mut out = Vec::new();
        collect_refs(
            "shortcut_baselines",
            &json!([
                {"name": "always high", "agreement": 0.41, "kappa": 0.0},
                {"name": "length", "agreement": 0.3}
            ]),
            0,
            &mut out,
        );
        collect_refs(
            "human_ceiling",
            &json!({"agreement": 0.86, "n": 40}),
            0,
            &mut out,
        );
        collect_refs("inter_annotator_agreement", &json!(0.9), 0, &mut out);
        collect_refs("n", &json!(0.5), 0, &mut out);
        let labels: Vec<&str> = out.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(
            labels,
            [
                "shortcut_baselines: always high",
                "shortcut_baselines: length",
                "human_ceiling",
                "inter_annotator_agreement"
            ]
        );
    }
}
