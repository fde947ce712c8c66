//! The Cardinal answering agent. One turn: language (given or detected) → retrieve the top-k
//! cards → answer from them, citing `[card-id]` → drop (and record) citations of cards that were
//! not retrieved. Requests that a rule forbids, prompt injections and questions no card covers
//! get a polite refusal in the user's language — retrieval still runs for them, so the right
//! card is measured either way. Every turn yields a [`Turn`] trace.

pub mod citations;
pub mod messages;
pub mod policy;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use cardinal_kb::{KnowledgeBase, Lang};
use cardinal_llm::{ChatModel, GenParams, Message, Usage};
use cardinal_retrieval::{Mode, Retrieval, Retriever};
use serde::Serialize;
use sha2::{Digest, Sha256};

pub use citations::{filter_citations, parse_citations};
pub use policy::{detect_lang, forbidden_request, RefusalReason};

/// Errors of one turn.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("retrieval failed: {0}")]
    Retrieval(#[from] cardinal_retrieval::RetrievalError),
    #[error("generation failed: {0}")]
    Llm(#[from] cardinal_llm::LlmError),
}

pub type Result<T, E = AgentError> = std::result::Result<T, E>;

/// How answers are produced.
#[derive(Clone)]
pub enum Generator {
    /// Deterministic, no LLM: the most relevant header claims of the top card, cited.
    Extractive,
    /// A chat model prompted with the numbered cards.
    Llm {
        model: Arc<dyn ChatModel>,
        params: GenParams,
    },
}

impl Generator {
    pub fn name(&self) -> String {
        match self {
            Generator::Extractive => "extractive".into(),
            Generator::Llm { model, .. } => model.id(),
        }
    }
}

/// Milliseconds spent in each step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Timings {
    pub retrieval_ms: f64,
    pub generation_ms: f64,
    pub total_ms: f64,
}

/// The trace of one turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn {
    pub question: String,
    pub lang: Lang,
    pub lang_detected: bool,
    pub generator: String,
    pub retrieval: Retrieval,
    pub answer: String,
    /// Citations kept: cards that were retrieved, in order of appearance.
    pub citations: Vec<String>,
    /// Citations removed because the card was not retrieved.
    pub dropped_citations: Vec<String>,
    pub refused: bool,
    pub refusal_reason: Option<RefusalReason>,
    pub prompt_sha256: Option<String>,
    pub raw_output: Option<String>,
    pub usage: Option<Usage>,
    pub timings: Timings,
}

/// The agent: a KB, a retriever and a generator.
pub struct Agent {
    pub kb: Arc<KnowledgeBase>,
    pub retriever: Arc<Retriever>,
    pub generator: Generator,
    pub mode: Mode,
}

impl Agent {
    pub fn new(kb: Arc<KnowledgeBase>, retriever: Arc<Retriever>, generator: Generator) -> Self {
        Agent {
            kb,
            retriever,
            generator,
            mode: Mode::Hybrid,
        }
    }

    /// Answer one message. `lang` is the case language when known; otherwise it is detected.
    pub fn answer(&self, question: &str, lang: Option<Lang>) -> Result<Turn> {
        let start = Instant::now();
        let (lang, lang_detected) = match lang {
            Some(l) => (l, false),
            None => (detect_lang(question), true),
        };
        let retrieval = self.retriever.retrieve(question, lang, self.mode)?;
        let retrieval_ms = start.elapsed().as_secs_f64() * 1000.0;
        let retrieved = retrieval.card_ids();
        let mut turn = Turn {
            question: question.to_string(),
            lang,
            lang_detected,
            generator: self.generator.name(),
            retrieval,
            answer: String::new(),
            citations: Vec::new(),
            dropped_citations: Vec::new(),
            refused: false,
            refusal_reason: None,
            prompt_sha256: None,
            raw_output: None,
            usage: None,
            timings: Timings {
                retrieval_ms,
                ..Default::default()
            },
        };
        let gen_start = Instant::now();
        if let Some(reason) = forbidden_request(question) {
            // Point to the retrieved card whose rule applies (else the top card), when
            // retrieval found one above the floor.
            let cite = (!turn.retrieval.below_floor && reason != RefusalReason::PromptInjection)
                .then(|| self.card_with_rule(&retrieved, reason))
                .flatten();
            self.refuse(&mut turn, reason, cite);
        } else if turn.retrieval.below_floor || retrieved.is_empty() {
            self.refuse(&mut turn, RefusalReason::NoRelevantCard, None);
        } else {
            match &self.generator {
                Generator::Extractive => self.extractive(&mut turn),
                Generator::Llm { model, params } => {
                    self.generate(&mut turn, model.as_ref(), params)?
                }
            }
        }
        turn.timings.generation_ms = gen_start.elapsed().as_secs_f64() * 1000.0;
        turn.timings.total_ms = start.elapsed().as_secs_f64() * 1000.0;
        Ok(turn)
    }

    /// The first retrieved card with a rule about `reason`, else the first retrieved card.
    fn card_with_rule(&self, retrieved: &[String], reason: RefusalReason) -> Option<String> {
        let markers: &[&str] = match reason {
            RefusalReason::DoubleDose => &[
                "doubl",
                "dobl",
                "two doses",
                "dos dosis",
                "duas doses",
                "extra",
            ],
            RefusalReason::StopMedication => {
                &["stop", "suspend", "interromp", "parar", "dejar", "deixar"]
            }
            RefusalReason::Diagnosis => &["diagnos", "interpret"],
            RefusalReason::Cure => &["cure", "cura"],
            _ => &[],
        };
        retrieved
            .iter()
            .find(|id| {
                self.kb.get(id).is_some_and(|cf| {
                    cf.card.rules().iter().any(|r| {
                        let r = r.to_lowercase();
                        markers.iter().any(|m| r.contains(m))
                    })
                })
            })
            .or_else(|| retrieved.first())
            .cloned()
    }

    fn refuse(&self, turn: &mut Turn, reason: RefusalReason, cite: Option<String>) {
        let mut text = messages::refusal(turn.lang, reason);
        if let Some(id) = &cite {
            text.push_str(&format!(" [{id}]"));
            turn.citations = vec![id.clone()];
        }
        turn.answer = text;
        turn.refused = true;
        turn.refusal_reason = Some(reason);
    }

    /// The top card's header claims that share the most stemmed terms with the question
    /// (at most two, in card order), each followed by the citation.
    fn extractive(&self, turn: &mut Turn) {
        let Some(top) = turn.retrieval.cards.first().map(|c| c.card_id.clone()) else {
            self.refuse(turn, RefusalReason::NoRelevantCard, None);
            return;
        };
        let Some(cf) = self.kb.get(&top) else {
            self.refuse(turn, RefusalReason::NoRelevantCard, None);
            return;
        };
        let q: BTreeSet<String> = cardinal_retrieval::lexical::terms(turn.lang, &turn.question)
            .into_iter()
            .collect();
        let claims = cf.card.claims();
        let mut scored: Vec<(usize, usize)> = claims
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let terms: BTreeSet<String> = cardinal_retrieval::lexical::terms(turn.lang, c)
                    .into_iter()
                    .collect();
                (q.intersection(&terms).count(), i)
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut pick: Vec<usize> = scored.iter().take(2).map(|(_, i)| *i).collect();
        pick.sort_unstable();
        turn.answer = pick
            .iter()
            .map(|&i| format!("{} [{top}]", claims[i].trim_end()))
            .collect::<Vec<_>>()
            .join(" ");
        turn.citations = vec![top];
    }

    fn generate(&self, turn: &mut Turn, model: &dyn ChatModel, params: &GenParams) -> Result<()> {
        let cards: Vec<(&str, &str, &str)> = turn
            .retrieval
            .cards
            .iter()
            .filter_map(|c| self.kb.get(&c.card_id))
            .map(|cf| {
                (
                    cf.card.id.as_str(),
                    cf.card.title.as_str(),
                    cf.card.full_text(),
                )
            })
            .collect();
        let messages = vec![
            Message::system(messages::system_prompt(turn.lang, &cards)),
            Message::user(messages::user_message(
                turn.lang,
                &turn.question,
                cards.first().map(|c| c.0),
            )),
        ];
        let mut h = Sha256::new();
        for m in &messages {
            h.update(m.content.as_bytes());
            h.update([0]);
        }
        turn.prompt_sha256 = Some(h.finalize().iter().map(|b| format!("{b:02x}")).collect());
        let completion = model.complete(&messages, params)?;
        turn.usage = Some(completion.usage);
        let raw = completion.text.trim().to_string();
        turn.raw_output = Some(raw.clone());
        if raw.is_empty() || raw.contains(messages::NO_ANSWER) {
            self.refuse(turn, RefusalReason::NoAnswerInCards, None);
            return Ok(());
        }
        let (text, kept, dropped) = filter_citations(&raw, &turn.retrieval.card_ids());
        turn.answer = text;
        turn.citations = kept;
        turn.dropped_citations = dropped;
        Ok(())
    }
}
