//! Evaluation cases of Cardinal: JSONL files, one per language, with a disjunctive gold list.
//!
//! [`load_cases`] validates every line and reports all problems as `file:line: field: message`;
//! [`check`] is the ADR-0023 integrity gate (every gold id resolves to a card of the case's
//! language); [`stats`] counts what the KB and the cases hold.

pub mod calibration;
pub mod case;
pub mod check;
pub mod error;
pub mod stats;

pub use case::{
    load_case_dir, load_case_file, Case, CaseType, Expect, Form, LoadedCase, SafetyClass, Split,
};
pub use check::check;

/// `[card-id]` citations written in a text, in order, without duplicates.
pub fn citations_in(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else { break };
        let inner = after[..close].trim();
        let is_id = inner.contains('.')
            && inner
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
        if is_id && !out.iter().any(|x| x == inner) {
            out.push(inner.to_string());
        }
        rest = &after[close + 1..];
    }
    out
}
pub use error::{DatasetError, Result};
pub use stats::{stats, Stats};
