use std::path::PathBuf;

/// Errors of embedders and cross-encoders.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("model directory {dir}: missing {file}")]
    MissingFile { dir: PathBuf, file: &'static str },
    #[error("cannot read {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{path}: unsupported model_type `{model_type}` (supported: bert, xlm-roberta)")]
    Unsupported { path: PathBuf, model_type: String },
    #[error("loading the embedder: {0}")]
    Load(String),
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    #[error("model error: {0}")]
    Model(#[from] candle_core::Error),
}

pub type Result<T, E = EmbedError> = std::result::Result<T, E>;
