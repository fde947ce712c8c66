//! Fuzzing the run directory's records loader (issue 16): arbitrary bytes never panic, and a
//! records file cut at any byte — the state a crash can leave — loads the complete records,
//! keeps or cuts the torn tail, and leaves a file that reloads to the same records.

use cardinal_harness::rundir::load_records;
use proptest::prelude::*;
use serde_json::Value;

fn id_of(v: &Value) -> String {
    v.get("id").map(|x| x.to_string()).unwrap_or_default()
}

fn records_text(n: usize, payload: &str) -> String {
    (0..n)
        .map(|i| {
            let record =
                serde_json::json!({"id": format!("case-{i}"), "answer": payload, "score": i});
            format!("{record}\n")
        })
        .collect()
}

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_load_or_fail_with_a_message_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..300)
    ) {
        let dir = tempfile::tempdir().map_err(fail)?;
        let path = dir.path().join("records.jsonl");
        std::fs::write(&path, &bytes).map_err(fail)?;
        match load_records::<Value>(&path, id_of) {
            Ok(l) => prop_assert!(l.records.len() <= bytes.len()),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn a_file_cut_at_any_byte_keeps_every_complete_record_and_reloads_the_same(
        n in 1usize..8,
        payload in "[a-zé \"\\\\{}]{0,12}",
        cut in any::<proptest::sample::Index>(),
    ) {
        let full = records_text(n, &payload);
        let at = cut.index(full.len() + 1);
        let bytes = &full.as_bytes()[..at];
        let dir = tempfile::tempdir().map_err(fail)?;
        let path = dir.path().join("records.jsonl");
        std::fs::write(&path, bytes).map_err(fail)?;
        let complete = bytes.iter().filter(|&&b| b == b'\n').count();
        let first = load_records::<Value>(&path, id_of).map_err(fail)?;
        let torn = bytes.last().is_some_and(|&b| b != b'\n');
        // A torn tail is kept only when the whole record was written (just the newline missing).
        let line_start = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let whole_record_unterminated =
            torn && serde_json::from_slice::<Value>(&bytes[line_start..]).is_ok();
        prop_assert_eq!(first.records.len(), complete + usize::from(whole_record_unterminated));
        prop_assert_eq!(first.dropped_torn_tail, torn && !whole_record_unterminated);
        for (i, r) in first.records.iter().enumerate() {
            let want = format!("case-{i}");
            prop_assert_eq!(r["id"].as_str(), Some(want.as_str()));
        }
        // The repaired file ends at a record boundary and reloads to the same records.
        let after = std::fs::read(&path).map_err(fail)?;
        prop_assert!(after.is_empty() || after.last() == Some(&b'\n'));
        let second = load_records::<Value>(&path, id_of).map_err(fail)?;
        prop_assert!(!second.dropped_torn_tail);
        prop_assert_eq!(second.records, first.records);
    }
}
