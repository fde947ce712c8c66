//! Rendering tests on the committed fixtures: what the pages contain, that untrusted text is
//! escaped, that optional inputs are optional and bad inputs are typed errors.

use std::fs;

use cardinal_eval::{compare, Baseline, BaselineMeta, GateConfig};
use cardinal_report::{
    render_calibration, render_calibration_with, render_sweep, render_sweep_with,
    write_calibration, write_sweep, CalibrationOptions, ReportError, SweepOptions, REPORT_HTML,
};

mod common;
use common::{
    aggregate_of_records, calibration_fixture, card_texts, copy_dir, kb_card_texts, sweep_fixture,
    sweep_fixtures,
};

fn full_options() -> SweepOptions {
    SweepOptions {
        card_texts: card_texts(),
        gates: Some(GateConfig {
            min_retrieval_recall: Some(0.5),
            min_retrieval_hit: Some(0.99),
        }),
        ..SweepOptions::default()
    }
}

/// The committed report.json is exactly the aggregate of the committed records (so the page
/// shows one consistent run). `CARDINAL_REPORT_BLESS=1` rewrites it.
#[test]
fn fixture_report_is_the_aggregate_of_its_records() {
    let dir = sweep_fixture();
    let agg = aggregate_of_records(&dir);
    let path = dir.join("report.json");
    if std::env::var_os("CARDINAL_REPORT_BLESS").is_some() {
        fs::write(&path, serde_json::to_string_pretty(&agg).unwrap()).unwrap();
    }
    let committed: cardinal_eval::Aggregate =
        serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(committed, agg);
}

#[test]
fn sweep_page_is_self_contained_and_complete() {
    let html = render_sweep_with(sweep_fixture(), &full_options()).unwrap();
    // Nothing is fetched: no external resource of any kind.
    for needle in ["<link", "src=", "@import", "url(", "<iframe", "<img"] {
        assert!(!html.contains(needle), "found {needle}");
    }
    assert_eq!(
        html.matches("<script").count(),
        1,
        "only the page's own script"
    );
    // One chart per metric (9 keys; latency is not plotted).
    assert_eq!(html.matches("<figure class=\"plot metric\"").count(), 9);
    assert_eq!(html.matches("<svg").count(), 9);
    assert!(!html.contains("data-key=\"latency_ms\""));
    // Every case is a row with its filter attributes.
    let agg = aggregate_of_records(&sweep_fixture());
    assert_eq!(
        html.matches("<tbody class=\"case\"").count(),
        agg.n_cases,
        "one row group per case"
    );
    assert!(html.contains("data-case=\"pt-BR-missed-dose-01\""));
    assert!(html.contains("data-failed=\"groundedness faithfulness hallucination\""));
    assert!(html.contains("data-errors=\"hallucination\""));
    // Counts that must never be hidden.
    assert!(
        html.contains("judge errors: <b>1</b>"),
        "judge errors counted"
    );
    assert!(html.contains("refused: <b>3</b>"));
    assert!(html.contains("wrong refusals: <b>1</b> refused, <b>2</b> answered"));
    // Manifest, gates (one fails), citations linked to card text, retrieval details.
    assert!(html.contains("cardinal eval --llm extractive"));
    assert!(
        html.contains("&lt;b&gt;not bold&lt;&#x2f;b&gt;")
            || html.contains("&lt;b&gt;not bold&lt;/b&gt;")
    );
    assert!(html.contains("gates: <b>FAILED</b>"));
    assert!(html.contains("<a class=\"cite\" href=\"#card-"));
    assert!(html.contains("dense_similarity"));
    // Judge checks with their probabilities (judge v2 shape), and the raw replies.
    assert!(html.contains("no_double_dose_advice"));
    assert!(html.contains("0.97"));
    assert!(html.contains("raw replies and calls"));
}

/// Every committed sweep fixture renders: self-contained, one row per record, a plot per
/// aggregated key, citations linked to the knowledge base's cards.
#[test]
fn every_sweep_fixture_renders() {
    let fixtures = sweep_fixtures();
    assert!(!fixtures.is_empty());
    let cards = kb_card_texts();
    assert!(cards.len() > 100, "the repository's KB");
    for dir in fixtures {
        let opts = SweepOptions {
            card_texts: cards.clone(),
            ..SweepOptions::default()
        };
        let html = render_sweep_with(&dir, &opts).unwrap();
        let records = fs::read_to_string(dir.join("records.jsonl")).unwrap();
        let n = records.lines().filter(|l| !l.trim().is_empty()).count();
        assert_eq!(
            html.matches("<tbody class=\"case\"").count(),
            n,
            "{}",
            dir.display()
        );
        let agg: cardinal_eval::Aggregate =
            serde_json::from_str(&fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
        let keys = agg.overall().unwrap().metrics.len();
        assert_eq!(html.matches("<svg").count(), keys, "{}", dir.display());
        assert_eq!(html.matches("<script").count(), 1);
        for needle in ["<link", "src=", "@import", "url(", "<iframe", "<img"] {
            assert!(!html.contains(needle), "{}: found {needle}", dir.display());
        }
        assert!(
            html.contains("<a class=\"cite\" href=\"#card-"),
            "{}",
            dir.display()
        );
        assert!(!html.contains("is incomplete"), "{}", dir.display());
    }
}

#[test]
fn a_script_in_an_answer_renders_as_text() {
    let html = render_sweep_with(sweep_fixture(), &full_options()).unwrap();
    assert!(
        !html.contains("<script>alert"),
        "the answer's script tag is live"
    );
    assert!(
        html.contains("&lt;script&gt;alert("),
        "the answer's script tag is shown"
    );
}

#[test]
fn untrusted_card_text_is_escaped() {
    let mut opts = full_options();
    opts.card_texts.insert(
        "refills.en".into(),
        "<img src=x onerror=alert(1)> \"quoted\" & more".into(),
    );
    let html = render_sweep_with(sweep_fixture(), &opts).unwrap();
    assert!(!html.contains("<img"));
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
}

#[test]
fn rendering_is_deterministic() {
    let a = render_sweep_with(sweep_fixture(), &full_options()).unwrap();
    let b = render_sweep_with(sweep_fixture(), &full_options()).unwrap();
    assert_eq!(a, b);
}

#[test]
fn optional_inputs_are_optional() {
    let tmp = tempfile::tempdir().unwrap();
    fs::copy(
        sweep_fixture().join("report.json"),
        tmp.path().join("report.json"),
    )
    .unwrap();
    let html = render_sweep(tmp.path()).unwrap();
    assert!(html.contains("No manifest.json in this run directory."));
    assert!(html.contains("no records.jsonl in the run directory"));
    assert!(html.contains("No gate configuration was given"));
    assert!(html.contains("No baseline comparison was given"));
    assert!(html.contains("No card texts were given"));
    assert!(html.contains("refusals: unknown (no records)"));
    assert_eq!(
        html.matches("<svg").count(),
        9,
        "the aggregate alone gives the plots"
    );
}

#[test]
fn baseline_deltas_are_shown() {
    let dir = sweep_fixture();
    let mut agg = aggregate_of_records(&dir);
    // A baseline where every hit@k was perfect: the current run regresses there.
    for s in &mut agg.slices {
        if let Some(m) = s.metrics.get_mut("retrieval_hit_at_k") {
            m.mean = 1.0;
        }
    }
    let baseline = Baseline::from_aggregate(
        &agg,
        BaselineMeta {
            k: 5,
            cases: "9 cases".into(),
            note: None,
            manifest: None,
        },
    );
    let diff = compare(&baseline, &aggregate_of_records(&dir), 0.0).unwrap();
    assert!(diff.has_regressions());
    let opts = SweepOptions {
        baseline: Some(diff),
        ..full_options()
    };
    let html = render_sweep_with(&dir, &opts).unwrap();
    assert!(html.contains("REGRESSED"));
    assert!(html.contains("baseline regressions: <b>"));
    assert!(html.contains("baseline mean (bar-wide line)"));
}

#[test]
fn records_are_read_leniently_and_errors_are_typed() {
    let tmp = copy_dir(&sweep_fixture());
    let records = tmp.path().join("records.jsonl");
    let text = fs::read_to_string(&records).unwrap();
    // A record of a later shape: unknown fields, retrieved cards as objects, a new judge shape.
    let mut future: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    future["scores"]["case_id"] = "en-future-01".into();
    future["new_field"] = serde_json::json!({"anything": [1, 2]});
    future["retrieved"] =
        serde_json::json!([{"card_id": "missed-dose.en", "fused_score": 0.5, "why": "new"}]);
    future["judge"]["faithfulness"] = serde_json::json!({
        "status": "scored", "score": 0.82,
        "checks": [{"id": "c1", "question": "Does it advise a double dose?", "answer": "no", "probability": 0.9731}]
    });
    // A judge dimension scored as a probability: on the judge's 0-1 scale, failed below 0.5.
    future["scores"]["scores"]["support"] = 0.3.into();
    future["judge"]["support"] = serde_json::json!({"status": "scored", "score": 0.3});
    let mut appended = text.clone();
    appended.push_str(&serde_json::to_string(&future).unwrap());
    appended.push('\n');
    // A torn last line (an interrupted write) is skipped, with a note.
    appended.push_str("{\"scores\": {\"case_id\": \"torn");
    fs::write(&records, &appended).unwrap();
    let html = render_sweep(tmp.path()).unwrap();
    assert!(html.contains("data-case=\"en-future-01\""));
    assert!(html.contains("data-failed=\"support\""));
    assert!(html.contains("scale judge 0–1"));
    assert!(html.contains("scale judge 1–5"));
    assert!(html.contains("Does it advise a double dose?"));
    assert!(html.contains("0.9731"));
    assert!(html.contains("is incomplete (an interrupted write) and was skipped"));
    assert!(html.contains("records.jsonl has 10 record(s), report.json aggregates 9 case(s)"));

    // A malformed line in the middle is an error naming the line.
    let broken = text.replacen('\n', "\nnot json\n", 1);
    fs::write(&records, broken).unwrap();
    match render_sweep(tmp.path()) {
        Err(ReportError::JsonLine { line, .. }) => assert_eq!(line, 2),
        other => panic!("expected a JsonLine error, got {other:?}"),
    }

    // A missing aggregate, and a broken manifest.
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        render_sweep(empty.path()),
        Err(ReportError::Missing { .. })
    ));
    fs::write(&records, &text).unwrap();
    fs::write(tmp.path().join("manifest.json"), "{not json").unwrap();
    assert!(matches!(
        render_sweep(tmp.path()),
        Err(ReportError::Json { .. })
    ));
}

#[test]
fn write_helpers_write_report_html() {
    let tmp = copy_dir(&sweep_fixture());
    let path = write_sweep(tmp.path(), &full_options()).unwrap();
    assert_eq!(path, tmp.path().join(REPORT_HTML));
    assert!(fs::read_to_string(&path)
        .unwrap()
        .starts_with("<!DOCTYPE html>"));
    let cal = copy_dir(&calibration_fixture());
    let path = write_calibration(cal.path(), &CalibrationOptions::default()).unwrap();
    assert!(fs::read_to_string(path)
        .unwrap()
        .contains("judge calibration"));
}

fn calibration_options() -> CalibrationOptions {
    CalibrationOptions {
        labels_dir: Some(calibration_fixture().join("labels")),
        title: None,
    }
}

#[test]
fn calibration_page_shows_every_dimension_and_language() {
    let html = render_calibration_with(calibration_fixture(), &calibration_options()).unwrap();
    // 2 dimensions × (all + 3 languages): a heatmap and a scatter each, plus one agreement
    // chart per dimension.
    assert_eq!(html.matches("<figure class=\"plot heatmap\"").count(), 8);
    assert_eq!(html.matches("<figure class=\"plot scatter\"").count(), 8);
    assert_eq!(html.matches("<figure class=\"plot agreement\"").count(), 2);
    assert_eq!(html.matches("<svg").count(), 18);
    assert!(!html.contains("<script"));
    // The gate fails for both gated dimensions in this run.
    assert!(html.contains("groundedness: agreement <b>0.316</b>"));
    assert_eq!(html.matches("<b>FAILS</b>").count(), 2);
    // Largest disagreements with both rationales.
    assert!(html.contains("The reply time is not supported; the card says 2 business days."));
    assert!(html.contains("cal-en-001"));
    assert!(!html.contains("labels not supplied"));
    // The scatter covers the report's n: no consistency note.
    assert!(!html.contains("the scatter has"));
    // The ADR-0029 control.
    assert!(html.contains("full card vs header only"));
}

#[test]
fn calibration_without_labels_or_scores_still_renders() {
    let tmp = tempfile::tempdir().unwrap();
    fs::copy(
        calibration_fixture().join("calibration.json"),
        tmp.path().join("calibration.json"),
    )
    .unwrap();
    let html = render_calibration(tmp.path()).unwrap();
    assert_eq!(html.matches("<figure class=\"plot heatmap\"").count(), 8);
    assert!(!html.contains("<figure class=\"plot scatter\""));
    assert!(html.contains("no judge-scores.json in the directory"));
    assert!(html.contains("labels not supplied"));
    assert!(matches!(
        render_calibration(tempfile::tempdir().unwrap().path()),
        Err(ReportError::Missing { .. })
    ));
}

#[test]
fn calibration_fields_added_later_are_shown() {
    let tmp = copy_dir(&calibration_fixture());
    let path = tmp.path().join("calibration.json");
    let mut cal: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    // Per-row shortcut baselines, a κ interval and item pairs; a top-level human ceiling.
    for row in cal["rows"].as_array_mut().unwrap() {
        row["shortcut_baselines"] = serde_json::json!([
            {"name": "always high", "agreement": 0.35, "kappa_quadratic": 0.0},
            {"name": "answer length", "agreement": 0.41}
        ]);
        row["kappa_ci"] = serde_json::json!({"low": -0.2, "high": 0.1});
        row["pairs"] = serde_json::json!([
            {"item_id": "x1", "human": 1, "judge": 5},
            {"item_id": "x2", "human": 4, "judge": 5}
        ]);
    }
    cal["human_ceiling"] = serde_json::json!([
        {"dimension": "groundedness", "slice": "all", "agreement": 0.86, "n": 40}
    ]);
    fs::write(&path, serde_json::to_string(&cal).unwrap()).unwrap();
    let html = render_calibration(tmp.path()).unwrap();
    assert!(html.contains("shortcut_baselines: always high"));
    assert!(html.contains("shortcut_baselines: answer length"));
    assert!(html.contains("95 % CI [-0.2, 0.1]"));
    assert!(html.contains("human_ceiling"));
    assert!(html.contains("0.86"));
    // Pairs in the report draw the scatter even without the labels.
    assert_eq!(html.matches("<figure class=\"plot scatter\"").count(), 8);
}
