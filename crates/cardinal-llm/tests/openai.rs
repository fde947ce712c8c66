//! The OpenAI-compatible client against a scripted server on 127.0.0.1: every fault ends in a
//! correct answer or a typed error naming the endpoint and the attempt count.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cardinal_llm::testing::{completion_body, ScriptedResponse, ScriptedServer};
use cardinal_llm::{
    CacheMode, CachedModel, ChatModel, FinishReason, GenParams, LlmError, Message, OpenAiClient,
    OpenAiConfig, Usage,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Fast settings; the key variable is one no test sets, so no `Authorization` header.
fn fast(base_url: &str) -> OpenAiConfig {
    let mut c = OpenAiConfig::new(base_url, "test-model");
    c.api_key_env = "CARDINAL_LLM_TEST_KEY_NEVER_SET".into();
    c.request_timeout = Duration::from_secs(3);
    c.connect_timeout = Duration::from_secs(1);
    c.max_retries = 2;
    c.base_backoff = Duration::from_millis(10);
    c.max_backoff = Duration::from_millis(50);
    c.proxy_from_env = false;
    c
}

fn client(base_url: &str) -> OpenAiClient {
    OpenAiClient::new(fast(base_url)).expect("valid test config")
}

fn chat() -> Vec<Message> {
    vec![
        Message::system("Answer from the cards."),
        Message::user("¿Puedo tomar dos dosis?"),
    ]
}

fn assert_names_endpoint(err: &LlmError, endpoint: &str) {
    let shown = err.to_string();
    assert!(
        shown.contains(endpoint),
        "{shown:?} does not name {endpoint}"
    );
    assert!(
        shown.contains("attempt"),
        "{shown:?} gives no attempt count"
    );
}

#[test]
fn success_sends_model_messages_and_parameters() -> TestResult {
    let (server, base_url) = ScriptedServer::start(vec![ScriptedResponse::completion("Hola.")])?;
    let client = client(&base_url);
    let params = GenParams {
        temperature: 0.7,
        max_tokens: 64,
        seed: 7,
        stop: vec!["\n\n".into(), "END".into()],
    };
    let out = client.complete(&chat(), &params)?;
    assert_eq!(out.text, "Hola.");
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(
        out.usage,
        Usage {
            prompt_tokens: 10,
            completion_tokens: 5
        }
    );

    let requests = server.finish();
    assert_eq!(requests.len(), 1);
    let req = &requests[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.header("authorization"), None, "no key, no header");
    let body = req.json().ok_or("request body is not JSON")?;
    assert_eq!(body["model"], "test-model");
    assert_eq!(
        body["messages"],
        serde_json::json!([
            {"role": "system", "content": "Answer from the cards."},
            {"role": "user", "content": "¿Puedo tomar dos dosis?"},
        ])
    );
    let t = body["temperature"].as_f64().ok_or("no temperature")?;
    assert!((t - 0.7).abs() < 1e-6, "temperature {t}");
    assert_eq!(body["max_tokens"], 64);
    assert_eq!(body["seed"], 7);
    assert_eq!(body["stop"], serde_json::json!(["\n\n", "END"]));
    assert_eq!(body["stream"], false);
    Ok(())
}

#[test]
fn empty_stop_list_is_not_sent_and_length_finish_is_parsed() -> TestResult {
    let (server, base_url) = ScriptedServer::start(vec![ScriptedResponse::json(
        200,
        completion_body("cut", "length", 3, 64),
    )])?;
    let out = client(&base_url).complete(&chat(), &GenParams::default())?;
    assert_eq!(out.finish_reason, FinishReason::Length);
    assert_eq!(out.usage.completion_tokens, 64);
    let body = server.finish()[0].json().ok_or("not JSON")?;
    assert!(body.get("stop").is_none(), "{body}");
    assert_eq!(body["temperature"], 0.0);
    Ok(())
}

#[test]
fn http_500_then_success_is_retried() -> TestResult {
    let (server, base_url) = ScriptedServer::start(vec![
        ScriptedResponse::status(500, r#"{"error":{"message":"boom"}}"#),
        ScriptedResponse::completion("second time lucky"),
    ])?;
    let out = client(&base_url).complete(&chat(), &GenParams::default())?;
    assert_eq!(out.text, "second time lucky");
    let requests = server.finish();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].body, requests[1].body,
        "a retry resends the same request"
    );
    Ok(())
}

#[test]
fn http_429_with_retry_after_is_honoured() -> TestResult {
    let (server, base_url) = ScriptedServer::start(vec![
        ScriptedResponse::status(429, r#"{"error":{"message":"slow down"}}"#)
            .with_header("Retry-After", "1"),
        ScriptedResponse::completion("after the wait"),
    ])?;
    let started = Instant::now();
    let out = client(&base_url).complete(&chat(), &GenParams::default())?;
    let elapsed = started.elapsed();
    assert_eq!(out.text, "after the wait");
    assert!(
        elapsed >= Duration::from_millis(950),
        "retried after {elapsed:?}, before the 1 s Retry-After (backoff alone is ≤ 50 ms)"
    );
    assert_eq!(server.finish().len(), 2);
    Ok(())
}

#[test]
fn retry_after_is_capped() -> TestResult {
    let (server, base_url) = ScriptedServer::start(vec![
        ScriptedResponse::status(429, "busy").with_header("Retry-After", "3600"),
        ScriptedResponse::completion("ok"),
    ])?;
    let mut cfg = fast(&base_url);
    cfg.max_retry_after = Duration::from_millis(100);
    let started = Instant::now();
    let out = OpenAiClient::new(cfg)?.complete(&chat(), &GenParams::default())?;
    assert_eq!(out.text, "ok");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(server.finish().len(), 2);
    Ok(())
}

#[test]
fn persistent_5xx_gives_up_after_max_retries() -> TestResult {
    let (server, base_url) = ScriptedServer::start(vec![
        ScriptedResponse::status(503, "overloaded"),
        ScriptedResponse::status(503, "overloaded"),
        ScriptedResponse::status(503, "still overloaded"),
        ScriptedResponse::completion("never reached"),
    ])?;
    let client = client(&base_url);
    let err = client
        .complete(&chat(), &GenParams::default())
        .expect_err("three 503s with max_retries = 2 must fail");
    match &err {
        LlmError::Status {
            endpoint,
            status,
            attempts,
            body,
        } => {
            assert_eq!(endpoint, client.endpoint());
            assert_eq!(*status, 503);
            assert_eq!(*attempts, 3);
            assert_eq!(body, "still overloaded");
        }
        other => panic!("expected Status, got {other:?}"),
    }
    assert_names_endpoint(&err, client.endpoint());
    assert_eq!(server.finish().len(), 3);
    Ok(())
}

#[test]
fn a_server_that_never_answers_times_out_after_bounded_retries() -> TestResult {
    let hang = || ScriptedResponse::hang(Duration::from_secs(10));
    let (server, base_url) = ScriptedServer::start(vec![hang(), hang(), hang()])?;
    let mut cfg = fast(&base_url);
    cfg.request_timeout = Duration::from_millis(300);
    let client = OpenAiClient::new(cfg)?;
    let started = Instant::now();
    let err = client
        .complete(&chat(), &GenParams::default())
        .expect_err("no answer must time out");
    let elapsed = started.elapsed();
    match &err {
        LlmError::Timeout {
            endpoint,
            attempts,
            elapsed_secs,
            bound_secs,
            ..
        } => {
            assert_eq!(endpoint, client.endpoint());
            assert_eq!(*attempts, 3);
            assert!(
                *elapsed_secs >= 0.9 && *elapsed_secs <= *bound_secs,
                "{err}"
            );
            // The message says how long the call took and what bounds it.
            let msg = err.to_string();
            assert!(
                msg.contains("in all") && msg.contains("--request-timeout"),
                "{msg}"
            );
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert_names_endpoint(&err, client.endpoint());
    assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert_eq!(server.finish().len(), 3);
    Ok(())
}

#[test]
fn malformed_json_is_a_typed_error_and_not_retried() -> TestResult {
    let (server, base_url) = ScriptedServer::start(vec![
        ScriptedResponse::json(200, r#"{"choices": [ {"message": "#),
        ScriptedResponse::completion("must not be asked for"),
    ])?;
    let client = client(&base_url);
    let err = client
        .complete(&chat(), &GenParams::default())
        .expect_err("malformed JSON must fail");
    match &err {
        LlmError::Malformed { endpoint, message } => {
            assert_eq!(endpoint, client.endpoint());
            assert!(message.contains("not JSON"), "{message}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
    assert_names_endpoint(&err, client.endpoint());
    assert_eq!(server.finish().len(), 1);
    Ok(())
}

#[test]
fn a_truncated_body_is_a_typed_error() -> TestResult {
    let full = completion_body("this answer is cut", "stop", 1, 1);
    let half = full[..full.len() / 2].to_string();
    let (server, base_url) =
        ScriptedServer::start(vec![ScriptedResponse::truncated(half, full.len())])?;
    let mut cfg = fast(&base_url);
    cfg.max_retries = 0;
    let client = OpenAiClient::new(cfg)?;
    let err = client
        .complete(&chat(), &GenParams::default())
        .expect_err("a truncated body must fail");
    match &err {
        LlmError::Truncated {
            endpoint, attempts, ..
        } => {
            assert_eq!(endpoint, client.endpoint());
            assert_eq!(*attempts, 1);
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
    assert_names_endpoint(&err, client.endpoint());
    assert_eq!(server.finish().len(), 1);
    Ok(())
}

#[test]
fn a_truncated_body_is_retried() -> TestResult {
    let (server, base_url) = ScriptedServer::start(vec![
        ScriptedResponse::truncated(r#"{"choices":[{"#, 4096),
        ScriptedResponse::completion("whole"),
    ])?;
    let out = client(&base_url).complete(&chat(), &GenParams::default())?;
    assert_eq!(out.text, "whole");
    assert_eq!(server.finish().len(), 2);
    Ok(())
}

#[test]
fn a_connection_closed_without_answer_is_retried() -> TestResult {
    let (server, base_url) = ScriptedServer::start(vec![
        ScriptedResponse::close(),
        ScriptedResponse::completion("reconnected"),
    ])?;
    let out = client(&base_url).complete(&chat(), &GenParams::default())?;
    assert_eq!(out.text, "reconnected");
    assert_eq!(server.finish().len(), 2);
    Ok(())
}

#[test]
fn http_400_is_not_retried() -> TestResult {
    let (server, base_url) = ScriptedServer::start(vec![
        ScriptedResponse::status(400, r#"{"error":{"message":"max_tokens too large"}}"#),
        ScriptedResponse::completion("must not be asked for"),
    ])?;
    let client = client(&base_url);
    let err = client
        .complete(&chat(), &GenParams::default())
        .expect_err("400 must fail");
    match &err {
        LlmError::Status {
            status,
            attempts,
            body,
            ..
        } => {
            assert_eq!(*status, 400);
            assert_eq!(*attempts, 1);
            assert!(body.contains("max_tokens too large"), "{body}");
        }
        other => panic!("expected Status, got {other:?}"),
    }
    assert_names_endpoint(&err, client.endpoint());
    assert_eq!(
        server.finish().len(),
        1,
        "the server must see exactly one request"
    );
    Ok(())
}

#[test]
fn other_4xx_are_not_retried_either() -> TestResult {
    for status in [401u16, 404, 422] {
        let (server, base_url) = ScriptedServer::start(vec![
            ScriptedResponse::status(status, "no"),
            ScriptedResponse::completion("must not be asked for"),
        ])?;
        let err = client(&base_url)
            .complete(&chat(), &GenParams::default())
            .expect_err("4xx must fail");
        assert!(
            matches!(err, LlmError::Status { status: s, attempts: 1, .. } if s == status),
            "{err:?}"
        );
        assert_eq!(server.finish().len(), 1);
    }
    Ok(())
}

#[test]
fn missing_or_empty_content_is_an_error_never_an_empty_answer() -> TestResult {
    let bodies = [
        r#"{"choices":[{"index":0,"message":{"role":"assistant"},"finish_reason":"stop"}]}"#,
        r#"{"choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}"#,
        r#"{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0}}"#,
        r#"{"object":"chat.completion"}"#,
        r#"{"error":{"message":"model not loaded"}}"#,
    ];
    for body in bodies {
        let (server, base_url) = ScriptedServer::start(vec![ScriptedResponse::json(200, body)])?;
        let client = client(&base_url);
        match client.complete(&chat(), &GenParams::default()) {
            Err(LlmError::Malformed { endpoint, .. }) => assert_eq!(endpoint, client.endpoint()),
            other => panic!("{body}: expected Malformed, got {other:?}"),
        }
        assert_eq!(server.finish().len(), 1, "{body}: not retried");
    }
    Ok(())
}

#[test]
fn connection_refused_is_a_transport_error_after_retries() -> TestResult {
    // A port that was free a moment ago: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let client = client(&base_url);
    let err = client
        .complete(&chat(), &GenParams::default())
        .expect_err("nothing listens");
    match &err {
        LlmError::Transport { endpoint, message } => {
            assert_eq!(endpoint, client.endpoint());
            assert!(message.contains("after 3 attempt(s)"), "{message}");
        }
        other => panic!("expected Transport, got {other:?}"),
    }
    assert_names_endpoint(&err, client.endpoint());
    Ok(())
}

#[test]
fn concurrency_is_bounded_across_clones() -> TestResult {
    const CALLS: usize = 6;
    let delay = Duration::from_millis(200);
    let script = (0..CALLS)
        .map(|i| ScriptedResponse::completion(&format!("answer {i}")).with_delay(delay))
        .collect();
    let (server, base_url) = ScriptedServer::start(script)?;
    let mut cfg = fast(&base_url);
    cfg.max_concurrency = 2;
    cfg.max_retries = 0;
    let client = OpenAiClient::new(cfg)?;
    let started = Instant::now();
    let handles: Vec<_> = (0..CALLS)
        .map(|_| {
            let client = client.clone();
            std::thread::spawn(move || client.complete(&chat(), &GenParams::default()))
        })
        .collect();
    for h in handles {
        let out = h.join().map_err(|_| "client thread panicked")??;
        assert!(out.text.starts_with("answer "));
    }
    let elapsed = started.elapsed();
    assert!(server.max_in_flight() <= 2, "{}", server.max_in_flight());
    // 6 requests, 2 at a time, 200 ms each: at least 3 rounds.
    assert!(elapsed >= 3 * delay, "{elapsed:?}");
    assert_eq!(server.finish().len(), CALLS);
    Ok(())
}

#[test]
fn a_cached_client_asks_the_server_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (server, base_url) = ScriptedServer::start(vec![ScriptedResponse::completion("once")])?;
    let model: Arc<dyn ChatModel> = Arc::new(client(&base_url));
    let cached = CachedModel::new(model, dir.path(), CacheMode::ReadWrite)?;
    let first = cached.complete(&chat(), &GenParams::default())?;
    let second = cached.complete(&chat(), &GenParams::default())?;
    assert_eq!(first, second);
    assert_eq!(cached.stats().model_calls, 1);
    assert_eq!(cached.stats().hits, 1);
    assert_eq!(server.finish().len(), 1);
    Ok(())
}
