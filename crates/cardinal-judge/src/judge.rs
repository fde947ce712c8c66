//! The judge: one shared, read-only LLM client that scores a dimension on an input.
//!
//! One call per attempt at temperature 0. Unparseable output (see [`crate::parse`]) is retried
//! a bounded number of times ([`DEFAULT_MAX_RETRIES`] extra attempts by default), each retry
//! re-sending the base prompt plus the rejected reply and a short corrective user message. A
//! backend error ([`cardinal_llm::LlmError`]: transport, timeout, HTTP status, malformed
//! response, local runtime) is not retried here — the HTTP client already retries — and ends
//! the judgement as [`JudgeOutcome::Failed`]. A failure is never turned into a score.

use std::sync::Arc;

use cardinal_llm::{ChatModel, FinishReason, GenParams, Message, Role, Usage};
use serde::{Deserialize, Serialize};

use crate::dimension::Dimension;
use crate::parse::{parse_judge_output, ParseError, Score};
use crate::prompt::{build_prompt, JudgeInput, NotApplicable};

/// Extra attempts after an unparseable reply (so at most 3 calls per judgement).
pub const DEFAULT_MAX_RETRIES: u32 = 2;

/// Why a judgement failed. The stable names are what the report counts as `judge_error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Every attempt's reply was rejected by the strict parser.
    Unparseable,
    /// The model call itself failed (any `LlmError`).
    Transport,
}

impl FailureKind {
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Unparseable => "unparseable",
            FailureKind::Transport => "transport",
        }
    }
}

/// The record of one model call, for the artifacts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeCall {
    /// 1-based.
    pub attempt: u32,
    /// [`ChatModel::id`] of the judge model.
    pub model: String,
    /// [`messages_sha256`] of the messages sent.
    pub messages_sha256: String,
    /// The model's reply; `None` when the call failed.
    pub raw: Option<String>,
    pub finish_reason: Option<FinishReason>,
    pub usage: Option<Usage>,
    /// Why the reply was rejected, or why the call failed; `None` when accepted.
    pub error: Option<String>,
}

/// The result of judging one dimension on one input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum JudgeOutcome {
    /// A verdict was parsed.
    Scored {
        score: Score,
        rationale: String,
        /// Model calls made (1 = first try).
        attempts: u32,
        /// The accepted reply, verbatim.
        raw: String,
        calls: Vec<JudgeCall>,
    },
    /// No verdict: record as `judge_error`, never as a score.
    Failed {
        kind: FailureKind,
        message: String,
        attempts: u32,
        /// Every reply received (rejected ones), verbatim, in order.
        raw_outputs: Vec<String>,
        calls: Vec<JudgeCall>,
    },
    /// The dimension does not apply to this input: no key, no model call.
    NotApplicable { reason: NotApplicable },
}

impl JudgeOutcome {
    /// The score, when scored.
    pub fn score(&self) -> Option<Score> {
        match self {
            JudgeOutcome::Scored { score, .. } => Some(*score),
            _ => None,
        }
    }

    pub fn is_failed(&self) -> bool {
        matches!(self, JudgeOutcome::Failed { .. })
    }

    /// Model calls made (0 when not applicable).
    pub fn attempts(&self) -> u32 {
        match self {
            JudgeOutcome::Scored { attempts, .. } | JudgeOutcome::Failed { attempts, .. } => {
                *attempts
            }
            JudgeOutcome::NotApplicable { .. } => 0,
        }
    }

    pub fn calls(&self) -> &[JudgeCall] {
        match self {
            JudgeOutcome::Scored { calls, .. } | JudgeOutcome::Failed { calls, .. } => calls,
            JudgeOutcome::NotApplicable { .. } => &[],
        }
    }
}

/// The LLM judge. Read-only and cheap to share (`&self` everywhere; `Send + Sync`).
#[derive(Clone)]
pub struct Judge {
    model: Arc<dyn ChatModel>,
    params: GenParams,
    max_retries: u32,
}

impl std::fmt::Debug for Judge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Judge")
            .field("model", &self.model.id())
            .field("params", &self.params)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

impl Judge {
    /// A judge on `model` with greedy decoding (temperature 0, the [`GenParams`] defaults
    /// otherwise) and [`DEFAULT_MAX_RETRIES`].
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Judge {
            model,
            params: GenParams {
                temperature: 0.0,
                ..GenParams::default()
            },
            max_retries: DEFAULT_MAX_RETRIES,
        }
    }

    /// Extra attempts after an unparseable reply.
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Token budget of one reply. The temperature stays 0.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.params.max_tokens = max_tokens;
        self
    }

    pub fn model_id(&self) -> String {
        self.model.id()
    }

    pub fn params(&self) -> &GenParams {
        &self.params
    }

    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// Judge one dimension on one input.
    pub fn score(&self, dimension: Dimension, input: &JudgeInput<'_>) -> JudgeOutcome {
        match build_prompt(dimension, input) {
            Ok(messages) => self.score_messages(&messages),
            Err(reason) => JudgeOutcome::NotApplicable { reason },
        }
    }

    /// Run the call/parse/retry loop on a prompt built by [`build_prompt`].
    pub fn score_messages(&self, base: &[Message]) -> JudgeOutcome {
        let model = self.model.id();
        let mut calls = Vec::new();
        let mut raw_outputs = Vec::new();
        let mut messages = base.to_vec();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let hash = messages_sha256(&messages);
            let completion = match self.model.complete(&messages, &self.params) {
                Ok(c) => c,
                Err(e) => {
                    let message = e.to_string();
                    calls.push(JudgeCall {
                        attempt,
                        model,
                        messages_sha256: hash,
                        raw: None,
                        finish_reason: None,
                        usage: None,
                        error: Some(message.clone()),
                    });
                    return JudgeOutcome::Failed {
                        kind: FailureKind::Transport,
                        message,
                        attempts: attempt,
                        raw_outputs,
                        calls,
                    };
                }
            };
            let raw = completion.text;
            let parsed = parse_judge_output(&raw);
            calls.push(JudgeCall {
                attempt,
                model: model.clone(),
                messages_sha256: hash,
                raw: Some(raw.clone()),
                finish_reason: Some(completion.finish_reason),
                usage: Some(completion.usage),
                error: parsed.as_ref().err().map(ToString::to_string),
            });
            match parsed {
                Ok(verdict) => {
                    return JudgeOutcome::Scored {
                        score: verdict.score,
                        rationale: verdict.rationale,
                        attempts: attempt,
                        raw,
                        calls,
                    }
                }
                Err(err) => {
                    raw_outputs.push(raw.clone());
                    if attempt > self.max_retries {
                        return JudgeOutcome::Failed {
                            kind: FailureKind::Unparseable,
                            message: format!(
                                "no parseable verdict after {attempt} attempt(s); last error: {err}"
                            ),
                            attempts: attempt,
                            raw_outputs,
                            calls,
                        };
                    }
                    // Retry from the base prompt with only the latest rejected reply, so the
                    // conversation stays bounded and shares the base prefix.
                    messages = base.to_vec();
                    messages.push(Message::assistant(raw));
                    messages.push(Message::user(correction(&err)));
                }
            }
        }
    }
}

/// The corrective user message sent after a rejected reply.
pub fn correction(err: &ParseError) -> String {
    format!(
        "Your previous reply could not be accepted: {err}. Reply again with ONLY one JSON object \
of the form {{\"score\": <integer 1-5>, \"rationale\": \"<one or two sentences, in English>\"}} \
and nothing else."
    )
}

/// SHA-256 (lower-case hex) over the messages: for each, the framed parts role name, content
/// length in bytes (u64, little-endian) and content.
pub fn messages_sha256(messages: &[Message]) -> String {
    let mut d = cardinal_digest::Digest::new();
    for m in messages {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        d.push(role);
        d.push((m.content.len() as u64).to_le_bytes());
        d.push(&m.content);
    }
    d.hex()
}
