//! The crate's typed errors.

use std::path::PathBuf;

/// Why a report could not be rendered or written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A required input file is absent.
    #[error("{}: not found ({what})", path.display())]
    Missing {
        /// The file looked for.
        path: PathBuf,
        /// What it should have held, and which command writes it.
        what: &'static str,
    },
    /// A JSON file is not of the expected shape.
    #[error("{}: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A line of a JSON-lines file (other than a torn last line) is not of the expected shape.
    #[error("{}:{line}: {source}", path.display())]
    JsonLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A plot could not be drawn.
    #[error("drawing the plot `{plot}`: {message}")]
    Plot {
        /// Which plot.
        plot: String,
        /// The backend's message.
        message: String,
    },
    /// The HTML template failed (a bug in this crate, not in the input).
    #[error("rendering the HTML page: {0}")]
    Template(#[from] minijinja::Error),
}

/// This crate's result.
pub type Result<T, E = ReportError> = std::result::Result<T, E>;
