//! The LLM-judge scorers of Cardinal: groundedness, faithfulness (ADR-0029) and hallucination.
//!
//! The scorers differ only in rubric and framing; the [`Judge`] itself is shared and read-only.
//!
//! - [`rubric`]: the committed rubrics, one `const` system message per [`Dimension`].
//! - [`prompt`]: [`JudgeInput`] and the pure [`build_prompt`] (which cards, which part of each).
//! - [`parse`]: the strict [`parse_judge_output`] (one JSON object `{"score", "rationale"}`).
//! - [`judge`]: the call/parse/retry loop and the [`JudgeOutcome`] kept in the artifacts.
//! - [`checks`]: judge v2, yes/no checks read from token probabilities (`checks-v1`, `checks-v2`).
//! - [`probe`]: `probe-v1`, a linear probe on the judge model's hidden state, and its pure fit.
//!
//! A judgement is [`JudgeOutcome::Scored`], [`JudgeOutcome::Failed`] (record `judge_error`, never
//! a score) or [`JudgeOutcome::NotApplicable`] (no key: groundedness and faithfulness when no
//! cited id is a real card).

pub mod checks;
pub mod dimension;
pub mod evidence;
pub mod judge;
pub mod parse;
pub mod probe;
pub mod prompt;
pub mod rubric;

pub use dimension::{Dimension, UnknownDimension};
pub use judge::{
    correction, messages_sha256, FailureKind, Judge, JudgeCall, JudgeOutcome, DEFAULT_MAX_RETRIES,
};
pub use parse::{parse_judge_output, JudgeVerdict, ParseError, Score};
pub use prompt::{
    applicability, build_prompt, build_prompt_framed, language_name, Framing, JudgeInput,
    NotApplicable,
};
