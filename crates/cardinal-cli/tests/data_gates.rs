//! The data gates on the bundled data and on deliberately broken copies of it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::{bundled_data, copy_dir};

fn cardinal(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .expect("the cardinal binary runs")
}

/// A scratch copy of the bundled data.
fn broken_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    copy_dir(&bundled_data(), &data);
    (tmp, data)
}

fn replace_in(path: &Path, from: &str, to: &str) {
    let text = fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} lacks {from:?}", path.display());
    fs::write(path, text.replacen(from, to, 1)).unwrap();
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn line_of_id(path: &Path, id: &str) -> usize {
    let text = fs::read_to_string(path).unwrap();
    text.lines()
        .position(|l| {
            l.contains(&format!("\"id\": \"{id}\"")) || l.contains(&format!("\"id\":\"{id}\""))
        })
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("{id} not in {}", path.display()))
}

#[test]
fn bundled_data_passes_both_gates() {
    let o = cardinal(&bundled_data(), &["data", "check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = cardinal(&bundled_data(), &["kb", "lint"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// The corpus sizes and mixes the foundation promises, read from `kb stats --json`.
#[test]
fn bundled_data_has_the_promised_shape() {
    let o = cardinal(&bundled_data(), &["kb", "stats", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(s["topics_complete"].as_u64().unwrap() >= 40);
    assert!(s["topics_with_safety_rule"].as_u64().unwrap() >= 15);
    for lang in ["en", "es-419", "pt-BR"] {
        let k = &s["kb"][lang];
        let cards = k["cards"].as_u64().unwrap();
        assert!(cards >= 40, "{lang}: {cards} cards");
        assert!(k["claims"].as_u64().unwrap() >= 3 * cards);
        assert!(k["rules"].as_u64().unwrap() >= 2 * cards);
        let row = &s["cases"][lang];
        let get = |t: &str, f: &str| row[t][f].as_u64().unwrap_or(0);
        let total: u64 = ["golden", "adversarial", "capability", "no_match"]
            .iter()
            .map(|t| get(t, "cases"))
            .sum();
        let min = if lang == "en" { 100 } else { 60 };
        assert!(total >= min, "{lang}: {total} cases");
        // Since the safety cases v2 (issue 15) most cases are safety cases; the retrieval set
        // is the golden cases, at least 35 per language.
        assert!(
            get("golden", "cases") >= 35,
            "{lang}: fewer than 35 golden cases"
        );
        assert!(
            get("adversarial", "cases") * 100 >= 15 * total,
            "{lang}: adversarial < 15%"
        );
        assert!(get("adversarial", "with_gold") * 2 >= get("adversarial", "cases"));
        assert!(
            get("golden", "multi_gold") * 5 >= get("golden", "cases"),
            "{lang}: multi-gold < 20%"
        );
        assert!(get("capability", "cases") > 0 && get("no_match", "cases") > 0);
        // A benign near-miss (capability) carries the card that answers it; a no-match case
        // never has gold.
        assert_eq!(get("no_match", "with_gold"), 0);
    }
}

#[test]
fn data_check_lists_every_problem_with_file_and_line() {
    let (_tmp, data) = broken_copy();
    let en = data.join("cases/en.jsonl");
    let es = data.join("cases/es-419.jsonl");
    // 1. a gold id that is not a card
    let l1 = line_of_id(&en, "en-missed-dose-01");
    replace_in(&en, "\"missed-dose.en\"", "\"missed-dos.en\"");
    // 2. a gold card in the wrong language
    let l2 = line_of_id(&es, "es-419-stopping-medication-01");
    replace_in(
        &es,
        "\"stopping-medication.es-419\"",
        "\"stopping-medication.en\"",
    );
    // 3. a duplicated case id
    let l3 = line_of_id(&es, "es-419-double-dose-01");
    replace_in(
        &es,
        "\"id\": \"es-419-double-dose-01\"",
        "\"id\": \"es-419-missed-dose-01\"",
    );
    // 4. a broken JSON line appended
    let mut text = fs::read_to_string(&en).unwrap();
    let l4 = text.lines().count() + 1;
    text.push_str("{\"id\": \"en-x\", \"lang\": \"en\"\n");
    fs::write(&en, text).unwrap();
    // 5. a topic missing in one language
    fs::remove_file(data.join("kb/pt-BR/refills.md")).unwrap();

    let o = cardinal(&data, &["data", "check"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    let en_s = en.display().to_string();
    let es_s = es.display().to_string();
    for expected in [
        format!("{en_s}:{l1}: must_cite_one_of: `missed-dos.en` is not a card of the knowledge base"),
        format!("{es_s}:{l2}: must_cite_one_of: `stopping-medication.en` is a en card but the case is es-419"),
        format!("{es_s}:{l3}: id: duplicate case id `es-419-missed-dose-01`"),
        format!("{en_s}:{l4}: json: not valid JSON"),
        "refills.md:5: topic: topic `refills` has no card in pt-BR".to_string(),
    ] {
        assert!(err.contains(&expected), "missing {expected:?} in:\n{err}");
    }
    // pt-BR cases that cite the deleted card are reported too.
    assert!(err.contains("`refills.pt-BR` is not a card"), "{err}");
    assert!(err.contains("problem(s) found"), "{err}");
}

#[test]
fn data_check_reports_card_parse_errors() {
    let (_tmp, data) = broken_copy();
    let card = data.join("kb/es-419/missed-dose.md");
    replace_in(&card, "## Reglas", "## Rules");
    let card2 = data.join("kb/en/refills.md");
    replace_in(&card2, "lang = \"en\"", "lang = \"es\"");
    let o = cardinal(&data, &["data", "check"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{}:", card.display()))
            && err.contains(": rules: no `## Reglas` section"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{}:3: lang: unknown language `es`",
            card2.display()
        )),
        "{err}"
    );
}

#[test]
fn kb_lint_flags_real_looking_personal_data() {
    let (_tmp, data) = broken_copy();
    let card = data.join("kb/en/contacting-care-team.md");
    let mut text = fs::read_to_string(&card).unwrap();
    let base = text.lines().count();
    text.push_str("\nWrite to nurse.jane@gmail.com or call (212) 555-2368.\nCPF 529.982.247-25\n");
    fs::write(&card, &text).unwrap();
    let other = data.join("kb/pt-BR/refills.md");
    replace_in(&other, "synthetic = true", "synthetic = false");

    let o = cardinal(&data, &["kb", "lint"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    let c = card.display().to_string();
    for expected in [
        format!("{c}:{}: email: `nurse.jane@gmail.com`", base + 2),
        format!("{c}:{}: phone: `(212) 555-2368`", base + 2),
        format!(
            "{c}:{}: national id: `529.982.247-25` passes the Brazilian CPF checksum",
            base + 3
        ),
        format!("{}:6: synthetic: must be `true`", other.display()),
    ] {
        assert!(err.contains(&expected), "missing {expected:?} in:\n{err}");
    }
}

#[test]
fn missing_data_dir_is_an_input_error() {
    let tmp = tempfile::tempdir().unwrap();
    let o = cardinal(&tmp.path().join("nope"), &["data", "check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
}

#[test]
fn usage_error_exits_2() {
    let o = cardinal(&bundled_data(), &["data", "frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn data_check_validates_the_calibration_corpus() {
    let (_tmp, data) = broken_copy();
    let f = data.join("calibration/en.jsonl");
    let text = fs::read_to_string(&f).unwrap();
    let first = text.lines().next().unwrap().to_string();
    let mut v: Value = serde_json::from_str(&first).unwrap();
    v["cited"] = serde_json::json!(["no-such-card.en"]);
    v["labels"]["faithfulness"]["score"] = serde_json::json!(7);
    let rest: Vec<&str> = text.lines().skip(1).collect();
    fs::write(&f, format!("{}\n{}\n", v, rest.join("\n"))).unwrap();
    let o = cardinal(&data, &["data", "check"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    let p = f.display().to_string();
    assert!(
        err.contains(&format!("{p}:1: cited: `no-such-card.en` is not a card")),
        "{err}"
    );
    assert!(err.contains(&format!("{p}:1: cited: lists")), "{err}");
    assert!(
        err.contains(&format!(
            "{p}:1: labels.faithfulness: score 7 is outside 1–5"
        )),
        "{err}"
    );
}

#[test]
fn kb_lint_also_reads_cases_and_calibration() {
    let (_tmp, data) = broken_copy();
    let f = data.join("cases/pt-BR.jsonl");
    let mut text = fs::read_to_string(&f).unwrap();
    let n = text.lines().count();
    text.push_str("{\"id\":\"x\",\"lang\":\"pt-BR\",\"type\":\"no_match\",\"question\":\"Meu e-mail é ana@gmail.com\",\"must_cite_one_of\":[],\"expect\":\"refuse\"}\n");
    fs::write(&f, text).unwrap();
    let o = cardinal(&data, &["kb", "lint"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("{}:{}: email:", f.display(), n + 1)),
        "{}",
        stderr(&o)
    );
}

#[test]
fn invalid_utf8_is_reported_with_file_byte_and_line_and_the_check_goes_on() {
    let (_tmp, data) = broken_copy();
    let en = data.join("cases/en.jsonl");
    let pt = data.join("calibration/pt-BR.jsonl");
    let card = data.join("kb/es-419/refills.md");
    // A stray Latin-1 byte in line 3 of the English cases, and a broken JSON line after it.
    let mut bytes = fs::read(&en).unwrap();
    let line3 = bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .nth(1)
        .map(|(i, _)| i + 1)
        .unwrap();
    let bad_at = line3 + 2;
    bytes[bad_at] = 0xe9;
    let l_json = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
    bytes.extend_from_slice(b"{\"id\": \"en-x\"\n");
    fs::write(&en, &bytes).unwrap();
    // A truncated two-byte sequence at the very end of a labels file.
    let mut labels = fs::read(&pt).unwrap();
    let pt_lines = labels.iter().filter(|&&b| b == b'\n').count() + 1;
    let pt_at = labels.len();
    labels.push(0xc3);
    fs::write(&pt, &labels).unwrap();
    // An invalid byte in a card.
    let mut c = fs::read(&card).unwrap();
    let card_line = c.iter().filter(|&&b| b == b'\n').count() + 2;
    c.extend_from_slice(b"\n\xff\n");
    fs::write(&card, &c).unwrap();

    let o = cardinal(&data, &["data", "check"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    for expected in [
        format!(
            "{}:3: encoding: invalid UTF-8 at byte {bad_at}",
            en.display()
        ),
        format!("{}:{l_json}: json: not valid JSON", en.display()),
        format!(
            "{}:{pt_lines}: encoding: invalid UTF-8 at byte {pt_at}",
            pt.display()
        ),
        format!("{}:{card_line}: encoding: invalid UTF-8", card.display()),
    ] {
        assert!(err.contains(&expected), "missing {expected:?} in:\n{err}");
    }
    assert!(err.contains("encoding: invalid UTF-8"), "{err}");
}

#[test]
fn a_byte_order_mark_is_accepted_alike_in_cards_cases_and_labels() {
    let (_tmp, data) = broken_copy();
    for f in [
        "cases/es-419.jsonl",
        "calibration/en.jsonl",
        "kb/pt-BR/refills.md",
    ] {
        let p = data.join(f);
        let mut bytes = b"\xEF\xBB\xBF".to_vec();
        bytes.extend(fs::read(&p).unwrap());
        fs::write(&p, bytes).unwrap();
    }
    let o = cardinal(&data, &["data", "check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = cardinal(&data, &["kb", "lint"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn kb_stats_refuses_invalid_data_instead_of_counting_it() {
    let (_tmp, data) = broken_copy();
    // A card copied under a second name: one id twice.
    fs::copy(
        data.join("kb/en/refills.md"),
        data.join("kb/en/refills-copy.md"),
    )
    .unwrap();
    let o = cardinal(&data, &["kb", "stats"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("duplicate card id `refills.en`"), "{err}");
    assert!(o.stdout.is_empty(), "no statistics printed from bad data");
}
