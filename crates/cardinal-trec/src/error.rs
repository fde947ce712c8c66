//! The error type of the trec_eval re-implementation.

use std::path::PathBuf;

/// Where a bad input line came from: a file (`path`) or in-memory rows (`<rows>`), and the
/// 1-based line (or row) number.
pub(crate) type Source = String;

/// Errors of parsing, writing and evaluating. Input errors carry `source:line` so the CLI can
/// print them as they are and exit 2.
#[derive(Debug, thiserror::Error)]
pub enum TrecError {
    /// A file could not be read or written.
    #[error("{path}: {source}", path = path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no data line at all (trec_eval refuses empty files too).
    #[error("{source_name}: no {what} lines")]
    Empty {
        /// The file.
        source_name: Source,
        /// `qrels` or `run`.
        what: &'static str,
    },
    /// A line has the wrong number of whitespace-separated columns.
    #[error("{source_name}:{line}: expected {expected} columns, found {found}")]
    Columns {
        /// The file (or `<rows>`).
        source_name: Source,
        /// 1-based line number.
        line: usize,
        /// `4` for qrels, `6 (or more)` for runs.
        expected: &'static str,
        /// Columns found.
        found: usize,
    },
    /// A line is not valid UTF-8.
    #[error("{source_name}:{line}: not valid UTF-8")]
    NotUtf8 {
        /// The file.
        source_name: Source,
        /// 1-based line number.
        line: usize,
    },
    /// A qrels relevance value is not an integer.
    #[error("{source_name}:{line}: rel: `{value}` is not an integer")]
    BadRelevance {
        /// The file (or `<rows>`).
        source_name: Source,
        /// 1-based line number.
        line: usize,
        /// The text found.
        value: String,
    },
    /// A run score is not a number (NaN is rejected too: it has no rank).
    #[error("{source_name}:{line}: score: `{value}` is not a number")]
    BadScore {
        /// The file (or `<rows>`).
        source_name: Source,
        /// 1-based line number.
        line: usize,
        /// The text found.
        value: String,
    },
    /// The same document appears twice for one query (trec_eval: "duplicate docs").
    #[error(
        "{source_name}:{line}: docid: `{docid}` appears twice for query `{qid}` (first at line {first_line})"
    )]
    DuplicateDoc {
        /// The file (or `<rows>`).
        source_name: Source,
        /// 1-based line number of the later occurrence.
        line: usize,
        /// 1-based line number of the earlier occurrence.
        first_line: usize,
        /// The query.
        qid: String,
        /// The document.
        docid: String,
    },
    /// A field longer than 16 MiB, a file beyond 1 TiB, or a query with 4 billion documents:
    /// more than the parser's compact layout can address.
    #[error("{source_name}:{line}: input too large (a field over 16 MiB, a file over 1 TiB or over 4 billion documents in one query)")]
    TooLarge {
        /// The file (or `<rows>`).
        source_name: Source,
        /// 1-based line number.
        line: usize,
    },
    /// trec_eval 10.0 without `-c`: a query of the qrels has no line in the run (10.0 stops with
    /// "result qid '…' not found in qrels", exit 4; 9.0.x skipped the query).
    #[error(
        "query `{qid}` is in the qrels but not in the run (trec_eval 10.0 stops here: give -c to score it 0, or --trec-eval-9 to skip it as trec_eval 9.0.x does)"
    )]
    MissingRunQuery {
        /// The first such query, in trec_eval's order.
        qid: String,
    },
    /// A field to be written is empty or contains whitespace, so the file would not parse back.
    #[error("row {row}: {field}: `{value}` is empty or contains whitespace")]
    BadField {
        /// 1-based row number.
        row: usize,
        /// `qid`, `docid` or `tag`.
        field: &'static str,
        /// The value.
        value: String,
    },
    /// A score to be written is NaN or infinite.
    #[error("row {row}: score: {value} is not a finite number")]
    NonFiniteScore {
        /// 1-based row number.
        row: usize,
        /// The value.
        value: f64,
    },
    /// A `-m` argument trec_eval would reject (or that this crate does not implement).
    #[error("illegal measure `{spec}`: {reason}")]
    Measure {
        /// The argument as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No measure was requested.
    #[error("no measure requested (give at least one of ndcg_cut, recall, success)")]
    NoMeasures,
    /// No query is in both the run and the qrels (trec_eval exits 7 with the same message).
    #[error("no queries with both results and relevance info")]
    NoQueries,
}

/// Result alias of this crate.
pub type Result<T, E = TrecError> = std::result::Result<T, E>;
