use std::path::PathBuf;

/// Errors of model pulling and conversion.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("unknown model `{0}` (known: {1})")]
    Unknown(String, String),
    #[error("I/O error at {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed: {message}")]
    Download { command: String, message: String },
    #[error("no wheel for {package}=={version} found in {dir}")]
    WheelMissing {
        package: String,
        version: String,
        dir: PathBuf,
    },
    #[error("cannot read wheel {path}: {message}")]
    Wheel { path: PathBuf, message: String },
    #[error("checksum mismatch for {what}: expected sha256 {expected}, got {actual}")]
    Checksum {
        what: String,
        expected: String,
        actual: String,
    },
    #[error("size mismatch for {what}: expected {expected} bytes, got {actual}")]
    Size {
        what: String,
        expected: u64,
        actual: u64,
    },
    #[error("invalid E5S1 file: {0}")]
    E5s1(String),
    #[error("model `{name}` is not installed in {dir}; run `cardinal models pull {name}`")]
    NotInstalled { name: String, dir: PathBuf },
    #[error("invalid manifest {path}: {message}")]
    Manifest { path: PathBuf, message: String },
}

pub type Result<T, E = ModelError> = std::result::Result<T, E>;

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ModelError {
    let path = path.into();
    move |source| ModelError::Io { path, source }
}
