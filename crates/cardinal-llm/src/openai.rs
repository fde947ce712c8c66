//! A client for any OpenAI-compatible `POST {base_url}/chat/completions` endpoint (vLLM, Ollama,
//! llama.cpp server, hosted APIs).
//!
//! * The base URL follows the OpenAI SDK convention: it ends with the API version, e.g.
//!   `http://127.0.0.1:8000/v1` (vLLM), `http://localhost:11434/v1` (Ollama),
//!   `https://api.openai.com/v1`. The client appends `/chat/completions`.
//! * The API key is read once, when the client is built, from the environment variable named by
//!   [`OpenAiConfig::api_key_env`] (default `OPENAI_API_KEY`). Absent or empty: no
//!   `Authorization` header (local servers). The key is never printed.
//! * Retries, with exponential backoff and jitter, on HTTP 429 (honouring `Retry-After` in
//!   seconds, capped by [`OpenAiConfig::max_retry_after`]), HTTP 5xx, timeouts, connection errors
//!   and bodies cut short. No retry on any other status (400, 401, 404, ...) nor on a well-formed
//!   HTTP answer that is not a chat completion.
//! * At most [`OpenAiConfig::max_concurrency`] requests are in flight at once across all clones
//!   of one client (a permit is held for one attempt, not during the backoff sleep).
//! * The answer is parsed strictly: malformed JSON, no choices, absent or empty content, a
//!   truncated body are typed [`LlmError`]s naming the endpoint and the attempt count.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

use crate::{ChatModel, Completion, FinishReason, GenParams, LlmError, Message, Result, Usage};

/// The default environment variable holding the API key.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";
/// The default number of retries after the first attempt.
pub const DEFAULT_MAX_RETRIES: u32 = 4;

/// The largest response body read (a chat completion is a few kilobytes).
const MAX_BODY_BYTES: u64 = 16 * 1024 * 1024;
/// How much of an error body is quoted in [`LlmError::Status`].
const ERROR_BODY_CHARS: usize = 500;

/// Settings of an [`OpenAiClient`]. Build with [`OpenAiConfig::new`] and adjust the fields.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// Base URL including the version segment, e.g. `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    /// The `model` field sent to the server.
    pub model: String,
    /// The NAME of the environment variable holding the API key.
    pub api_key_env: String,
    /// Deadline of one attempt, from connecting to the last byte of the body.
    pub request_timeout: Duration,
    /// Deadline for establishing the TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Retries after the first attempt (so at most `max_retries + 1` requests per call).
    pub max_retries: u32,
    /// Backoff before the first retry; doubles on every further retry, with jitter.
    pub base_backoff: Duration,
    /// Upper bound of one backoff.
    pub max_backoff: Duration,
    /// Upper bound of a wait asked by a `Retry-After` header.
    pub max_retry_after: Duration,
    /// Requests in flight at once, shared by all clones of one client. At least 1.
    pub max_concurrency: usize,
    /// Use `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` (and `NO_PROXY`) from the environment.
    pub proxy_from_env: bool,
}

impl OpenAiConfig {
    /// Defaults: key from `OPENAI_API_KEY`, 120 s request timeout, 10 s connect timeout,
    /// 4 retries from a 500 ms backoff (capped at 30 s), `Retry-After` capped at 60 s,
    /// 4 concurrent requests, proxies from the environment.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: DEFAULT_API_KEY_ENV.to_string(),
            request_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            max_retries: DEFAULT_MAX_RETRIES,
            base_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            max_concurrency: 4,
            proxy_from_env: true,
        }
    }
}

/// An OpenAI-compatible chat-completion client. Cheap to clone; clones share the connection
/// pool and the concurrency bound.
#[derive(Clone)]
pub struct OpenAiClient {
    inner: Arc<Inner>,
}

struct Inner {
    config: OpenAiConfig,
    endpoint: String,
    api_key: Option<String>,
    agent: ureq::Agent,
    permits: Semaphore,
    rng: AtomicU64,
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("endpoint", &self.inner.endpoint)
            .field("model", &self.inner.config.model)
            .field(
                "api_key",
                &self.inner.api_key.as_ref().map(|_| "<redacted>"),
            )
            .finish_non_exhaustive()
    }
}

impl OpenAiClient {
    /// Build a client; reads the API key from the configured environment variable now.
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        let base = config.base_url.trim().trim_end_matches('/');
        let Some(rest) = base
            .strip_prefix("http://")
            .or_else(|| base.strip_prefix("https://"))
        else {
            return Err(LlmError::Config(format!(
                "OpenAI-compatible base URL must start with http:// or https://, got {:?}",
                config.base_url
            )));
        };
        if rest.is_empty() || rest.starts_with('/') || rest.starts_with(':') {
            return Err(LlmError::Config(format!(
                "OpenAI-compatible base URL has no host: {:?}",
                config.base_url
            )));
        }
        if config.model.trim().is_empty() {
            return Err(LlmError::Config(
                "OpenAI-compatible model name is empty".into(),
            ));
        }
        if config.max_concurrency == 0 {
            return Err(LlmError::Config(
                "max_concurrency must be at least 1".into(),
            ));
        }
        if config.request_timeout.is_zero() || config.connect_timeout.is_zero() {
            return Err(LlmError::Config("timeouts must be positive".into()));
        }
        let endpoint = format!("{base}/chat/completions");
        let api_key = std::env::var(&config.api_key_env)
            .ok()
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty());

        let mut builder = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(config.request_timeout))
            .timeout_connect(Some(config.connect_timeout))
            .max_redirects(0)
            .max_redirects_will_error(false)
            .user_agent(concat!("cardinal-llm/", env!("CARGO_PKG_VERSION")));
        if !config.proxy_from_env {
            builder = builder.proxy(None);
        }
        let agent = ureq::Agent::new_with_config(builder.build());

        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x5eed)
            ^ (std::process::id() as u64).rotate_left(32);
        let permits = Semaphore::new(config.max_concurrency);
        Ok(OpenAiClient {
            inner: Arc::new(Inner {
                config,
                endpoint,
                api_key,
                agent,
                permits,
                rng: AtomicU64::new(seed),
            }),
        })
    }

    /// The full URL requests go to (`{base_url}/chat/completions`).
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// The settings this client was built with.
    pub fn config(&self) -> &OpenAiConfig {
        &self.inner.config
    }

    /// Whether an API key was found (the key itself is not exposed).
    pub fn has_api_key(&self) -> bool {
        self.inner.api_key.is_some()
    }

    /// The JSON request body sent for these messages and parameters.
    pub fn request_body(&self, messages: &[Message], params: &GenParams) -> Result<Vec<u8>> {
        let request = ChatRequest {
            model: &self.inner.config.model,
            messages,
            temperature: params.temperature,
            max_tokens: params.max_tokens,
            seed: params.seed,
            stop: if params.stop.is_empty() {
                None
            } else {
                Some(&params.stop)
            },
            stream: false,
        };
        serde_json::to_vec(&request)
            .map_err(|e| LlmError::Config(format!("cannot serialise the chat request: {e}")))
    }

    fn attempt(&self, body: &[u8]) -> std::result::Result<Vec<u8>, Failure> {
        let inner = &*self.inner;
        let mut request = inner
            .agent
            .post(&inner.endpoint)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json");
        if let Some(key) = &inner.api_key {
            request = request.header("Authorization", format!("Bearer {key}"));
        }
        let mut response = request.send(body).map_err(Failure::from_send)?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_vec();
        if !(200..300).contains(&status) {
            let body = match bytes {
                Ok(b) => snippet(&String::from_utf8_lossy(&b), ERROR_BODY_CHARS),
                Err(e) => format!("<body unreadable: {e}>"),
            };
            return Err(Failure::Status {
                status,
                body,
                retry_after,
            });
        }
        bytes.map_err(Failure::from_body)
    }

    fn backoff(&self, retry: u32) -> Duration {
        let cfg = &self.inner.config;
        let factor = 1u32
            .checked_shl(retry.saturating_sub(1))
            .unwrap_or(u32::MAX);
        let exp = cfg
            .base_backoff
            .checked_mul(factor)
            .unwrap_or(cfg.max_backoff)
            .min(cfg.max_backoff);
        // "Equal jitter": half fixed, half uniform, so retries of parallel callers spread out
        // while the delay still grows.
        let half = exp / 2;
        let span = half.as_nanos().min(u64::MAX as u128) as u64;
        let jitter = if span == 0 {
            0
        } else {
            self.next_random() % (span + 1)
        };
        half + Duration::from_nanos(jitter)
    }

    /// SplitMix64 over a shared atomic counter: tiny, lock-free, good enough for jitter.
    fn next_random(&self) -> u64 {
        let mut z = self
            .inner
            .rng
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl ChatModel for OpenAiClient {
    fn id(&self) -> String {
        format!(
            "openai:{}@{}",
            self.inner.config.model,
            self.inner.config.base_url.trim().trim_end_matches('/')
        )
    }

    fn complete(&self, messages: &[Message], params: &GenParams) -> Result<Completion> {
        if messages.is_empty() {
            return Err(LlmError::Config(format!(
                "no messages to send to {}",
                self.inner.endpoint
            )));
        }
        if !params.temperature.is_finite() || params.temperature < 0.0 {
            return Err(LlmError::Config(format!(
                "temperature must be a finite number >= 0, got {}",
                params.temperature
            )));
        }
        let body = self.request_body(messages, params)?;
        self.with_retries(&body, parse_completion)
    }
}

impl OpenAiClient {
    /// Send `body`, retrying what is worth retrying (timeouts, transport, truncation, 429 and
    /// 5xx with backoff and Retry-After), and parse a 2xx body with `parse`.
    fn with_retries<T>(
        &self,
        body: &[u8],
        parse: impl Fn(&[u8]) -> std::result::Result<T, String>,
    ) -> Result<T> {
        let max_attempts = self.inner.config.max_retries.saturating_add(1);
        let mut attempts = 0u32;
        let started = std::time::Instant::now();
        loop {
            attempts += 1;
            let outcome = {
                let _permit = self.inner.permits.acquire();
                self.attempt(body)
                    .and_then(|bytes| parse(&bytes).map_err(Failure::Malformed))
            };
            let failure = match outcome {
                Ok(v) => return Ok(v),
                Err(f) => f,
            };
            if !failure.retryable() || attempts >= max_attempts {
                let mut err = failure.into_error(&self.inner.endpoint, attempts);
                if let LlmError::Timeout {
                    elapsed_secs,
                    attempt_secs,
                    bound_secs,
                    ..
                } = &mut err
                {
                    let c = &self.inner.config;
                    let attempt = c.request_timeout + c.connect_timeout;
                    let wait = c.max_backoff.max(c.max_retry_after);
                    *elapsed_secs = started.elapsed().as_secs_f64();
                    *attempt_secs = attempt.as_secs_f64();
                    *bound_secs = attempt.as_secs_f64() * f64::from(max_attempts)
                        + wait.as_secs_f64() * f64::from(max_attempts - 1);
                }
                return Err(err);
            }
            let wait = match failure.retry_after() {
                Some(asked) => asked.min(self.inner.config.max_retry_after),
                None => self.backoff(attempts),
            };
            std::thread::sleep(wait);
        }
    }
}

/// Yes/No checks over an OpenAI-compatible endpoint: one request per check with
/// `max_tokens: 1`, `logprobs: true`, `top_logprobs: 20`; P(Yes) comes from the first token's
/// top log-probabilities. An endpoint that returns no log-probabilities but a one-token reply
/// "Yes" or "No" gives p = 1 or 0 (mass unknown); anything else is an error, never a score.
impl crate::probe::YesNoModel for OpenAiClient {
    fn id(&self) -> String {
        ChatModel::id(self)
    }

    fn yes_no(&self, messages: &[Message], checks: &[String]) -> Result<Vec<crate::probe::YesNo>> {
        let Some((last, head)) = messages.split_last() else {
            return Err(LlmError::Config("no messages for a yes/no check".into()));
        };
        checks
            .iter()
            .map(|check| {
                let mut msgs: Vec<Message> = head.to_vec();
                let mut m = last.clone();
                m.content.push_str(check);
                msgs.push(m);
                let body = serde_json::to_vec(&serde_json::json!({
                    "model": self.inner.config.model,
                    "messages": msgs,
                    "temperature": 0.0,
                    "max_tokens": 1,
                    "logprobs": true,
                    "top_logprobs": 20,
                    "stream": false,
                }))
                .map_err(|e| LlmError::Config(format!("cannot serialise the request: {e}")))?;
                self.with_retries(&body, parse_yes_no)
            })
            .collect()
    }
}

/// Read a yes/no answer from a chat-completion body (see the `YesNoModel` impl).
pub fn parse_yes_no(bytes: &[u8]) -> std::result::Result<crate::probe::YesNo, String> {
    use crate::probe::{from_logprobs, YesNo};
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        format!(
            "response is not JSON ({e}): {}",
            snippet(&String::from_utf8_lossy(bytes), 200)
        )
    })?;
    if let Some(err) = value.get("error").filter(|e| !e.is_null()) {
        return Err(format!(
            "server reported an error: {}",
            snippet(&err.to_string(), 300)
        ));
    }
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| "no `choices[0]` in response".to_string())?;
    let norm = |s: &str| {
        s.trim()
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    };
    let top = choice
        .pointer("/logprobs/content/0/top_logprobs")
        .and_then(Value::as_array);
    if let Some(top) = top {
        let mut yes = Vec::new();
        let mut no = Vec::new();
        let mut all = Vec::new();
        for t in top {
            let (Some(tok), Some(lp)) = (
                t.get("token").and_then(Value::as_str),
                t.get("logprob").and_then(Value::as_f64),
            ) else {
                continue;
            };
            all.push(lp);
            match norm(tok).as_str() {
                "yes" => yes.push(lp),
                "no" => no.push(lp),
                _ => {}
            }
        }
        // Log-probabilities are already normalised over the whole vocabulary: log Z = 0.
        if let Some(v) = from_logprobs(&yes, &no, 0.0) {
            return Ok(v);
        }
        if !all.is_empty() {
            return Err("neither Yes nor No among the first token's top log-probabilities".into());
        }
    }
    let text = choice
        .pointer("/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| "no log-probabilities and no reply text".to_string())?;
    match norm(text).as_str() {
        "yes" => Ok(YesNo {
            p_yes: 1.0,
            mass: None,
        }),
        "no" => Ok(YesNo {
            p_yes: 0.0,
            mass: None,
        }),
        other => Err(format!(
            "no log-probabilities and the reply {:?} is neither Yes nor No",
            snippet(other, 40)
        )),
    }
}

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: &'a [Message],
    temperature: f32,
    max_tokens: u32,
    seed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop: Option<&'a Vec<String>>,
    stream: bool,
}

/// Why one attempt failed.
#[derive(Debug)]
enum Failure {
    /// A deadline passed (connect or the whole request).
    Timeout,
    /// Connecting or exchanging failed; worth another try.
    Transport(String),
    /// A failure that another try will not fix (bad URL, TLS, DNS).
    Fatal(String),
    /// The server answered a non-2xx status.
    Status {
        status: u16,
        body: String,
        retry_after: Option<Duration>,
    },
    /// The body was cut short.
    Truncated(String),
    /// A complete 2xx answer that is not a chat completion.
    Malformed(String),
}

impl Failure {
    fn from_send(e: ureq::Error) -> Failure {
        match e {
            ureq::Error::Timeout(_) => Failure::Timeout,
            ureq::Error::Io(io) if is_timeout(&io) => Failure::Timeout,
            ureq::Error::Io(io) => Failure::Transport(io.to_string()),
            ureq::Error::ConnectionFailed => Failure::Transport("connection failed".into()),
            ureq::Error::Protocol(p) => Failure::Transport(format!("HTTP protocol error: {p}")),
            ureq::Error::HostNotFound => Failure::Fatal("host not found".into()),
            other => Failure::Fatal(other.to_string()),
        }
    }

    fn from_body(e: ureq::Error) -> Failure {
        match e {
            ureq::Error::Timeout(_) => Failure::Timeout,
            ureq::Error::Io(io) if is_timeout(&io) => Failure::Timeout,
            ureq::Error::BodyExceedsLimit(n) => {
                Failure::Malformed(format!("response body larger than {n} bytes"))
            }
            other => Failure::Truncated(format!("body cut short: {other}")),
        }
    }

    fn retryable(&self) -> bool {
        match self {
            Failure::Timeout | Failure::Transport(_) | Failure::Truncated(_) => true,
            Failure::Status { status, .. } => *status == 429 || (500..600).contains(status),
            Failure::Fatal(_) | Failure::Malformed(_) => false,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Failure::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    fn into_error(self, endpoint: &str, attempts: u32) -> LlmError {
        let endpoint = endpoint.to_string();
        match self {
            Failure::Timeout => LlmError::Timeout {
                endpoint,
                attempts,
                // Filled in by the retry loop, which knows the clock and the settings.
                elapsed_secs: 0.0,
                attempt_secs: 0.0,
                bound_secs: 0.0,
            },
            Failure::Transport(m) | Failure::Fatal(m) => LlmError::Transport {
                endpoint,
                message: format!("{m} (after {attempts} attempt(s))"),
            },
            Failure::Status { status, body, .. } => LlmError::Status {
                endpoint,
                status,
                attempts,
                body,
            },
            Failure::Truncated(message) => LlmError::Truncated {
                endpoint,
                attempts,
                message,
            },
            Failure::Malformed(m) => LlmError::Malformed {
                endpoint,
                message: format!("{m} (attempt {attempts})"),
            },
        }
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

/// `Retry-After` as delay-seconds. An HTTP-date is not honoured (the normal backoff applies).
fn parse_retry_after(v: &str) -> Option<Duration> {
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

fn snippet(s: &str, max_chars: usize) -> String {
    let s = s.trim();
    match s.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

/// Parse a chat-completion response body strictly.
pub fn parse_completion(bytes: &[u8]) -> std::result::Result<Completion, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err("empty response body".into());
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        format!(
            "response is not JSON ({e}): {}",
            snippet(&String::from_utf8_lossy(bytes), 200)
        )
    })?;
    let obj = value
        .as_object()
        .ok_or_else(|| "response is not a JSON object".to_string())?;
    if let Some(err) = obj.get("error").filter(|e| !e.is_null()) {
        return Err(format!(
            "server reported an error: {}",
            snippet(&err.to_string(), 300)
        ));
    }
    let choices = obj
        .get("choices")
        .ok_or_else(|| "no `choices` in response".to_string())?
        .as_array()
        .ok_or_else(|| "`choices` is not an array".to_string())?;
    let choice = choices
        .first()
        .ok_or_else(|| "`choices` is empty".to_string())?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| "`choices[0].message` is absent or not an object".to_string())?;
    let text = match message.get("content") {
        None | Some(Value::Null) => {
            return Err("`choices[0].message.content` is absent".into());
        }
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("`choices[0].message.content` is not a string".into()),
    };
    if text.trim().is_empty() {
        return Err("`choices[0].message.content` is empty".into());
    }
    let finish_reason = match choice.get("finish_reason") {
        None | Some(Value::Null) => FinishReason::Other,
        Some(Value::String(s)) => match s.as_str() {
            "stop" | "eos" | "stop_sequence" => FinishReason::Stop,
            "length" | "max_tokens" => FinishReason::Length,
            _ => FinishReason::Other,
        },
        Some(_) => return Err("`choices[0].finish_reason` is not a string".into()),
    };
    let usage = match obj.get("usage") {
        None | Some(Value::Null) => Usage::default(),
        Some(Value::Object(u)) => Usage {
            prompt_tokens: token_count(u, "prompt_tokens")?,
            completion_tokens: token_count(u, "completion_tokens")?,
        },
        Some(_) => return Err("`usage` is not an object".into()),
    };
    Ok(Completion {
        text,
        finish_reason,
        usage,
    })
}

fn token_count(
    usage: &serde_json::Map<String, Value>,
    field: &str,
) -> std::result::Result<u32, String> {
    let v = usage
        .get(field)
        .ok_or_else(|| format!("`usage.{field}` is absent"))?;
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| format!("`usage.{field}` is not a token count: {v}"))
}

/// A counting semaphore (std has none).
struct Semaphore {
    free: Mutex<usize>,
    freed: Condvar,
}

struct Permit<'a>(&'a Semaphore);

impl Semaphore {
    fn new(permits: usize) -> Self {
        Semaphore {
            free: Mutex::new(permits),
            freed: Condvar::new(),
        }
    }

    fn acquire(&self) -> Permit<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut free = self.0.free.lock().unwrap_or_else(|p| p.into_inner());
        *free += 1;
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_completion() {
        let body = br#"{"choices":[{"message":{"role":"assistant","content":"Hi"},"finish_reason":"length"}],
                        "usage":{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8}}"#;
        let c = parse_completion(body).unwrap();
        assert_eq!(c.text, "Hi");
        assert_eq!(c.finish_reason, FinishReason::Length);
        assert_eq!(
            c.usage,
            Usage {
                prompt_tokens: 7,
                completion_tokens: 1
            }
        );
    }

    #[test]
    fn rejects_what_is_not_a_completion() {
        for bad in [
            &b""[..],
            b"   ",
            b"not json",
            b"[1,2]",
            br#"{"choices":[]}"#,
            br#"{"choices":{}}"#,
            br#"{"object":"chat.completion"}"#,
            br#"{"choices":[{"message":{"role":"assistant"}}]}"#,
            br#"{"choices":[{"message":{"content":null}}]}"#,
            br#"{"choices":[{"message":{"content":"  "}}]}"#,
            br#"{"choices":[{"message":{"content":42}}]}"#,
            br#"{"choices":[{"message":{"content":"x"},"finish_reason":3}]}"#,
            br#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":-1,"completion_tokens":1}}"#,
            br#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":1}}"#,
            br#"{"error":{"message":"overloaded"}}"#,
            br#"{"choices":[{"message":{"content":"x"}}"#,
        ] {
            assert!(
                parse_completion(bad).is_err(),
                "accepted {}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn usage_may_be_absent() {
        let c = parse_completion(br#"{"choices":[{"message":{"content":"x"}}]}"#).unwrap();
        assert_eq!(c.usage, Usage::default());
        assert_eq!(c.finish_reason, FinishReason::Other);
    }

    #[test]
    fn retry_after_seconds_only() {
        assert_eq!(parse_retry_after(" 3 "), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn backoff_grows_is_jittered_and_capped() {
        let mut cfg = OpenAiConfig::new("http://127.0.0.1:9/v1", "m");
        cfg.base_backoff = Duration::from_millis(100);
        cfg.max_backoff = Duration::from_millis(1000);
        let client = OpenAiClient::new(cfg).unwrap();
        for _ in 0..50 {
            let b1 = client.backoff(1);
            assert!(b1 >= Duration::from_millis(50) && b1 <= Duration::from_millis(100));
            let b3 = client.backoff(3);
            assert!(b3 >= Duration::from_millis(200) && b3 <= Duration::from_millis(400));
            let b30 = client.backoff(30);
            assert!(b30 >= Duration::from_millis(500) && b30 <= Duration::from_millis(1000));
        }
        let draws: std::collections::HashSet<_> = (0..20).map(|_| client.backoff(5)).collect();
        assert!(draws.len() > 1, "no jitter");
    }

    #[test]
    fn rejects_bad_configs() {
        assert!(OpenAiClient::new(OpenAiConfig::new("127.0.0.1:8000/v1", "m")).is_err());
        assert!(OpenAiClient::new(OpenAiConfig::new("http://", "m")).is_err());
        assert!(OpenAiClient::new(OpenAiConfig::new("http://h/v1", " ")).is_err());
        let mut cfg = OpenAiConfig::new("http://h/v1", "m");
        cfg.max_concurrency = 0;
        assert!(OpenAiClient::new(cfg).is_err());
    }

    #[test]
    fn endpoint_and_id() {
        let client = OpenAiClient::new(OpenAiConfig::new("http://h:1/v1/", "qwen")).unwrap();
        assert_eq!(client.endpoint(), "http://h:1/v1/chat/completions");
        assert_eq!(client.id(), "openai:qwen@http://h:1/v1");
    }
}
