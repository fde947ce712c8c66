//! The safety policy v2: which requests are refused or escalated before any generation.
//!
//! A multilingual classifier over the project's query embedder (multilingual-e5-small) and,
//! when the fitted file names one, an intent encoder (EmbeddingGemma-300M, whose vector of the
//! message is appended to the features) and a local model's reading (the output of one of its
//! blocks averaged over the message, [`second_opinion::read`]; since 2026-12-07 the bundled
//! policy reads block 14 of Qwen2.5-Coder-1.5B): a softmax regression over eight classes (benign, the
//! five refusal classes, emergency, out of scope), fitted on the **train split only** by
//! [`fit`] and shipped as
//! `data/policy/policy-v2.json` (which records the sha256 of the train cases it read), plus a
//! small set of general prompt-injection markers ([`rules`]). No per-case pattern list: the
//! regular-expression policy v1 was removed (issue 15). The decision, in order:
//!
//! 1. an injection marker → refuse (`prompt_injection`);
//! 2. unsafe probability mass ≥ `unsafe_min` (of the whole message, or of its most unsafe
//!    sentence when the model scores sentences) → the most probable unsafe class: escalate for
//!    `emergency`, refuse otherwise;
//! 3. P(out_of_scope) ≥ `out_of_scope_min` or best dense cosine < `cosine_floor` → no relevant
//!    card;
//! 4. otherwise answer.
//!
//! The language of a message is detected here too when the caller does not give it.

pub mod fit;
pub mod model;
pub mod rules;
pub mod second_opinion;

use std::sync::{Arc, OnceLock};

use cardinal_dataset::SafetyClass;
use cardinal_kb::Lang;
use regex::Regex;
use serde::{Deserialize, Serialize};

pub use fit::{CaseFeatures, Featurizer, FitError, TrainSet};
pub use model::{
    FitOptions, IntentEncoderInfo, LocalView, PolicyModel, SecondOpinionInfo, Thresholds,
};

/// Why the agent did not answer normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalReason {
    /// Asks to take a double or extra dose.
    DoubleDose,
    /// Asks to stop, skip or change a prescribed medicine on one's own.
    StopMedication,
    /// Asks for a diagnosis, an interpretation of results, or a cure claim.
    Diagnosis,
    /// Someone else's records, or credentials shared in the chat.
    Privacy,
    /// Emergency signs: the turn is an escalation (`escalated: true`, `refused: false`).
    Emergency,
    /// Tries to override or reveal the instructions.
    PromptInjection,
    /// Out of scope: no card covers it.
    NoRelevantCard,
    /// The model said the cards do not answer the question.
    NoAnswerInCards,
    /// The generated answer failed the answer guard (a number, dose, time, phone number or
    /// medicine name not in the cited card) and the top card's own sentences could not replace
    /// it, so the refusal fallback was given. (When they can, the turn is answered with them and
    /// `guard.fallback` says so.)
    AnswerGuard,
}

impl RefusalReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::DoubleDose => "double_dose",
            RefusalReason::StopMedication => "stop_medication",
            RefusalReason::Diagnosis => "diagnosis",
            RefusalReason::Privacy => "privacy",
            RefusalReason::Emergency => "emergency",
            RefusalReason::PromptInjection => "prompt_injection",
            RefusalReason::NoRelevantCard => "no_relevant_card",
            RefusalReason::NoAnswerInCards => "no_answer_in_cards",
            RefusalReason::AnswerGuard => "answer_guard",
        }
    }

    /// The reason of a refusal class (`None` for benign).
    pub fn of_class(class: SafetyClass) -> Option<RefusalReason> {
        Some(match class {
            SafetyClass::DoubleDose => RefusalReason::DoubleDose,
            SafetyClass::StopChangeMedication => RefusalReason::StopMedication,
            SafetyClass::Diagnosis => RefusalReason::Diagnosis,
            SafetyClass::Privacy => RefusalReason::Privacy,
            SafetyClass::PromptInjection => RefusalReason::PromptInjection,
            SafetyClass::Emergency => RefusalReason::Emergency,
            SafetyClass::OutOfScope => RefusalReason::NoRelevantCard,
            SafetyClass::Benign => return None,
        })
    }

    /// The safety class a refusal reason stands for (rule-backed reasons only).
    pub fn class(self) -> Option<SafetyClass> {
        Some(match self {
            RefusalReason::DoubleDose => SafetyClass::DoubleDose,
            RefusalReason::StopMedication => SafetyClass::StopChangeMedication,
            RefusalReason::Diagnosis => SafetyClass::Diagnosis,
            RefusalReason::Privacy => SafetyClass::Privacy,
            RefusalReason::PromptInjection => SafetyClass::PromptInjection,
            RefusalReason::Emergency => SafetyClass::Emergency,
            _ => return None,
        })
    }
}

/// What the policy decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "decision", content = "class")]
pub enum Decision {
    Answer,
    Refuse(SafetyClass),
    Escalate,
    OutOfScope,
}

/// Scores of one segment (a sentence of the message).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SegmentSignals {
    pub text: String,
    pub unsafe_mass: f32,
    pub top_unsafe: SafetyClass,
    pub p_benign: f32,
    pub p_out_of_scope: f32,
}

/// Everything the decision reads, kept in the turn's trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Signals {
    /// Class probabilities of the whole message, in the model's class order.
    pub probabilities: Vec<(SafetyClass, f32)>,
    pub unsafe_mass: f32,
    pub top_unsafe: SafetyClass,
    pub p_out_of_scope: f32,
    pub best_cosine: Option<f32>,
    pub segments: Vec<SegmentSignals>,
    /// P(Yes) of each second-opinion check, by the class it asks about (empty when the policy
    /// does not read them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub second_opinion: Vec<(SafetyClass, f32)>,
}

impl Default for Signals {
    fn default() -> Self {
        Signals {
            probabilities: Vec::new(),
            unsafe_mass: 0.0,
            top_unsafe: SafetyClass::PromptInjection,
            p_out_of_scope: 0.0,
            best_cosine: None,
            segments: Vec::new(),
            second_opinion: Vec::new(),
        }
    }
}

impl Signals {
    /// The model's signals for one message's features.
    pub fn of(m: &PolicyModel, f: &CaseFeatures) -> Signals {
        let local = f.local(&m.options);
        let so = local.second_opinion;
        let p = m.probabilities(&model::features(
            &f.embedding,
            f.intent.as_deref(),
            f.best_cosine,
            local,
            &m.options,
        ));
        let segments = f
            .segment_embeddings
            .iter()
            .zip(&f.segment_texts)
            .enumerate()
            .map(|(i, (e, text))| {
                let intent = f.segment_intents.get(i).map(Vec::as_slice);
                let ps = m.probabilities(&model::features(
                    e,
                    intent,
                    f.best_cosine,
                    local,
                    &m.options,
                ));
                SegmentSignals {
                    text: text.clone(),
                    unsafe_mass: m.unsafe_mass(&ps),
                    top_unsafe: m.top_unsafe(&ps),
                    p_benign: m.prob(&ps, SafetyClass::Benign),
                    p_out_of_scope: m.prob(&ps, SafetyClass::OutOfScope),
                }
            })
            .collect();
        Signals {
            probabilities: m.classes.iter().copied().zip(p.iter().copied()).collect(),
            unsafe_mass: m.unsafe_mass(&p),
            top_unsafe: m.top_unsafe(&p),
            p_out_of_scope: m.prob(&p, SafetyClass::OutOfScope),
            best_cosine: f.best_cosine,
            segments,
            second_opinion: match so {
                Some(p) => second_opinion::CHECKS
                    .iter()
                    .map(|(c, _)| *c)
                    .zip(p.iter().copied())
                    .collect(),
                None => Vec::new(),
            },
        }
    }

    /// The unsafe score: of the whole message, or the most unsafe of it and its segments.
    pub fn unsafe_score(&self, with_segments: bool) -> f32 {
        let mut u = self.unsafe_mass;
        if with_segments {
            for s in &self.segments {
                u = u.max(s.unsafe_mass);
            }
        }
        u
    }

    /// The most probable unsafe class of the most unsafe part.
    pub fn unsafe_class(&self, with_segments: bool) -> SafetyClass {
        let mut best = (self.unsafe_mass, self.top_unsafe);
        if with_segments {
            for s in &self.segments {
                if s.unsafe_mass > best.0 {
                    best = (s.unsafe_mass, s.top_unsafe);
                }
            }
        }
        best.1
    }
}

/// The policy decision (see the module documentation for the order).
pub fn decide(s: &Signals, rule_hit: bool, t: &Thresholds, opt: &FitOptions) -> Decision {
    if opt.rules && rule_hit {
        return Decision::Refuse(SafetyClass::PromptInjection);
    }
    if s.unsafe_score(opt.segments) >= t.unsafe_min {
        return match s.unsafe_class(opt.segments) {
            SafetyClass::Emergency => Decision::Escalate,
            c => Decision::Refuse(c),
        };
    }
    if s.p_out_of_scope >= t.out_of_scope_min || s.best_cosine.is_some_and(|b| b < t.cosine_floor) {
        return Decision::OutOfScope;
    }
    Decision::Answer
}

/// The sentences of a message with at least three words (the whole message is not repeated;
/// a one-sentence message has no segments).
pub fn segments(message: &str) -> Vec<String> {
    static SPLIT: OnceLock<Regex> = OnceLock::new();
    let re = SPLIT.get_or_init(|| match Regex::new(r"[.!?;:\n]+\s*|\s+[¿¡]|^[¿¡]") {
        Ok(r) => r,
        Err(e) => panic!("invalid built-in segment pattern: {e}"),
    });
    let parts: Vec<String> = re
        .split(message)
        .map(|p| {
            p.trim()
                .trim_matches(|c: char| matches!(c, '"' | '\'' | '“' | '”' | '¿' | '¡'))
                .trim()
                .to_string()
        })
        .filter(|p| p.split_whitespace().count() >= 3)
        .collect();
    if parts.len() < 2 {
        Vec::new()
    } else {
        parts
    }
}

const BUNDLED_POLICY: &str = include_str!("../../../data/policy/policy-v2.json");

/// The identity of the bundled policy for run manifests: its file name and the sha256 of its
/// bytes (a refit changes refusals, so it changes the numbers of a sweep).
pub fn bundled_id() -> String {
    format!(
        "policy-v2.json:sha256-{}",
        cardinal_digest::sha256_hex(BUNDLED_POLICY)
    )
}

/// The policy model bundled with the agent: `data/policy/policy-v2.json`.
pub fn bundled() -> Arc<PolicyModel> {
    static M: OnceLock<Arc<PolicyModel>> = OnceLock::new();
    M.get_or_init(|| {
        match serde_json::from_str(BUNDLED_POLICY) {
            Ok(m) => Arc::new(m),
            // The file is compiled in; a parse failure is a build error of this crate.
            Err(e) => panic!("data/policy/policy-v2.json does not parse: {e}"),
        }
    })
    .clone()
}

/// Guess the language of a message from function words; English when unsure.
pub fn detect_lang(message: &str) -> Lang {
    static WORDS: OnceLock<[(Lang, Regex); 3]> = OnceLock::new();
    let words = WORDS.get_or_init(|| {
        let re = |p: &str| match Regex::new(p) {
            Ok(r) => r,
            Err(e) => panic!("invalid built-in language pattern: {e}"),
        };
        [
            (Lang::En, re(r"(?i)\b(the|is|are|my|what|how|can|do|i|you|should|it|to|and)\b")),
            (Lang::Es419, re(r"(?i)\b(el|la|los|las|es|mi|qué|que|cómo|puedo|debo|usted|tengo|una|para|con|se|me|olvidé)\b|ñ|¿")),
            (Lang::PtBr, re(r"(?i)\b(o|a|os|as|é|meu|minha|que|como|posso|devo|você|tenho|uma|para|com|não|esqueci)\b|ção|ões|ã|õ")),
        ]
    });
    let mut best = (Lang::En, 0usize);
    for (lang, re) in words.iter() {
        let n = re.find_iter(message).count();
        if n > best.1 {
            best = (*lang, n);
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_language() {
        assert_eq!(detect_lang("What should I do if I miss a dose?"), Lang::En);
        assert_eq!(detect_lang("¿Qué hago si olvidé mi pastilla?"), Lang::Es419);
        assert_eq!(
            detect_lang("O que eu faço se esqueci o remédio?"),
            Lang::PtBr
        );
    }

    #[test]
    fn segments_split_sentences_of_three_words_or_more() {
        assert!(segments("Can I double my dose?").is_empty());
        assert_eq!(
            segments("How do I refill my pills? Also, can I take two tonight to catch up?"),
            vec![
                "How do I refill my pills",
                "Also, can I take two tonight to catch up"
            ]
        );
        assert_eq!(
            segments("Hola. ¿Cómo renuevo la receta? ¿Y puedo tomar el doble hoy?"),
            vec!["Cómo renuevo la receta", "Y puedo tomar el doble hoy"]
        );
    }

    #[test]
    fn the_bundled_model_loads() {
        let m = bundled();
        assert_eq!(m.classes.len(), model::CLASSES.len());
        assert_eq!(m.weights.len(), m.classes.len());
        assert!(m.weights.iter().all(|w| w.len() == m.mean.len()));
    }
}
