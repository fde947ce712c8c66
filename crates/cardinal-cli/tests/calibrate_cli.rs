//! `cardinal calibrate` against the scripted OpenAI-compatible server on a subset of the
//! labelled corpus: with the rubric scorer, the report's numbers equal those computed here from
//! the reference labels and the scripted scores; with the checks scorer, every check is one
//! logprobs request and the probabilities map to the documented scores; scores are anchored to
//! the labels' sha256; the gate decides the exit code; the fit never reads a test label.

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

/// The reference score of an item: adjudicated when present, else the first label.
fn reference(v: &Value, dim: &str) -> u64 {
    v["adjudicated"][dim]["score"]
        .as_u64()
        .unwrap_or_else(|| v["labels"][dim]["score"].as_u64().unwrap())
}

/// A labels dir with, per language, the first 2 rule-violation items and the first 3 others.
/// Returns the items in the order the command judges them (language, cited ids, item id).
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

fn row<'a>(report: &'a Value, variant: &str, dim: &str, slice: &str) -> &'a Value {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["variant"] == variant && r["dimension"] == dim && r["slice"] == slice)
        .unwrap_or_else(|| panic!("no row {variant}/{dim}/{slice}"))
}

#[test]
fn scripted_rubric_judge_gives_the_expected_report_anchored_to_the_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let labels = tmp.path().join("labels");
    let items = subset(&labels);
    assert_eq!(items.len(), 15);
    // Per item, groundedness then faithfulness. The judge echoes the reference groundedness
    // except on every third item where it answers 5; faithfulness always echoes.
    let mut script = Vec::new();
    let mut want_g = 0usize;
    for (i, it) in items.iter().enumerate() {
        let hg = reference(it, "groundedness");
        let jg = if i % 3 == 0 { 5 } else { hg };
        script.push(verdict(jg));
        script.push(verdict(reference(it, "faithfulness")));
        if bin(jg) == bin(hg) {
            want_g += 1;
        }
    }
    let n_calls = script.len();
    let (server, url) = ScriptedServer::start(script).unwrap();
    let out = tmp.path().join("out");
    let o = calibrate(
        &labels,
        &out,
        &[
            "--llm",
            "openai",
            "--llm-url",
            &url,
            "--scorer",
            "rubric-v1",
            "--split",
            "all",
        ],
    );
    let requests = server.finish();
    assert_eq!(requests.len(), n_calls, "{}", text(&o));
    let report: Value =
        serde_json::from_str(&fs::read_to_string(out.join("calibration.json")).unwrap()).unwrap();
    let g = row(&report, "judge", "groundedness", "all");
    assert_eq!(g["n"], 15);
    assert!((g["agreement"].as_f64().unwrap() - want_g as f64 / 15.0).abs() < 1e-12);
    let f = row(&report, "judge", "faithfulness", "all");
    assert_eq!(f["agreement"], 1.0);
    assert_eq!(row(&report, "judge", "faithfulness", "es-419")["n"], 5);
    let c = f["confusion"].as_array().unwrap();
    for (i, r) in c.iter().enumerate() {
        for (j, x) in r.as_array().unwrap().iter().enumerate() {
            if i != j {
                assert_eq!(x, 0);
            }
        }
    }
    // Beside every agreement: the shortcut baselines and the human ceiling.
    assert!(report["shortcuts"]["faithfulness"]["all"]["majority_agreement"].is_number());
    assert!(report["ceiling"]["groundedness"]["all"]["n"]
        .as_u64()
        .is_some());
    // The gate is checked overall and per language.
    let g_pass = report["gate"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g["pass"] == true);
    assert_eq!(
        o.status.code(),
        Some(if g_pass { 0 } else { 1 }),
        "{}",
        text(&o)
    );
    let md = fs::read_to_string(out.join("calibration.md")).unwrap();
    assert!(
        md.contains("majority bin") && md.contains("human ceiling"),
        "{md}"
    );

    // Reporting again from the scores file gives the same report, no model needed.
    let again = tmp.path().join("again");
    let scores = out.join("judge-scores.json");
    let o = calibrate(
        &labels,
        &again,
        &["--from-scores", scores.to_str().unwrap()],
    );
    assert!(matches!(o.status.code(), Some(0) | Some(1)), "{}", text(&o));
    assert_eq!(
        fs::read_to_string(again.join("calibration.json")).unwrap(),
        fs::read_to_string(out.join("calibration.json")).unwrap()
    );
    // Anchoring: a label edited after scoring -> refused with a clear message, exit 2.
    let en = labels.join("en.jsonl");
    let edited = fs::read_to_string(&en).unwrap().replacen(
        "\"rationale\": \"",
        "\"rationale\": \"(edited) ",
        1,
    );
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
    assert!(
        err.contains("en.jsonl") && err.contains("re-anchor"),
        "{err}"
    );
}

#[test]
fn the_checks_scorer_reads_probabilities_and_the_fit_reads_dev_only() {
    let tmp = tempfile::tempdir().unwrap();
    let labels = tmp.path().join("labels");
    subset(&labels);
    // Every check answers P(Yes) = 0.9: every sentence is a supported claim (u = 0.09, raw
    // groundedness 0.91 → 5) but also contradicts (raw faithfulness 0.1 → 1).
    let script: Vec<ScriptedResponse> = (0..3000).map(|_| ScriptedResponse::yes_no(0.9)).collect();
    let (server, url) = ScriptedServer::start(script).unwrap();
    let out = tmp.path().join("out");
    let o = calibrate(
        &labels,
        &out,
        &["--llm", "openai", "--llm-url", &url, "--split", "all"],
    );
    let requests = server.finish();
    let scores: Value =
        serde_json::from_str(&fs::read_to_string(out.join("judge-scores.json")).unwrap()).unwrap();
    let all_items = scores["items"].as_array().unwrap();
    let checks: usize = all_items
        .iter()
        .map(|i| i["checks"].as_array().unwrap().len())
        .sum();
    // One request per check, plus the five content-free probes.
    assert_eq!(requests.len(), checks + 5, "{}", text(&o));
    let body = requests[5].json().unwrap();
    assert_eq!(body["max_tokens"], 1);
    assert_eq!(body["logprobs"], true);
    for it in all_items.iter().filter(|i| i["framing"] == "full_card") {
        assert_eq!(it["verdicts"]["groundedness"]["score"], 5.0, "{it}");
        assert_eq!(it["verdicts"]["faithfulness"]["score"], 1.0, "{it}");
        for c in it["checks"].as_array().unwrap() {
            assert!((c["p_yes"].as_f64().unwrap() - 0.9).abs() < 1e-9);
        }
    }
    // The header-only control ran on the 6 rule-violation items without rule checks.
    let control: Vec<&Value> = all_items
        .iter()
        .filter(|i| i["framing"] == "header_only")
        .collect();
    assert_eq!(control.len(), 6);
    assert!(control.iter().all(|i| i["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["kind"] != "breaks")));

    // A second run whose probabilities vary from check to check, so the raw scores spread and
    // the fitted cut points depend on the labels they read.
    let script: Vec<ScriptedResponse> = (0..3000)
        .map(|i| ScriptedResponse::yes_no(((i * 37) % 97) as f64 / 97.0))
        .collect();
    let (server, url) = ScriptedServer::start(script).unwrap();
    let out = tmp.path().join("out-varied");
    let o = calibrate(
        &labels,
        &out,
        &[
            "--llm",
            "openai",
            "--llm-url",
            &url,
            "--split",
            "all",
            "--no-control",
        ],
    );
    server.finish();
    assert!(matches!(o.status.code(), Some(0) | Some(1)), "{}", text(&o));

    // Fit on dev: the fitted file records the labels' sha256 and split dev; poisoning every
    // test label (not dev) leaves the fitted values unchanged.
    let fit = |calibration: &Path, scores_file: &Path| -> Value {
        let o = calibrate(
            &labels,
            &tmp.path().join("fit-out"),
            &[
                "--from-scores",
                scores_file.to_str().unwrap(),
                "--fit",
                "--calibration",
                calibration.to_str().unwrap(),
            ],
        );
        assert!(matches!(o.status.code(), Some(0) | Some(1)), "{}", text(&o));
        serde_json::from_str(&fs::read_to_string(calibration).unwrap()).unwrap()
    };
    let scores_path = out.join("judge-scores.json");
    let first = fit(&tmp.path().join("c1.json"), &scores_path);
    assert_eq!(first["split"], "dev");
    assert_eq!(first["fitted_on"].as_array().unwrap().len(), 3);
    let keep = |v: &Value| {
        (
            v["groundedness"].clone(),
            v["faithfulness"].clone(),
            v["content_free"].clone(),
        )
    };
    // Poison: every test item's labels flipped to the opposite end of the scale.
    for lang in ["en", "es-419", "pt-BR"] {
        let p = labels.join(format!("{lang}.jsonl"));
        let poisoned: String = fs::read_to_string(&p)
            .unwrap()
            .lines()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                if v["split"] == "test" {
                    for dim in ["groundedness", "faithfulness"] {
                        let s = v["labels"][dim]["score"].as_u64().unwrap();
                        v["labels"][dim]["score"] = Value::from(6 - s);
                        if v["adjudicated"][dim].is_object() {
                            let a = v["adjudicated"][dim]["score"].as_u64().unwrap();
                            v["adjudicated"][dim]["score"] = Value::from(6 - a);
                        }
                    }
                }
                serde_json::to_string(&v).unwrap() + "\n"
            })
            .collect();
        fs::write(&p, poisoned).unwrap();
    }
    // The scores are anchored to the old labels: re-anchor them to the poisoned ones (same
    // scores, new hashes) so that only the labels differ between the two fits.
    let mut s: Value = serde_json::from_str(&fs::read_to_string(&scores_path).unwrap()).unwrap();
    for h in s["labels"].as_array_mut().unwrap() {
        let f = labels.join(h["file"].as_str().unwrap());
        let bytes = fs::read(&f).unwrap();
        h["sha256"] = Value::from(cardinal_digest::sha256_hex(&bytes));
    }
    let reanchored = tmp.path().join("reanchored.json");
    fs::write(&reanchored, serde_json::to_string(&s).unwrap()).unwrap();
    let second = fit(&tmp.path().join("c2.json"), &reanchored);
    assert_eq!(keep(&first), keep(&second), "the fit read a test label");
    assert_ne!(first["fitted_on"], second["fitted_on"]);

    // --rescore: the stored probabilities scored again under the fitted calibration, without
    // a model: every verdict follows the fitted cut points applied to the stored raw score.
    let rescored = tmp.path().join("rescored");
    let o = calibrate(
        &labels,
        &rescored,
        &[
            "--from-scores",
            reanchored.to_str().unwrap(),
            "--rescore",
            "--calibration",
            tmp.path().join("c2.json").to_str().unwrap(),
        ],
    );
    assert!(matches!(o.status.code(), Some(0) | Some(1)), "{}", text(&o));
    let r: Value =
        serde_json::from_str(&fs::read_to_string(rescored.join("judge-scores.json")).unwrap())
            .unwrap();
    assert_eq!(r["calibration"], second);
    let cuts = |dim: &str| -> Vec<f64> {
        second[dim]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_f64().unwrap())
            .collect()
    };
    let mut checked = 0;
    for it in r["items"].as_array().unwrap() {
        for dim in ["groundedness", "faithfulness"] {
            let v = &it["verdicts"][dim];
            let raw = v["detail"]["raw"][dim].as_f64().unwrap();
            let want = 1 + cuts(dim).iter().filter(|&&c| raw >= c).count() as u64;
            assert_eq!(v["score"].as_f64().unwrap() as u64, want, "{it}");
            checked += 1;
        }
    }
    assert!(checked > 0);
    // Without --from-scores there is nothing to re-score.
    let o = calibrate(&labels, &tmp.path().join("x"), &["--rescore"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}
