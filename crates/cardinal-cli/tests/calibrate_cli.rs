//! `cardinal calibrate` against the scripted OpenAI-compatible server on a subset of the
//! labelled corpus: the report's numbers equal those computed here from the labels and the
//! scripted scores; scores are anchored to the labels' sha256; the gate decides the exit code.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use cardinal_llm::testing::{ScriptedResponse, ScriptedServer};
use serde_json::Value;

mod common;
use common::{bundled_data, text};

fn bin(s: u64) -> u8 {
    match s {
        1 | 2 => 0,
        3 => 1,
        _ => 2,
    }
}

/// A labels dir with, per language, the first 2 rule-violation items and the first 3 others
/// that cite a card. Returns the items in the order the command judges them within a phase.
fn subset(dir: &Path) -> Vec<Value> {
    fs::create_dir_all(dir).unwrap();
    let mut all = Vec::new();
    for lang in ["en", "es-419", "pt-BR"] {
        let text =
            fs::read_to_string(bundled_data().join(format!("calibration/{lang}.jsonl"))).unwrap();
        let (mut rv, mut other) = (0, 0);
        let mut lines = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line).unwrap();
            if v["cited"].as_array().unwrap().is_empty() {
                continue;
            }
            let is_rv = v["category"] == "rule_violation";
            if (is_rv && rv < 2) || (!is_rv && other < 3) {
                if is_rv {
                    rv += 1
                } else {
                    other += 1
                }
                lines.push(line.to_string());
                all.push(v);
            }
        }
        fs::write(dir.join(format!("{lang}.jsonl")), lines.join("\n") + "\n").unwrap();
    }
    // The command's order within each phase: language, cited ids, item id.
    let key = |v: &Value| {
        let cited: Vec<String> = v["cited"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        (
            v["lang"].as_str().unwrap().to_string(),
            cited,
            v["id"].as_str().unwrap().to_string(),
        )
    };
    all.sort_by_key(key);
    all
}

fn verdict(score: u64) -> ScriptedResponse {
    ScriptedResponse::completion(&format!(
        "{{\"score\": {score}, \"rationale\": \"scripted\"}}"
    ))
}

fn calibrate(labels: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .arg("--data")
        .arg(bundled_data())
        .arg("calibrate")
        .arg("--labels")
        .arg(labels)
        .arg("--out")
        .arg(out)
        .arg("--no-cache")
        .args(extra)
        .output()
        .expect("the cardinal binary runs")
}

fn row<'a>(report: &'a Value, dim: &str, slice: &str) -> &'a Value {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["dimension"] == dim && r["slice"] == slice)
        .unwrap()
}

#[test]
fn scripted_judge_gives_the_expected_report_anchored_to_the_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let labels = tmp.path().join("labels");
    let items = subset(&labels);
    assert_eq!(items.len(), 15);

    // Script, in the command's order (all groundedness, all faithfulness, then the header-only
    // control on rule-violation items). The judge echoes the human groundedness, except on
    // every third item where it answers 5; faithfulness always echoes the human; the
    // header-only control always says 5 (it cannot see the broken rule).
    let mut script = Vec::new();
    let mut want_g = (0usize, 0usize); // (agreeing, n)
    let mut want_ctrl = (0usize, 0usize);
    for (i, it) in items.iter().enumerate() {
        let hg = it["labels"]["groundedness"]["score"].as_u64().unwrap();
        let jg = if i % 3 == 0 { 5 } else { hg };
        script.push(verdict(jg));
        want_g.1 += 1;
        if bin(jg) == bin(hg) {
            want_g.0 += 1;
        }
    }
    for it in &items {
        script.push(verdict(
            it["labels"]["faithfulness"]["score"].as_u64().unwrap(),
        ));
    }
    for it in items.iter().filter(|it| it["category"] == "rule_violation") {
        let hf = it["labels"]["faithfulness"]["score"].as_u64().unwrap();
        script.push(verdict(5));
        want_ctrl.1 += 1;
        if bin(5) == bin(hf) {
            want_ctrl.0 += 1;
        }
    }
    let n_calls = script.len();
    let (server, url) = ScriptedServer::start(script).unwrap();
    let out = tmp.path().join("out");
    let o = calibrate(&labels, &out, &["--llm", "openai", "--llm-url", &url]);
    let requests = server.finish();
    assert_eq!(requests.len(), n_calls, "{}", text(&o));
    let report: Value =
        serde_json::from_str(&fs::read_to_string(out.join("calibration.json")).unwrap()).unwrap();

    let g = row(&report, "groundedness", "all");
    assert_eq!(g["n"], 15);
    let want = want_g.0 as f64 / want_g.1 as f64;
    assert!((g["agreement"].as_f64().unwrap() - want).abs() < 1e-12);
    let f = row(&report, "faithfulness", "all");
    assert_eq!(f["agreement"], 1.0);
    assert_eq!(
        f["kappa_quadratic"]
            .as_f64()
            .map(|k| (k - 1.0).abs() < 1e-12),
        Some(true)
    );
    assert_eq!(row(&report, "faithfulness", "es-419")["n"], 5);
    // Confusion of faithfulness is diagonal and sums to n.
    let c = f["confusion"].as_array().unwrap();
    let total: u64 = c
        .iter()
        .flat_map(|r| r.as_array().unwrap())
        .map(|x| x.as_u64().unwrap())
        .sum();
    assert_eq!(total, 15);
    for (i, r) in c.iter().enumerate() {
        for (j, x) in r.as_array().unwrap().iter().enumerate() {
            if i != j {
                assert_eq!(x, 0);
            }
        }
    }
    // The control: full-card framing agrees on all 6 rule-violation items, header-only as
    // often as a 5 lands in the human bin.
    let ctrl = report["control"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["slice"] == "all")
        .unwrap();
    assert_eq!(ctrl["full_card"]["n"], 6);
    assert_eq!(ctrl["full_card"]["agreement"], 1.0);
    assert_eq!(ctrl["header_only"]["n"], want_ctrl.1);
    let want = want_ctrl.0 as f64 / want_ctrl.1 as f64;
    assert!((ctrl["header_only"]["agreement"].as_f64().unwrap() - want).abs() < 1e-12);
    // Gate: faithfulness passes; groundedness passes iff its agreement >= 0.70.
    let g_pass = want_g.0 as f64 / want_g.1 as f64 >= 0.70;
    assert_eq!(
        o.status.code(),
        Some(if g_pass { 0 } else { 1 }),
        "{}",
        text(&o)
    );
    let md = fs::read_to_string(out.join("calibration.md")).unwrap();
    assert!(md.contains("ADR-0029 control"), "{md}");

    // Reporting again from the scores file gives the same report, no model needed.
    let again = tmp.path().join("again");
    let scores = out.join("judge-scores.json");
    let o = calibrate(
        &labels,
        &again,
        &["--from-scores", scores.to_str().unwrap()],
    );
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(1),
        "{}",
        text(&o)
    );
    assert_eq!(
        fs::read_to_string(again.join("calibration.json")).unwrap(),
        fs::read_to_string(out.join("calibration.json")).unwrap()
    );

    // Anchoring: a label edited after scoring -> refused with a clear message, exit 2.
    let en = labels.join("en.jsonl");
    let edited = fs::read_to_string(&en)
        .unwrap()
        .replacen("\"score\": ", "\"score\":", 1);
    fs::write(&en, edited).unwrap();
    let o = calibrate(
        &labels,
        &again,
        &["--from-scores", scores.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("labels changed since the judge scored them"),
        "{err}"
    );
    assert!(err.contains("en.jsonl"), "{err}");
    assert!(err.contains("re-anchor"), "{err}");
}

#[test]
fn a_judge_that_disagrees_fails_the_gate() {
    let tmp = tempfile::tempdir().unwrap();
    let labels = tmp.path().join("labels");
    let items = subset(&labels);
    // Always the opposite bin of the human (high -> 1, otherwise 5).
    let flip = |s: u64| if s >= 4 { 1 } else { 5 };
    let human = |it: &Value, dim: &str| it["labels"][dim]["score"].as_u64().unwrap();
    let mut script: Vec<_> = items
        .iter()
        .map(|it| verdict(flip(human(it, "groundedness"))))
        .collect();
    script.extend(
        items
            .iter()
            .map(|it| verdict(flip(human(it, "faithfulness")))),
    );
    script.extend(
        items
            .iter()
            .filter(|it| it["category"] == "rule_violation")
            .map(|it| verdict(flip(human(it, "faithfulness")))),
    );
    let (server, url) = ScriptedServer::start(script).unwrap();
    let out = tmp.path().join("out");
    let o = calibrate(&labels, &out, &["--llm", "openai", "--llm-url", &url]);
    server.finish();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("calibration gate failed"));
    let report: Value =
        serde_json::from_str(&fs::read_to_string(out.join("calibration.json")).unwrap()).unwrap();
    assert_eq!(row(&report, "faithfulness", "all")["agreement"], 0.0);
    assert!(report["gate"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g["pass"] == false));
}
