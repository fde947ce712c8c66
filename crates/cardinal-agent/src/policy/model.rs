//! The fitted policy model: a softmax (multinomial logistic) regression over standardised
//! query embeddings, with the decision thresholds chosen by cross-validation inside the train
//! split. Serialised to `data/policy/policy-v2.json`.

use std::collections::BTreeMap;

use cardinal_dataset::SafetyClass;
use serde::{Deserialize, Serialize};

/// Version of the policy file format.
pub const POLICY_SCHEMA_VERSION: u32 = 1;

/// The classes the model scores, in the order of its rows.
pub const CLASSES: [SafetyClass; 8] = [
    SafetyClass::Benign,
    SafetyClass::DoubleDose,
    SafetyClass::StopChangeMedication,
    SafetyClass::Diagnosis,
    SafetyClass::Privacy,
    SafetyClass::PromptInjection,
    SafetyClass::Emergency,
    SafetyClass::OutOfScope,
];

/// Index of `class` in [`CLASSES`].
pub fn class_index(class: SafetyClass) -> usize {
    CLASSES.iter().position(|c| *c == class).unwrap_or(0)
}

/// Is `class` one that is not answered normally (refused or escalated)?
pub fn is_unsafe(class: SafetyClass) -> bool {
    !matches!(class, SafetyClass::Benign | SafetyClass::OutOfScope)
}

/// Decision thresholds (all chosen on train by cross-validation).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Refuse (or escalate) when the unsafe probability mass is at least this.
    pub unsafe_min: f32,
    /// Otherwise, no relevant card when P(out_of_scope) is at least this.
    pub out_of_scope_min: f32,
    /// Otherwise, no relevant card when the best dense cosine is under this.
    pub cosine_floor: f32,
    /// A segment of a refused message is answered when P(benign) of the segment is at least this.
    pub rest_benign_min: f32,
}

/// The classifier family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Classifier {
    /// Multinomial logistic regression on standardised features.
    Softmax,
    /// Nearest prototype: softmax of `temperature × cosine` to each class centroid.
    Prototype,
}

/// How the model was fitted (the options of [`crate::policy::fit`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitOptions {
    pub classifier: Classifier,
    /// Prototype temperature.
    pub temperature: f32,
    /// L2 penalty on the weights.
    pub l2: f32,
    /// Gradient-descent iterations.
    pub iterations: usize,
    /// Weigh classes by inverse frequency.
    pub balanced: bool,
    /// Use the best dense cosine as a feature.
    pub cosine_feature: bool,
    /// Score every sentence of a message as well and take the most unsafe.
    pub segments: bool,
    /// Apply the general prompt-injection markers.
    pub rules: bool,
    /// Cross-validation folds for the thresholds.
    pub folds: usize,
    /// Cost of a missed unsafe request relative to a false refusal, when choosing thresholds.
    pub miss_cost: f32,
    /// Use the local model's second-opinion checks ([`super::second_opinion`]) as features.
    #[serde(default)]
    pub second_opinion: bool,
    /// Standard deviation of the standardised second-opinion features (1 = the same as every
    /// embedding dimension; more = less shrunk by the L2 penalty).
    #[serde(default = "one")]
    pub second_opinion_weight: f32,
    /// Append the intent encoder's vector of the message (a second, larger multilingual
    /// encoder, [`IntentEncoderInfo`]) to the query embedding.
    #[serde(default)]
    pub intent: bool,
    /// Read the query embedding (the retriever's embedder). Without it the features start with
    /// the intent encoder's vector; only meaningful with `intent`.
    #[serde(default = "yes")]
    pub query_embedding: bool,
    /// Append the local model's reading of the message: the output of this transformer block
    /// (0-based), averaged over the message's tokens ([`super::second_opinion::read`]). The
    /// model is the one [`PolicyModel::second_opinion`] names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading_layer: Option<usize>,
}

impl FitOptions {
    /// Does the policy consult the local model (its checks or its reading)?
    pub fn uses_local_model(&self) -> bool {
        self.second_opinion || self.reading_layer.is_some()
    }
}

fn one() -> f32 {
    1.0
}

fn yes() -> bool {
    true
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            classifier: Classifier::Softmax,
            temperature: 30.0,
            l2: 1e-2,
            iterations: 400,
            balanced: true,
            cosine_feature: false,
            segments: false,
            rules: true,
            folds: 5,
            miss_cost: 3.0,
            second_opinion: false,
            second_opinion_weight: 1.0,
            intent: false,
            query_embedding: true,
            reading_layer: None,
        }
    }
}

/// What the fit read: the train split only, identified by its hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainInfo {
    /// sha256 of the canonical train cases (see [`crate::policy::fit::TrainSet::sha256`]).
    pub sha256: String,
    pub cases: usize,
    pub per_class: BTreeMap<String, usize>,
    /// Out-of-fold figures of the chosen thresholds on train.
    pub cv: BTreeMap<String, f64>,
}

/// The model whose yes/no checks the policy reads, when it reads any.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecondOpinionInfo {
    /// Registry name of the local model (what `cardinal models pull` installs).
    pub model: String,
    /// Its identity as a [`cardinal_llm::YesNoModel`] (name and weights' digest); the agent
    /// refuses another.
    pub model_id: String,
    /// [`super::second_opinion::SECOND_OPINION_VERSION`] of the prompt and checks.
    pub version: String,
    /// [`super::second_opinion::READING_VERSION`] when the policy reads the model's hidden
    /// state ([`FitOptions::reading_layer`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading_version: Option<String>,
}

/// The encoder whose vectors of the message the policy reads besides the query embedding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntentEncoderInfo {
    /// Registry name of the encoder (what `cardinal models pull` installs).
    pub model: String,
    /// Its identity as an embedder (name, prompt, length); the agent refuses another.
    pub embedder_id: String,
}

/// The fitted policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyModel {
    pub schema_version: u32,
    /// Identity of the embedder the model was fitted with; the agent refuses to use the model
    /// with another one.
    pub embedder: String,
    /// The local model, when [`FitOptions::second_opinion`] or [`FitOptions::reading_layer`] is
    /// on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second_opinion: Option<SecondOpinionInfo>,
    /// The intent encoder, when [`FitOptions::intent`] is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent_encoder: Option<IntentEncoderInfo>,
    pub classes: Vec<SafetyClass>,
    pub options: FitOptions,
    pub thresholds: Thresholds,
    pub train: TrainInfo,
    /// Feature standardisation: x' = (x - mean) / scale.
    pub mean: Vec<f32>,
    pub scale: Vec<f32>,
    /// One row per class, one column per (standardised) feature.
    pub weights: Vec<Vec<f32>>,
    pub bias: Vec<f32>,
}

/// Softmax of logits, numerically stable.
pub fn softmax(logits: &[f32]) -> Vec<f32> {
    let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = logits.iter().map(|z| (z - m).exp()).collect();
    let s: f32 = e.iter().sum();
    e.into_iter().map(|x| x / s).collect()
}

/// What the local model said about a message: its check answers and its reading (each only
/// when the policy uses it).
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalView<'a> {
    pub second_opinion: Option<&'a [f32]>,
    pub reading: Option<&'a [f32]>,
}

/// The feature vector: the embedding, then the intent encoder's vector when the model uses
/// it, then the local model's reading when it uses one, then the best cosine when the model
/// uses it, then the log-odds of the second-opinion checks when it uses them (0 = undecided
/// when absent). A missing intent vector or reading adds no columns; the callers make sure
/// every case has them before a model is fitted or applied.
pub fn features(
    embedding: &[f32],
    intent: Option<&[f32]>,
    best_cosine: Option<f32>,
    local: LocalView<'_>,
    opt: &FitOptions,
) -> Vec<f32> {
    let second_opinion = local.second_opinion;
    let mut x = if opt.query_embedding || !opt.intent {
        embedding.to_vec()
    } else {
        Vec::new()
    };
    if opt.intent {
        x.extend_from_slice(intent.unwrap_or_default());
    }
    if opt.reading_layer.is_some() {
        x.extend_from_slice(local.reading.unwrap_or_default());
    }
    if opt.cosine_feature {
        x.push(best_cosine.unwrap_or(0.0));
    }
    if opt.second_opinion {
        let n = super::second_opinion::CHECKS.len();
        match second_opinion {
            Some(p) => x.extend(
                p.iter()
                    .take(n)
                    .map(|&v| super::second_opinion::log_odds(v)),
            ),
            None => x.extend(std::iter::repeat_n(0.0, n)),
        }
    }
    x
}

/// How many trailing columns of [`features`] are second-opinion features.
pub fn second_opinion_columns(opt: &FitOptions) -> usize {
    if opt.second_opinion {
        super::second_opinion::CHECKS.len()
    } else {
        0
    }
}

impl PolicyModel {
    /// Class probabilities of one raw feature vector (see [`features`]).
    pub fn probabilities(&self, x: &[f32]) -> Vec<f32> {
        let z: Vec<f32> = x
            .iter()
            .zip(self.mean.iter().zip(&self.scale))
            .map(|(v, (m, s))| (v - m) / s)
            .collect();
        let logits: Vec<f32> = self
            .weights
            .iter()
            .zip(&self.bias)
            .map(|(w, b)| b + w.iter().zip(&z).map(|(a, c)| a * c).sum::<f32>())
            .collect();
        softmax(&logits)
    }

    /// Probability of `class` in `p` (as returned by [`PolicyModel::probabilities`]).
    pub fn prob(&self, p: &[f32], class: SafetyClass) -> f32 {
        self.classes
            .iter()
            .position(|c| *c == class)
            .map(|i| p[i])
            .unwrap_or(0.0)
    }

    /// Probability mass of the unsafe classes (refusal classes and emergency).
    pub fn unsafe_mass(&self, p: &[f32]) -> f32 {
        self.classes
            .iter()
            .zip(p)
            .filter(|(c, _)| is_unsafe(**c))
            .map(|(_, v)| v)
            .sum()
    }

    /// The most probable unsafe class.
    pub fn top_unsafe(&self, p: &[f32]) -> SafetyClass {
        self.classes
            .iter()
            .zip(p)
            .filter(|(c, _)| is_unsafe(**c))
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(c, _)| *c)
            .unwrap_or(SafetyClass::PromptInjection)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_feature_vector_follows_the_options() {
        let e = [1.0, 2.0];
        let i = [3.0, 4.0, 5.0];
        let with_intent = FitOptions {
            intent: true,
            cosine_feature: true,
            ..FitOptions::default()
        };
        assert_eq!(
            features(&e, Some(&i), Some(0.5), LocalView::default(), &with_intent),
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 0.5]
        );
        // The reading sits before the cosine and the check answers (whose columns are counted
        // from the end).
        let with_reading = FitOptions {
            reading_layer: Some(14),
            second_opinion: true,
            ..with_intent.clone()
        };
        let so = [0.5f32; super::super::second_opinion::CHECKS.len()];
        let local = LocalView {
            second_opinion: Some(&so),
            reading: Some(&[7.0, 8.0]),
        };
        let x = features(&e, Some(&i), Some(0.5), local, &with_reading);
        assert_eq!(x[..8], [1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 8.0, 0.5]);
        assert_eq!(x.len(), 8 + so.len());
        assert!(x[8..].iter().all(|v| v.abs() < 1e-6));
        let intent_only = FitOptions {
            query_embedding: false,
            ..with_intent.clone()
        };
        assert_eq!(
            features(&e, Some(&i), Some(0.5), LocalView::default(), &intent_only),
            vec![3.0, 4.0, 5.0, 0.5]
        );
        // Without an intent encoder the query embedding is always read.
        let no_intent = FitOptions {
            query_embedding: false,
            ..FitOptions::default()
        };
        assert_eq!(
            features(&e, None, None, LocalView::default(), &no_intent),
            vec![1.0, 2.0]
        );
    }

    #[test]
    fn options_written_before_query_embedding_existed_read_it_as_on() {
        let mut v = serde_json::to_value(FitOptions::default()).unwrap();
        v.as_object_mut().unwrap().remove("query_embedding");
        let o: FitOptions = serde_json::from_value(v).unwrap();
        assert!(o.query_embedding);
    }
}
