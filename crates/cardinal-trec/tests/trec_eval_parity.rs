//! Byte-for-byte parity with the real trec_eval on the cases of `tests/fixtures/cases.tsv`:
//! by default with trec_eval 10.0 (`expected-10.0/`), and with `EvalOptions::trec_eval_9` with
//! trec_eval 9.0.x (`expected/`, written by 9.0.4). The expected files were written by those
//! binaries (`tests/fixtures/regenerate.sh`, provenance in `tests/fixtures/README.md`).

use std::path::{Path, PathBuf};

use cardinal_trec::{
    evaluate, evaluate_with, parse_measure_args, parse_qrels, parse_run, EvalOptions, TrecError,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

struct Case {
    name: String,
    qrels: PathBuf,
    run: PathBuf,
    args: Vec<String>,
}

fn cases() -> Vec<Case> {
    let dir = fixtures();
    let text = std::fs::read_to_string(dir.join("cases.tsv")).expect("cases.tsv is readable");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(
                cols.len(),
                4,
                "cases.tsv line `{l}` needs 4 tab-separated columns"
            );
            Case {
                name: cols[0].to_string(),
                qrels: dir.join(cols[1]),
                run: dir.join(cols[2]),
                args: cols[3].split_whitespace().map(str::to_string).collect(),
            }
        })
        .collect()
}

/// What `cardinal trec-eval` does with trec_eval's flags: `-q`, `-c`, `-m SPEC` (and
/// `--trec-eval-9` when `trec_eval_9`).
fn run_case(case: &Case, trec_eval_9: bool) -> Result<String, TrecError> {
    let (mut per_query, mut complete, mut specs) = (false, false, Vec::new());
    let mut args = case.args.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "-q" => per_query = true,
            "-c" => complete = true,
            "-m" => specs.push(args.next().expect("-m takes a value").clone()),
            other => panic!(
                "case {}: flag {other} not supported by this test",
                case.name
            ),
        }
    }
    let measures = parse_measure_args(&specs)?;
    let qrels = parse_qrels(&case.qrels)?;
    let run = parse_run(&case.run)?;
    let evaluation = if trec_eval_9 {
        let options = EvalOptions {
            complete,
            trec_eval_9,
        };
        evaluate_with(&qrels, &run, &measures, &options)?
    } else {
        evaluate(&qrels, &run, &measures, complete)?
    };
    Ok(evaluation.render(per_query))
}

#[test]
fn output_is_byte_identical_to_trec_eval_10() {
    check_all("expected-10.0", false);
}

#[test]
fn output_is_byte_identical_to_trec_eval_9_with_the_option() {
    check_all("expected", true);
}

fn check_all(expected_dir: &str, trec_eval_9: bool) {
    let cases = cases();
    assert!(cases.len() >= 20, "cases.tsv lost its cases");
    let mut failures = Vec::new();
    for case in &cases {
        let expected_path = fixtures()
            .join(expected_dir)
            .join(format!("{}.txt", case.name));
        let expected = std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
        let got = run_case(case, trec_eval_9);
        match (expected.strip_prefix("ERROR exit "), got) {
            (None, Ok(out)) if out == expected => {}
            (None, Ok(out)) => failures.push(format!(
                "{}: output differs\n--- trec_eval\n{expected}--- cardinal-trec\n{out}",
                case.name
            )),
            (None, Err(e)) => failures.push(format!("{}: unexpected error: {e}", case.name)),
            (Some(code), Ok(out)) => failures.push(format!(
                "{}: trec_eval failed (exit {}), we printed\n{out}",
                case.name,
                code.trim()
            )),
            (Some(code), Err(e)) => {
                // The kind of failure matches trec_eval's exit status where it is specific.
                let ok = match code.trim() {
                    // 10.0 also exits 4 for a qrels query missing from the run (no -c).
                    "4" => matches!(
                        e,
                        TrecError::DuplicateDoc { .. } | TrecError::MissingRunQuery { .. }
                    ),
                    "7" => matches!(e, TrecError::NoQueries),
                    _ => true,
                };
                if !ok {
                    failures.push(format!(
                        "{}: trec_eval exit {}, but we failed with: {e}",
                        case.name,
                        code.trim()
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{expected_dir}: {} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn input_errors_name_file_and_line() {
    let dir = fixtures();
    let err = parse_run(dir.join("dup.run")).expect_err("duplicate docid");
    let msg = err.to_string();
    assert!(
        msg.ends_with("dup.run:3: docid: `a` appears twice for query `9` (first at line 1)"),
        "{msg}"
    );
    let err = parse_qrels(dir.join("fivecol.qrels")).expect_err("five columns");
    assert!(
        err.to_string()
            .ends_with("fivecol.qrels:1: expected 4 columns, found 5"),
        "{err}"
    );
    let err = parse_qrels(dir.join("blank.qrels")).expect_err("blank line");
    assert!(
        err.to_string()
            .ends_with("blank.qrels:2: expected 4 columns, found 0"),
        "{err}"
    );
    let err = parse_run(dir.join("no-such-file.run")).expect_err("missing file");
    assert!(matches!(err, TrecError::Io { .. }));
}
