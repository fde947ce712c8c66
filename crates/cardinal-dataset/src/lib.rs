//! Evaluation cases of Cardinal: JSONL files, one per language, with a disjunctive gold list.
//!
//! [`load_cases`] validates every line and reports all problems as `file:line: field: message`;
//! [`check`] is the ADR-0023 integrity gate (every gold id resolves to a card of the case's
//! language); [`stats`] counts what the KB and the cases hold.

pub mod case;
pub mod check;
pub mod error;
pub mod stats;

pub use case::{load_case_dir, load_case_file, Case, CaseType, Expect, LoadedCase};
pub use check::check;
pub use error::{DatasetError, Result};
pub use stats::{stats, Stats};
