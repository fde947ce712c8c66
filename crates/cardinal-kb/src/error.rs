use std::path::PathBuf;

use crate::diag::Diagnostics;

/// Errors of the knowledge-base crate.
#[derive(Debug, thiserror::Error)]
pub enum KbError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("knowledge base directory {0} does not exist")]
    MissingDir(PathBuf),
    /// One or more problems in the data, each with file, line and field.
    #[error("{0}")]
    Invalid(Diagnostics),
}

pub type Result<T, E = KbError> = std::result::Result<T, E>;
