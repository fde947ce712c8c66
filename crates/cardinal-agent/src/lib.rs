//! The Cardinal answering agent. One turn: language (given or detected) → one query embedding,
//! shared by retrieval and the safety policy → retrieve the top-k cards → the policy decides
//! (answer, refuse with a card rule, escalate an emergency, or no relevant card) → answer from
//! the cards, citing `[card-id]` → drop (and record) citations of cards that were not retrieved →
//! the answer guard checks every number and medicine name against the cited card. Retrieval
//! runs for refused requests too, so the right card is measured either way. A message with a
//! forbidden part and a legitimate part gets the refusal plus an answer to the legitimate part.
//! Every turn yields a [`Turn`] trace.

pub mod citations;
pub mod guard;
pub mod messages;
pub mod policy;
pub mod rulecite;
pub mod safety_eval;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use cardinal_kb::{KnowledgeBase, Lang};
use cardinal_llm::{ChatModel, GenParams, Message, Usage};
use cardinal_retrieval::{Mode, Retrieval, Retriever};
use serde::Serialize;

pub use citations::{filter_citations, parse_citations};
pub use guard::{check_answer, GuardReport};
pub use policy::{detect_lang, Decision, PolicyModel, RefusalReason, Signals};

/// Errors of one turn.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("retrieval failed: {0}")]
    Retrieval(#[from] cardinal_retrieval::RetrievalError),
    #[error("generation failed: {0}")]
    Llm(#[from] cardinal_llm::LlmError),
    #[error("embedding failed: {0}")]
    Embed(#[from] cardinal_embed::EmbedError),
    #[error("safety policy: {0}")]
    Policy(String),
    #[error("safety policy: the second-opinion model failed: {0}")]
    SecondOpinion(#[source] cardinal_llm::LlmError),
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

/// The policy part of a turn's trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyTrace {
    pub decision: Decision,
    pub signals: Signals,
    /// Indices of the general injection markers that matched.
    pub injection_markers: Vec<usize>,
}

/// The answered legitimate part of a two-intent message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RestAnswer {
    /// The sentence that was answered.
    pub segment: String,
    /// What was appended to the refusal (with its citations).
    pub answer: String,
    pub citations: Vec<String>,
}

/// What answering one question from retrieved cards produced.
struct Produced {
    answer: String,
    citations: Vec<String>,
    dropped: Vec<String>,
    /// `Some` when the generator declined (NO_ANSWER) or the guard rejected the answer.
    failed: Option<RefusalReason>,
    guard: Option<GuardReport>,
    prompt_sha256: Option<String>,
    raw_output: Option<String>,
    usage: Option<Usage>,
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
    /// The request (or its forbidden part) was declined.
    pub refused: bool,
    /// An emergency: the answer is the emergency escalation from the cards (`refused` is
    /// false, `refusal_reason` is `Emergency`).
    pub escalated: bool,
    /// Why the turn did not answer normally (a refusal or an escalation).
    pub refusal_reason: Option<RefusalReason>,
    /// The policy's decision and the signals it read.
    pub policy: Option<PolicyTrace>,
    /// The rule of the cited card that the refusal or escalation applies.
    pub cited_rule: Option<String>,
    /// The answer guard's verdict on a generated answer.
    pub guard: Option<GuardReport>,
    /// Two intents: the legitimate part that was answered after the refusal.
    pub rest: Option<RestAnswer>,
    pub prompt_sha256: Option<String>,
    pub raw_output: Option<String>,
    pub usage: Option<Usage>,
    pub timings: Timings,
}

/// The local model's second-opinion answers and reading of a message (each when the policy
/// uses it).
type LocalFeatures = (Option<Vec<f32>>, Option<Vec<f32>>);

/// The agent: a KB, a retriever, a generator and the safety policy.
pub struct Agent {
    pub kb: Arc<KnowledgeBase>,
    pub retriever: Arc<Retriever>,
    pub generator: Generator,
    pub mode: Mode,
    /// The fitted policy (by default the bundled `data/policy/policy-v2.json`).
    pub policy: Arc<PolicyModel>,
    /// The model answering the policy's second-opinion checks, when the policy reads them.
    pub second_opinion: Option<Arc<dyn cardinal_llm::YesNoModel>>,
    /// The encoder whose vectors of the message the policy reads, when it reads any.
    pub intent_encoder: Option<Arc<dyn cardinal_embed::Embedder>>,
}

impl Agent {
    pub fn new(kb: Arc<KnowledgeBase>, retriever: Arc<Retriever>, generator: Generator) -> Self {
        Agent {
            kb,
            retriever,
            generator,
            mode: Mode::Hybrid,
            policy: policy::bundled(),
            second_opinion: None,
            intent_encoder: None,
        }
    }

    /// The same agent with the model that answers the policy's second-opinion checks.
    pub fn with_second_opinion(mut self, model: Arc<dyn cardinal_llm::YesNoModel>) -> Self {
        self.second_opinion = Some(model);
        self
    }

    /// The local model the policy consults, when it consults one: errors when the policy needs
    /// a model the agent lacks, or was fitted with another one (or another reading prompt).
    fn local_model(&self) -> Result<Option<&dyn cardinal_llm::YesNoModel>> {
        let Some(info) = self.policy.second_opinion.as_ref() else {
            return Ok(None);
        };
        let Some(model) = self.second_opinion.as_ref() else {
            return Err(AgentError::Policy(format!(
                "the policy consults the local model `{}`, and none is attached",
                info.model
            )));
        };
        if model.id() != info.model_id {
            return Err(AgentError::Policy(format!(
                "the policy was fitted with second-opinion model `{}` but the agent has `{}`",
                info.model_id,
                model.id()
            )));
        }
        if self.policy.options.reading_layer.is_some()
            && info.reading_version.as_deref() != Some(policy::second_opinion::READING_VERSION)
        {
            return Err(AgentError::Policy(format!(
                "the policy reads the local model through `{}` but this agent reads it through `{}`",
                info.reading_version.as_deref().unwrap_or("(none)"),
                policy::second_opinion::READING_VERSION
            )));
        }
        Ok(Some(model.as_ref()))
    }

    /// What the local model says about `question`, as far as the policy uses it: the
    /// second-opinion answers and the reading (the model is checked once for both).
    fn local_features(&self, question: &str) -> Result<LocalFeatures> {
        let Some(model) = self.local_model()? else {
            return Ok((None, None));
        };
        let options = &self.policy.options;
        let checks = options
            .second_opinion
            .then(|| policy::second_opinion::ask(model, question))
            .transpose()
            .map_err(AgentError::SecondOpinion)?;
        let reading = options
            .reading_layer
            .map(|layer| policy::second_opinion::read(model, question, layer))
            .transpose()
            .map_err(AgentError::SecondOpinion)?;
        Ok((checks, reading))
    }

    /// The same agent with the encoder whose vectors the policy reads.
    pub fn with_intent_encoder(mut self, encoder: Arc<dyn cardinal_embed::Embedder>) -> Self {
        self.intent_encoder = Some(encoder);
        self
    }

    /// The intent encoder's vectors of `texts` (the message, then its segments), when the
    /// policy reads them: errors when the policy needs an encoder the agent lacks, or was
    /// fitted with another one.
    fn intent(&self, texts: &[&str]) -> Result<Option<Vec<Vec<f32>>>> {
        let Some(info) = self.policy.intent_encoder.as_ref() else {
            return Ok(None);
        };
        let Some(encoder) = self.intent_encoder.as_ref() else {
            return Err(AgentError::Policy(format!(
                "the policy reads the intent encoder `{}`, and none is attached",
                info.model
            )));
        };
        if encoder.id() != info.embedder_id {
            return Err(AgentError::Policy(format!(
                "the policy was fitted with intent encoder `{}` but the agent has `{}`",
                info.embedder_id,
                encoder.id()
            )));
        }
        let v = encoder.embed_queries(texts)?;
        if v.len() != texts.len() {
            return Err(AgentError::Policy(
                "the intent encoder returned too few vectors".into(),
            ));
        }
        Ok(Some(v))
    }

    /// The same agent with another fitted policy.
    pub fn with_policy(mut self, policy: Arc<PolicyModel>) -> Self {
        self.policy = policy;
        self
    }

    /// Every text the agent embeds as a query for `question` (the message, then its sentences
    /// when the policy scores them), so a sweep can embed all of its cases' texts in one batch
    /// beforehand.
    pub fn query_texts(&self, question: &str) -> Vec<String> {
        let mut texts = vec![question.to_string()];
        if self.policy.options.segments {
            texts.extend(policy::segments(question));
        }
        texts
    }

    /// The policy's features of `question`: one batch of query embeddings (the message, then
    /// its sentences when the policy scores them), the first of which retrieval reuses.
    fn policy_features(&self, question: &str) -> Result<policy::CaseFeatures> {
        let embedder = self.retriever.embedder();
        if embedder.id() != self.policy.embedder {
            return Err(AgentError::Policy(format!(
                "the policy was fitted with embedder `{}` but the retriever uses `{}`",
                self.policy.embedder,
                embedder.id()
            )));
        }
        // The same texts a sweep embeds beforehand, so its batch is what is looked up here.
        let mut segment_texts = self.query_texts(question);
        let texts: Vec<&str> = segment_texts.iter().map(String::as_str).collect();
        let mut vectors = embedder.embed_queries(&texts)?;
        if vectors.len() != texts.len() {
            return Err(AgentError::Policy(
                "the embedder returned too few vectors".into(),
            ));
        }
        let (intent, segment_intents) = match self.intent(&texts)? {
            Some(mut v) => {
                let first = v.remove(0);
                (Some(first), v)
            }
            None => (None, Vec::new()),
        };
        let embedding = vectors.remove(0);
        let (second_opinion, reading) = self.local_features(question)?;
        segment_texts.remove(0);
        Ok(policy::CaseFeatures {
            embedding,
            best_cosine: None,
            segment_texts,
            segment_embeddings: vectors,
            rule_hit: !policy::rules::injection_markers(question).is_empty(),
            second_opinion,
            intent,
            segment_intents,
            reading,
        })
    }

    /// Answer one message. `lang` is the case language when known; otherwise it is detected.
    pub fn answer(&self, question: &str, lang: Option<Lang>) -> Result<Turn> {
        let start = Instant::now();
        let (lang, lang_detected) = match lang {
            Some(l) => (l, false),
            None => (detect_lang(question), true),
        };
        let mut feats = self.policy_features(question)?;
        let retrieval = self.retriever.retrieve_with_vector(
            question,
            Some(feats.embedding.as_slice()),
            lang,
            self.mode,
        )?;
        feats.best_cosine = retrieval.best_similarity;
        let retrieval_ms = start.elapsed().as_secs_f64() * 1000.0;
        let retrieved = retrieval.card_ids();
        let signals = Signals::of(&self.policy, &feats);
        let decision = policy::decide(
            &signals,
            feats.rule_hit,
            &self.policy.thresholds,
            &self.policy.options,
        );
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
            escalated: false,
            refusal_reason: None,
            policy: Some(PolicyTrace {
                decision,
                signals,
                injection_markers: policy::rules::injection_markers(question),
            }),
            cited_rule: None,
            guard: None,
            rest: None,
            prompt_sha256: None,
            raw_output: None,
            usage: None,
            timings: Timings {
                retrieval_ms,
                ..Default::default()
            },
        };
        let gen_start = Instant::now();
        match decision {
            Decision::Refuse(class) => {
                let reason =
                    RefusalReason::of_class(class).unwrap_or(RefusalReason::PromptInjection);
                let cite = rulecite::card_with_rule(&self.kb, &retrieved, class, lang);
                turn.cited_rule = cite
                    .as_deref()
                    .and_then(|id| rulecite::cited_rule(&self.kb, id, class))
                    .map(str::to_string);
                self.refuse(&mut turn, reason, cite);
                self.answer_rest(&mut turn, &feats)?;
            }
            Decision::Escalate => self.escalate(&mut turn, &retrieved),
            Decision::OutOfScope => self.refuse(&mut turn, RefusalReason::NoRelevantCard, None),
            Decision::Answer => {
                if retrieved.is_empty() {
                    self.refuse(&mut turn, RefusalReason::NoRelevantCard, None);
                } else {
                    let p = self.produce(question, lang, &turn.retrieval)?;
                    turn.prompt_sha256 = p.prompt_sha256;
                    turn.raw_output = p.raw_output;
                    turn.usage = p.usage;
                    turn.guard = p.guard;
                    turn.dropped_citations = p.dropped;
                    match p.failed {
                        Some(reason) => self.refuse(&mut turn, reason, None),
                        None => {
                            turn.answer = p.answer;
                            turn.citations = p.citations;
                        }
                    }
                }
            }
        }
        turn.timings.generation_ms = gen_start.elapsed().as_secs_f64() * 1000.0;
        turn.timings.total_ms = start.elapsed().as_secs_f64() * 1000.0;
        Ok(turn)
    }

    /// Two intents: after a refusal, answer the sentence of the message that the policy scores
    /// as benign and in scope (the most benign one), from its own retrieval.
    fn answer_rest(&self, turn: &mut Turn, feats: &policy::CaseFeatures) -> Result<()> {
        let t = &self.policy.thresholds;
        let Some(sig) = turn.policy.as_ref().map(|p| &p.signals) else {
            return Ok(());
        };
        let best = sig
            .segments
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.p_benign >= t.rest_benign_min
                    && s.unsafe_mass < t.unsafe_min
                    && s.p_out_of_scope < t.out_of_scope_min
                    && policy::rules::injection_markers(&s.text).is_empty()
            })
            .max_by(|a, b| a.1.p_benign.total_cmp(&b.1.p_benign))
            .map(|(i, s)| (i, s.text.clone()));
        let Some((i, segment)) = best else {
            return Ok(());
        };
        let Some(vector) = feats.segment_embeddings.get(i) else {
            return Ok(());
        };
        let retrieval = self.retriever.retrieve_with_vector(
            &segment,
            Some(vector.as_slice()),
            turn.lang,
            self.mode,
        )?;
        if retrieval
            .best_similarity
            .is_some_and(|b| b < t.cosine_floor)
            || retrieval.cards.is_empty()
        {
            return Ok(());
        }
        let p = self.produce(&segment, turn.lang, &retrieval)?;
        if p.failed.is_some() || p.citations.is_empty() {
            return Ok(());
        }
        let intro = messages::rest_intro(turn.lang);
        turn.answer = format!("{} {intro} {}", turn.answer, p.answer);
        for c in &p.citations {
            if !turn.citations.contains(c) {
                turn.citations.push(c.clone());
            }
        }
        // The rest's cards were retrieved for the segment; record them as retrieved context
        // of this turn so citation correctness holds.
        for card in retrieval.cards {
            if !turn
                .retrieval
                .cards
                .iter()
                .any(|c| c.card_id == card.card_id)
                && p.citations.contains(&card.card_id)
            {
                turn.retrieval.cards.push(card);
            }
        }
        turn.rest = Some(RestAnswer {
            segment,
            answer: p.answer,
            citations: p.citations,
        });
        Ok(())
    }

    /// An emergency: the safe escalation text in the user's language, then the emergency
    /// sentence of the first retrieved card whose rules send emergencies to emergency services
    /// (else the emergency-warning-signs card), cited.
    fn escalate(&self, turn: &mut Turn, retrieved: &[String]) {
        let class = cardinal_dataset::SafetyClass::Emergency;
        let mut candidates: Vec<String> = retrieved
            .iter()
            .filter(|id| {
                self.kb.get(id).is_some_and(|cf| {
                    cf.card
                        .rules()
                        .iter()
                        .any(|r| rulecite::rule_is_about(r, class))
                })
            })
            .cloned()
            .collect();
        if let Some(home) = rulecite::home_card(class, turn.lang) {
            candidates.push(home);
        }
        let mut text = messages::refusal(turn.lang, RefusalReason::Emergency);
        for id in candidates {
            let Some(cf) = self.kb.get(&id) else { continue };
            if let Some(sentence) = emergency_sentence(cf.card.header()) {
                text.push_str(&format!(" {sentence} [{id}]"));
                turn.cited_rule = rulecite::cited_rule(&self.kb, &id, class).map(str::to_string);
                turn.citations = vec![id];
                break;
            }
        }
        turn.answer = text;
        turn.escalated = true;
        turn.refused = false;
        turn.refusal_reason = Some(RefusalReason::Emergency);
    }

    /// Answer `question` from `retrieval` with the configured generator, then run the guard.
    fn produce(&self, question: &str, lang: Lang, retrieval: &Retrieval) -> Result<Produced> {
        let mut p = Produced {
            answer: String::new(),
            citations: Vec::new(),
            dropped: Vec::new(),
            failed: None,
            guard: None,
            prompt_sha256: None,
            raw_output: None,
            usage: None,
        };
        match &self.generator {
            Generator::Extractive => match self.extractive(question, lang, retrieval) {
                Some((answer, top)) => {
                    p.answer = answer;
                    p.citations = vec![top];
                }
                None => p.failed = Some(RefusalReason::NoRelevantCard),
            },
            Generator::Llm { model, params } => {
                self.generate(&mut p, question, lang, retrieval, model.as_ref(), params)?
            }
        }
        if p.failed.is_none() {
            let mut report = guard::check_answer(&self.kb, lang, &p.answer);
            if !report.passed {
                p.failed = Some(RefusalReason::AnswerGuard);
                // A generated answer that fails is replaced by the top card's own sentences
                // (the extractive answer, checked by the guard too); only when there are none
                // does the turn fall back to the refusal text. The report keeps the generated
                // answer's problems either way.
                if matches!(self.generator, Generator::Llm { .. }) {
                    if let Some((answer, top)) = self.extractive(question, lang, retrieval) {
                        if guard::check_answer(&self.kb, lang, &answer).passed {
                            p.answer = answer;
                            p.citations = vec![top];
                            p.failed = None;
                            report.fallback = Some(guard::CARD_TEXT_FALLBACK);
                        }
                    }
                }
            }
            p.guard = Some(report);
        }
        Ok(p)
    }

    fn refuse(&self, turn: &mut Turn, reason: RefusalReason, cite: Option<String>) {
        let mut text = messages::refusal(turn.lang, reason);
        if let Some(id) = &cite {
            text.push_str(&format!(" [{id}]"));
            turn.citations = vec![id.clone()];
        } else {
            turn.citations.clear();
        }
        turn.answer = text;
        turn.refused = true;
        turn.refusal_reason = Some(reason);
    }

    /// The top card's header claims that share the most stemmed terms with the question
    /// (at most two, in card order), each followed by the citation.
    fn extractive(
        &self,
        question: &str,
        lang: Lang,
        retrieval: &Retrieval,
    ) -> Option<(String, String)> {
        let top = retrieval.cards.first().map(|c| c.card_id.clone())?;
        let cf = self.kb.get(&top)?;
        let q: BTreeSet<String> = cardinal_retrieval::lexical::terms(lang, question)
            .into_iter()
            .collect();
        let claims = cf.card.claims();
        let mut scored: Vec<(usize, usize)> = claims
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let terms: BTreeSet<String> = cardinal_retrieval::lexical::terms(lang, c)
                    .into_iter()
                    .collect();
                (q.intersection(&terms).count(), i)
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut pick: Vec<usize> = scored.iter().take(2).map(|(_, i)| *i).collect();
        pick.sort_unstable();
        let answer = pick
            .iter()
            .map(|&i| format!("{} [{top}]", claims[i].trim_end()))
            .collect::<Vec<_>>()
            .join(" ");
        Some((answer, top))
    }

    fn generate(
        &self,
        p: &mut Produced,
        question: &str,
        lang: Lang,
        retrieval: &Retrieval,
        model: &dyn ChatModel,
        params: &GenParams,
    ) -> Result<()> {
        let cards: Vec<(&str, &str, &str)> = retrieval
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
            Message::system(messages::system_prompt(lang, &cards)),
            Message::user(messages::user_message(
                lang,
                question,
                cards.first().map(|c| c.0),
            )),
        ];
        let mut h = cardinal_digest::Digest::new();
        for m in &messages {
            h.push(&m.content);
        }
        p.prompt_sha256 = Some(h.hex());
        let completion = model.complete(&messages, params)?;
        p.usage = Some(completion.usage);
        let raw = completion.text.trim().to_string();
        p.raw_output = Some(raw.clone());
        if raw.is_empty() || raw.contains(messages::NO_ANSWER) {
            p.failed = Some(RefusalReason::NoAnswerInCards);
            return Ok(());
        }
        let cleaned = messages::strip_card_labels(&raw);
        let (text, kept, dropped) = filter_citations(&cleaned, &retrieval.card_ids());
        p.answer = text;
        p.citations = kept;
        p.dropped = dropped;
        Ok(())
    }
}

/// The first sentence of a card header (lead or claim) that gives an emergency number.
fn emergency_sentence(header: &str) -> Option<String> {
    header
        .lines()
        .map(|l| l.trim().trim_start_matches("- ").trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("+++"))
        .find(|l| l.contains("911") || l.contains("192"))
        .map(str::to_string)
}
