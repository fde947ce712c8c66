use std::path::PathBuf;

/// Errors of retrieval: indexes, stores, models.
#[derive(Debug, thiserror::Error)]
pub enum RetrievalError {
    #[error("lexical index: {0}")]
    Lexical(#[from] tantivy::TantivyError),
    #[error("embedder: {0}")]
    Embed(#[from] cardinal_embed::EmbedError),
    #[error("store I/O at {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("store at {path} is corrupt: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error("vector store: {0}")]
    Store(String),
    #[error("invalid retrieval configuration: {0}")]
    Config(String),
    #[error("internal: {0}")]
    Internal(String),
}

pub type Result<T, E = RetrievalError> = std::result::Result<T, E>;
