/// Errors of chat-completion backends.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The transport failed (connection refused, reset, DNS, TLS).
    #[error("transport error talking to {endpoint}: {message}")]
    Transport { endpoint: String, message: String },
    /// No answer within the deadline, after retries.
    #[error(
        "timed out after {attempts} attempt(s) talking to {endpoint}, {elapsed_secs:.1} s in all \
         (one attempt may take {attempt_secs:.1} s and a call at most {bound_secs:.1} s: \
         --request-timeout, --connect-timeout, --attempts, --max-backoff)"
    )]
    Timeout {
        endpoint: String,
        attempts: u32,
        /// Time spent on the call, retries and waits included.
        elapsed_secs: f64,
        /// The deadline of one attempt (connect + request).
        attempt_secs: f64,
        /// The most a call can take with these settings: every attempt to its deadline plus
        /// the longest wait between attempts.
        bound_secs: f64,
    },
    /// The server answered with an error status, after retries where they apply.
    #[error("{endpoint} answered HTTP {status} after {attempts} attempt(s): {body}")]
    Status {
        endpoint: String,
        status: u16,
        attempts: u32,
        body: String,
    },
    /// The server answered something that is not a chat completion.
    #[error("malformed response from {endpoint}: {message}")]
    Malformed { endpoint: String, message: String },
    /// The response body ended before the length the server announced (or the connection broke
    /// while it was being read), after retries.
    #[error("truncated response from {endpoint} after {attempts} attempt(s): {message}")]
    Truncated {
        endpoint: String,
        attempts: u32,
        message: String,
    },
    /// The local model failed to load or run.
    #[error("local model error: {0}")]
    Local(String),
    /// The response cache could not be read or written.
    #[error("response cache error at {path}: {message}")]
    Cache { path: String, message: String },
    #[error("configuration error: {0}")]
    Config(String),
}

pub type Result<T, E = LlmError> = std::result::Result<T, E>;
