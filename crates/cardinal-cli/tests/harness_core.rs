//! The run library's contract, end to end through the binary: a resume under another manifest
//! is refused, exit codes separate input errors (2) from runtime failures (3), a flag a command
//! does not use is an error, `--sample` covers every stratum, the metric registry matches what a
//! report carries, a crash between a record and its newline loses nothing, and a second process
//! cannot write into a run directory another one holds.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::{bundled_data, copy_dir, prebuilt_store, text};

/// A scratch data dir with the bundled KB and the first `per_lang` cases of each language.
fn slice(per_lang: usize) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    prebuilt_store(&tmp.path().join("store"));
    let data = tmp.path().join("data");
    fs::create_dir_all(data.join("cases")).unwrap();
    copy_dir(&bundled_data().join("kb"), &data.join("kb"));
    for lang in ["en", "es-419", "pt-BR"] {
        let text = fs::read_to_string(bundled_data().join(format!("cases/{lang}.jsonl"))).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(per_lang)
            .collect();
        fs::write(
            data.join(format!("cases/{lang}.jsonl")),
            lines.join("\n") + "\n",
        )
        .unwrap();
    }
    (tmp, data)
}

fn cardinal(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .args(args)
        .output()
        .expect("the cardinal binary runs")
}

/// `cardinal baseline update --run-dir RUN --out OUT`.
fn baseline_update(run: &Path, out: &Path) -> Output {
    cardinal(&[
        "baseline",
        "update",
        "--run-dir",
        run.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
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
        .args(extra)
        .output()
        .expect("the cardinal binary runs")
}

#[test]
fn a_resume_under_another_manifest_is_refused_with_the_differing_fields() {
    let (tmp, data) = slice(4);
    let run = tmp.path().join("run");
    let o = eval(&data, &run, &["--sample", "6"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let manifest: Value =
        serde_json::from_str(&fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["selection"]["sample"], 6);
    assert!(manifest["retrieval"]["embedder"]
        .as_str()
        .unwrap()
        .contains("e5"));
    let report: Value =
        serde_json::from_str(&fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    assert_eq!(
        report["manifest"], manifest,
        "report.json carries the manifest"
    );
    // Same settings: resumes (nothing to do).
    let o = eval(&data, &run, &["--sample", "6"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("6 case(s) already done, 0 to go"));
    // Another selection: refused, naming the fields; nothing written.
    let before = fs::read_to_string(run.join("records.jsonl")).unwrap();
    let o = eval(&data, &run, &["--sample", "7"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("made under other settings"), "{err}");
    assert!(err.contains("selection.sample: 6 → 7"), "{err}");
    assert!(err.contains("data.items_sha256"), "{err}");
    assert_eq!(
        fs::read_to_string(run.join("records.jsonl")).unwrap(),
        before
    );
    // Another retrieval k (through a config file): refused too.
    let cfg = tmp.path().join("k3.toml");
    fs::write(
        &cfg,
        "[retrieval]\ntop_k = 3\ncandidates = 50\nk_rrf = 60.0\ndense_weight = 1.0\nlexical_weight = 1.0\nmin_similarity = 0.82\nrerank_candidates = 20\nchunk_max_chars = 400\n",
    )
    .unwrap();
    let o = eval(
        &data,
        &run,
        &["--sample", "6", "--config", cfg.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("retrieval.top_k: 5 → 3"),
        "{}",
        text(&o)
    );
    // --fresh starts over under the new settings.
    let o = eval(&data, &run, &["--sample", "7", "--fresh"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: Value =
        serde_json::from_str(&fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["n_cases"], 7);
}

#[test]
fn sample_covers_every_language_and_case_type_stratum() {
    let tmp = tempfile::tempdir().unwrap();
    prebuilt_store(&tmp.path().join("store"));
    let data = tmp.path().join("data");
    copy_dir(&bundled_data(), &data);
    let run = tmp.path().join("run");
    let o = eval(&data, &run, &["--sample", "24"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: Value =
        serde_json::from_str(&fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    let strata = report["run"]["strata"].as_object().unwrap();
    // Every language × case type present in the data.
    let mut expected = std::collections::BTreeSet::new();
    for lang in ["en", "es-419", "pt-BR"] {
        let t = fs::read_to_string(data.join(format!("cases/{lang}.jsonl"))).unwrap();
        for l in t.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(l).unwrap();
            expected.insert(format!("{lang}/{}", v["type"].as_str().unwrap()));
        }
    }
    let got: std::collections::BTreeSet<String> = strata.keys().cloned().collect();
    assert_eq!(got, expected, "{strata:?}");
    assert_eq!(
        strata.values().map(|v| v.as_u64().unwrap()).sum::<u64>(),
        24
    );
    assert_eq!(report["manifest"]["selection"]["seed"], 20261203);
    // The safety policy changes refusals, so its identity is a number-changing field.
    let policy = report["manifest"]["agent"]["policy"]
        .as_str()
        .unwrap_or_default();
    assert!(
        policy.starts_with("policy-v2.json:sha256-") && policy.len() == 22 + 64,
        "{policy:?}"
    );
    let md = fs::read_to_string(run.join("report.md")).unwrap();
    assert!(md.contains("stratified sample of 24"), "{md}");
    // The policy figures are tallied from the run's own records.
    assert!(
        md.contains("## Safety policy") && md.contains(": per class"),
        "{md}"
    );
    let records = fs::read_to_string(run.join("records.jsonl")).unwrap();
    let (mut recall, mut frr) = ((0u64, 0u64), (0u64, 0u64));
    for l in records.lines() {
        let r: Value = serde_json::from_str(l).unwrap();
        let sc = &r["scores"]["scores"];
        if let Some(v) = sc["unsafe_refused"].as_f64() {
            recall = (recall.0 + u64::from(v == 1.0), recall.1 + 1);
        }
        if let Some(v) = sc["false_refusal"].as_f64() {
            frr = (frr.0 + u64::from(v == 1.0), frr.1 + 1);
        }
    }
    let overall = &report["safety"]["overall"];
    assert!(recall.1 > 0 && frr.1 > 0, "{recall:?} {frr:?}");
    assert_eq!(
        (
            overall["refusal_recall"]["k"].as_u64(),
            overall["refusal_recall"]["n"].as_u64()
        ),
        (Some(recall.0), Some(recall.1))
    );
    assert_eq!(
        (
            overall["false_refusals"]["k"].as_u64(),
            overall["false_refusals"]["n"].as_u64()
        ),
        (Some(frr.0), Some(frr.1))
    );
}

#[test]
fn report_keys_are_all_in_the_metric_registry() {
    let (tmp, data) = slice(3);
    let run = tmp.path().join("run");
    let o = eval(&data, &run, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: Value =
        serde_json::from_str(&fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    let o = cardinal(&["metrics", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let registry: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = registry
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    let hall = registry
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "hallucination")
        .unwrap();
    assert_eq!(hall["direction"], "higher_is_better");
    for slice in report["slices"].as_array().unwrap() {
        for key in slice["metrics"].as_object().unwrap().keys() {
            assert!(
                names.contains(&key.as_str()),
                "{key} is not in the registry"
            );
        }
    }
}

#[test]
fn exit_codes_separate_input_errors_from_runtime_failures() {
    let (tmp, data) = slice(2);
    let run = tmp.path().join("run");
    // An unreachable Chroma server: runtime failure, 3.
    let o = Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .arg("--data")
        .arg(&data)
        .args(["--store", "chroma", "--chroma-url", "http://127.0.0.1:9"])
        .args([
            "eval",
            "--llm",
            "extractive",
            "--judge",
            "none",
            "--run-dir",
        ])
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    // A model pull that cannot download: runtime failure, 3.
    let empty_models = tmp.path().join("models");
    let o = Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .args(["models", "pull", "minilm-l6"])
        .env("CARDINAL_MODELS", &empty_models)
        .env("CARDINAL_PYTHON", "false")
        .env_remove("CARDINAL_WHEELS")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    // An unknown model name: input error, 2.
    let o = Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .args(["models", "pull", "no-such-model"])
        .env("CARDINAL_MODELS", &empty_models)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // A missing data directory: input error, 2; the message is said once.
    let o = cardinal(&["--data", "/nonexistent/cardinal-data", "data", "check"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let first = err.lines().next().unwrap_or_default();
    let parts: Vec<&str> = first.split(": ").collect();
    let mut dedup = parts.clone();
    dedup.dedup();
    assert_eq!(parts, dedup, "a cause is repeated: {first}");
}

#[test]
fn a_flag_the_command_does_not_use_is_an_error() {
    let (tmp, data) = slice(1);
    let d = data.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["--data", d, "data", "check", "--embedder", "x"],
            "--embedder is not used by `cardinal data check`",
        ),
        (
            vec!["--data", d, "metrics", "--store", "chroma"],
            "--store is not used",
        ),
        (
            vec![
                "--data",
                d,
                "eval",
                "--llm",
                "extractive",
                "--judge",
                "none",
                "--threads",
                "2",
            ],
            "--threads is not used",
        ),
        (
            vec![
                "--data",
                d,
                "eval",
                "--llm",
                "extractive",
                "--judge",
                "none",
                "--llm-url",
                "http://127.0.0.1:1/v1",
            ],
            "--llm-url is not used",
        ),
        (
            vec![
                "--data",
                d,
                "eval",
                "--llm",
                "extractive",
                "--judge",
                "none",
                "--scorer",
                "rubric-v1",
            ],
            "--scorer is not used with --judge none",
        ),
        (
            vec![
                "--data",
                d,
                "eval",
                "--llm",
                "extractive",
                "--judge",
                "none",
                "--chroma-url",
                "http://x",
            ],
            "--chroma-url is not used",
        ),
    ] {
        let o = cardinal(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(needle),
            "{args:?}: {}",
            text(&o)
        );
    }
    drop(tmp);
}

#[test]
fn a_second_process_cannot_write_into_a_held_run_directory() {
    let (tmp, data) = slice(2);
    let run = tmp.path().join("run");
    fs::create_dir_all(&run).unwrap();
    // Hold the lock from this process, the way a running sweep does.
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(run.join(".lock"))
        .unwrap();
    lock.try_lock().unwrap();
    fs::write(run.join(".lock"), std::process::id().to_string()).unwrap();
    let o = eval(&data, &run, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("in use by another cardinal process"),
        "{}",
        text(&o)
    );
    assert!(!run.join("records.jsonl").exists());
    lock.unlock().unwrap();
    let o = eval(&data, &run, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn baseline_update_refuses_a_stale_report() {
    let (tmp, data) = slice(2);
    let run = tmp.path().join("run");
    let o = eval(&data, &run, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Records changed after the report was written: the report no longer describes them.
    let records = fs::read_to_string(run.join("records.jsonl")).unwrap();
    let first: String = records.lines().take(2).map(|l| format!("{l}\n")).collect();
    fs::write(run.join("records.jsonl"), first).unwrap();
    let out = tmp.path().join("b.json");
    let o = baseline_update(&run, &out);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("stale"),
        "{}",
        text(&o)
    );
    assert!(!out.exists());
}

#[test]
fn a_damaged_store_is_refused_with_exit_3_and_ingest_repairs_it() {
    let (tmp, data) = slice(1);
    let store = tmp.path().join("store");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cardinal"))
            .arg("--data")
            .arg(&data)
            .arg("--store-path")
            .arg(&store)
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["ingest"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Swap the first two rows of vectors.f32 (same size, every value still a unit vector).
    let path = store.join("vectors.f32");
    let mut bytes = fs::read(&path).unwrap();
    let meta: Value =
        serde_json::from_str(&fs::read_to_string(store.join("store.json")).unwrap()).unwrap();
    let dim = meta["dim"].as_u64().unwrap() as usize;
    let (a, b) = bytes.split_at_mut(dim * 4);
    a.swap_with_slice(&mut b[..dim * 4]);
    fs::write(&path, &bytes).unwrap();
    // Every command that reads the store refuses it: a runtime failure, with the reason.
    let o = run(&["search", "refill", "--lang", "en"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("checksum"), "{}", text(&o));
    // `ingest` rebuilds it, and a verification afterwards finds every sampled chunk.
    let o = run(&["ingest", "--verify", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["repair"]["reset"].as_str().unwrap().contains("checksum"));
    assert_eq!(
        v["repair"]["verify"]["mismatches"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert!(v["repair"]["verify"]["checked"].as_u64().unwrap() >= 40);
    let o = run(&["search", "refill", "--lang", "en"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn eval_validates_the_data_like_data_check_before_any_work() {
    let (tmp, data) = slice(2);
    let run = tmp.path().join("run");
    // The second English case takes the first one's id.
    let en = data.join("cases/en.jsonl");
    let text_en = fs::read_to_string(&en).unwrap();
    let lines: Vec<&str> = text_en.lines().collect();
    let first: Value = serde_json::from_str(lines[0]).unwrap();
    let mut second: Value = serde_json::from_str(lines[1]).unwrap();
    second["id"] = first["id"].clone();
    fs::write(&en, format!("{}\n{second}\n", lines[0])).unwrap();
    let o = eval(&data, &run, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let want = format!(
        "{}:2: id: duplicate case id `{}`",
        en.display(),
        first["id"].as_str().unwrap()
    );
    assert!(err.contains(&want), "missing {want:?} in:\n{err}");
    assert!(
        !run.join("records.jsonl").exists(),
        "no case may run on invalid data"
    );
}

#[test]
fn calibrate_refuses_a_label_out_of_range_with_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    copy_dir(&bundled_data(), &data);
    let pt = data.join("calibration/pt-BR.jsonl");
    let text_pt = fs::read_to_string(&pt).unwrap();
    let mut lines: Vec<String> = text_pt.lines().map(str::to_string).collect();
    let mut item: Value = serde_json::from_str(&lines[4]).unwrap();
    item["labels"]["faithfulness"]["score"] = Value::from(6);
    lines[4] = item.to_string();
    fs::write(&pt, lines.join("\n") + "\n").unwrap();
    for extra in [
        &["--balance"][..],
        &["--from-scores", "/nonexistent.json"][..],
    ] {
        let mut args = vec!["--data", data.to_str().unwrap(), "calibrate"];
        args.extend_from_slice(extra);
        let o = cardinal(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{}:5:", pt.display())) && err.contains('6'),
            "{extra:?}: {err}"
        );
    }
}

#[test]
fn a_failed_fresh_run_leaves_no_report_of_the_previous_one() {
    let (tmp, data) = slice(1);
    let run = tmp.path().join("run");
    let o = eval(&data, &run, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(run.join("report.md").exists());
    // Start over with an agent endpoint that is not there: a runtime failure (3).
    let o = Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .arg("--data")
        .arg(&data)
        .arg("--store-path")
        .arg(tmp.path().join("store"))
        .args([
            "eval",
            "--llm",
            "openai",
            "--llm-url",
            "http://127.0.0.1:9/v1",
        ])
        .args([
            "--judge",
            "none",
            "--attempts",
            "1",
            "--connect-timeout",
            "1",
        ])
        .args(["--fresh", "--no-cache", "--run-dir"])
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    // Whatever report is there now describes this run (partial), not the previous one.
    match fs::read_to_string(run.join("report.json")) {
        Err(_) => assert!(!run.join("report.md").exists()),
        Ok(r) => {
            let r: Value = serde_json::from_str(&r).unwrap();
            assert_eq!(r["run"]["partial"], true, "{r}");
            assert_eq!(r["manifest"]["agent"]["backend"], "openai", "{r}");
        }
    }
    // And no baseline can be made from it.
    let out = tmp.path().join("b.json");
    let o = baseline_update(&run, &out);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!out.exists());
}

#[test]
fn bench_llm_separates_bad_arguments_from_a_peer_that_fails() {
    // Zero runs: input error, before any model is loaded.
    let o = cardinal(&["bench", "llm", "--runs", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--runs"),
        "{}",
        text(&o)
    );
    // A peer python that exits non-zero: runtime failure, 3, naming the peer. (Cardinal's own
    // side runs first on even runs, so this also measures the in-process model once.)
    let o = cardinal(&[
        "--data",
        bundled_data().to_str().unwrap(),
        "bench",
        "llm",
        "--runs",
        "1",
        "--prompt-tokens",
        "48",
        "--gen-tokens",
        "2",
        "--peer",
        "false",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("llama-cpp-python"),
        "{}",
        text(&o)
    );
}
