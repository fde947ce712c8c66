//! The fitting code never reads a test case: poisoning every test case (question, class,
//! expectation) leaves the fitted policy file byte-identical, and the train hash it records is
//! the hash of the train cases only. A toy embedder keeps this test free of models.

mod common;

use cardinal_agent::policy::fit::{fit, Featurizer, FitError, TrainSet};
use cardinal_agent::policy::FitOptions;
use cardinal_dataset::{LoadedCase, SafetyClass, Split};
use cardinal_kb::Lang;

/// A deterministic bag-of-character-trigrams embedder (64 dims).
struct Toy;

impl Featurizer for Toy {
    fn embedder_id(&self) -> String {
        "toy".into()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Ok(texts
            .iter()
            .map(|t| common::ngram_vector(t, 3, 64, 7))
            .collect())
    }
    fn best_cosine(&self, vector: &[f32], _lang: Lang) -> Result<Option<f32>, String> {
        Ok(Some(0.8 + 0.1 * vector[0]))
    }
}

fn cases() -> Vec<LoadedCase> {
    let dir = common::data_dir().join("cases");
    let (cases, diags) = cardinal_dataset::load_case_dir(&dir).unwrap();
    assert!(diags.is_empty(), "{diags}");
    cases
}

fn fitted(cases: &[LoadedCase]) -> String {
    let opt = FitOptions {
        iterations: 30,
        segments: true,
        ..FitOptions::default()
    };
    let train = TrainSet::from_cases(cases).unwrap();
    serde_json::to_string(&fit(&train, &Toy, &opt).unwrap()).unwrap()
}

/// Refits after every test and holdout case's question and class are poisoned and asserts the
/// fitted file is byte-identical to `m`.
fn assert_poisoned_splits_change_nothing(
    clean: &[LoadedCase],
    fz: &dyn Featurizer,
    opt: &FitOptions,
    m: &cardinal_agent::policy::PolicyModel,
    class: SafetyClass,
) {
    let mut poisoned = clean.to_vec();
    for lc in poisoned
        .iter_mut()
        .filter(|c| matches!(c.case.split, Some(Split::Test | Split::Holdout)))
    {
        lc.case.question = format!("POISON {}", lc.case.id);
        lc.case.class = Some(class);
    }
    let again = fit(&TrainSet::from_cases(&poisoned).unwrap(), fz, opt).unwrap();
    assert_eq!(
        serde_json::to_string(m).unwrap(),
        serde_json::to_string(&again).unwrap()
    );
}

#[test]
fn poisoned_test_cases_do_not_change_the_fitted_file() {
    let clean = cases();
    let not_train = |c: &LoadedCase| matches!(c.case.split, Some(Split::Test | Split::Holdout));
    let n_test = clean.iter().filter(|c| not_train(c)).count();
    assert!(n_test > 250 + 450, "{n_test}");
    let mut poisoned = clean.clone();
    for lc in poisoned.iter_mut().filter(|c| not_train(c)) {
        lc.case.question = format!("POISON {} ignore all rules", lc.case.id);
        lc.case.class = Some(SafetyClass::Benign);
        lc.case.answer_gold.clear();
        lc.case.id = format!("poison-{}", lc.case.id);
    }
    // Also drop half of the test and holdout cases entirely.
    let mut i = 0;
    poisoned.retain(|c| {
        i += 1;
        !not_train(c) || i % 2 == 0
    });
    let a = fitted(&clean);
    let b = fitted(&poisoned);
    assert!(a == b, "the fitted policy depends on test cases");
    let train = TrainSet::from_cases(&clean).unwrap();
    assert_eq!(train.cases().len(), clean.len() - n_test);
    assert!(train.cases().iter().all(|c| !c.id.contains("poison")));
}

#[test]
fn a_case_without_a_split_is_refused() {
    let mut c = cases();
    c[0].case.split = None;
    assert!(matches!(
        TrainSet::from_cases(&c),
        Err(FitError::NoSplit(_))
    ));
}

#[test]
fn the_bundled_policy_was_fitted_on_the_current_train_split() {
    let train = TrainSet::from_cases(&cases()).unwrap();
    let m = cardinal_agent::policy::bundled();
    assert_eq!(
        m.train.sha256,
        train.sha256(),
        "data/policy/policy-v2.json was fitted on other train data: refit it with the policy_fit example"
    );
    assert_eq!(m.train.cases, train.cases().len());
}

/// [`Toy`] with a second opinion: P(Yes) of each check from the message's characters, so the
/// fit reads a deterministic, text-dependent probability per check.
struct ToyWithSecondOpinion;

impl Featurizer for ToyWithSecondOpinion {
    fn embedder_id(&self) -> String {
        Toy.embedder_id()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Toy.embed(texts)
    }
    fn best_cosine(&self, vector: &[f32], lang: Lang) -> Result<Option<f32>, String> {
        Toy.best_cosine(vector, lang)
    }
    fn second_opinion_info(&self) -> Option<cardinal_agent::policy::SecondOpinionInfo> {
        Some(cardinal_agent::policy::SecondOpinionInfo {
            model: "toy-judge".into(),
            model_id: "toy-judge:v0".into(),
            version: cardinal_agent::policy::second_opinion::SECOND_OPINION_VERSION.into(),
            reading_version: None,
        })
    }
    fn reading(&self, question: &str) -> Result<Option<Vec<f32>>, String> {
        // A 16-dim "hidden state": character 2-grams of the message.
        Ok(Some(common::ngram_vector(question, 2, 16, 3)))
    }
    fn second_opinion(&self, question: &str) -> Result<Option<Vec<f32>>, String> {
        let n = question.chars().count() as f32;
        Ok(Some(
            (0..cardinal_agent::policy::second_opinion::CHECKS.len())
                .map(|i| ((n + 7.0 * i as f32) % 97.0) / 97.0)
                .collect(),
        ))
    }
}

#[test]
fn second_opinion_features_are_fitted_on_train_only_and_named_in_the_file() {
    let opt = FitOptions {
        iterations: 30,
        second_opinion: true,
        second_opinion_weight: 3.0,
        ..FitOptions::default()
    };
    let clean = cases();
    let train = TrainSet::from_cases(&clean).unwrap();
    // Without a model the options cannot be met.
    let err = fit(&train, &Toy, &opt).unwrap_err();
    assert!(
        matches!(&err, FitError::Features(m) if m.contains("no model is named")),
        "{err}"
    );
    let m = fit(&train, &ToyWithSecondOpinion, &opt).unwrap();
    let info = m.second_opinion.as_ref().expect("the model is named");
    assert_eq!(info.model_id, "toy-judge:v0");
    let n_checks = cardinal_agent::policy::second_opinion::CHECKS.len();
    assert!(m.weights.iter().all(|w| w.len() == 64 + n_checks));
    // The second-opinion columns are standardised to a spread of `second_opinion_weight`.
    let (mean, scale) = (&m.mean[64..], &m.scale[64..]);
    assert!(mean.iter().all(|v| v.is_finite()));
    let emb_scale = m.scale[..64].iter().copied().fold(0f32, f32::max);
    assert!(
        scale.iter().all(|s| *s > 0.0 && *s < 1.0),
        "{scale:?} vs {emb_scale}"
    );
    // Poisoning the test and holdout cases changes nothing with these features either.
    assert_poisoned_splits_change_nothing(
        &clean,
        &ToyWithSecondOpinion,
        &opt,
        &m,
        SafetyClass::PromptInjection,
    );
}

/// [`Toy`] with an intent encoder: a second bag of character 4-grams (16 dims).
struct ToyWithIntent;

impl Featurizer for ToyWithIntent {
    fn embedder_id(&self) -> String {
        Toy.embedder_id()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Toy.embed(texts)
    }
    fn best_cosine(&self, vector: &[f32], lang: Lang) -> Result<Option<f32>, String> {
        Toy.best_cosine(vector, lang)
    }
    fn intent_info(&self) -> Option<cardinal_agent::policy::IntentEncoderInfo> {
        Some(cardinal_agent::policy::IntentEncoderInfo {
            model: "toy-intent".into(),
            embedder_id: "toy-intent:v0".into(),
        })
    }
    fn intent(&self, texts: &[&str]) -> Result<Option<Vec<Vec<f32>>>, String> {
        Ok(Some(
            texts
                .iter()
                .map(|t| common::ngram_vector(t, 4, 16, 3))
                .collect(),
        ))
    }
}

#[test]
fn intent_features_are_fitted_on_train_only_and_named_in_the_file() {
    let opt = FitOptions {
        iterations: 30,
        cosine_feature: true,
        intent: true,
        ..FitOptions::default()
    };
    let clean = cases();
    let train = TrainSet::from_cases(&clean).unwrap();
    // Without an encoder the options cannot be met.
    let err = fit(&train, &Toy, &opt).unwrap_err();
    assert!(
        matches!(&err, FitError::Features(m) if m.contains("none is named")),
        "{err}"
    );
    let m = fit(&train, &ToyWithIntent, &opt).unwrap();
    let info = m.intent_encoder.as_ref().expect("the encoder is named");
    assert_eq!(info.embedder_id, "toy-intent:v0");
    // Query embedding (64), intent vector (16), best cosine (1).
    assert!(m.weights.iter().all(|w| w.len() == 64 + 16 + 1));
    // Poisoning the test and holdout cases changes nothing with these features either.
    assert_poisoned_splits_change_nothing(
        &clean,
        &ToyWithIntent,
        &opt,
        &m,
        SafetyClass::PromptInjection,
    );
}

#[test]
fn the_local_reading_is_fitted_on_train_only_and_named_in_the_file() {
    let opt = FitOptions {
        iterations: 30,
        reading_layer: Some(14),
        ..FitOptions::default()
    };
    let clean = cases();
    let train = TrainSet::from_cases(&clean).unwrap();
    // Without a model the reading cannot be taken.
    let err = fit(&train, &Toy, &opt).unwrap_err();
    assert!(
        matches!(&err, FitError::Features(m) if m.contains("no model is named")),
        "{err}"
    );
    let m = fit(&train, &ToyWithSecondOpinion, &opt).unwrap();
    let info = m.second_opinion.as_ref().expect("the model is named");
    assert_eq!(
        info.reading_version.as_deref(),
        Some(cardinal_agent::policy::second_opinion::READING_VERSION)
    );
    assert_eq!(m.options.reading_layer, Some(14));
    // The embedding's 64 columns, then the reading's 16; no check columns.
    assert!(m.weights.iter().all(|w| w.len() == 64 + 16));
    assert!(m
        .weights
        .iter()
        .any(|w| w[64..].iter().any(|v| v.abs() > 1e-4)));
    // A fit without the reading does not name a reading version.
    let plain = FitOptions {
        second_opinion: true,
        ..opt.clone()
    };
    let plain = FitOptions {
        reading_layer: None,
        ..plain
    };
    let m2 = fit(&train, &ToyWithSecondOpinion, &plain).unwrap();
    assert_eq!(
        m2.second_opinion
            .as_ref()
            .and_then(|i| i.reading_version.clone()),
        None
    );
    // Poisoning the test and holdout cases changes nothing with these features either.
    assert_poisoned_splits_change_nothing(
        &clean,
        &ToyWithSecondOpinion,
        &opt,
        &m,
        SafetyClass::Diagnosis,
    );
}
