//! The error type of the evaluation core.

use std::path::PathBuf;

/// Errors of the evaluation core.
///
/// Everything here is either invalid input (a caller bug or a bad flag) or a baseline file that
/// cannot be read or written; the CLI maps all of them to exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A score key the metric registry does not define.
    #[error("`{0}` is not a metric of the registry (see `cardinal metrics`)")]
    UnknownMetric(String),
    /// `k` must be at least 1: a top-0 cut-off scores nothing.
    #[error("retrieval k must be at least 1 (got 0)")]
    ZeroK,
    /// A score that is NaN or infinite reached the aggregator.
    #[error("case `{case_id}`: score `{key}` is not a finite number ({value})")]
    NonFiniteScore {
        /// The case that carried the value.
        case_id: String,
        /// The score key.
        key: String,
        /// The offending value.
        value: f64,
    },
    /// A case carries a score and an error for the same key.
    #[error("case `{case_id}`: `{key}` is both scored and recorded as an error")]
    ScoredAndFailed {
        /// The case.
        case_id: String,
        /// The key.
        key: String,
    },
    /// Two cases with the same id reached the aggregator (a resumed run counted twice).
    #[error("case `{0}` appears more than once in the scores to aggregate")]
    DuplicateCase(String),
    /// An aggregation setting is out of range.
    #[error("invalid aggregation config: {0}")]
    InvalidConfig(String),
    /// A gate threshold or baseline tolerance is not a usable number.
    #[error("invalid {what}: {value} ({why})")]
    InvalidThreshold {
        /// Which setting (for example `tolerance`).
        what: &'static str,
        /// The value given.
        value: f64,
        /// Why it is rejected.
        why: &'static str,
    },
    /// A judge score outside the 1..=5 scale reached the column guard.
    #[error("faithfulness score {0} is outside the 1..=5 scale")]
    ScoreOutOfRange(u8),
    /// A baseline file could not be read or written.
    #[error("baseline {path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A baseline file is not valid baseline JSON.
    #[error("baseline {path}: not a valid baseline file: {source}")]
    Parse {
        /// The file involved.
        path: PathBuf,
        /// The JSON error (with line and column).
        #[source]
        source: serde_json::Error,
    },
    /// A baseline file was written by an incompatible schema version.
    #[error("baseline {path}: schema version {found} is not supported (expected {expected})")]
    SchemaVersion {
        /// The file involved.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The version this build reads and writes.
        expected: u32,
    },
}

/// Result alias of the evaluation core.
pub type Result<T, E = EvalError> = std::result::Result<T, E>;
