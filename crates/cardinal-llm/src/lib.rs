//! Chat completion behind one trait ([`ChatModel`]); backends live in their own modules.
//!
//! * [`openai`]: [`OpenAiClient`], any OpenAI-compatible `/v1/chat/completions` server.
//! * [`cache`]: [`CachedModel`], a content-addressed on-disk response cache over any model.
//! * `testing` (cargo feature `testing`): a scripted OpenAI-compatible server and a counting
//!   fake model for tests.

pub mod cache;
pub mod error;
pub mod openai;
pub mod probe;
#[cfg(feature = "testing")]
pub mod testing;

pub use cache::{CacheMode, CacheStats, CachedModel};
pub use error::{LlmError, Result};
pub use openai::{OpenAiClient, OpenAiConfig};
pub use probe::{CachedYesNo, YesNo, YesNoModel};

use serde::{Deserialize, Serialize};

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Message {
            role: Role::System,
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Message {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// Generation parameters. The default is greedy decoding (temperature 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenParams {
    pub temperature: f32,
    pub max_tokens: u32,
    pub seed: u64,
    pub stop: Vec<String>,
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams {
            temperature: 0.0,
            max_tokens: 256,
            seed: 42,
            stop: Vec::new(),
        }
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    Length,
    Other,
}

/// Token counts of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub text: String,
    pub finish_reason: FinishReason,
    pub usage: Usage,
}

/// A chat-completion backend. Implementations are shared read-only (`&self`), so one model
/// can serve the agent and the judge.
pub trait ChatModel: Send + Sync {
    /// A stable identity (backend + model), used in cache keys and reports.
    fn id(&self) -> String;

    /// Complete a conversation.
    fn complete(&self, messages: &[Message], params: &GenParams) -> Result<Completion>;
}

impl<T: ChatModel + ?Sized> ChatModel for std::sync::Arc<T> {
    fn id(&self) -> String {
        (**self).id()
    }

    fn complete(&self, messages: &[Message], params: &GenParams) -> Result<Completion> {
        (**self).complete(messages, params)
    }
}

impl<T: ChatModel + ?Sized> ChatModel for Box<T> {
    fn id(&self) -> String {
        (**self).id()
    }

    fn complete(&self, messages: &[Message], params: &GenParams) -> Result<Completion> {
        (**self).complete(messages, params)
    }
}
