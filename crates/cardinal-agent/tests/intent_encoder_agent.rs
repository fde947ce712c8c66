//! A policy fitted with an intent encoder, used by the agent: without its encoder, or with
//! another one, a turn is a policy error (never a decision made without the features it was
//! fitted on); with it, the encoder's vectors reach the classifier. Toy encoders keep this free
//! of real models.

mod common;

use std::sync::Arc;

use cardinal_agent::policy::fit::{fit, RetrieverFeaturizer, TrainSet};
use cardinal_agent::policy::FitOptions;
use cardinal_agent::{Agent, AgentError, Generator};
use cardinal_embed::Embedder;
use cardinal_kb::Lang;

fn intent(id: &'static str, salt: u32) -> Arc<dyn Embedder> {
    Arc::new(common::NGrams {
        id,
        n: 4,
        dim: 16,
        salt,
    })
}

fn agent_and_policy() -> (Agent, tempfile::TempDir) {
    let (kb, retriever, dir) = common::toy_retriever();
    let (cases, diags) =
        cardinal_dataset::load_case_dir(&common::data_dir().join("cases")).unwrap();
    assert!(diags.is_empty(), "{diags}");
    let enc = intent("fourgram-toy:v1", 3);
    let fz = RetrieverFeaturizer {
        retriever: &retriever,
        second_opinion: None,
        intent: Some(("fourgram", enc.as_ref())),
        reading_layer: None,
    };
    let opt = FitOptions {
        iterations: 20,
        cosine_feature: true,
        intent: true,
        ..FitOptions::default()
    };
    let policy = fit(&TrainSet::from_cases(&cases).unwrap(), &fz, &opt).unwrap();
    let info = policy
        .intent_encoder
        .clone()
        .expect("the policy names its encoder");
    assert_eq!(info.model, "fourgram");
    assert_eq!(info.embedder_id, "fourgram-toy:v1");
    // Query embedding (32), intent vector (16), best cosine (1).
    assert!(policy.weights.iter().all(|w| w.len() == 32 + 16 + 1));
    let agent =
        Agent::new(kb, Arc::new(retriever), Generator::Extractive).with_policy(Arc::new(policy));
    (agent, dir)
}

#[test]
fn the_agent_uses_exactly_the_intent_encoder_its_policy_was_fitted_with() {
    let (agent, _dir) = agent_and_policy();
    let q = "How do I renew my prescription through the portal?";

    let err = agent.answer(q, Some(Lang::En)).unwrap_err();
    assert!(
        matches!(&err, AgentError::Policy(m) if m.contains("fourgram") && m.contains("none is attached")),
        "{err}"
    );

    let other = agent.with_intent_encoder(intent("another:v9", 3));
    let err = other.answer(q, Some(Lang::En)).unwrap_err();
    assert!(
        matches!(&err, AgentError::Policy(m) if m.contains("fourgram-toy:v1") && m.contains("another:v9")),
        "{err}"
    );

    let good = other.with_intent_encoder(intent("fourgram-toy:v1", 3));
    let p_good = good
        .answer(q, Some(Lang::En))
        .unwrap()
        .policy
        .unwrap()
        .signals;
    // Same id, other vectors: the class probabilities move, so the vectors reach the model.
    let moved = good.with_intent_encoder(intent("fourgram-toy:v1", 11));
    let p_moved = moved
        .answer(q, Some(Lang::En))
        .unwrap()
        .policy
        .unwrap()
        .signals;
    assert_ne!(p_good.probabilities, p_moved.probabilities);
}
