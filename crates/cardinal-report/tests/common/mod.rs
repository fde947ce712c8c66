//! Fixtures shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use cardinal_eval::{aggregate, AggregateConfig, CaseScores};

/// The hand-written sweep fixture (9 cases, judged, with a script tag in one answer and judge
/// checks in the v2 shape): report.json (the aggregate of its records), records.jsonl,
/// manifest.json, cards.json.
pub fn sweep_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sweep-handwritten")
}

/// The committed calibration fixture: calibration.json, judge-scores.json, labels/.
pub fn calibration_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/calibration")
}

/// Card id → text of the cards the sweep fixture refers to.
pub fn card_texts() -> BTreeMap<String, String> {
    let text = fs::read_to_string(sweep_fixture().join("cards.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The aggregate of the fixture's records, computed the way `cardinal eval` does (latency is
/// not aggregated).
pub fn aggregate_of_records(dir: &Path) -> cardinal_eval::Aggregate {
    let text = fs::read_to_string(dir.join("records.jsonl")).unwrap();
    let cases: Vec<CaseScores> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let mut s: CaseScores = serde_json::from_value(v["scores"].clone()).unwrap();
            s.scores.remove("latency_ms");
            s
        })
        .collect();
    aggregate(&cases, &AggregateConfig::default()).unwrap()
}

/// A copy of a fixture directory in a fresh temporary directory.
pub fn copy_dir(from: &Path) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_into(from, tmp.path());
    tmp
}

fn copy_into(from: &Path, to: &Path) {
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            fs::create_dir_all(&target).unwrap();
            copy_into(&e.path(), &target);
        } else {
            fs::copy(e.path(), target).unwrap();
        }
    }
}

/// Every committed sweep fixture (`tests/fixtures/sweep-*/` with a report.json), sorted.
pub fn sweep_fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("sweep-"))
                && p.join("report.json").is_file()
        })
        .collect();
    out.sort();
    out
}

/// Card id → text of every card of the repository's knowledge base (`data/kb/<lang>/<topic>.md`,
/// id `<topic>.<lang>`, the text after the front matter), as the CLI passes it.
pub fn kb_card_texts() -> BTreeMap<String, String> {
    let kb = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/kb");
    let mut out = BTreeMap::new();
    for lang in fs::read_dir(&kb).unwrap() {
        let lang = lang.unwrap().path();
        let Some(tag) = lang
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if !lang.is_dir() {
            continue;
        }
        for card in fs::read_dir(&lang).unwrap() {
            let card = card.unwrap().path();
            if card.extension().and_then(|x| x.to_str()) != Some("md") {
                continue;
            }
            let Some(topic) = card.file_stem().and_then(|n| n.to_str()) else {
                continue;
            };
            let text = fs::read_to_string(&card).unwrap();
            let body = text.splitn(3, "+++").nth(2).unwrap_or(&text).trim();
            out.insert(format!("{topic}.{tag}"), body.to_string());
        }
    }
    out
}
