use std::path::PathBuf;

use cardinal_kb::{Diagnostics, KbError};

/// Errors of the dataset crate.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("case directory {0} does not exist")]
    MissingDir(PathBuf),
    #[error(transparent)]
    Kb(#[from] KbError),
    /// Problems in the data, each with file, line and field.
    #[error("{0}")]
    Invalid(Diagnostics),
}

pub type Result<T, E = DatasetError> = std::result::Result<T, E>;
