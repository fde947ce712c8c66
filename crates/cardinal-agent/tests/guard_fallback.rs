//! The answer guard at the agent level: a generated answer with an invented dose is never
//! shown; the turn answers with the top card's own sentences instead (cited, checked by the
//! guard too), the trace keeps the generated answer's problems and says what replaced it. In
//! all three languages. A scripted chat model, a toy embedder and a policy that answers
//! everything keep this free of real models.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use cardinal_agent::guard::CARD_TEXT_FALLBACK;
use cardinal_agent::policy::model::{TrainInfo, CLASSES, POLICY_SCHEMA_VERSION};
use cardinal_agent::policy::{FitOptions, PolicyModel, Thresholds};
use cardinal_agent::{Agent, Generator};
use cardinal_embed::Embedder;
use cardinal_kb::Lang;
use cardinal_llm::{ChatModel, Completion, FinishReason, GenParams, Message, Usage};

/// Always the same answer, citing the first card of the prompt where the text says `{card}`.
struct Inventing(&'static str);

impl ChatModel for Inventing {
    fn id(&self) -> String {
        "inventing:v1".into()
    }
    fn complete(&self, messages: &[Message], _: &GenParams) -> cardinal_llm::Result<Completion> {
        let re = regex::Regex::new(r"\[([a-z0-9-]+\.(?:en|es-419|pt-BR))\]").unwrap();
        // The cards are in the user message (the system message may show an example id).
        let prompt = messages.last().map(|m| m.content.as_str()).unwrap_or("");
        let card = re
            .captures(prompt)
            .map(|c| c[1].to_string())
            .expect("the prompt lists cards");
        Ok(Completion {
            text: self.0.replace("{card}", &card),
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
        })
    }
}

/// A policy over the toy embedder that answers every message (no class reaches a threshold).
fn answer_everything() -> PolicyModel {
    let d = 32;
    PolicyModel {
        schema_version: POLICY_SCHEMA_VERSION,
        embedder: common::TRIGRAMS.id(),
        second_opinion: None,
        intent_encoder: None,
        classes: CLASSES.to_vec(),
        options: FitOptions::default(),
        thresholds: Thresholds {
            unsafe_min: 2.0,
            out_of_scope_min: 2.0,
            cosine_floor: 0.0,
            rest_benign_min: 0.5,
        },
        train: TrainInfo {
            sha256: String::new(),
            cases: 0,
            per_class: BTreeMap::new(),
            cv: BTreeMap::new(),
        },
        mean: vec![0.0; d],
        scale: vec![1.0; d],
        weights: vec![vec![0.0; d]; CLASSES.len()],
        bias: vec![0.0; CLASSES.len()],
    }
}

fn agent(answer: &'static str) -> (Agent, tempfile::TempDir) {
    let (kb, retriever, dir) = common::toy_retriever();
    let generator = Generator::Llm {
        model: Arc::new(Inventing(answer)),
        params: GenParams::default(),
    };
    let agent =
        Agent::new(kb, Arc::new(retriever), generator).with_policy(Arc::new(answer_everything()));
    (agent, dir)
}

#[test]
fn an_invented_dose_is_replaced_by_the_cards_own_sentences_in_three_languages() {
    for (lang, question, invented, dose) in [
        (
            Lang::En,
            "I missed my blood pressure pill this morning, what should I do?",
            "Take 1000 mg of your pill tonight to catch up. [{card}]",
            "1000",
        ),
        (
            Lang::Es419,
            "Olvidé la pastilla de la presión esta mañana, ¿qué hago?",
            "Tome 750 mg esta noche para compensar. [{card}]",
            "750",
        ),
        (
            Lang::PtBr,
            "Esqueci o remédio da pressão hoje de manhã, o que eu faço?",
            "Tome 640 mg hoje à noite para compensar. [{card}]",
            "640",
        ),
    ] {
        let (agent, _dir) = agent(invented);
        let t = agent.answer(question, Some(lang)).unwrap();
        let g = t.guard.as_ref().expect("the guard ran");
        assert!(!g.passed, "{lang}: {g:?}");
        assert!(
            g.problems.iter().any(|p| p.contains(dose)),
            "{lang}: {:?}",
            g.problems
        );
        assert_eq!(g.fallback, Some(CARD_TEXT_FALLBACK), "{lang}");
        assert!(!t.refused, "{lang}: {:?}", t.refusal_reason);
        assert!(!t.answer.contains(dose), "{lang}: {}", t.answer);
        let top = &t.retrieval.cards[0].card_id;
        assert_eq!(t.citations, vec![top.clone()], "{lang}");
        assert!(
            t.answer.contains(&format!("[{top}]")),
            "{lang}: {}",
            t.answer
        );
        // The replacement passes the guard on its own.
        assert!(cardinal_agent::check_answer(&agent.kb, lang, &t.answer).passed);
        // The generated text stays in the trace.
        assert!(t.raw_output.as_deref().is_some_and(|r| r.contains(dose)));
    }
}

#[test]
fn a_faithful_generated_answer_is_kept() {
    // No number, dose or medicine name: nothing the cited card has to state.
    let (agent, _dir) = agent("Your care team can help you with that. [{card}]");
    let t = agent
        .answer("Can I take two pills if I forgot one?", Some(Lang::En))
        .unwrap();
    let g = t.guard.as_ref().expect("the guard ran");
    assert!(g.passed, "{g:?}");
    assert_eq!(g.fallback, None);
    assert!(!t.refused);
    assert!(
        t.answer
            .starts_with("Your care team can help you with that. ["),
        "{}",
        t.answer
    );
}
