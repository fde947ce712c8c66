//! Sentence embedders and cross-encoders of Cardinal, run in-process on the CPU with candle.
//!
//! Any standard Hugging Face model directory (`config.json`, `model.safetensors`,
//! `tokenizer.json`) of the BERT or XLM-RoBERTa architecture loads; the default is
//! multilingual-e5-small as installed by `cardinal models pull`. Embeddings are mean-pooled over
//! the attention mask and L2-normalised, in f32 (f16 attention masks overflow on CPU).

pub mod bert;
pub mod cross;
pub mod error;
pub mod gemma;
pub mod matmul;
pub mod native;
pub mod query_cache;

pub use bert::{BertEmbedder, EmbedderOptions, Engine, NATIVE_BATCH_TOKENS};
pub use cross::CrossEncoder;
pub use error::{EmbedError, Result};
pub use gemma::GemmaEmbedder;
pub use query_cache::{QueryCache, QueryCacheStats};

/// Turns text into unit vectors. Queries and passages may be embedded differently (E5 prefixes).
pub trait Embedder: Send + Sync {
    /// Stable identity (model + prefixes), recorded in stores so a changed model forces re-ingest.
    fn id(&self) -> String;
    /// Vector dimension.
    fn dim(&self) -> usize;
    /// Embed search queries.
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
    /// Embed passages (chunks) to be searched.
    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

/// Cosine similarity of two vectors (they need not be normalised).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let mut dot = 0f32;
    let mut na = 0f32;
    let mut nb = 0f32;
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}
