//! Test doubles (cargo feature `testing`): a scripted OpenAI-compatible HTTP server and a
//! counting fake [`ChatModel`].
//!
//! [`ScriptedServer`] listens on `127.0.0.1` at a random port and answers the N-th connection
//! with the N-th [`ScriptedResponse`] (one request per connection; every answer carries
//! `Connection: close`). Once the script is used up, or after its lifetime (300 s by default),
//! it stops listening, so an extra request is refused. The lifetime is only a bound for a test
//! that hangs: [`ScriptedServer::finish`] and dropping the server stop it at once, and a test
//! that drives the whole binary (model loading included) can take well over 30 s on a slow
//! 2-core machine. Every loop is bounded: accepting polls against the lifetime, sockets have
//! read and write timeouts, hangs have a maximum.
//!
//! ```ignore
//! let (server, base_url) = ScriptedServer::start(vec![
//!     ScriptedResponse::status(500, "boom"),
//!     ScriptedResponse::completion("Hello"),
//! ])?;
//! let client = OpenAiClient::new(OpenAiConfig::new(base_url, "m"))?;
//! // ...
//! assert_eq!(server.requests().len(), 2);
//! ```

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{ChatModel, Completion, FinishReason, GenParams, LlmError, Message, Result, Usage};

const MAX_HEAD_BYTES: usize = 64 * 1024;
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
const SOCKET_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct ScriptedResponse {
    action: Action,
    delay: Duration,
}

#[derive(Debug, Clone)]
enum Action {
    Http {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        /// `Content-Length` to announce instead of the body's length.
        declared_len: Option<usize>,
    },
    /// Read the request, answer nothing; close when the client does or after `max`.
    Hang { max: Duration },
    /// Read the request and close the connection without an answer.
    Close,
}

impl ScriptedResponse {
    /// An HTTP answer with a JSON content type.
    pub fn json(status: u16, body: impl Into<String>) -> Self {
        ScriptedResponse {
            action: Action::Http {
                status,
                headers: vec![("Content-Type".into(), "application/json".into())],
                body: body.into().into_bytes(),
                declared_len: None,
            },
            delay: Duration::ZERO,
        }
    }

    /// An error status with a plain-text or JSON body.
    pub fn status(status: u16, body: impl Into<String>) -> Self {
        Self::json(status, body)
    }

    /// HTTP 200 with a valid chat completion answering `text` (finish reason `stop`, usage
    /// 10 prompt + 5 completion tokens).
    pub fn completion(text: &str) -> Self {
        Self::json(200, completion_body(text, "stop", 10, 5))
    }

    /// HTTP 200 with a one-token answer whose first-token top log-probabilities give
    /// P(Yes) = `p_yes` within a Yes+No mass of 0.9 (the rest on another token).
    pub fn yes_no(p_yes: f64) -> Self {
        let lp = |p: f64| if p > 0.0 { (0.9 * p).ln() } else { -100.0 };
        let body = serde_json::json!({
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": 0,
            "model": "scripted",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": if p_yes >= 0.5 { "Yes" } else { "No" }},
                "finish_reason": "length",
                "logprobs": {"content": [{
                    "token": if p_yes >= 0.5 { "Yes" } else { "No" },
                    "logprob": lp(p_yes.max(1.0 - p_yes)),
                    "top_logprobs": [
                        {"token": "Yes", "logprob": lp(p_yes)},
                        {"token": "No", "logprob": lp(1.0 - p_yes)},
                        {"token": "Maybe", "logprob": 0.1f64.ln()},
                    ],
                }]},
            }],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
        });
        Self::json(200, body.to_string())
    }

    /// HTTP 200 announcing `declared_len` bytes of body but sending only `body`, then closing.
    pub fn truncated(body: impl Into<String>, declared_len: usize) -> Self {
        let mut r = Self::json(200, body);
        if let Action::Http {
            declared_len: d, ..
        } = &mut r.action
        {
            *d = Some(declared_len);
        }
        r
    }

    /// Read the request and never answer; the connection is closed when the client gives up,
    /// or after `max`.
    pub fn hang(max: Duration) -> Self {
        ScriptedResponse {
            action: Action::Hang { max },
            delay: Duration::ZERO,
        }
    }

    /// Read the request and close the connection without a byte of answer.
    pub fn close() -> Self {
        ScriptedResponse {
            action: Action::Close,
            delay: Duration::ZERO,
        }
    }

    /// Add a header (e.g. `Retry-After`) to an HTTP answer.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        if let Action::Http { headers, .. } = &mut self.action {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }

    /// Wait this long after reading the request before acting.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// The JSON body of a chat completion, as OpenAI-compatible servers send it.
pub fn completion_body(
    text: &str,
    finish_reason: &str,
    prompt_tokens: u32,
    completion_tokens: u32,
) -> String {
    serde_json::json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": finish_reason,
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    })
    .to_string()
}

/// A request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Header names in lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RecordedRequest {
    /// The first value of a header (name matched case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&self.body).ok()
    }
}

#[derive(Default)]
struct Shared {
    requests: Mutex<Vec<RecordedRequest>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    served: AtomicUsize,
    stop: AtomicBool,
}

/// A scripted OpenAI-compatible server; see the module documentation. Dropping it stops it.
pub struct ScriptedServer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    script_len: usize,
}

impl ScriptedServer {
    /// Start serving `script`; returns the server and the base URL (`http://127.0.0.1:PORT/v1`)
    /// to give to [`crate::OpenAiConfig::new`].
    pub fn start(script: Vec<ScriptedResponse>) -> std::io::Result<(ScriptedServer, String)> {
        Self::start_with_lifetime(script, DEFAULT_LIFETIME)
    }

    /// As [`ScriptedServer::start`], listening at most `lifetime`.
    pub fn start_with_lifetime(
        script: Vec<ScriptedResponse>,
        lifetime: Duration,
    ) -> std::io::Result<(ScriptedServer, String)> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        let shared = Arc::new(Shared::default());
        let script_len = script.len();
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("scripted-openai".into())
                .spawn(move || serve(listener, script, shared, lifetime))?
        };
        Ok((
            ScriptedServer {
                shared,
                thread: Some(thread),
                script_len,
            },
            base_url,
        ))
    }

    /// The requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many script entries have been handed to a connection.
    pub fn served(&self) -> usize {
        self.shared.served.load(Ordering::SeqCst)
    }

    /// How many script entries were never used.
    pub fn unused(&self) -> usize {
        self.script_len.saturating_sub(self.served())
    }

    /// The largest number of requests the server held at once (between reading a request and
    /// starting its answer) — a lower bound of the client's concurrency.
    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    /// Stop listening, wait for the connection handlers and return every request received.
    pub fn finish(mut self) -> Vec<RecordedRequest> {
        self.stop();
        self.requests()
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve(
    listener: TcpListener,
    script: Vec<ScriptedResponse>,
    shared: Arc<Shared>,
    lifetime: Duration,
) {
    let deadline = Instant::now() + lifetime;
    let mut handlers = Vec::new();
    let mut script = script.into_iter();
    let mut next = script.next();
    while next.is_some() && Instant::now() < deadline && !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Some(response) = next.take() {
                    shared.served.fetch_add(1, Ordering::SeqCst);
                    let shared = Arc::clone(&shared);
                    handlers.push(std::thread::spawn(move || {
                        handle(stream, response, &shared);
                    }));
                }
                next = script.next();
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
    drop(listener);
    for h in handlers {
        let _ = h.join();
    }
}

fn handle(mut stream: TcpStream, response: ScriptedResponse, shared: &Shared) {
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(Some(SOCKET_TIMEOUT)).is_err()
        || stream.set_write_timeout(Some(SOCKET_TIMEOUT)).is_err()
    {
        return;
    }
    let Some(request) = read_request(&mut stream) else {
        return;
    };
    shared
        .requests
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(request);
    let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
    sleep_unless_stopped(response.delay, shared);
    shared.in_flight.fetch_sub(1, Ordering::SeqCst);

    match response.action {
        Action::Http {
            status,
            headers,
            body,
            declared_len,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\nContent-Length: {}\r\nConnection: close\r\n",
                reason(status),
                declared_len.unwrap_or(body.len())
            );
            for (name, value) in &headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream
                .write_all(head.as_bytes())
                .and_then(|()| stream.write_all(&body))
                .and_then(|()| stream.flush());
            let _ = stream.shutdown(Shutdown::Both);
        }
        Action::Hang { max } => {
            // Wait for the client to give up (EOF or reset) or `max`, whichever comes first.
            let end = Instant::now() + max;
            let _ = stream.set_read_timeout(Some(Duration::from_millis(20)));
            let mut buf = [0u8; 256];
            while Instant::now() < end && !shared.stop.load(Ordering::SeqCst) {
                match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break,
                }
            }
        }
        Action::Close => {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

fn sleep_unless_stopped(total: Duration, shared: &Shared) {
    let end = Instant::now() + total;
    loop {
        let now = Instant::now();
        if now >= end || shared.stop.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(10)));
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Scripted",
    }
}

/// Read one HTTP/1.1 request with a `Content-Length` body (what the client sends).
fn read_request(stream: &mut TcpStream) -> Option<RecordedRequest> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD_BYTES {
            return None;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let content_length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    if content_length > MAX_BODY_BYTES {
        return None;
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < content_length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(content_length);
    Some(RecordedRequest {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A fake [`ChatModel`] that counts its calls. Its answer names the call number and the last
/// message (`"<id> answer #<n>: <last message>"`), so a cached answer is told apart from a
/// fresh one.
pub struct FakeModel {
    id: String,
    calls: AtomicUsize,
    failing: AtomicBool,
    seen: Mutex<Vec<(Vec<Message>, GenParams)>>,
}

impl FakeModel {
    pub fn new(id: impl Into<String>) -> Self {
        FakeModel {
            id: id.into(),
            calls: AtomicUsize::new(0),
            failing: AtomicBool::new(false),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Calls so far (failed ones included).
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Make the following calls fail with [`LlmError::Transport`] (or succeed again).
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// Every call's messages and parameters.
    pub fn seen(&self) -> Vec<(Vec<Message>, GenParams)> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl ChatModel for FakeModel {
    fn id(&self) -> String {
        self.id.clone()
    }

    fn complete(&self, messages: &[Message], params: &GenParams) -> Result<Completion> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((messages.to_vec(), params.clone()));
        if self.failing.load(Ordering::SeqCst) {
            return Err(LlmError::Transport {
                endpoint: format!("fake:{}", self.id),
                message: "scripted failure".into(),
            });
        }
        let last = messages.last().map(|m| m.content.as_str()).unwrap_or("");
        Ok(Completion {
            text: format!("{} answer #{n}: {last}", self.id),
            finish_reason: FinishReason::Stop,
            usage: Usage {
                prompt_tokens: 3,
                completion_tokens: 4,
            },
        })
    }
}
