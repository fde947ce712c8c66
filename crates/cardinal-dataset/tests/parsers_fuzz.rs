//! Fuzzing the data parsers (issue 16): cards, cases and calibration labels, from raw bytes
//! through the shared decoder, never panic, and every problem they report points at a line of
//! the input. Inputs are the bundled files damaged at random (bytes deleted, replaced, inserted,
//! lines swapped) plus arbitrary bytes, so the parsers see both near-valid and hostile text.

use std::path::Path;

use cardinal_dataset::calibration::parse_calibration;
use cardinal_dataset::case::parse_cases;
use cardinal_kb::diag::decode_data;
use cardinal_kb::parse_card;
use proptest::prelude::*;

const CARD: &str = include_str!("../../../data/kb/en/accidental-overdose.md");
const CARD_ES: &str = include_str!("../../../data/kb/es-419/accidental-overdose.md");
const CASES: &str = include_str!("../../../data/cases/pt-BR.jsonl");
const LABELS: &str = include_str!("../../../data/calibration/es-419.jsonl");

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize, usize),
    Replace(usize, Vec<u8>),
    Insert(usize, Vec<u8>),
    SwapLines(usize, usize),
}

fn junk() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 1..8),
        proptest::sample::select(vec![
            b"\"".to_vec(),
            b"{".to_vec(),
            b"}".to_vec(),
            b"+++".to_vec(),
            b"\n".to_vec(),
            b"\xEF\xBB\xBF".to_vec(),
            b"\xc3".to_vec(),
            b"\\u00".to_vec(),
            b"[".to_vec(),
            b"=".to_vec(),
            b"id = \"".to_vec(),
            b"\"score\": 9".to_vec(),
        ]),
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(a, n)| Edit::Delete(a, n)),
        (any::<usize>(), junk()).prop_map(|(a, j)| Edit::Replace(a, j)),
        (any::<usize>(), junk()).prop_map(|(a, j)| Edit::Insert(a, j)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
    ]
}

fn apply(base: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut b = base.to_vec();
    for e in edits {
        let len = b.len().max(1);
        match e {
            Edit::Delete(at, n) => {
                let at = at % len;
                let end = (at + n).min(b.len());
                if at < end {
                    b.drain(at..end);
                }
            }
            Edit::Replace(at, j) => {
                let at = at % len;
                for (k, &byte) in j.iter().enumerate() {
                    if let Some(slot) = b.get_mut(at + k) {
                        *slot = byte;
                    }
                }
            }
            Edit::Insert(at, j) => {
                let at = at % (b.len() + 1);
                b.splice(at..at, j.iter().copied());
            }
            Edit::SwapLines(x, y) => {
                let mut lines: Vec<Vec<u8>> =
                    b.split(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
                let n = lines.len();
                lines.swap(x % n, y % n);
                b = lines.join(&b'\n');
            }
        }
    }
    b
}

fn damaged(base: &'static str) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(edit(), 0..6).prop_map(move |edits| apply(base.as_bytes(), &edits))
}

fn input(base: &'static str) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => damaged(base),
        1 => proptest::collection::vec(any::<u8>(), 0..400),
    ]
}

fn line_count(text: &str) -> usize {
    text.lines().count().max(1)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn decoding_keeps_lines_and_reports_only_lines_it_has(bytes in input(CASES)) {
        let (text, diags) = decode_data(Path::new("x.jsonl"), &bytes);
        let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
        prop_assert_eq!(text.matches('\n').count(), newlines);
        prop_assert_eq!(diags.is_empty(), std::str::from_utf8(&bytes).is_ok());
        for d in diags.iter() {
            prop_assert!(d.line <= newlines + 1, "{d}");
        }
    }

    #[test]
    fn cards_never_panic_and_point_at_lines_of_the_file(
        bytes in prop_oneof![input(CARD), input(CARD_ES)]
    ) {
        let path = Path::new("kb/en/card.md");
        let (text, _) = decode_data(path, &bytes);
        match parse_card(path, &text) {
            Ok(_) => {}
            Err(diags) => {
                prop_assert!(!diags.is_empty());
                for d in diags.iter() {
                    prop_assert!(d.line <= line_count(&text) + 1, "{d}");
                }
            }
        }
    }

    #[test]
    fn cases_never_panic_and_every_line_is_a_case_or_a_problem(bytes in input(CASES)) {
        let path = Path::new("cases/pt-BR.jsonl");
        let (text, _) = decode_data(path, &bytes);
        let (cases, diags) = parse_cases(path, &text);
        let n = line_count(&text);
        for c in &cases {
            prop_assert!(c.line >= 1 && c.line <= n);
        }
        for d in diags.iter() {
            prop_assert!(d.line <= n, "{d}");
        }
        // A non-blank line is either loaded or reported (possibly both: a case can load with a
        // field problem), never silently skipped.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let line = i + 1;
            prop_assert!(
                cases.iter().any(|c| c.line == line) || diags.iter().any(|d| d.line == line),
                "line {} neither loaded nor reported: {:?}", line, raw
            );
        }
    }

    #[test]
    fn labels_never_panic_and_every_line_is_an_item_or_a_problem(bytes in input(LABELS)) {
        let path = Path::new("calibration/es-419.jsonl");
        let (text, _) = decode_data(path, &bytes);
        let (items, diags) = parse_calibration(path, &text);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let line = i + 1;
            prop_assert!(
                items.iter().any(|c| c.line == line) || diags.iter().any(|d| d.line == line),
                "line {} neither loaded nor reported", line
            );
        }
    }
}

#[test]
fn the_bundled_files_parse_cleanly_through_the_same_path() {
    let (text, d) = decode_data(Path::new("c"), CASES.as_bytes());
    assert!(d.is_empty());
    let (cases, diags) = parse_cases(Path::new("c"), &text);
    assert!(diags.is_empty(), "{diags}");
    assert!(cases.len() > 100);
    let (items, diags) = parse_calibration(Path::new("l"), LABELS);
    assert!(diags.is_empty(), "{diags}");
    assert!(items.len() >= 120);
    assert!(parse_card(Path::new("kb/en/a.md"), CARD).is_ok());
}
