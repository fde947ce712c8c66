//! A policy fitted with second-opinion features, used by the agent: without its model, or with
//! another model, a turn is a policy error (never a decision made without the features it was
//! fitted on); with it, the checks' answers reach the trace; a failing model is a
//! `SecondOpinion` error carrying the model's own error. Toy embedder and a scripted yes/no
//! model keep this free of real models.

mod common;

use std::sync::Arc;

use cardinal_agent::policy::fit::{fit, RetrieverFeaturizer, TrainSet};
use cardinal_agent::policy::second_opinion::CHECKS;
use cardinal_agent::policy::FitOptions;
use cardinal_agent::{Agent, AgentError, Generator};
use cardinal_kb::Lang;
use cardinal_llm::{LlmError, Message, YesNo, YesNoModel};

/// Answers every check with a probability from the message length and the check's index;
/// fails every call when `fail`.
struct Scripted {
    id: &'static str,
    fail: bool,
}

impl YesNoModel for Scripted {
    fn id(&self) -> String {
        self.id.into()
    }
    fn yes_no(&self, messages: &[Message], checks: &[String]) -> cardinal_llm::Result<Vec<YesNo>> {
        if self.fail {
            return Err(LlmError::Local("the scripted model is down".into()));
        }
        let n = messages.last().map(|m| m.content.len()).unwrap_or(0) as f64;
        Ok((0..checks.len())
            .map(|i| YesNo {
                p_yes: ((n + 11.0 * i as f64) % 89.0) / 89.0,
                mass: Some(0.9),
            })
            .collect())
    }
    fn span_states(
        &self,
        messages: &[Message],
        span: &str,
        layer: usize,
    ) -> cardinal_llm::Result<Vec<f32>> {
        if self.fail {
            return Err(LlmError::Local("the scripted model is down".into()));
        }
        let last = messages.last().map(|m| m.content.as_str()).unwrap_or("");
        assert!(last.ends_with(span), "the span ends the last message");
        // Records what was read: the span's length and the block, in an 8-dim "state".
        let mut v = common::ngram_vector(span, 2, 6, 5);
        v.push(span.chars().count() as f32);
        v.push(layer as f32);
        Ok(v)
    }
}

fn agent_and_policy() -> (Agent, tempfile::TempDir) {
    let (kb, retriever, dir) = common::toy_retriever();
    let (cases, diags) =
        cardinal_dataset::load_case_dir(&common::data_dir().join("cases")).unwrap();
    assert!(diags.is_empty(), "{diags}");
    let judge = Scripted {
        id: "scripted:v1",
        fail: false,
    };
    let fz = RetrieverFeaturizer {
        retriever: &retriever,
        second_opinion: Some(("scripted", &judge)),
        intent: None,
        reading_layer: None,
    };
    let opt = FitOptions {
        iterations: 20,
        cosine_feature: true,
        second_opinion: true,
        ..FitOptions::default()
    };
    let policy = fit(&TrainSet::from_cases(&cases).unwrap(), &fz, &opt).unwrap();
    assert_eq!(
        policy.second_opinion.as_ref().map(|i| i.model.as_str()),
        Some("scripted")
    );
    let agent =
        Agent::new(kb, Arc::new(retriever), Generator::Extractive).with_policy(Arc::new(policy));
    (agent, dir)
}

#[test]
fn the_agent_uses_exactly_the_second_opinion_model_its_policy_was_fitted_with() {
    let (agent, _dir) = agent_and_policy();
    let q = "How do I renew my prescription through the portal?";

    let err = agent.answer(q, Some(Lang::En)).unwrap_err();
    assert!(
        matches!(&err, AgentError::Policy(m) if m.contains("scripted") && m.contains("none is attached")),
        "{err}"
    );

    let other = agent.with_second_opinion(Arc::new(Scripted {
        id: "another:v9",
        fail: false,
    }));
    let err = other.answer(q, Some(Lang::En)).unwrap_err();
    assert!(
        matches!(&err, AgentError::Policy(m) if m.contains("scripted:v1") && m.contains("another:v9")),
        "{err}"
    );

    let down = other.with_second_opinion(Arc::new(Scripted {
        id: "scripted:v1",
        fail: true,
    }));
    let err = down.answer(q, Some(Lang::En)).unwrap_err();
    assert!(
        matches!(&err, AgentError::SecondOpinion(LlmError::Local(m)) if m.contains("down")),
        "{err}"
    );

    let good = down.with_second_opinion(Arc::new(Scripted {
        id: "scripted:v1",
        fail: false,
    }));
    let turn = good.answer(q, Some(Lang::En)).unwrap();
    let so = &turn.policy.as_ref().unwrap().signals.second_opinion;
    assert_eq!(so.len(), CHECKS.len());
    let (messages, _) = cardinal_agent::policy::second_opinion::plan(q);
    let n = messages[1].content.len() as f32;
    for (i, ((class, p), (check_class, _))) in so.iter().zip(CHECKS.iter()).enumerate() {
        assert_eq!(class, check_class);
        assert!(
            (p - ((n + 11.0 * i as f32) % 89.0) / 89.0).abs() < 1e-6,
            "{so:?}"
        );
    }
}

#[test]
fn a_policy_that_reads_the_local_model_reads_the_message_at_its_block() {
    let (kb, retriever, _dir) = common::toy_retriever();
    let (cases, diags) =
        cardinal_dataset::load_case_dir(&common::data_dir().join("cases")).unwrap();
    assert!(diags.is_empty(), "{diags}");
    let judge = Scripted {
        id: "scripted:v1",
        fail: false,
    };
    let fz = RetrieverFeaturizer {
        retriever: &retriever,
        second_opinion: Some(("scripted", &judge)),
        intent: None,
        reading_layer: Some(7),
    };
    let opt = FitOptions {
        iterations: 20,
        cosine_feature: true,
        reading_layer: Some(7),
        ..FitOptions::default()
    };
    let policy = fit(&TrainSet::from_cases(&cases).unwrap(), &fz, &opt).unwrap();
    // 32 toy embedding columns, 8 reading columns, the cosine.
    assert!(
        policy.weights.iter().all(|w| w.len() == 32 + 8 + 1),
        "{}",
        policy.weights[0].len()
    );
    let layer_col = 32 + 7;
    assert!(
        (policy.mean[layer_col] - 7.0).abs() < 1e-4,
        "every reading was taken at block 7"
    );
    let agent = Agent::new(kb, Arc::new(retriever), Generator::Extractive)
        .with_policy(Arc::new(policy.clone()));
    let q = "  Can I stop the reminder texts?  ";
    let err = agent.answer(q, Some(Lang::En)).unwrap_err();
    assert!(
        matches!(&err, AgentError::Policy(m) if m.contains("none is attached")),
        "{err}"
    );
    let down = agent.with_second_opinion(Arc::new(Scripted {
        id: "scripted:v1",
        fail: true,
    }));
    let err = down.answer(q, Some(Lang::En)).unwrap_err();
    assert!(
        matches!(&err, AgentError::SecondOpinion(LlmError::Local(m)) if m.contains("down")),
        "{err}"
    );
    let good = down.with_second_opinion(Arc::new(Scripted {
        id: "scripted:v1",
        fail: false,
    }));
    let turn = good.answer(q, Some(Lang::En)).unwrap();
    // The policy read no checks (it was fitted without them).
    assert!(turn
        .policy
        .as_ref()
        .unwrap()
        .signals
        .second_opinion
        .is_empty());
    // A policy file from another reading prompt is refused.
    let mut stale = policy;
    if let Some(info) = stale.second_opinion.as_mut() {
        info.reading_version = Some("message-reading/v0".into());
    }
    let stale_agent = good.with_policy(Arc::new(stale));
    let err = stale_agent.answer(q, Some(Lang::En)).unwrap_err();
    assert!(
        matches!(&err, AgentError::Policy(m) if m.contains("message-reading/v0")),
        "{err}"
    );
}
