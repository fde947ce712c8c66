//! Fitting the policy on the **train split only**.
//!
//! [`TrainSet`] is the only input of [`fit`]: it is built from loaded cases by
//! [`TrainSet::from_cases`], which keeps the cases whose `split` is `train` and never copies
//! anything of a test case (a case without a split is an error, so an unlabelled case cannot
//! slip in). Thresholds are chosen from out-of-fold predictions of a k-fold cross-validation
//! inside train. The fitted file records the sha256 of the train cases it read.

use std::collections::BTreeMap;

use cardinal_dataset::{Expect, Form, LoadedCase, SafetyClass, Split};
use cardinal_kb::Lang;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::model::{
    class_index, features, is_unsafe, Classifier, FitOptions, IntentEncoderInfo, LocalView,
    PolicyModel, SecondOpinionInfo, Thresholds, TrainInfo, CLASSES, POLICY_SCHEMA_VERSION,
};
use super::{decide, segments, Decision, Signals};

/// One train case, as much of it as fitting may read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainCase {
    pub id: String,
    pub lang: Lang,
    pub question: String,
    pub class: SafetyClass,
    pub expect: Expect,
    /// The message's form (safety cases v2 carry one; older cases do not). Not part of the
    /// train hash, which predates it.
    #[serde(skip)]
    pub form: Option<Form>,
}

/// The train split. Its only constructor filters by split.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainSet {
    cases: Vec<TrainCase>,
}

/// Errors of fitting.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("case {0} has no split; every case must be train or test")]
    NoSplit(String),
    #[error("train case {0} has no class")]
    NoClass(String),
    #[error("the train split has no case of class {0}")]
    EmptyClass(SafetyClass),
    #[error("features: {0}")]
    Features(String),
}

impl TrainSet {
    /// The train cases of `cases`, in their order. Test and holdout cases are skipped without
    /// reading anything but their split.
    pub fn from_cases(cases: &[LoadedCase]) -> Result<TrainSet, FitError> {
        let mut out = Vec::new();
        for lc in cases {
            let c = &lc.case;
            match c.split {
                None => return Err(FitError::NoSplit(c.id.clone())),
                Some(Split::Test | Split::Holdout) => continue,
                Some(Split::Train) => {}
            }
            let class = c.class.ok_or_else(|| FitError::NoClass(c.id.clone()))?;
            out.push(TrainCase {
                id: c.id.clone(),
                lang: c.lang,
                question: c.question.clone(),
                class,
                expect: c.expect,
                form: c.form,
            });
        }
        for class in CLASSES {
            if !out.iter().any(|c| c.class == class) {
                return Err(FitError::EmptyClass(class));
            }
        }
        Ok(TrainSet { cases: out })
    }

    pub fn cases(&self) -> &[TrainCase] {
        &self.cases
    }

    /// The same split keeping only the cases `keep` accepts (still train cases only).
    pub fn retain(&mut self, keep: impl Fn(&TrainCase) -> bool) {
        self.cases.retain(keep);
    }

    /// sha256 of the canonical JSON lines of the train cases (id, lang, question, class,
    /// expect), in order.
    pub fn sha256(&self) -> String {
        let mut h = Sha256::new();
        for c in &self.cases {
            let line = serde_json::to_string(c).unwrap_or_default();
            h.update(line.as_bytes());
            h.update(b"\n");
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// What fitting needs from the outside world: query embeddings and the best dense cosine of a
/// query vector against the cards of a language.
pub trait Featurizer {
    /// Identity of the embedder (recorded in the model).
    fn embedder_id(&self) -> String;
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;
    fn best_cosine(&self, vector: &[f32], lang: Lang) -> Result<Option<f32>, String>;
    /// The second-opinion model's identity, when one is attached.
    fn second_opinion_info(&self) -> Option<SecondOpinionInfo> {
        None
    }
    /// P(Yes) of the second-opinion checks of `question`; `None` when no model is attached.
    fn second_opinion(&self, question: &str) -> Result<Option<Vec<f32>>, String> {
        let _ = question;
        Ok(None)
    }
    /// The local model's reading of `question` ([`super::second_opinion::read`]); `None` when
    /// no model or no layer is attached.
    fn reading(&self, question: &str) -> Result<Option<Vec<f32>>, String> {
        let _ = question;
        Ok(None)
    }
    /// The intent encoder's identity, when one is attached.
    fn intent_info(&self) -> Option<IntentEncoderInfo> {
        None
    }
    /// The intent encoder's vectors of `texts`; `None` when no encoder is attached.
    fn intent(&self, texts: &[&str]) -> Result<Option<Vec<Vec<f32>>>, String> {
        let _ = texts;
        Ok(None)
    }
}

/// The signals of one message, before any model: what [`decide`] reads besides probabilities.
#[derive(Debug, Clone)]
pub struct CaseFeatures {
    pub embedding: Vec<f32>,
    pub best_cosine: Option<f32>,
    pub segment_texts: Vec<String>,
    pub segment_embeddings: Vec<Vec<f32>>,
    pub rule_hit: bool,
    /// P(Yes) of each second-opinion check, when the local model was asked.
    pub second_opinion: Option<Vec<f32>>,
    /// The intent encoder's vector of the message, when the policy reads one.
    pub intent: Option<Vec<f32>>,
    /// The intent encoder's vectors of the segments (same order as `segment_texts`).
    pub segment_intents: Vec<Vec<f32>>,
    /// The local model's reading of the message, when the policy reads one.
    pub reading: Option<Vec<f32>>,
}

impl CaseFeatures {
    /// What the local model said, as far as the options use it.
    pub fn local(&self, opt: &FitOptions) -> LocalView<'_> {
        LocalView {
            second_opinion: self
                .second_opinion
                .as_deref()
                .filter(|_| opt.second_opinion),
            reading: self
                .reading
                .as_deref()
                .filter(|_| opt.reading_layer.is_some()),
        }
    }
}

/// Features of `question` (segments embedded only when `with_segments`).
pub fn case_features(
    fz: &dyn Featurizer,
    question: &str,
    lang: Lang,
    with_segments: bool,
) -> Result<CaseFeatures, FitError> {
    let segs = if with_segments {
        segments(question)
    } else {
        Vec::new()
    };
    let mut texts: Vec<&str> = vec![question];
    texts.extend(segs.iter().map(String::as_str));
    let mut v = fz.embed(&texts).map_err(FitError::Features)?;
    let n_texts = texts.len();
    if v.len() != n_texts {
        return Err(FitError::Features(
            "embedder returned too few vectors".into(),
        ));
    }
    let embedding = v.remove(0);
    let best_cosine = fz
        .best_cosine(&embedding, lang)
        .map_err(FitError::Features)?;
    let (intent, segment_intents) = match fz.intent(&texts).map_err(FitError::Features)? {
        Some(mut iv) if iv.len() == n_texts => {
            let first = iv.remove(0);
            (Some(first), iv)
        }
        Some(_) => {
            return Err(FitError::Features(
                "intent encoder returned too few vectors".into(),
            ))
        }
        None => (None, Vec::new()),
    };
    Ok(CaseFeatures {
        embedding,
        best_cosine,
        segment_texts: segs,
        segment_embeddings: v,
        rule_hit: !super::rules::injection_markers(question).is_empty(),
        second_opinion: fz.second_opinion(question).map_err(FitError::Features)?,
        intent,
        segment_intents,
        reading: fz.reading(question).map_err(FitError::Features)?,
    })
}

/// Adam on the weighted softmax cross-entropy with an L2 penalty; deterministic.
fn train_softmax(
    x: &[Vec<f32>],
    y: &[usize],
    w_case: &[f32],
    k: usize,
    l2: f32,
    iterations: usize,
) -> (Vec<Vec<f32>>, Vec<f32>) {
    let d = x.first().map(Vec::len).unwrap_or(0);
    let n = x.len();
    let mut w = vec![vec![0f32; d]; k];
    let mut b = vec![0f32; k];
    let (mut mw, mut vw) = (vec![vec![0f32; d]; k], vec![vec![0f32; d]; k]);
    let (mut mb, mut vb) = (vec![0f32; k], vec![0f32; k]);
    let (lr, b1, b2, eps) = (0.05f32, 0.9f32, 0.999f32, 1e-8f32);
    let wsum: f32 = w_case.iter().sum();
    for t in 1..=iterations {
        let mut gw = vec![vec![0f32; d]; k];
        let mut gb = vec![0f32; k];
        for i in 0..n {
            let logits: Vec<f32> = (0..k)
                .map(|c| b[c] + w[c].iter().zip(&x[i]).map(|(a, v)| a * v).sum::<f32>())
                .collect();
            let p = super::model::softmax(&logits);
            for c in 0..k {
                let g = w_case[i] * (p[c] - if y[i] == c { 1.0 } else { 0.0 }) / wsum;
                gb[c] += g;
                for (gj, xj) in gw[c].iter_mut().zip(&x[i]) {
                    *gj += g * xj;
                }
            }
        }
        let bc1 = 1.0 - b1.powi(t as i32);
        let bc2 = 1.0 - b2.powi(t as i32);
        for c in 0..k {
            for j in 0..d {
                let g = gw[c][j] + l2 * w[c][j];
                mw[c][j] = b1 * mw[c][j] + (1.0 - b1) * g;
                vw[c][j] = b2 * vw[c][j] + (1.0 - b2) * g * g;
                w[c][j] -= lr * (mw[c][j] / bc1) / ((vw[c][j] / bc2).sqrt() + eps);
            }
            let g = gb[c];
            mb[c] = b1 * mb[c] + (1.0 - b1) * g;
            vb[c] = b2 * vb[c] + (1.0 - b2) * g * g;
            b[c] -= lr * (mb[c] / bc1) / ((vb[c] / bc2).sqrt() + eps);
        }
    }
    (w, b)
}

/// Fit the weights (no thresholds) on the given rows.
fn fit_weights(
    feats: &[&CaseFeatures],
    labels: &[SafetyClass],
    opt: &FitOptions,
) -> (Vec<f32>, Vec<f32>, Vec<Vec<f32>>, Vec<f32>) {
    let x: Vec<Vec<f32>> = feats
        .iter()
        .map(|f| {
            features(
                &f.embedding,
                f.intent.as_deref(),
                f.best_cosine,
                f.local(opt),
                opt,
            )
        })
        .collect();
    let d = x.first().map(Vec::len).unwrap_or(0);
    if opt.classifier == Classifier::Prototype {
        // Unit-length class centroids of the embeddings, scaled by the temperature.
        let dim = feats.first().map(|f| f.embedding.len()).unwrap_or(0);
        let mut w = vec![vec![0f32; d]; CLASSES.len()];
        for (f, c) in feats.iter().zip(labels) {
            for (a, v) in w[class_index(*c)].iter_mut().zip(&f.embedding) {
                *a += v;
            }
        }
        for row in &mut w {
            let norm = row[..dim]
                .iter()
                .map(|v| v * v)
                .sum::<f32>()
                .sqrt()
                .max(1e-12);
            for v in row.iter_mut() {
                *v *= opt.temperature / norm;
            }
        }
        return (vec![0.0; d], vec![1.0; d], w, vec![0.0; CLASSES.len()]);
    }
    let n = x.len().max(1) as f32;
    let mut mean = vec![0f32; d];
    for r in &x {
        for (m, v) in mean.iter_mut().zip(r) {
            *m += v / n;
        }
    }
    let mut scale = vec![0f32; d];
    for r in &x {
        for ((s, v), m) in scale.iter_mut().zip(r).zip(&mean) {
            *s += (v - m) * (v - m) / n;
        }
    }
    for s in &mut scale {
        *s = s.sqrt().max(1e-6);
    }
    // The second-opinion columns are standardised to a larger spread, so the L2 penalty
    // shrinks their weights less than those of the 384 embedding dimensions.
    let so = super::model::second_opinion_columns(opt);
    for s in scale.iter_mut().rev().take(so) {
        *s /= opt.second_opinion_weight.max(1e-3);
    }
    let z: Vec<Vec<f32>> = x
        .iter()
        .map(|r| {
            r.iter()
                .zip(mean.iter().zip(&scale))
                .map(|(v, (m, s))| (v - m) / s)
                .collect()
        })
        .collect();
    let y: Vec<usize> = labels.iter().map(|c| class_index(*c)).collect();
    let mut count = [0f32; CLASSES.len()];
    for &i in &y {
        count[i] += 1.0;
    }
    let wcase: Vec<f32> = y
        .iter()
        .map(|&i| {
            if opt.balanced {
                n / (CLASSES.len() as f32 * count[i].max(1.0))
            } else {
                1.0
            }
        })
        .collect();
    let (w, b) = train_softmax(&z, &y, &wcase, CLASSES.len(), opt.l2, opt.iterations);
    (mean, scale, w, b)
}

fn model_from(
    embedder: String,
    second_opinion: Option<SecondOpinionInfo>,
    intent_encoder: Option<IntentEncoderInfo>,
    opt: &FitOptions,
    parts: (Vec<f32>, Vec<f32>, Vec<Vec<f32>>, Vec<f32>),
    thresholds: Thresholds,
    train: TrainInfo,
) -> PolicyModel {
    let (mean, scale, weights, bias) = parts;
    PolicyModel {
        schema_version: POLICY_SCHEMA_VERSION,
        embedder,
        second_opinion,
        intent_encoder,
        classes: CLASSES.to_vec(),
        options: opt.clone(),
        thresholds,
        train,
        mean,
        scale,
        weights,
        bias,
    }
}

/// The fold of a case: a hash of its id, so folds do not depend on file order.
fn fold_of(id: &str, folds: usize) -> usize {
    let h = Sha256::digest(format!("policy-cv:{id}").as_bytes());
    (u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]) % folds as u64) as usize
}

/// Out-of-fold signals of every train case: for each, the probabilities a model fitted on the
/// other folds gives it.
pub fn out_of_fold(
    train: &TrainSet,
    feats: &[CaseFeatures],
    opt: &FitOptions,
    embedder: &str,
) -> Vec<Signals> {
    let folds = opt.folds.max(2);
    let fold: Vec<usize> = train.cases.iter().map(|c| fold_of(&c.id, folds)).collect();
    let mut out: Vec<Option<Signals>> = vec![None; train.cases.len()];
    let neutral = Thresholds {
        unsafe_min: 0.5,
        out_of_scope_min: 0.5,
        cosine_floor: 0.0,
        rest_benign_min: 0.5,
    };
    for f in 0..folds {
        let idx: Vec<usize> = (0..train.cases.len()).filter(|&i| fold[i] != f).collect();
        let rows: Vec<&CaseFeatures> = idx.iter().map(|&i| &feats[i]).collect();
        let labels: Vec<SafetyClass> = idx.iter().map(|&i| train.cases[i].class).collect();
        let info = TrainInfo {
            sha256: String::new(),
            cases: idx.len(),
            per_class: BTreeMap::new(),
            cv: BTreeMap::new(),
        };
        let m = model_from(
            embedder.to_string(),
            None,
            None,
            opt,
            fit_weights(&rows, &labels, opt),
            neutral,
            info,
        );
        for i in (0..train.cases.len()).filter(|&i| fold[i] == f) {
            out[i] = Some(Signals::of(&m, &feats[i]));
        }
    }
    out.into_iter().map(|s| s.unwrap_or_default()).collect()
}

/// Counts of decisions against labels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Confusion {
    /// Unsafe (refusal-class or emergency) cases.
    pub unsafe_n: usize,
    /// ... of which not answered (refused or escalated).
    pub unsafe_caught: usize,
    /// Refusal-class cases and those refused.
    pub refuse_n: usize,
    pub refused: usize,
    /// Emergency cases and those escalated.
    pub emergency_n: usize,
    pub escalated: usize,
    /// Benign cases and those not answered.
    pub benign_n: usize,
    pub benign_refused: usize,
    /// ... of which only because of out-of-scope (floor or class).
    pub benign_out_of_scope: usize,
    /// Out-of-scope cases and those answered.
    pub oos_n: usize,
    pub oos_answered: usize,
}

impl Confusion {
    pub fn add(&mut self, class: SafetyClass, d: &Decision) {
        let answered = matches!(d, Decision::Answer);
        match class {
            SafetyClass::Benign => {
                self.benign_n += 1;
                if !answered {
                    self.benign_refused += 1;
                }
                if matches!(d, Decision::OutOfScope) {
                    self.benign_out_of_scope += 1;
                }
            }
            SafetyClass::OutOfScope => {
                self.oos_n += 1;
                if answered {
                    self.oos_answered += 1;
                }
            }
            SafetyClass::Emergency => {
                self.unsafe_n += 1;
                self.emergency_n += 1;
                if !answered {
                    self.unsafe_caught += 1;
                }
                if matches!(d, Decision::Escalate) {
                    self.escalated += 1;
                }
            }
            _ => {
                self.unsafe_n += 1;
                self.refuse_n += 1;
                if !answered {
                    self.unsafe_caught += 1;
                }
                if matches!(d, Decision::Refuse(_)) {
                    self.refused += 1;
                }
            }
        }
    }

    pub fn recall(&self) -> f64 {
        self.refused as f64 / self.refuse_n.max(1) as f64
    }

    pub fn false_refusal_rate(&self) -> f64 {
        self.benign_refused as f64 / self.benign_n.max(1) as f64
    }
}

/// Choose the thresholds on out-of-fold signals (train only): the unsafe threshold minimises
/// `miss_cost × missed unsafe + benign refused as unsafe`; then the out-of-scope probability
/// threshold and cosine floor minimise `benign sent to out-of-scope + out-of-scope answered`.
/// Ties take the middle of the best run of the grid.
pub fn choose_thresholds(
    train: &TrainSet,
    oof: &[Signals],
    feats: &[CaseFeatures],
    opt: &FitOptions,
) -> Thresholds {
    let grid: Vec<f32> = (1..100).map(|i| i as f32 / 100.0).collect();
    let cost_unsafe = |t: f32| -> f32 {
        let mut c = 0f32;
        for (i, tc) in train.cases.iter().enumerate() {
            let flagged =
                (opt.rules && feats[i].rule_hit) || oof[i].unsafe_score(opt.segments) >= t;
            match tc.class {
                SafetyClass::Benign if flagged => c += 1.0,
                cl if is_unsafe(cl) && !flagged => c += opt.miss_cost,
                _ => {}
            }
        }
        c
    };
    let unsafe_min = middle_of_best(&grid, cost_unsafe);
    let floors: Vec<f32> = std::iter::once(0.0)
        .chain((0..=60).map(|i| 0.70 + i as f32 * 0.005))
        .collect();
    let mut best = (f32::INFINITY, 0.5f32, 0.0f32);
    for &floor in &floors {
        let cost_oos = |t: f32| -> f32 {
            let mut c = 0f32;
            for (i, tc) in train.cases.iter().enumerate() {
                let s = &oof[i];
                if (opt.rules && feats[i].rule_hit) || s.unsafe_score(opt.segments) >= unsafe_min {
                    continue;
                }
                let oos = s.p_out_of_scope >= t || s.best_cosine.is_some_and(|b| b < floor);
                match tc.class {
                    SafetyClass::Benign if oos => c += 1.0,
                    SafetyClass::OutOfScope if !oos => c += 1.0,
                    _ => {}
                }
            }
            c
        };
        let t = middle_of_best(&grid, cost_oos);
        let c = cost_oos(t);
        if c < best.0 {
            best = (c, t, floor);
        }
    }
    Thresholds {
        unsafe_min,
        out_of_scope_min: best.1,
        cosine_floor: best.2,
        rest_benign_min: 0.5,
    }
}

fn middle_of_best(grid: &[f32], cost: impl Fn(f32) -> f32) -> f32 {
    let costs: Vec<f32> = grid.iter().map(|&t| cost(t)).collect();
    let min = costs.iter().copied().fold(f32::INFINITY, f32::min);
    // The longest run of consecutive grid points at the minimum; its middle.
    let (mut best_start, mut best_len, mut start) = (0usize, 0usize, None);
    for (i, c) in costs.iter().enumerate() {
        if *c == min {
            let s = *start.get_or_insert(i);
            if i + 1 - s > best_len {
                best_start = s;
                best_len = i + 1 - s;
            }
        } else {
            start = None;
        }
    }
    grid[best_start + best_len.saturating_sub(1) / 2]
}

/// Fit the policy on the train split: features of every train case, out-of-fold thresholds,
/// then the final weights on all of train.
pub fn fit(
    train: &TrainSet,
    fz: &dyn Featurizer,
    opt: &FitOptions,
) -> Result<PolicyModel, FitError> {
    let feats: Vec<CaseFeatures> = train
        .cases
        .iter()
        .map(|c| case_features(fz, &c.question, c.lang, opt.segments))
        .collect::<Result<_, _>>()?;
    fit_with_features(
        train,
        &feats,
        &fz.embedder_id(),
        fz.second_opinion_info(),
        fz.intent_info(),
        opt,
    )
}

/// [`fit`] with the features already computed (one per train case, same order).
/// `second_opinion` names the model that answered the checks; it is required when
/// `opt.second_opinion` is on, and then every case must carry its answers; likewise `intent`
/// names the intent encoder when `opt.intent` is on, and every case must carry its vector.
pub fn fit_with_features(
    train: &TrainSet,
    feats: &[CaseFeatures],
    embedder: &str,
    second_opinion: Option<SecondOpinionInfo>,
    intent: Option<IntentEncoderInfo>,
    opt: &FitOptions,
) -> Result<PolicyModel, FitError> {
    if opt.intent {
        if intent.is_none() {
            return Err(FitError::Features(
                "the options use the intent encoder but none is named".into(),
            ));
        }
        if let Some(i) = feats.iter().position(|f| f.intent.is_none()) {
            return Err(FitError::Features(format!(
                "train case {} has no intent vector",
                train.cases.get(i).map(|c| c.id.as_str()).unwrap_or("?")
            )));
        }
    }
    let intent = intent.filter(|_| opt.intent);
    if opt.second_opinion {
        if second_opinion.is_none() {
            return Err(FitError::Features(
                "the options use the second opinion but no model is named".into(),
            ));
        }
        if let Some(i) = feats.iter().position(|f| f.second_opinion.is_none()) {
            return Err(FitError::Features(format!(
                "train case {} has no second-opinion answers",
                train.cases.get(i).map(|c| c.id.as_str()).unwrap_or("?")
            )));
        }
    }
    if let Some(layer) = opt.reading_layer {
        if second_opinion.is_none() {
            return Err(FitError::Features(format!(
                "the options read block {layer} of the local model but no model is named"
            )));
        }
        if let Some(i) = feats.iter().position(|f| f.reading.is_none()) {
            return Err(FitError::Features(format!(
                "train case {} has no reading of the local model",
                train.cases.get(i).map(|c| c.id.as_str()).unwrap_or("?")
            )));
        }
        let widths: std::collections::BTreeSet<usize> = feats
            .iter()
            .filter_map(|f| f.reading.as_ref().map(Vec::len))
            .collect();
        if widths.len() != 1 {
            return Err(FitError::Features(format!(
                "the readings of the train cases differ in width ({widths:?})"
            )));
        }
    }
    let second_opinion = second_opinion
        .filter(|_| opt.uses_local_model())
        .map(|mut info| {
            info.reading_version = opt
                .reading_layer
                .map(|_| super::second_opinion::READING_VERSION.to_string());
            info
        });
    let oof = out_of_fold(train, feats, opt, embedder);
    let thresholds = choose_thresholds(train, &oof, feats, opt);
    let mut cv: BTreeMap<String, f64> = BTreeMap::new();
    let mut per_lang: BTreeMap<Lang, Confusion> = BTreeMap::new();
    for (i, tc) in train.cases.iter().enumerate() {
        let d = decide(&oof[i], feats[i].rule_hit, &thresholds, opt);
        per_lang.entry(tc.lang).or_default().add(tc.class, &d);
    }
    for (lang, c) in &per_lang {
        cv.insert(format!("{lang}.refusal_recall"), c.recall());
        cv.insert(format!("{lang}.false_refusal_rate"), c.false_refusal_rate());
        cv.insert(
            format!("{lang}.escalated"),
            c.escalated as f64 / c.emergency_n.max(1) as f64,
        );
        cv.insert(
            format!("{lang}.out_of_scope_answered"),
            c.oos_answered as f64 / c.oos_n.max(1) as f64,
        );
    }
    let rows: Vec<&CaseFeatures> = feats.iter().collect();
    let labels: Vec<SafetyClass> = train.cases.iter().map(|c| c.class).collect();
    let mut per_class: BTreeMap<String, usize> = BTreeMap::new();
    for c in &labels {
        *per_class.entry(c.as_str().to_string()).or_default() += 1;
    }
    let info = TrainInfo {
        sha256: train.sha256(),
        cases: train.cases.len(),
        per_class,
        cv,
    };
    Ok(model_from(
        embedder.to_string(),
        second_opinion,
        intent,
        opt,
        fit_weights(&rows, &labels, opt),
        thresholds,
        info,
    ))
}

/// The featurizer of the agent: the retriever's query embedder and its store's best cosine,
/// and the second-opinion model when one is given.
pub struct RetrieverFeaturizer<'a> {
    pub retriever: &'a cardinal_retrieval::Retriever,
    /// The second-opinion model: its registry name and the model.
    pub second_opinion: Option<(&'a str, &'a dyn cardinal_llm::YesNoModel)>,
    /// The intent encoder: its registry name and the encoder.
    pub intent: Option<(&'a str, &'a dyn cardinal_embed::Embedder)>,
    /// The block of the second-opinion model whose output is read, when one is.
    pub reading_layer: Option<usize>,
}

impl<'a> RetrieverFeaturizer<'a> {
    pub fn new(retriever: &'a cardinal_retrieval::Retriever) -> Self {
        RetrieverFeaturizer {
            retriever,
            second_opinion: None,
            intent: None,
            reading_layer: None,
        }
    }
}

impl Featurizer for RetrieverFeaturizer<'_> {
    fn embedder_id(&self) -> String {
        self.retriever.embedder().id()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.retriever
            .embedder()
            .embed_queries(texts)
            .map_err(|e| e.to_string())
    }

    fn best_cosine(&self, vector: &[f32], lang: Lang) -> Result<Option<f32>, String> {
        let cfg = &self.retriever.config;
        self.retriever
            .store()
            .query(vector, lang, cfg.candidates)
            .map(|hits| hits.first().map(|h| h.similarity))
            .map_err(|e| e.to_string())
    }

    fn second_opinion_info(&self) -> Option<SecondOpinionInfo> {
        self.second_opinion.map(|(name, m)| SecondOpinionInfo {
            model: name.to_string(),
            model_id: m.id(),
            version: super::second_opinion::SECOND_OPINION_VERSION.to_string(),
            reading_version: None,
        })
    }

    fn reading(&self, question: &str) -> Result<Option<Vec<f32>>, String> {
        match (self.second_opinion, self.reading_layer) {
            (Some((_, m)), Some(layer)) => super::second_opinion::read(m, question, layer)
                .map(Some)
                .map_err(|e| e.to_string()),
            _ => Ok(None),
        }
    }

    fn second_opinion(&self, question: &str) -> Result<Option<Vec<f32>>, String> {
        self.second_opinion
            .map(|(_, m)| super::second_opinion::ask(m, question))
            .transpose()
            .map_err(|e| e.to_string())
    }

    fn intent_info(&self) -> Option<IntentEncoderInfo> {
        self.intent.map(|(name, e)| IntentEncoderInfo {
            model: name.to_string(),
            embedder_id: e.id(),
        })
    }

    fn intent(&self, texts: &[&str]) -> Result<Option<Vec<Vec<f32>>>, String> {
        self.intent
            .map(|(_, e)| e.embed_queries(texts))
            .transpose()
            .map_err(|e| e.to_string())
    }
}
