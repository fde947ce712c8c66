//! The fault campaign: `cardinal eval --judge openai` against the scripted OpenAI-compatible
//! server in every failure mode an endpoint shows in practice — 429 with Retry-After, 5xx, a
//! hang, a cut-short body, a non-JSON body, empty choices, unparseable judge output, a closed
//! connection, a server that is down, a flaky one. For each: cases lost = 0 (every selected
//! case has exactly one record), scores fabricated = 0 (a failed judgement is an error of its
//! dimension, never a score), no panic, and the exit code says what happened (1 when judge
//! errors exceed --max-judge-errors, 0 when the retries recovered). The campaign's table is
//! printed for the record.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use cardinal_llm::testing::{ScriptedResponse, ScriptedServer};
use serde_json::Value;

mod common;
use common::{bundled_data, prebuilt_store, text};

const SAMPLE: usize = 8;
const DIMS: [&str; 3] = ["groundedness", "faithfulness", "hallucination"];

fn eval(tmp: &Path, run: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .arg("--data")
        .arg(bundled_data())
        .arg("--store-path")
        .arg(tmp.join("store"))
        .args(["eval", "--llm", "extractive", "--no-cache", "--sample"])
        .arg(SAMPLE.to_string())
        .arg("--run-dir")
        .arg(tmp.join(run))
        .args(extra)
        .output()
        .expect("the cardinal binary runs")
}

fn records(dir: &Path) -> Vec<Value> {
    fs::read_to_string(dir.join("records.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn verdict(score: u8) -> ScriptedResponse {
    ScriptedResponse::completion(&format!(
        "{{\"score\": {score}, \"rationale\": \"scripted verdict\"}}"
    ))
}

/// One failure mode: the faulty response, and whether each call is retried into a good one.
struct Mode {
    name: &'static str,
    fault: fn() -> ScriptedResponse,
    /// The server is not there at all (no script).
    down: bool,
    /// The client or the judge tries again after this fault. A well-formed HTTP 200 that is not
    /// a chat completion is final by the client's contract (crates/cardinal-llm/src/openai.rs):
    /// it is an error of that judgement, not retried.
    retried: bool,
}

fn modes() -> Vec<Mode> {
    vec![
        Mode {
            name: "429 + Retry-After",
            fault: || {
                ScriptedResponse::status(429, "{\"error\":\"slow down\"}")
                    .with_header("Retry-After", "1")
            },
            down: false,
            retried: true,
        },
        Mode {
            name: "503",
            fault: || ScriptedResponse::status(503, "overloaded"),
            down: false,
            retried: true,
        },
        Mode {
            name: "hang",
            fault: || ScriptedResponse::hang(Duration::from_secs(5)),
            down: false,
            retried: true,
        },
        Mode {
            name: "cut-short body",
            fault: || ScriptedResponse::truncated("{\"choices\": [{\"mess", 400),
            down: false,
            retried: true,
        },
        Mode {
            name: "non-JSON 200",
            fault: || ScriptedResponse::json(200, "<html>gateway</html>"),
            down: false,
            retried: false,
        },
        Mode {
            name: "empty choices",
            fault: || ScriptedResponse::json(200, "{\"choices\": []}"),
            down: false,
            retried: false,
        },
        Mode {
            name: "unparseable verdict",
            fault: || ScriptedResponse::completion("I think it is fine."),
            down: false,
            retried: true,
        },
        Mode {
            name: "connection closed",
            fault: ScriptedResponse::close,
            down: false,
            retried: true,
        },
        Mode {
            name: "server down",
            fault: ScriptedResponse::close,
            down: true,
            retried: false,
        },
    ]
}

/// Cases lost and judge scores present on the run's records, and the answered case ids.
fn audit(dir: &Path, expected: &BTreeSet<String>) -> (usize, usize, usize) {
    let recs = records(dir);
    let ids: BTreeSet<String> = recs
        .iter()
        .map(|r| r["scores"]["case_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        ids.len(),
        recs.len(),
        "a case has two records in {}",
        dir.display()
    );
    let lost = expected.difference(&ids).count();
    let scored = recs
        .iter()
        .map(|r| {
            DIMS.iter()
                .filter(|d| r["scores"]["scores"].get(**d).is_some())
                .count()
        })
        .sum();
    let errors = recs
        .iter()
        .map(|r| {
            r["scores"]["errors"]
                .as_array()
                .map(|e| e.len())
                .unwrap_or(0)
        })
        .sum();
    (lost, scored, errors)
}

#[test]
fn every_endpoint_fault_loses_no_case_and_fabricates_no_score() {
    let tmp = tempfile::tempdir().unwrap();
    prebuilt_store(&tmp.path().join("store"));
    let o = eval(tmp.path(), "plain", &["--judge", "none"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let plain = records(&tmp.path().join("plain"));
    assert_eq!(plain.len(), SAMPLE);
    let expected: BTreeSet<String> = plain
        .iter()
        .map(|r| r["scores"]["case_id"].as_str().unwrap().to_string())
        .collect();
    let answered = plain
        .iter()
        .filter(|r| {
            r["refused"] == false
                && r["trace"]["escalated"] != true
                && !r["citations"].as_array().unwrap().is_empty()
        })
        .count();
    assert!(answered >= 2, "only {answered} answered cases");
    let calls = 3 * answered;
    let endpoint = [
        "--judge",
        "openai",
        "--scorer",
        "rubric-v1",
        "--attempts",
        "2",
        "--request-timeout",
        "1",
        "--connect-timeout",
        "1",
        "--max-backoff",
        "0.05",
    ];
    let mut table = vec![format!(
        "{:<22} {:<9} {:>4} {:>5} {:>10} {:>6}",
        "mode", "script", "exit", "lost", "fabricated", "errors"
    )];
    for mode in modes() {
        for recover in [false, true] {
            if recover && !mode.retried {
                continue;
            }
            let run = format!("{}-{}", mode.name.replace(' ', "_"), recover);
            // Every call fails on every attempt (and every judge-level re-ask), or its first
            // attempt fails and the next one is a good verdict.
            let (server, url) = if mode.down {
                let (s, url) = ScriptedServer::start(Vec::new()).unwrap();
                drop(s);
                (None, url)
            } else {
                let script: Vec<ScriptedResponse> = if recover {
                    (0..calls)
                        .flat_map(|_| [(mode.fault)(), verdict(4)])
                        .collect()
                } else {
                    (0..calls * 6).map(|_| (mode.fault)()).collect()
                };
                let (s, url) = ScriptedServer::start(script).unwrap();
                (Some(s), url)
            };
            let mut args = endpoint.to_vec();
            args.extend(["--judge-url", &url]);
            let o = eval(tmp.path(), &run, &args);
            if let Some(s) = server {
                s.finish();
            }
            let out = text(&o);
            assert!(!out.contains("panicked"), "{}: {out}", mode.name);
            let dir = tmp.path().join(&run);
            let (lost, scored, errors) = audit(&dir, &expected);
            let code = o.status.code();
            table.push(format!(
                "{:<22} {:<9} {:>4} {:>5} {:>10} {:>6}",
                mode.name,
                if recover { "recovers" } else { "fails" },
                code.map(|c| c.to_string()).unwrap_or("-".into()),
                lost,
                if recover { 0 } else { scored },
                errors
            ));
            assert_eq!(lost, 0, "{}: cases lost\n{out}", mode.name);
            if recover {
                assert_eq!(code, Some(0), "{} (recovers): {out}", mode.name);
                assert_eq!(scored, calls, "{} (recovers)", mode.name);
                assert_eq!(errors, 0, "{} (recovers)", mode.name);
                for r in records(&dir) {
                    for d in DIMS {
                        if let Some(v) = r["scores"]["scores"].get(d) {
                            assert_eq!(v.as_f64(), Some(4.0), "{}: {d}", mode.name);
                        }
                    }
                }
            } else {
                assert_eq!(code, Some(1), "{} (fails): {out}", mode.name);
                assert_eq!(scored, 0, "{}: a score was fabricated", mode.name);
                assert_eq!(
                    errors, calls,
                    "{}: every judged dimension is an error",
                    mode.name
                );
                assert!(out.contains("judge error(s)"), "{}: {out}", mode.name);
                let md = fs::read_to_string(dir.join("report.md")).unwrap();
                assert!(
                    md.contains("error"),
                    "{}: the report says nothing",
                    mode.name
                );
            }
        }
    }
    eprintln!("{}", table.join("\n"));
}
