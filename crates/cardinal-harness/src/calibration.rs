//! The calibration run: the judge against the labelled corpus, anchored to the labels, fitted on
//! **dev**, reported on **test**.
//!
//! - [`run_scores`] judges the items of one split (and the ADR-0029 header-only control on its
//!   rule-violation items) and returns a [`ScoresFile`] that records the sha256 of every labels
//!   file: scores are only ever compared with the labels they were produced against.
//! - [`fit`] fits the checks scorer's calibration (content-free correction, cut points) from a
//!   scores file of the **dev** split; it takes a [`DevSplit`], which can only be built from
//!   dev items, so no fitting code can read a test label.
//! - [`report`] computes, per dimension and language: binned agreement with n and bootstrap CI,
//!   quadratic κ, the confusion matrix, the largest disagreements, the shortcut baselines (fitted
//!   on dev, scored on the reported split), the human inter-annotator ceiling, and the control;
//!   for the checks scorer, each calibration variant from the same check results.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use cardinal_dataset::calibration::{CalibrationItem, Category, LoadedItem, Split};
use cardinal_eval::calibration::{
    agreement, passes_gate, Agreement, Pair, AGREEMENT_GATE, GATED_DIMENSIONS,
};
use cardinal_eval::shortcut::{shortcuts, Shortcuts};
use cardinal_eval::Bin;
use cardinal_judge::checks::{Calibration, CheckFraming, CheckResult, ContentFree};
use cardinal_judge::JudgeInput;
use cardinal_kb::{Card, KnowledgeBase};
use serde::{Deserialize, Serialize};

use crate::error::{HarnessError, Result};
use crate::observer::Observer;
use crate::scorer::{CaseScorer, Verdict};

/// Version of `judge-scores.json`.
pub const SCORES_SCHEMA_VERSION: u32 = 2;

/// The sha256 of one labels file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelsHash {
    pub file: String,
    pub sha256: String,
}

/// The verdicts of one item under one framing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ItemScores {
    pub item_id: String,
    pub lang: String,
    pub category: Category,
    pub split: Split,
    pub framing: CheckFraming,
    pub verdicts: BTreeMap<String, Verdict>,
    /// The checks scorer's raw check results (re-scorable under any calibration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<Vec<CheckResult>>,
    /// `checks-v2`: the signals read beside the checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signals: Option<cardinal_judge::checks::Signals>,
    /// `probe-v1`: the feature vector (the model's block output averaged over the answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Vec<f32>>,
    /// Seconds the judge spent on this item.
    pub seconds: f64,
}

/// `judge-scores.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScoresFile {
    pub schema_version: u32,
    pub scorer: String,
    pub judge_model: String,
    /// The labels the scores were produced against.
    pub labels: Vec<LabelsHash>,
    /// The split judged (`dev`, `test`, or `all`).
    pub split: String,
    pub sample: Option<usize>,
    /// The checks scorer's content-free probabilities, when measured.
    #[serde(default)]
    pub content_free: Option<ContentFree>,
    /// The calibration the verdicts were scored under (checks scorer).
    #[serde(default)]
    pub calibration: Option<Calibration>,
    pub items: Vec<ItemScores>,
}

/// The sha256 of every `*.jsonl` labels file in `dir`, sorted by name.
pub fn labels_hashes(dir: &Path) -> Result<Vec<LabelsHash>> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(HarnessError::io("reading", dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|x| x.to_str()) == Some("jsonl"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            Ok(LabelsHash {
                file: p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                sha256: cardinal_digest::file_sha256(p).map_err(HarnessError::io("reading", p))?,
            })
        })
        .collect()
}

/// Refuse to compare scores with labels that changed since scoring.
pub fn check_anchor(scored_against: &[LabelsHash], now: &[LabelsHash]) -> Result<()> {
    if scored_against == now {
        return Ok(());
    }
    let old: BTreeMap<&str, &str> = scored_against
        .iter()
        .map(|h| (h.file.as_str(), h.sha256.as_str()))
        .collect();
    let new: BTreeMap<&str, &str> = now
        .iter()
        .map(|h| (h.file.as_str(), h.sha256.as_str()))
        .collect();
    let mut what = String::new();
    for (f, sha) in &old {
        match new.get(f) {
            None => what.push_str(&format!("  {f}: scored against {sha}, now missing\n")),
            Some(n) if n != sha => {
                what.push_str(&format!("  {f}: scored against {sha}, now {n}\n"))
            }
            _ => {}
        }
    }
    for (f, sha) in &new {
        if !old.contains_key(f) {
            what.push_str(&format!("  {f}: new since scoring ({sha})\n"));
        }
    }
    Err(HarnessError::Input(format!(
        "the labels changed since the judge scored them:\n{what}the scores no longer measure \
         these labels; re-run `cardinal calibrate` (without --from-scores) to re-anchor"
    )))
}

/// Items of a split (`None`: all).
pub fn select_split(items: &[LoadedItem], split: Option<Split>) -> Vec<LoadedItem> {
    items
        .iter()
        .filter(|li| split.is_none_or(|s| li.item.split == s))
        .cloned()
        .collect()
}

/// The judge's input for one calibration item: its question, answer and cited cards (which
/// also stand as the retrieved cards: a calibration item has no retrieval of its own).
pub fn item_input<'a>(kb: &'a KnowledgeBase, it: &'a CalibrationItem) -> JudgeInput<'a> {
    let cards: Vec<&Card> = it
        .cited
        .iter()
        .filter_map(|id| kb.get(id).map(|f| &f.card))
        .collect();
    JudgeInput::resolve(&it.question, &it.answer, it.lang, &it.cited, &cards, |id| {
        kb.get(id).map(|f| &f.card)
    })
}

/// Judge every item of `items` (ordered by language and cited cards so consecutive prompts
/// share their prefix), plus the header-only control on rule-violation items when `scorer`
/// can be reframed (`control`).
pub fn run_scores(
    kb: &KnowledgeBase,
    items: &[LoadedItem],
    scorer: &dyn CaseScorer,
    control: Option<&dyn CaseScorer>,
    obs: &dyn Observer,
) -> Vec<ItemScores> {
    let mut ordered: Vec<&LoadedItem> = items.iter().collect();
    ordered.sort_by(|a, b| {
        (a.item.lang.tag(), &a.item.cited, &a.item.id).cmp(&(
            b.item.lang.tag(),
            &b.item.cited,
            &b.item.id,
        ))
    });
    let n_control = ordered
        .iter()
        .filter(|li| li.item.category == Category::RuleViolation)
        .count();
    let total = ordered.len() + if control.is_some() { n_control } else { 0 };
    // One item under one framing: the same input, the scorer that frames it.
    let judge_one = |li: &LoadedItem, scorer: &dyn CaseScorer, framing: CheckFraming| {
        let it = &li.item;
        let input = item_input(kb, it);
        let t = std::time::Instant::now();
        let mut verdicts = scorer.score(&input);
        let checks = checks_of(&verdicts);
        let signals = signals_of(&verdicts);
        let probe = take_probe_features(&mut verdicts);
        ItemScores {
            item_id: it.id.clone(),
            lang: it.lang.tag().to_string(),
            category: it.category,
            split: it.split,
            framing,
            verdicts: verdicts.into_iter().collect(),
            checks,
            signals,
            probe,
            seconds: t.elapsed().as_secs_f64(),
        }
    };
    let mut out = Vec::with_capacity(total);
    obs.progress("judgements", 0, total);
    for li in &ordered {
        out.push(judge_one(li, scorer, CheckFraming::FullCard));
        obs.progress("judgements", out.len(), total);
    }
    if let Some(ctl) = control {
        for li in ordered
            .iter()
            .filter(|li| li.item.category == Category::RuleViolation)
        {
            out.push(judge_one(li, ctl, CheckFraming::HeaderOnly));
            obs.progress("judgements", out.len(), total);
        }
    }
    out
}

fn checks_of(verdicts: &[(String, Verdict)]) -> Option<Vec<CheckResult>> {
    verdicts.iter().find_map(|(_, v)| match v {
        Verdict::Scored { detail, .. } => detail
            .get("checks")
            .and_then(|c| serde_json::from_value(c.clone()).ok()),
        _ => None,
    })
}

/// The probe's feature vector, taken out of every verdict's detail (it is kept once, in
/// [`ItemScores::probe`]).
fn take_probe_features(verdicts: &mut [(String, Verdict)]) -> Option<Vec<f32>> {
    let mut found = None;
    for (_, v) in verdicts.iter_mut() {
        let detail = match v {
            Verdict::Scored { detail, .. } | Verdict::Failed { detail, .. } => detail,
            Verdict::NotApplicable { .. } => continue,
        };
        if let Some(x) = detail
            .as_object_mut()
            .and_then(|o| o.remove(crate::scorer::PROBE_FEATURES))
        {
            if found.is_none() {
                found = serde_json::from_value(x).ok();
            }
        }
    }
    found
}

fn signals_of(verdicts: &[(String, Verdict)]) -> Option<cardinal_judge::checks::Signals> {
    verdicts.iter().find_map(|(_, v)| match v {
        Verdict::Scored { detail, .. } => detail
            .get("signals")
            .and_then(|c| serde_json::from_value(c.clone()).ok()),
        _ => None,
    })
}

/// Score the stored check results (and signals) of every checks-scorer item again under
/// `calibration`, which then becomes the scores' calibration. Items without stored checks (a
/// judge error) keep their verdicts. The sentences and rules shown in each verdict's detail are
/// kept.
pub fn rescore(scores: &mut ScoresFile, calibration: &Calibration) {
    for it in scores.items.iter_mut() {
        if let Some(x) = &it.probe {
            let fresh: BTreeMap<String, Verdict> =
                crate::scorer::ProbeScorer::verdicts(calibration, x, false)
                    .into_iter()
                    .filter(|(d, _)| it.verdicts.contains_key(d))
                    .collect();
            it.verdicts = fresh;
            continue;
        }
        let Some(checks) = &it.checks else {
            continue;
        };
        let detail = it.verdicts.values().find_map(|v| match v {
            Verdict::Scored { detail, .. } => Some(detail.clone()),
            _ => None,
        });
        let list = |key: &str| -> Vec<String> {
            detail
                .as_ref()
                .and_then(|d| d.get(key))
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .unwrap_or_default()
        };
        let (sentences, rules) = (list("sentences"), list("rules"));
        let fresh = crate::scorer::ChecksScorer::verdicts(
            calibration,
            &sentences,
            &rules,
            checks,
            it.signals.as_ref(),
        );
        // Only the dimensions the item was judged on (calibration judges the gated two).
        let fresh: BTreeMap<String, Verdict> = fresh
            .into_iter()
            .filter(|(d, _)| it.verdicts.contains_key(d))
            .collect();
        it.verdicts = fresh;
    }
    scores.calibration = Some(calibration.clone());
}

/// The dev items, and only them: the one input the fitting code accepts.
pub struct DevSplit<'a> {
    items: BTreeMap<&'a str, &'a LoadedItem>,
}

impl<'a> DevSplit<'a> {
    /// Whether `id` is a dev item of this split.
    pub fn contains(&self, id: &str) -> bool {
        self.items.contains_key(id)
    }

    /// Keep the dev items of `items` (test items never enter).
    pub fn from_items(items: &'a [LoadedItem]) -> Self {
        DevSplit {
            items: items
                .iter()
                .filter(|li| li.item.split == Split::Dev)
                .map(|li| (li.item.id.as_str(), li))
                .collect(),
        }
    }

    /// The reference label of a dev item; `None` for anything else.
    pub fn reference(&self, id: &str, dimension: &str) -> Option<u8> {
        self.items.get(id)?.item.reference(dimension)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Fit the checks scorer's calibration on the dev split: for each dimension, cut points on the
/// raw score with and without the content-free correction; the variant with the higher dev
/// binned agreement (summed over the gated dimensions) is kept. Reads labels through `dev` only.
pub fn fit(
    dev: &DevSplit<'_>,
    scores: &ScoresFile,
    content_free: Option<ContentFree>,
    fitted_on: Vec<(String, String)>,
) -> Result<Calibration> {
    if dev.is_empty() {
        return Err(HarnessError::Input("no dev item to fit on".into()));
    }
    if scores.scorer == cardinal_judge::probe::SCORER {
        return fit_probe(dev, scores, fitted_on);
    }
    let rows: Vec<(&str, &Vec<CheckResult>)> = scores
        .items
        .iter()
        .filter(|s| s.framing == CheckFraming::FullCard)
        .filter_map(|s| Some((s.item_id.as_str(), s.checks.as_ref()?)))
        .filter(|(id, _)| dev.items.contains_key(id))
        .collect();
    if rows.is_empty() {
        return Err(HarnessError::Input(
            "the scores hold no checks of dev items (run `cardinal calibrate --split dev` with the checks scorer first)".into(),
        ));
    }
    let fit_with = |cf: Option<&ContentFree>| -> (Calibration, usize) {
        let mut cal = Calibration::uncalibrated(&scores.judge_model);
        cal.content_free = cf.cloned();
        let raws: Vec<(&str, cardinal_judge::checks::Raw)> = rows
            .iter()
            .map(|(id, r)| (*id, cardinal_judge::checks::raw_scores(r, cf)))
            .collect();
        let pairs =
            |dim: &str, get: &dyn Fn(&cardinal_judge::checks::Raw) -> f64| -> Vec<(f64, u8)> {
                raws.iter()
                    .filter_map(|(id, raw)| Some((get(raw), dev.reference(id, dim)?)))
                    .collect()
            };
        let g = pairs("groundedness", &|r| r.groundedness);
        let f = pairs("faithfulness", &|r| r.faithfulness);
        cal.groundedness = cardinal_judge::checks::fit_cuts(&g);
        cal.faithfulness = cardinal_judge::checks::fit_cuts(&f);
        // Hallucination has no human label: its cut points stay the documented default.
        let hits = |pairs: &[(f64, u8)], cuts: &cardinal_judge::checks::Cuts| {
            pairs
                .iter()
                .filter(|(r, h)| Bin::of(cuts.score(*r)) == Bin::of(*h))
                .count()
        };
        let total = hits(&g, &cal.groundedness) + hits(&f, &cal.faithfulness);
        (cal, total)
    };
    let (plain, plain_hits) = fit_with(None);
    let mut best = plain;
    if let Some(cf) = &content_free {
        let (with_cf, cf_hits) = fit_with(Some(cf));
        if cf_hits > plain_hits {
            best = with_cf;
        }
    }
    best.scorer = scores.scorer.clone();
    if scores.scorer == cardinal_judge::checks::SCORER_V2 {
        best.aggregation = Some(fit_aggregations(dev, scores, &best)?);
    }
    best.fitted_on = fitted_on;
    best.split = "dev".into();
    Ok(best)
}

/// `probe-v1`: per gated dimension, the linear probe (standardise, PCA, ridge) fitted on the
/// dev items' feature vectors (full-card framing), then cut points on its squashed in-sample
/// output. Reads labels through `dev` only.
fn fit_probe(
    dev: &DevSplit<'_>,
    scores: &ScoresFile,
    fitted_on: Vec<(String, String)>,
) -> Result<Calibration> {
    use cardinal_judge::probe::{fit_linear, ProbeFit, COMPONENTS, LAYER, RIDGE_ALPHA};
    let xs: Vec<(&str, &[f32])> = scores
        .items
        .iter()
        .filter(|s| s.framing == CheckFraming::FullCard && dev.contains(&s.item_id))
        .filter_map(|s| Some((s.item_id.as_str(), s.probe.as_deref()?)))
        .collect();
    if xs.is_empty() {
        return Err(HarnessError::Input(
            "the scores hold no probe features of dev items (run `cardinal calibrate --scorer probe-v1 --split dev` first)".into(),
        ));
    }
    let rows = |dim: &str| -> Vec<(&[f32], u8)> {
        xs.iter()
            .filter_map(|(id, x)| Some((*x, dev.reference(id, dim)?)))
            .collect()
    };
    let (g, f) = (rows("groundedness"), rows("faithfulness"));
    let fit_one = |rows: &[(&[f32], u8)]| {
        fit_linear(rows, COMPONENTS, RIDGE_ALPHA)
            .map_err(|e| HarnessError::Input(format!("cannot fit the probe: {e}")))
    };
    let (lg, lf) = (fit_one(&g)?, fit_one(&f)?);
    let cuts = |lin: &cardinal_judge::probe::Linear, rows: &[(&[f32], u8)]| {
        let pairs: Vec<(f64, u8)> = rows
            .iter()
            .filter_map(|(x, h)| Some((lin.raw(x)?, *h)))
            .collect();
        cardinal_judge::checks::fit_cuts(&pairs)
    };
    let mut cal = Calibration::uncalibrated(&scores.judge_model);
    cal.scorer = scores.scorer.clone();
    cal.groundedness = cuts(&lg, &g);
    cal.faithfulness = cuts(&lf, &f);
    cal.probe = Some(ProbeFit {
        layer: LAYER,
        components: COMPONENTS,
        ridge_alpha: RIDGE_ALPHA,
        n: xs.len(),
        groundedness: lg,
        faithfulness: lf,
    });
    cal.fitted_on = fitted_on;
    cal.split = "dev".into();
    Ok(cal)
}

/// `checks-v2`: per gated dimension, every candidate feature set fitted on the dev items'
/// feature vectors and the one with the best leave-one-out agreement on dev chosen (the checks' raw scores under
/// `cal`, which is already fitted on dev).
fn fit_aggregations(
    dev: &DevSplit<'_>,
    scores: &ScoresFile,
    cal: &Calibration,
) -> Result<cardinal_judge::checks::Aggregations> {
    use cardinal_judge::checks::{features, raw_scores};
    let xs: Vec<(&str, [f64; 6])> = scores
        .items
        .iter()
        .filter(|s| s.framing == CheckFraming::FullCard && dev.contains(&s.item_id))
        .filter_map(|s| {
            let raw = raw_scores(s.checks.as_ref()?, cal.content_free.as_ref());
            Some((s.item_id.as_str(), features(&raw, s.signals.as_ref()?)))
        })
        .collect();
    if xs.is_empty() {
        return Err(HarnessError::Input(
            "the scores hold no checks-v2 signals of dev items (run `cardinal calibrate --scorer checks-v2 --split dev` first)".into(),
        ));
    }
    let rows = |dim: &str| -> Vec<([f64; 6], u8)> {
        xs.iter()
            .filter_map(|(id, x)| Some((*x, dev.reference(id, dim)?)))
            .collect()
    };
    let (g, f) = (rows("groundedness"), rows("faithfulness"));
    Ok(cardinal_judge::checks::Aggregations::select(&g, &f))
}

/// One row of the agreement tables.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgreementRow {
    /// `judge` for the scores as stored; for the checks scorer also `uncalibrated`,
    /// `content-free`, `cut-points`.
    pub variant: String,
    pub dimension: String,
    /// `all` or a language tag.
    pub slice: String,
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

/// Gate verdict of one gated dimension.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateRow {
    pub dimension: String,
    pub slice: String,
    pub agreement: Option<f64>,
    pub n: usize,
    pub threshold: f64,
    pub pass: bool,
}

/// `calibration.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CalibrationReport {
    pub scorer: String,
    pub judge_model: String,
    pub labels: Vec<LabelsHash>,
    pub split: String,
    pub sample: Option<usize>,
    pub rows: Vec<AgreementRow>,
    pub control: Vec<ControlRow>,
    /// dimension → slice → shortcut baselines (fitted on dev, scored on the reported items).
    pub shortcuts: BTreeMap<String, BTreeMap<String, Shortcuts>>,
    /// dimension → slice → inter-annotator agreement (first vs second labeller).
    pub ceiling: BTreeMap<String, BTreeMap<String, Agreement>>,
    /// Gate per gated dimension, overall and per language, on the stored scores.
    pub gate: Vec<GateRow>,
    /// Median seconds of judging per item (full framing).
    pub seconds_per_item: Option<f64>,
}

fn judge_score(v: &Verdict) -> Option<u8> {
    v.score().map(|s| s.round().clamp(1.0, 5.0) as u8)
}

/// How a report variant scores an item.
enum Rescore {
    /// The verdicts as stored.
    Stored,
    /// The checks' results under another calibration (no aggregation: the checks alone).
    Cal(Box<Calibration>),
    /// One candidate combination of a `checks-v2` calibration (groundedness, faithfulness).
    Aggregate(
        Box<(
            cardinal_judge::checks::Aggregation,
            cardinal_judge::checks::Aggregation,
        )>,
    ),
}

/// Build the report of `scores` against `items` (every item of the corpus: the dev items are
/// what the shortcut baselines are fitted on).
pub fn report(items: &[LoadedItem], scores: &ScoresFile) -> Result<CalibrationReport> {
    let by_id: BTreeMap<&str, &LoadedItem> =
        items.iter().map(|li| (li.item.id.as_str(), li)).collect();
    let mut langs: Vec<String> = scores.items.iter().map(|s| s.lang.clone()).collect();
    langs.sort();
    langs.dedup();
    let mut slices = vec!["all".to_string()];
    slices.extend(langs.iter().cloned());
    let in_slice = |s: &ItemScores, slice: &str| slice == "all" || s.lang == slice;
    // Variants: the stored scores, plus re-scorings of the checks scorers' results.
    let mut variants: Vec<(String, Rescore)> = vec![("judge".into(), Rescore::Stored)];
    if cardinal_judge::checks::is_checks_scorer(&scores.scorer) {
        let model = &scores.judge_model;
        if let Some(aggs) = scores
            .calibration
            .as_ref()
            .and_then(|c| c.aggregation.as_ref())
        {
            if let Some(c) = &scores.calibration {
                let mut checks_only = c.clone();
                checks_only.aggregation = None;
                variants.push(("checks only".into(), Rescore::Cal(Box::new(checks_only))));
            }
            for (k, c) in aggs.groundedness_candidates.iter().enumerate() {
                let Some(f) = aggs.faithfulness_candidates.get(k) else {
                    continue;
                };
                variants.push((
                    format!("dev-fitted: {}", c.name),
                    Rescore::Aggregate(Box::new((c.fit.clone(), f.fit.clone()))),
                ));
            }
        }
        variants.push((
            "uncalibrated".into(),
            Rescore::Cal(Box::new(Calibration::uncalibrated(model))),
        ));
        if let Some(cf) = &scores.content_free {
            let mut c = Calibration::uncalibrated(model);
            c.content_free = Some(cf.clone());
            variants.push(("content-free".into(), Rescore::Cal(Box::new(c))));
        }
    }
    let mut rows = Vec::new();
    for (variant, rescore) in &variants {
        for dim in GATED_DIMENSIONS {
            for slice in &slices {
                let mut pairs = Vec::new();
                let mut errors = 0;
                for s in scores
                    .items
                    .iter()
                    .filter(|s| s.framing == CheckFraming::FullCard && in_slice(s, slice))
                {
                    let li = by_id.get(s.item_id.as_str()).ok_or_else(|| {
                        HarnessError::Input(format!(
                            "judge scores name item {}, which is not in the labels",
                            s.item_id
                        ))
                    })?;
                    let human = li.item.reference(dim).unwrap_or(0);
                    let g = dim == "groundedness";
                    let judge = match (rescore, &s.checks) {
                        (Rescore::Stored, _) => s.verdicts.get(dim).and_then(judge_score),
                        (Rescore::Cal(c), Some(r)) => {
                            let (_, sc) = c.scores(r);
                            Some(if g { sc[0] } else { sc[1] })
                        }
                        (Rescore::Aggregate(a), Some(r)) => s.signals.as_ref().map(|sig| {
                            let cf = scores
                                .calibration
                                .as_ref()
                                .and_then(|c| c.content_free.as_ref());
                            let raw = cardinal_judge::checks::raw_scores(r, cf);
                            let x = cardinal_judge::checks::features(&raw, sig);
                            if g {
                                a.0.score(&x)
                            } else {
                                a.1.score(&x)
                            }
                        }),
                        (_, None) => None,
                    };
                    match judge {
                        Some(j) => pairs.push(Pair {
                            item_id: s.item_id.clone(),
                            human,
                            judge: j,
                        }),
                        None => {
                            if matches!(s.verdicts.get(dim), Some(Verdict::Failed { .. })) {
                                errors += 1;
                            }
                        }
                    }
                }
                if pairs.is_empty() && errors == 0 && variant != "judge" {
                    continue;
                }
                rows.push(AgreementRow {
                    variant: variant.clone(),
                    dimension: dim.to_string(),
                    slice: slice.clone(),
                    judge_errors: errors,
                    stats: agreement(&pairs, &format!("{variant}/{dim}/{slice}")),
                });
            }
        }
    }
    // The ADR-0029 control: faithfulness on rule-violation items, full card vs header only.
    let control = slices
        .iter()
        .map(|slice| {
            let get = |framing: CheckFraming| -> Vec<Pair> {
                scores
                    .items
                    .iter()
                    .filter(|s| {
                        s.framing == framing
                            && s.category == Category::RuleViolation
                            && in_slice(s, slice)
                    })
                    .filter_map(|s| {
                        let li = by_id.get(s.item_id.as_str())?;
                        Some(Pair {
                            item_id: s.item_id.clone(),
                            human: li.item.reference("faithfulness")?,
                            judge: s.verdicts.get("faithfulness").and_then(judge_score)?,
                        })
                    })
                    .collect()
            };
            ControlRow {
                slice: slice.clone(),
                full_card: agreement(
                    &get(CheckFraming::FullCard),
                    &format!("control/full/{slice}"),
                ),
                header_only: agreement(
                    &get(CheckFraming::HeaderOnly),
                    &format!("control/header/{slice}"),
                ),
            }
        })
        .collect();
    // Shortcut baselines: fitted on the dev items of the slice, scored on the reported items.
    let mut sc_map: BTreeMap<String, BTreeMap<String, Shortcuts>> = BTreeMap::new();
    let mut ceiling: BTreeMap<String, BTreeMap<String, Agreement>> = BTreeMap::new();
    let reported: std::collections::BTreeSet<&str> = scores
        .items
        .iter()
        .filter(|s| s.framing == CheckFraming::FullCard)
        .map(|s| s.item_id.as_str())
        .collect();
    for dim in GATED_DIMENSIONS {
        for slice in &slices {
            let of_slice = |li: &&LoadedItem| slice == "all" || li.item.lang.tag() == slice;
            let fit: Vec<(&str, Bin)> = items
                .iter()
                .filter(of_slice)
                .filter(|li| li.item.split == Split::Dev)
                .filter_map(|li| Some((li.item.answer.as_str(), Bin::of(li.item.reference(dim)?)?)))
                .collect();
            let score: Vec<(&str, Bin)> = items
                .iter()
                .filter(of_slice)
                .filter(|li| reported.contains(li.item.id.as_str()))
                .filter_map(|li| Some((li.item.answer.as_str(), Bin::of(li.item.reference(dim)?)?)))
                .collect();
            sc_map
                .entry(dim.to_string())
                .or_default()
                .insert(slice.clone(), shortcuts(&fit, &score));
            let iaa: Vec<Pair> = items
                .iter()
                .filter(of_slice)
                .filter(|li| reported.contains(li.item.id.as_str()))
                .filter_map(|li| {
                    Some(Pair {
                        item_id: li.item.id.clone(),
                        human: li.item.labels.score(dim)?,
                        judge: li.item.second_labels.as_ref()?.score(dim)?,
                    })
                })
                .collect();
            ceiling.entry(dim.to_string()).or_default().insert(
                slice.clone(),
                agreement(&iaa, &format!("ceiling/{dim}/{slice}")),
            );
        }
    }
    let gate = rows
        .iter()
        .filter(|r| r.variant == "judge" && GATED_DIMENSIONS.contains(&r.dimension.as_str()))
        .map(|r| GateRow {
            dimension: r.dimension.clone(),
            slice: r.slice.clone(),
            agreement: r.stats.agreement,
            n: r.stats.n,
            threshold: AGREEMENT_GATE,
            pass: passes_gate(&r.stats),
        })
        .collect();
    let mut secs: Vec<f64> = scores
        .items
        .iter()
        .filter(|s| s.framing == CheckFraming::FullCard)
        .map(|s| s.seconds)
        .collect();
    secs.sort_by(f64::total_cmp);
    Ok(CalibrationReport {
        scorer: scores.scorer.clone(),
        judge_model: scores.judge_model.clone(),
        labels: scores.labels.clone(),
        split: scores.split.clone(),
        sample: scores.sample,
        rows,
        control,
        shortcuts: sc_map,
        ceiling,
        gate,
        seconds_per_item: secs.get(secs.len() / 2).copied(),
    })
}

/// Measure the content-free probabilities of the checks (one probe per check kind).
pub fn measure_content_free(model: &Arc<dyn cardinal_llm::YesNoModel>) -> Result<ContentFree> {
    let plan = ContentFree::plan();
    let texts: Vec<String> = plan.checks.iter().map(|c| c.text.clone()).collect();
    let answers = model.yes_no(&plan.messages, &texts)?;
    Ok(ContentFree {
        p_yes: plan
            .checks
            .iter()
            .zip(answers)
            .map(|(c, a)| (c.kind, a.p_yes))
            .collect(),
    })
}

fn f3(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.3}")).unwrap_or_else(|| "n/a".into())
}

fn ci(a: &Agreement) -> String {
    a.ci.map(|c| format!("[{:.3}, {:.3}]", c.low, c.high))
        .unwrap_or_else(|| "n/a".into())
}

/// What the run's median judge time is (and is not): judgements served from the response or
/// reading cache take no time, so it is no speed figure.
const JUDGE_TIME_NOTE: &str =
    " (wall time of this run, cached judgements included; speed: `cardinal bench judge`)";

/// `calibration.md`.
pub fn render_markdown(r: &CalibrationReport) -> String {
    let mut s = String::from("# Judge calibration\n\n");
    s.push_str(&format!(
        "- scorer: `{}`; judge: `{}`\n- split: **{}**{}\n",
        r.scorer,
        r.judge_model,
        r.split,
        r.sample
            .map(|n| format!(" (stratified sample of {n})"))
            .unwrap_or_default()
    ));
    for h in &r.labels {
        s.push_str(&format!("- labels `{}`: sha256 `{}`\n", h.file, h.sha256));
    }
    s.push_str(&format!(
        "- bins: 1–2 low, 3 mid, 4–5 high; gate: binned agreement ≥ {AGREEMENT_GATE} on {} (frozen)\n",
        GATED_DIMENSIONS.join(", ")
    ));
    if let Some(t) = r.seconds_per_item {
        s.push_str(&format!(
            "- judge time: median {t:.1} s per item{JUDGE_TIME_NOTE}\n"
        ));
    }
    s.push_str("\n## Gate\n\n");
    for g in &r.gate {
        s.push_str(&format!(
            "- `{}` / {}: agreement {} (n = {}) — **{}**\n",
            g.dimension,
            g.slice,
            f3(g.agreement),
            g.n,
            if g.pass { "pass" } else { "FAIL" }
        ));
    }
    s.push_str("\n## Agreement, beside trivial baselines and the human ceiling\n\n");
    s.push_str("Shortcut baselines are fitted on the dev split and scored on the items reported here; the ceiling is the agreement of the two human labellers on the second-labelled items among them.\n\n");
    s.push_str("| variant | dimension | slice | n | errors | binned agreement | 95 % CI | quadratic κ | majority bin | best surface rule | human ceiling (n) |\n");
    s.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for row in &r.rows {
        let sc = r
            .shortcuts
            .get(&row.dimension)
            .and_then(|m| m.get(&row.slice));
        let best = sc.and_then(|sc| {
            sc.rules
                .iter()
                .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
                .map(|(f, (_, a))| format!("{a:.3} ({f})"))
        });
        let ceil = r
            .ceiling
            .get(&row.dimension)
            .and_then(|m| m.get(&row.slice));
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.variant,
            row.dimension,
            row.slice,
            row.stats.n,
            row.judge_errors,
            f3(row.stats.agreement),
            ci(&row.stats),
            f3(row.stats.kappa_quadratic),
            f3(sc.and_then(|x| x.majority_agreement)),
            best.unwrap_or_else(|| "n/a".into()),
            ceil.map(|c| format!("{} ({})", f3(c.agreement), c.n))
                .unwrap_or_else(|| "n/a".into()),
        ));
    }
    s.push_str("\n## Confusion matrices (rows: human bin, columns: judge bin; judge variant)\n\n");
    for row in r.rows.iter().filter(|x| x.variant == "judge") {
        let c = row.stats.confusion;
        s.push_str(&format!(
            "**{} / {}** (n = {})\n\n| human \\ judge | low | mid | high |\n| --- | --- | --- | --- |\n| low | {} | {} | {} |\n| mid | {} | {} | {} |\n| high | {} | {} | {} |\n\n",
            row.dimension, row.slice, row.stats.n,
            c[0][0], c[0][1], c[0][2], c[1][0], c[1][1], c[1][2], c[2][0], c[2][1], c[2][2]
        ));
    }
    s.push_str("## ADR-0029 control: faithfulness on rule-violation items\n\nThe same judge, framed with the full cited cards (rules included) vs the headers only (no rule shown, no rule check).\n\n| slice | n full | agreement full card | n header | agreement header only | difference |\n| --- | --- | --- | --- | --- | --- |\n");
    for c in &r.control {
        let d = match (c.full_card.agreement, c.header_only.agreement) {
            (Some(a), Some(b)) => format!("{:+.3}", a - b),
            _ => "n/a".into(),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {d} |\n",
            c.slice,
            c.full_card.n,
            f3(c.full_card.agreement),
            c.header_only.n,
            f3(c.header_only.agreement)
        ));
    }
    s.push_str("\n## Largest disagreements (judge variant, all languages)\n\n");
    for row in r
        .rows
        .iter()
        .filter(|x| x.variant == "judge" && x.slice == "all")
    {
        s.push_str(&format!("**{}**\n\n", row.dimension));
        if row.stats.worst.is_empty() {
            s.push_str("- none\n");
        }
        for p in &row.stats.worst {
            s.push_str(&format!(
                "- `{}`: human {}, judge {}\n",
                p.item_id, p.human, p.judge
            ));
        }
        s.push('\n');
    }
    s
}

/// A compact terminal table.
pub fn render_terminal(r: &CalibrationReport) -> String {
    let mut s = format!(
        "scorer {} · judge {} · split {}\n{:<13} {:<13} {:<7} {:>4} {:>9} {:<16} {:>7} {:>8} {:>8} {:>8}\n",
        r.scorer, r.judge_model, r.split, "variant", "dimension", "slice", "n", "agreement", "95% CI", "kappa_q", "majority", "surface", "ceiling"
    );
    for row in &r.rows {
        let sc = r
            .shortcuts
            .get(&row.dimension)
            .and_then(|m| m.get(&row.slice));
        let best = sc.and_then(|sc| sc.rules.values().map(|x| x.1).max_by(f64::total_cmp));
        let ceil = r
            .ceiling
            .get(&row.dimension)
            .and_then(|m| m.get(&row.slice))
            .and_then(|c| c.agreement);
        s.push_str(&format!(
            "{:<13} {:<13} {:<7} {:>4} {:>9} {:<16} {:>7} {:>8} {:>8} {:>8}\n",
            row.variant,
            row.dimension,
            row.slice,
            row.stats.n,
            f3(row.stats.agreement),
            ci(&row.stats),
            f3(row.stats.kappa_quadratic),
            f3(sc.and_then(|x| x.majority_agreement)),
            f3(best),
            f3(ceil)
        ));
    }
    for c in &r.control {
        s.push_str(&format!(
            "control {:<7} faithfulness on rule violations: full card {} (n={}) vs header only {} (n={})\n",
            c.slice,
            f3(c.full_card.agreement),
            c.full_card.n,
            f3(c.header_only.agreement),
            c.header_only.n
        ));
    }
    if let Some(t) = r.seconds_per_item {
        s.push_str(&format!(
            "judge time: median {t:.1} s per item{JUDGE_TIME_NOTE}\n"
        ));
    }
    s
}
