//! `ingest --verify`: re-embed a sample of the KB's chunks and check that the store returns
//! each one as its own nearest neighbour with (almost) the same vector. Works through
//! [`VectorStore::query`] only, so it checks the Chroma backend as well as the embedded one —
//! a store whose rows were swapped, re-embedded with another model under the same id, or
//! damaged in a way its own checks cannot see fails here.

use cardinal_embed::Embedder;
use cardinal_kb::{ChunkerConfig, KnowledgeBase};
use serde::Serialize;

use crate::error::Result;
use crate::indexed_chunks;
use crate::store::VectorStore;

/// Lowest cosine between a re-embedded chunk and its stored vector that counts as the same.
pub const VERIFY_MIN_COSINE: f32 = 0.999;

/// One chunk that failed verification.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifyMismatch {
    pub chunk_id: String,
    /// What the store returned first for the chunk's own vector (None: nothing).
    pub nearest: Option<String>,
    /// Its cosine.
    pub similarity: Option<f32>,
}

/// What `ingest --verify` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifyReport {
    pub checked: usize,
    pub chunks_total: usize,
    pub mismatches: Vec<VerifyMismatch>,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.mismatches.is_empty()
    }
}

/// Re-embed `sample` chunks spread evenly over the KB (all when `sample` ≥ the chunk count)
/// and query the store with each: the chunk must come back first with cosine ≥
/// [`VERIFY_MIN_COSINE`].
pub fn verify_store(
    store: &dyn VectorStore,
    embedder: &dyn Embedder,
    kb: &KnowledgeBase,
    chunker: &ChunkerConfig,
    sample: usize,
) -> Result<VerifyReport> {
    let chunks = indexed_chunks(kb, chunker);
    let total = chunks.len();
    let n = sample.min(total);
    // Evenly spread, deterministic: every language and most topics are covered.
    let picked: Vec<_> = (0..n).map(|i| &chunks[i * total / n.max(1)]).collect();
    let texts: Vec<&str> = picked.iter().map(|c| c.text.as_str()).collect();
    let vectors = if texts.is_empty() {
        Vec::new()
    } else {
        embedder.embed_passages(&texts)?
    };
    let mut mismatches = Vec::new();
    for (c, v) in picked.iter().zip(&vectors) {
        let hits = store.query(v, c.lang, 1)?;
        let first = hits.first();
        let same = first.is_some_and(|h| {
            h.chunk_id == c.chunk_id && !h.similarity.is_nan() && h.similarity >= VERIFY_MIN_COSINE
        });
        if !same {
            mismatches.push(VerifyMismatch {
                chunk_id: c.chunk_id.clone(),
                nearest: first.map(|h| h.chunk_id.clone()),
                similarity: first.map(|h| h.similarity),
            });
        }
    }
    Ok(VerifyReport {
        checked: picked.len(),
        chunks_total: total,
        mismatches,
    })
}
