//! What the judge reads: the input of one judgement and the pure prompt builder.
//!
//! Framing per dimension (which cards, and which part of each card):
//!
//! | dimension | cards | part shown |
//! | --- | --- | --- |
//! | groundedness | cited (real) cards | [`Card::header`] only: the facts |
//! | faithfulness | cited (real) cards | [`Card::full_text`]: facts **and rules** (ADR-0029) |
//! | hallucination | every retrieved card | [`Card::header`] only |
//!
//! Cited ids that are not cards of the knowledge base are never shown to the judge; they stay
//! in [`JudgeInput::unknown_cited`] for the record. When no real cited card remains, groundedness
//! and faithfulness are [`NotApplicable`]: the scorers emit **no key** for that case (not a
//! score, not a failure). Citing unknown ids is the business of `citation_correctness`.
//! Hallucination is always applicable: with no retrieved card the judge is told so, and every
//! factual claim counts as unsupported (a plain refusal still scores 5).

use std::collections::HashSet;

use cardinal_kb::{Card, Lang};
use cardinal_llm::Message;
use serde::{Deserialize, Serialize};

use crate::dimension::Dimension;
use crate::rubric::rubric;

/// Everything the judge needs about one case's answer.
#[derive(Debug, Clone)]
pub struct JudgeInput<'a> {
    /// The user's message.
    pub question: &'a str,
    /// The agent's answer.
    pub answer: &'a str,
    /// The language of the answer (the case's language).
    pub lang: Lang,
    /// The cited ids that resolved to real cards, in citation order, without duplicates.
    pub cited: Vec<&'a Card>,
    /// Cited ids that are not cards of the knowledge base, in citation order, without
    /// duplicates. Skipped in the framing; kept for the record.
    pub unknown_cited: Vec<String>,
    /// The retrieved cards (parents), in rank order, without duplicates.
    pub retrieved: Vec<&'a Card>,
}

impl<'a> JudgeInput<'a> {
    /// Build an input by resolving cited ids with `lookup` (for a knowledge base:
    /// `|id| kb.get(id).map(|f| &f.card)`). Unknown ids go to [`JudgeInput::unknown_cited`];
    /// duplicates (cited or retrieved) keep their first occurrence.
    pub fn resolve<S: AsRef<str>>(
        question: &'a str,
        answer: &'a str,
        lang: Lang,
        cited_ids: &[S],
        retrieved: &[&'a Card],
        lookup: impl Fn(&str) -> Option<&'a Card>,
    ) -> Self {
        let mut seen = HashSet::new();
        let mut cited = Vec::new();
        let mut unknown_cited = Vec::new();
        for id in cited_ids {
            let id = id.as_ref();
            if !seen.insert(id.to_string()) {
                continue;
            }
            match lookup(id) {
                Some(card) => cited.push(card),
                None => unknown_cited.push(id.to_string()),
            }
        }
        JudgeInput {
            question,
            answer,
            lang,
            cited,
            unknown_cited,
            retrieved: dedup(retrieved.iter().copied()),
        }
    }
}

/// Why a dimension has no judgement for an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum NotApplicable {
    /// Groundedness and faithfulness are framed with the cited cards, and no cited id is a
    /// real card (nothing cited, or only unknown ids).
    #[error("no cited id is a card of the knowledge base")]
    NoCitedCards,
}

/// Whether `dimension` can be judged on `input`.
pub fn applicability(dimension: Dimension, input: &JudgeInput<'_>) -> Result<(), NotApplicable> {
    if dimension.framed_by_cited_cards() && input.cited.is_empty() {
        Err(NotApplicable::NoCitedCards)
    } else {
        Ok(())
    }
}

/// Build the judge's conversation for one dimension: the dimension's rubric as the system
/// message (a constant), then one user message with the answer's language, the framed cards,
/// the question and the answer. Pure and deterministic.
pub fn build_prompt(
    dimension: Dimension,
    input: &JudgeInput<'_>,
) -> Result<Vec<Message>, NotApplicable> {
    build_prompt_framed(dimension, input, Framing::Standard)
}

/// Which framing a prompt uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Framing {
    /// The dimension's own framing (the table in the module documentation).
    Standard,
    /// The ADR-0029 control: the cited cards' **headers only** (no rules), whatever the
    /// dimension. Used by calibration to measure what reading the rules is worth for
    /// faithfulness; never used to score a sweep.
    HeaderOnlyControl,
}

/// [`build_prompt`] with an explicit [`Framing`]. With [`Framing::HeaderOnlyControl`] the
/// rubric and the rest of the prompt are unchanged; only the card text shown differs.
pub fn build_prompt_framed(
    dimension: Dimension,
    input: &JudgeInput<'_>,
    framing: Framing,
) -> Result<Vec<Message>, NotApplicable> {
    applicability(dimension, input)?;
    let (label, cards, part) = match (dimension, framing) {
        (Dimension::Groundedness | Dimension::Faithfulness, Framing::HeaderOnlyControl) => (
            "Cited cards (factual content only)",
            &input.cited,
            Part::Header,
        ),
        (Dimension::Hallucination, Framing::HeaderOnlyControl) => (
            "Retrieved cards (factual content only)",
            &input.retrieved,
            Part::Header,
        ),
        (dimension, Framing::Standard) => match dimension {
            Dimension::Groundedness => (
                "Cited cards (factual content only)",
                &input.cited,
                Part::Header,
            ),
            Dimension::Faithfulness => (
                "Cited cards (full text, rules included)",
                &input.cited,
                Part::Full,
            ),
            Dimension::Hallucination => (
                "Retrieved cards (factual content only)",
                &input.retrieved,
                Part::Header,
            ),
        },
    };
    let mut user = String::new();
    user.push_str(&format!(
        "Answer language: {} ({}). Judge the content regardless of language.\n\n",
        input.lang.tag(),
        language_name(input.lang)
    ));
    user.push_str(label);
    user.push_str(":\n\n");
    let cards = dedup(cards.iter().copied());
    if cards.is_empty() {
        user.push_str("(no card was retrieved)\n\n");
    }
    for card in cards {
        let body = match part {
            Part::Header => card.header(),
            Part::Full => card.full_text(),
        };
        user.push_str(&format!(
            "<card id=\"{}\">\nTitle: {}\n\n{}\n</card>\n\n",
            card.id,
            card.title,
            body.trim()
        ));
    }
    user.push_str(&format!(
        "<question>\n{}\n</question>\n\n<answer>\n{}\n</answer>\n\n",
        input.question.trim(),
        input.answer.trim()
    ));
    user.push_str(&format!(
        "Score the {} of the answer. Reply with ONLY the JSON object.",
        dimension.name().to_uppercase()
    ));
    Ok(vec![
        Message::system(rubric(dimension)),
        Message::user(user),
    ])
}

#[derive(Clone, Copy)]
enum Part {
    Header,
    Full,
}

/// The English name of a language, for the judge. Exhaustive on purpose: a new [`Lang`] must
/// be named here (and the rubrics reviewed) before it compiles.
pub fn language_name(lang: Lang) -> &'static str {
    match lang {
        Lang::En => "English",
        Lang::Es419 => "Latin-American Spanish",
        Lang::PtBr => "Brazilian Portuguese",
    }
}

fn dedup<'a>(cards: impl Iterator<Item = &'a Card>) -> Vec<&'a Card> {
    let mut seen = HashSet::new();
    cards.filter(|c| seen.insert(c.id.as_str())).collect()
}
