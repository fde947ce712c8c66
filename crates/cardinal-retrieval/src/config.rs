//! Retrieval settings: the one place where top-k lives.

use serde::{Deserialize, Serialize};

use crate::error::{Result, RetrievalError};

/// Retrieval configuration. `top_k` is shared by retrieval and the retrieval-recall evaluator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrievalConfig {
    /// Cards returned per query (after parent deduplication).
    pub top_k: usize,
    /// Chunks each retriever contributes to fusion.
    pub candidates: usize,
    /// The k of reciprocal rank fusion: score = Σ weight / (k_rrf + rank).
    pub k_rrf: f32,
    pub dense_weight: f32,
    pub lexical_weight: f32,
    /// Minimum dense cosine of the best chunk; below it the query has no relevant card.
    pub min_similarity: f32,
    /// Fused chunks re-scored by the re-ranker when one is configured.
    pub rerank_candidates: usize,
    /// Bytes per chunk when splitting cards.
    pub chunk_max_chars: usize,
}

impl Default for RetrievalConfig {
    fn default() -> Self {
        RetrievalConfig {
            top_k: 5,
            candidates: 50,
            k_rrf: 60.0,
            dense_weight: 1.0,
            lexical_weight: 1.0,
            min_similarity: 0.82,
            rerank_candidates: 20,
            chunk_max_chars: 400,
        }
    }
}

impl RetrievalConfig {
    /// Reject settings that cannot work.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(RetrievalError::Config(m));
        if self.top_k == 0 {
            return bad("top_k must be at least 1".into());
        }
        if self.candidates < self.top_k {
            return bad(format!(
                "candidates ({}) must be at least top_k ({})",
                self.candidates, self.top_k
            ));
        }
        if !(self.k_rrf.is_finite() && self.k_rrf >= 0.0) {
            return bad(format!(
                "k_rrf must be a non-negative number, got {}",
                self.k_rrf
            ));
        }
        for (name, w) in [
            ("dense_weight", self.dense_weight),
            ("lexical_weight", self.lexical_weight),
        ] {
            if !(w.is_finite() && w >= 0.0) {
                return bad(format!("{name} must be a non-negative number, got {w}"));
            }
        }
        if !(-1.0..=1.0).contains(&self.min_similarity) {
            return bad(format!(
                "min_similarity is a cosine in [-1, 1], got {}",
                self.min_similarity
            ));
        }
        if self.chunk_max_chars == 0 {
            return bad("chunk_max_chars must be at least 1".into());
        }
        Ok(())
    }

    pub fn chunker(&self) -> cardinal_kb::ChunkerConfig {
        cardinal_kb::ChunkerConfig {
            max_chars: self.chunk_max_chars,
        }
    }
}
