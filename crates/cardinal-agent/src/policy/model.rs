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

/// The fitted policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyModel {
    pub schema_version: u32,
    /// Identity of the embedder the model was fitted with; the agent refuses to use the model
    /// with another one.
    pub embedder: String,
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

/// The feature vector: the embedding, then the best cosine when the model uses it.
pub fn features(embedding: &[f32], best_cosine: Option<f32>, cosine_feature: bool) -> Vec<f32> {
    let mut x = embedding.to_vec();
    if cosine_feature {
        x.push(best_cosine.unwrap_or(0.0));
    }
    x
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
