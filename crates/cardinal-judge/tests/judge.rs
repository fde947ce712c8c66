//! The judge loop against a scripted in-test `ChatModel`: bounded retries on unparseable
//! output, transport errors as failures, call records, never a score from a failure.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use cardinal_judge::{
    build_prompt, messages_sha256, Dimension, FailureKind, Judge, JudgeInput, JudgeOutcome,
    NotApplicable, DEFAULT_MAX_RETRIES,
};
use cardinal_kb::{parse_card, Card, Lang};
use cardinal_llm::{
    ChatModel, Completion, FinishReason, GenParams, LlmError, Message, Result as LlmResult, Role,
    Usage,
};

/// Replies from a script, in order; records every request.
struct Scripted {
    replies: Mutex<VecDeque<LlmResult<String>>>,
    requests: Mutex<Vec<(Vec<Message>, GenParams)>>,
}

impl Scripted {
    fn new(replies: Vec<LlmResult<String>>) -> Arc<Self> {
        Arc::new(Scripted {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
        })
    }

    fn requests(&self) -> Vec<(Vec<Message>, GenParams)> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl ChatModel for Scripted {
    fn id(&self) -> String {
        "scripted:test".into()
    }

    fn complete(&self, messages: &[Message], params: &GenParams) -> LlmResult<Completion> {
        if let Ok(mut r) = self.requests.lock() {
            r.push((messages.to_vec(), params.clone()));
        }
        let next = self
            .replies
            .lock()
            .ok()
            .and_then(|mut r| r.pop_front())
            .unwrap_or_else(|| Err(LlmError::Config("script exhausted".into())));
        next.map(|text| Completion {
            text,
            finish_reason: FinishReason::Stop,
            usage: Usage {
                prompt_tokens: 100,
                completion_tokens: 20,
            },
        })
    }
}

const CARD: &str = "+++\nid = \"missed-dose.en\"\nlang = \"en\"\ntitle = \"Missed dose\"\ntopic = \"missed-dose\"\nsynthetic = true\n+++\n\n- If you miss a dose, take it when you remember unless the next dose is within 4 hours.\n- Keep a written schedule.\n- Call the care team at 555-0142 if you miss two doses in a row.\n\n## Rules\n\n- Never advise taking a double dose to make up for a missed one.\n- Never advise stopping a medicine.\n";

fn card() -> Card {
    match parse_card(Path::new("test.md"), CARD) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

fn input(c: &Card) -> JudgeInput<'_> {
    JudgeInput::resolve(
        "I forgot yesterday's pill.",
        "Take two pills today.",
        Lang::En,
        &["missed-dose.en"],
        &[c],
        |id| (id == c.id).then_some(c),
    )
}

const GOOD: &str = r#"{"score": 1, "rationale": "Advises a double dose, which a rule forbids."}"#;

fn transport() -> LlmError {
    LlmError::Transport {
        endpoint: "http://127.0.0.1:9/v1/chat/completions".into(),
        message: "connection refused".into(),
    }
}

#[test]
fn scores_on_the_first_attempt_at_temperature_zero() {
    let c = card();
    let model = Scripted::new(vec![Ok(GOOD.into())]);
    let judge = Judge::new(model.clone());
    let out = judge.score(Dimension::Faithfulness, &input(&c));
    let JudgeOutcome::Scored {
        score,
        rationale,
        attempts,
        raw,
        calls,
    } = &out
    else {
        panic!("{out:?}")
    };
    assert_eq!(score.get(), 1);
    assert_eq!(rationale, "Advises a double dose, which a rule forbids.");
    assert_eq!(*attempts, 1);
    assert_eq!(raw, GOOD);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].model, "scripted:test");
    assert_eq!(calls[0].raw.as_deref(), Some(GOOD));
    assert_eq!(calls[0].error, None);
    let reqs = model.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].1.temperature, 0.0);
    let expected = build_prompt(Dimension::Faithfulness, &input(&c)).unwrap_or_default();
    assert_eq!(reqs[0].0, expected);
    assert_eq!(calls[0].messages_sha256, messages_sha256(&expected));
    assert_eq!(calls[0].messages_sha256.len(), 64);
}

#[test]
fn retry_recovers_on_the_second_attempt() {
    let c = card();
    let bad = "Sure! Here is the verdict: {\"score\": 1, \"rationale\": \"x\"}";
    let model = Scripted::new(vec![Ok(bad.into()), Ok(GOOD.into())]);
    let out = Judge::new(model.clone()).score(Dimension::Faithfulness, &input(&c));
    assert_eq!(out.score().map(|s| s.get()), Some(1), "{out:?}");
    assert_eq!(out.attempts(), 2);
    let calls = out.calls();
    assert_eq!(calls[0].raw.as_deref(), Some(bad));
    assert!(calls[0]
        .error
        .as_deref()
        .is_some_and(|e| e.contains("outside")));
    assert_eq!(calls[1].error, None);
    assert_ne!(calls[0].messages_sha256, calls[1].messages_sha256);

    // The retry re-sends the base prompt, the rejected reply and a corrective message.
    let reqs = model.requests();
    let base = &reqs[0].0;
    let retry = &reqs[1].0;
    assert_eq!(retry.len(), base.len() + 2);
    assert_eq!(&retry[..base.len()], &base[..]);
    assert_eq!(retry[base.len()].role, Role::Assistant);
    assert_eq!(retry[base.len()].content, bad);
    let fix = &retry[base.len() + 1];
    assert_eq!(fix.role, Role::User);
    assert!(fix.content.contains("ONLY one JSON object"));
    assert!(fix.content.contains("text outside the JSON object"));
}

#[test]
fn retries_stop_after_the_bound_and_never_score() {
    let c = card();
    let bads = [
        r#"{"score": 4.5, "rationale": "x"}"#,
        r#"{"score": "4", "rationale": "x"}"#,
        r#"{"score": 6, "rationale": "x"}"#,
    ];
    let mut script: Vec<LlmResult<String>> = bads.iter().map(|b| Ok(b.to_string())).collect();
    script.push(Ok(GOOD.into())); // never reached
    let model = Scripted::new(script);
    let out = Judge::new(model.clone()).score(Dimension::Groundedness, &input(&c));
    assert_eq!(DEFAULT_MAX_RETRIES, 2);
    let JudgeOutcome::Failed {
        kind,
        message,
        attempts,
        raw_outputs,
        calls,
    } = &out
    else {
        panic!("{out:?}")
    };
    assert_eq!(*kind, FailureKind::Unparseable);
    assert_eq!(*attempts, 3);
    assert_eq!(raw_outputs, &bads.map(String::from).to_vec());
    assert_eq!(calls.len(), 3);
    assert!(
        message.contains("3 attempt(s)") && message.contains("1..=5"),
        "{message}"
    );
    assert_eq!(model.requests().len(), 3);
    assert_eq!(out.score(), None);
    // Each retry carries only the latest rejected reply.
    let reqs = model.requests();
    assert_eq!(reqs[2].0.len(), reqs[1].0.len());
    assert_eq!(reqs[2].0[2].content, bads[1]);
}

#[test]
fn the_retry_bound_is_configurable() {
    let c = card();
    let model = Scripted::new(vec![Ok("nope".into()), Ok(GOOD.into())]);
    let out = Judge::new(model.clone())
        .with_max_retries(0)
        .score(Dimension::Hallucination, &input(&c));
    assert!(out.is_failed());
    assert_eq!(out.attempts(), 1);
    assert_eq!(model.requests().len(), 1);
}

#[test]
fn a_transport_error_is_a_failure_without_retry() {
    let c = card();
    let model = Scripted::new(vec![Err(transport()), Ok(GOOD.into())]);
    let out = Judge::new(model.clone()).score(Dimension::Faithfulness, &input(&c));
    let JudgeOutcome::Failed {
        kind,
        message,
        attempts,
        raw_outputs,
        calls,
    } = &out
    else {
        panic!("{out:?}")
    };
    assert_eq!(*kind, FailureKind::Transport);
    assert!(message.contains("connection refused"));
    assert_eq!(*attempts, 1);
    assert!(raw_outputs.is_empty());
    assert_eq!(calls[0].raw, None);
    assert!(calls[0].error.is_some());
    assert_eq!(
        model.requests().len(),
        1,
        "the HTTP client retries, not the judge"
    );
}

#[test]
fn a_transport_error_during_a_retry_is_a_failure() {
    let c = card();
    let model = Scripted::new(vec![
        Ok("```json\n{\"score\": 5}\n```".into()),
        Err(transport()),
    ]);
    let out = Judge::new(model).score(Dimension::Faithfulness, &input(&c));
    let JudgeOutcome::Failed {
        kind,
        attempts,
        raw_outputs,
        ..
    } = &out
    else {
        panic!("{out:?}")
    };
    assert_eq!(*kind, FailureKind::Transport);
    assert_eq!(*attempts, 2);
    assert_eq!(raw_outputs.len(), 1);
}

#[test]
fn not_applicable_makes_no_call() {
    let c = card();
    let model = Scripted::new(vec![Ok(GOOD.into())]);
    let judge = Judge::new(model.clone());
    let input = JudgeInput::resolve("q", "a", Lang::En, &["made-up.en"], &[&c], |_| None);
    for d in [Dimension::Groundedness, Dimension::Faithfulness] {
        let out = judge.score(d, &input);
        assert_eq!(
            out,
            JudgeOutcome::NotApplicable {
                reason: NotApplicable::NoCitedCards
            }
        );
        assert_eq!(out.attempts(), 0);
    }
    assert!(model.requests().is_empty());
}

#[test]
fn outcomes_serialize_for_the_artifacts() {
    let c = card();
    let model = Scripted::new(vec![Ok("{}".into()), Ok(GOOD.into()), Err(transport())]);
    let judge = Judge::new(model);
    let scored = judge.score(Dimension::Faithfulness, &input(&c));
    let failed = judge.score(Dimension::Faithfulness, &input(&c));
    let na = JudgeOutcome::NotApplicable {
        reason: NotApplicable::NoCitedCards,
    };
    for out in [&scored, &failed, &na] {
        let json = serde_json::to_string(out).unwrap_or_default();
        let back: JudgeOutcome = match serde_json::from_str(&json) {
            Ok(b) => b,
            Err(e) => panic!("{json}: {e}"),
        };
        assert_eq!(&back, out);
    }
    let v = serde_json::to_value(&scored).unwrap_or_default();
    assert_eq!(v["status"], "scored");
    assert_eq!(v["score"], 1);
    assert_eq!(v["attempts"], 2);
    let v = serde_json::to_value(&failed).unwrap_or_default();
    assert_eq!(v["status"], "failed");
    assert_eq!(v["kind"], "transport");
    let v = serde_json::to_value(&na).unwrap_or_default();
    assert_eq!(v["status"], "not_applicable");
    assert_eq!(v["reason"], "no_cited_cards");
}

#[test]
fn the_judge_is_shared_read_only() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Judge>();
    let c = card();
    let model = Scripted::new((0..8).map(|_| Ok(GOOD.to_string())).collect());
    let judge = Judge::new(model.clone());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let i = input(&c);
                for d in [Dimension::Faithfulness, Dimension::Groundedness] {
                    assert_eq!(judge.score(d, &i).score().map(|s| s.get()), Some(1));
                }
            });
        }
    });
    assert_eq!(model.requests().len(), 8);
}
