//! `cardinal trec-eval` prints exactly what trec_eval 10.0 printed (default) and, with
//! `--trec-eval-9`, what trec_eval 9.0.4 printed, on the fixture cases of `cardinal-trec`
//! (expected outputs committed there), and rejects bad input with exit 2.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cardinal-trec/tests/fixtures")
}

fn compare_with(expected_dir: &str, extra: &[&str]) -> usize {
    let dir = fixtures();
    let cases = std::fs::read_to_string(dir.join("cases.tsv")).unwrap();
    let mut compared = 0;
    for line in cases
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let cols: Vec<&str> = line.split('\t').collect();
        let [name, qrels, run, args] = cols[..] else {
            continue;
        };
        let expected = dir.join(expected_dir).join(format!("{name}.txt"));
        let Ok(expected) = std::fs::read_to_string(&expected) else {
            continue;
        };
        let out = Command::new(env!("CARGO_BIN_EXE_cardinal"))
            .arg("trec-eval")
            .args(extra)
            .args(args.split_whitespace())
            .arg(dir.join(qrels))
            .arg(dir.join(run))
            .output()
            .unwrap();
        if !out.status.success() {
            // Error cases are covered below and in cardinal-trec.
            assert_eq!(out.status.code(), Some(2), "{name}");
            continue;
        }
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            expected,
            "case {name} ({expected_dir})"
        );
        compared += 1;
    }
    compared
}

#[test]
fn matches_trec_eval_10_on_every_passing_fixture_case() {
    let n = compare_with("expected-10.0", &[]);
    assert!(n >= 10, "only {n} cases compared");
}

#[test]
fn matches_trec_eval_9_with_the_flag() {
    let n = compare_with("expected", &["--trec-eval-9"]);
    assert!(n >= 10, "only {n} cases compared");
}

#[test]
fn duplicate_docids_are_an_input_error() {
    let dir = fixtures();
    let out = Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .args(["trec-eval", "-m", "ndcg_cut.10"])
        .arg(dir.join("dup.qrels"))
        .arg(dir.join("dup.run"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("appears twice"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
