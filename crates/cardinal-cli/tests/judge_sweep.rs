//! `cardinal eval --judge openai` against the scripted OpenAI-compatible server: the judge's
//! scores land in the report with their n, a judge failure is counted as an error (never a
//! score), the two framings reach the judge, and the faithfulness column guard alarms (exit 1
//! with --strict) when every score is high; a judge error fails the run (--max-judge-errors 0).

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use cardinal_llm::testing::{ScriptedResponse, ScriptedServer};
use serde_json::Value;

mod common;
use common::{bundled_data, prebuilt_store, text};

const SAMPLE: &str = "30";

fn eval(tmp: &Path, run: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .arg("--data")
        .arg(bundled_data())
        .arg("--store-path")
        .arg(tmp.join("store"))
        .args([
            "eval",
            "--llm",
            "extractive",
            "--sample",
            SAMPLE,
            "--no-cache",
        ])
        .arg("--run-dir")
        .arg(tmp.join(run))
        .args(extra)
        .output()
        .expect("the cardinal binary runs")
}

fn records(dir: &Path) -> Vec<Value> {
    fs::read_to_string(dir.join("records.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn overall(dir: &Path) -> Value {
    let report: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    report["slices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["dim"] == "overall")
        .unwrap()
        .clone()
}

fn verdict(score: u8) -> ScriptedResponse {
    ScriptedResponse::completion(&format!(
        "{{\"score\": {score}, \"rationale\": \"scripted verdict\"}}"
    ))
}

/// The judge sees the answer only when the agent answered (not refused, not an emergency
/// escalation) and cited a real card.
fn judged_cases(recs: &[Value]) -> Vec<&Value> {
    recs.iter()
        .filter(|r| {
            r["refused"] == false
                && r["trace"]["escalated"] != true
                && !r["citations"].as_array().unwrap().is_empty()
        })
        .collect()
}

#[test]
fn judge_scores_errors_framings_and_the_column_guard() {
    let tmp = tempfile::tempdir().unwrap();
    prebuilt_store(&tmp.path().join("store"));
    // Which cases does the extractive agent answer? (Deterministic; no judge.)
    let o = eval(tmp.path(), "plain", &["--judge", "none"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let plain = records(&tmp.path().join("plain"));
    assert_eq!(plain.len(), 30);
    let answered: Vec<String> = judged_cases(&plain)
        .iter()
        .map(|r| r["scores"]["case_id"].as_str().unwrap().to_string())
        .collect();
    let m = answered.len();
    assert!(m >= 10, "only {m} answered cases: the guard needs 10");
    for r in &plain {
        let keys = r["scores"]["scores"].as_object().unwrap();
        assert!(!keys.contains_key("faithfulness"));
    }

    // Run 1: groundedness 4, faithfulness 5 everywhere, hallucination 5; the first case's
    // faithfulness reply is garbage three times (1 try + 2 retries) -> judge_error.
    let mut script = Vec::new();
    for i in 0..m {
        script.push(verdict(4));
        if i == 0 {
            for _ in 0..3 {
                script.push(ScriptedResponse::completion("I think it is fine."));
            }
        } else {
            script.push(verdict(5));
        }
        script.push(verdict(5));
    }
    let (server, url) = ScriptedServer::start(script).unwrap();
    let o = eval(
        tmp.path(),
        "all-high",
        &[
            "--judge",
            "openai",
            "--judge-url",
            &url,
            "--scorer",
            "rubric-v1",
            "--strict",
        ],
    );
    let requests = server.finish();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(requests.len(), 3 * m + 2);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("1 judge error(s)"), "{}", text(&o));
    assert!(
        err.contains("judge errors on faithfulness: 1 of"),
        "{}",
        text(&o)
    );
    assert!(err.contains("scores are high"), "{}", text(&o));
    let md = fs::read_to_string(tmp.path().join("all-high/report.md")).unwrap();
    assert!(md.contains("WARNING: faithfulness column guard"), "{md}");

    let slice = overall(&tmp.path().join("all-high"));
    assert_eq!(slice["metrics"]["groundedness"]["mean"], 4.0);
    assert_eq!(slice["metrics"]["groundedness"]["n"], m);
    assert_eq!(slice["metrics"]["faithfulness"]["mean"], 5.0);
    assert_eq!(slice["metrics"]["faithfulness"]["n"], m - 1);
    assert_eq!(slice["errors"]["faithfulness"], 1);
    assert_eq!(slice["metrics"]["hallucination"]["n"], m);

    // Framings: the faithfulness prompt carries the cited card's rules, groundedness does not.
    let user_text = |i: usize| -> String {
        let body = requests[i].json().unwrap();
        body["messages"][1]["content"].as_str().unwrap().to_string()
    };
    let first = judged_cases(&records(&tmp.path().join("all-high")))[0].clone();
    let lang = first["scores"]["lang"].as_str().unwrap().to_string();
    let rules_heading = match lang.as_str() {
        "en" => "## Rules",
        "es-419" => "## Reglas",
        _ => "## Regras",
    };
    let cited = first["citations"][0].as_str().unwrap().to_string();
    assert!(user_text(0).contains(&cited));
    assert!(!user_text(0).contains(rules_heading), "{}", user_text(0));
    assert!(user_text(1).contains(&cited));
    assert!(user_text(1).contains(rules_heading), "{}", user_text(1));
    assert!(user_text(0).contains(&format!("Answer language: {lang}")));
    // The failed dimension is recorded with every raw reply, not as a score.
    assert_eq!(first["judge"]["faithfulness"]["status"], "failed");
    assert_eq!(first["judge"]["faithfulness"]["detail"]["attempts"], 3);
    assert!(first["scores"]["scores"].get("faithfulness").is_none());

    // Run 2: mixed faithfulness (1 and 5): the guard is quiet, --strict passes.
    let mut script = Vec::new();
    for i in 0..m {
        script.push(verdict(3));
        script.push(verdict(if i % 2 == 0 { 1 } else { 5 }));
        script.push(verdict(4));
    }
    let (server, url) = ScriptedServer::start(script).unwrap();
    let o = eval(
        tmp.path(),
        "mixed",
        &[
            "--judge",
            "openai",
            "--judge-url",
            &url,
            "--scorer",
            "rubric-v1",
            "--strict",
        ],
    );
    server.finish();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let slice = overall(&tmp.path().join("mixed"));
    let want = (m.div_ceil(2) as f64 * 1.0 + (m / 2) as f64 * 5.0) / m as f64;
    let got = slice["metrics"]["faithfulness"]["mean"].as_f64().unwrap();
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    assert!(slice["errors"].get("faithfulness").is_none());
    assert!(String::from_utf8_lossy(&o.stderr).contains("guard: ok"));

    // Run 3: every faithfulness score low: alarm the other way.
    let script: Vec<_> = (0..m)
        .flat_map(|_| [verdict(2), verdict(1), verdict(2)])
        .collect();
    let (server, url) = ScriptedServer::start(script).unwrap();
    let o = eval(
        tmp.path(),
        "all-low",
        &[
            "--judge",
            "openai",
            "--judge-url",
            &url,
            "--scorer",
            "rubric-v1",
            "--strict",
        ],
    );
    server.finish();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("scores are low"));
}
