//! Dense vector stores: the embedded default and the Chroma server backend.

pub mod chroma;
pub mod embedded;

use std::collections::BTreeMap;

use cardinal_kb::Lang;

use crate::error::Result;
use crate::IndexedChunk;

pub use chroma::ChromaStore;
pub use embedded::EmbeddedStore;

/// A chunk with its vector and the content hash of its card (for incremental re-ingest).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredChunk {
    pub chunk: IndexedChunk,
    pub card_hash: String,
    pub vector: Vec<f32>,
}

/// One dense hit.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseHit {
    pub chunk_id: String,
    pub card_id: String,
    /// Cosine similarity.
    pub similarity: f32,
}

/// A persistent store of chunk vectors, searched by cosine similarity within one language.
pub trait VectorStore: Send + Sync {
    /// Human-readable description (backend and location).
    fn describe(&self) -> String;
    /// The embedder the stored vectors were made with, if any were stored.
    fn embedder_id(&self) -> Result<Option<String>>;
    /// Card id → content hash of what is stored.
    fn card_hashes(&self) -> Result<BTreeMap<String, String>>;
    /// Remove the chunks of `remove` cards, then add `add`; record `embedder_id`.
    fn apply(&mut self, embedder_id: &str, remove: &[String], add: Vec<StoredChunk>) -> Result<()>;
    /// Remove everything.
    fn clear(&mut self) -> Result<()>;
    /// The `n` most similar chunks of language `lang`, most similar first.
    fn query(&self, vector: &[f32], lang: Lang, n: usize) -> Result<Vec<DenseHit>>;
    /// Number of stored chunks.
    fn len(&self) -> Result<usize>;
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}
