//! `cardinal eval` end to end on a small slice of the bundled cases with the real embedder and
//! the embedded store: resumability, gates and the baseline, TREC export.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::{bundled_data, copy_dir, prebuilt_store, text};

/// A scratch data dir: the bundled KB and the first `per_lang` cases of each language, plus one
/// case whose gold card cannot be retrieved for its question (so hit@k < 1 for sure).
fn slice(per_lang: usize) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    prebuilt_store(&tmp.path().join("store"));
    let data = tmp.path().join("data");
    fs::create_dir_all(data.join("cases")).unwrap();
    copy_dir(&bundled_data().join("kb"), &data.join("kb"));
    for lang in ["en", "es-419", "pt-BR"] {
        let text = fs::read_to_string(bundled_data().join(format!("cases/{lang}.jsonl"))).unwrap();
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(per_lang)
            .map(String::from)
            .collect();
        if lang == "en" {
            lines.push(
                r#"{"id": "en-test-unreachable", "lang": "en", "type": "golden", "question": "Where can I park my car and how much does the garage cost?", "must_cite_one_of": ["missed-dose.en"], "expect": "answer"}"#
                    .into(),
            );
        }
        fs::write(
            data.join(format!("cases/{lang}.jsonl")),
            lines.join("\n") + "\n",
        )
        .unwrap();
    }
    (tmp, data)
}

fn eval(data: &Path, run_dir: &Path, extra: &[&str]) -> Output {
    let store = data.parent().unwrap().join("store");
    Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .arg("--data")
        .arg(data)
        .arg("--store-path")
        .arg(&store)
        .args(["eval", "--llm", "extractive", "--judge", "none"])
        .arg("--run-dir")
        .arg(run_dir)
        .arg("--cache-dir")
        .arg(data.parent().unwrap().join("cache"))
        .args(extra)
        .output()
        .expect("the cardinal binary runs")
}

fn overall(report: &Value, key: &str) -> (f64, u64) {
    let slice = report["slices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["dim"] == "overall")
        .unwrap_or_else(|| panic!("no overall slice in {report}"));
    let k = &slice["metrics"][key];
    (k["mean"].as_f64().unwrap(), k["n"].as_u64().unwrap())
}

#[test]
fn a_resumed_run_reproduces_the_fresh_report_and_gates_decide_the_exit_code() {
    let (tmp, data) = slice(6);
    let fresh = tmp.path().join("fresh");
    let o = eval(&data, &fresh, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report_text = fs::read_to_string(fresh.join("report.json")).unwrap();
    let report: Value = serde_json::from_str(&report_text).unwrap();
    assert_eq!(report["n_cases"], 19);
    // Gold-labelled cases only carry retrieval keys; the unreachable case pulls hit below 1.
    let (hit, n_hit) = overall(&report, "retrieval_hit_at_k");
    let records = fs::read_to_string(fresh.join("records.jsonl")).unwrap();
    let with_gold = records
        .lines()
        .filter(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            !v["gold"].as_array().unwrap().is_empty()
        })
        .count();
    assert_eq!(n_hit as usize, with_gold);
    assert!(hit < 1.0 && hit > 0.5, "hit {hit}");
    let md = fs::read_to_string(fresh.join("report.md")).unwrap();
    assert!(md.contains("lower bound"), "{md}");

    // Interrupted run: a few complete records and a torn last line.
    let resumed = tmp.path().join("resumed");
    fs::create_dir_all(&resumed).unwrap();
    let mut partial: String = records.lines().take(7).map(|l| format!("{l}\n")).collect();
    partial.push_str(&records.lines().nth(7).unwrap()[..40]);
    fs::write(resumed.join("records.jsonl"), partial).unwrap();
    // An interrupted run leaves its manifest: the resume continues under the same settings.
    fs::copy(fresh.join("manifest.json"), resumed.join("manifest.json")).unwrap();
    let o = eval(&data, &resumed, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("7 case(s) already done, 12 to go"),
        "{}",
        text(&o)
    );
    assert_eq!(
        fs::read_to_string(resumed.join("report.json")).unwrap(),
        report_text
    );
    // Everything done: a third run scores nothing new and still gives the same report.
    let o = eval(&data, &resumed, &[]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("19 case(s) already done, 0 to go"),
        "{}",
        text(&o)
    );
    assert_eq!(
        fs::read_to_string(resumed.join("report.json")).unwrap(),
        report_text
    );

    // Gates: a floor above the measured hit fails with exit 1, one below passes.
    let high = format!("{:.4}", (hit + 0.0001).min(1.0));
    let o = eval(&data, &resumed, &["--min-retrieval-hit", &high]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("FAIL: gate retrieval_hit_at_k: mean"),
        "{}",
        text(&o)
    );
    let o = eval(
        &data,
        &resumed,
        &[
            "--min-retrieval-hit",
            "0.1",
            "--min-retrieval-recall",
            "0.1",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (recall, _) = overall(&report, "retrieval_recall_at_k");
    let o = eval(
        &data,
        &resumed,
        &[
            "--min-retrieval-recall",
            &format!("{:.4}", (recall + 0.0001).min(1.0)),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // A floor outside [0, 1] is a usage error.
    let o = eval(&data, &resumed, &["--min-retrieval-hit", "1.5"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    // Baseline: written from the run, it passes against itself...
    let baseline = tmp.path().join("baseline.json");
    let o = Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .args(["baseline", "update", "--run-dir"])
        .arg(&resumed)
        .arg("--out")
        .arg(&baseline)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let b = baseline.to_str().unwrap();
    let o = eval(&data, &resumed, &["--baseline", b]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // ...and fails, printing the diff, when the baseline claims a better hit@k than we have.
    let mut bv: Value = serde_json::from_str(&fs::read_to_string(&baseline).unwrap()).unwrap();
    let stored = bv["slices"]["overall"]["retrieval_hit_at_k"]["mean"]
        .as_f64()
        .unwrap();
    assert!((stored - hit).abs() < 1e-12);
    bv["slices"]["overall"]["retrieval_hit_at_k"]["mean"] = Value::from(hit + 0.05);
    fs::write(&baseline, serde_json::to_string_pretty(&bv).unwrap()).unwrap();
    let o = eval(&data, &resumed, &["--baseline", b]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("retrieval_hit_at_k"),
        "{}",
        text(&o)
    );
    // Within tolerance it passes.
    let o = eval(&data, &resumed, &["--baseline", b, "--tolerance", "0.06"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A baseline that is not a baseline is an input error.
    fs::write(&baseline, "{\"not\": \"a baseline\"}").unwrap();
    let o = eval(&data, &resumed, &["--baseline", b]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn the_sweep_exports_trec_files_that_trec_eval_rescores_to_the_same_hit() {
    let (tmp, data) = slice(4);
    let run_dir = tmp.path().join("run");
    let trec = tmp.path().join("trec");
    let o = eval(&data, &run_dir, &["--export-trec", trec.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: Value =
        serde_json::from_str(&fs::read_to_string(run_dir.join("report.json")).unwrap()).unwrap();
    let (hit, _) = overall(&report, "retrieval_hit_at_k");
    let o = Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .arg("trec-eval")
        .arg(trec.join("qrels.txt"))
        .arg(trec.join("run.txt"))
        .args(["-m", "success.5"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let all: f64 = out
        .lines()
        .find(|l| l.contains("\tall\t"))
        .and_then(|l| l.rsplit('\t').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no all line in {out}"));
    assert!((all - hit).abs() < 5e-5, "trec_eval {all} vs report {hit}");
}
