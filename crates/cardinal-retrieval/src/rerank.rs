//! Re-rankers: score (query, passage) pairs; higher is more relevant.

use crate::error::Result;

/// Scores passages against a query. Used after fusion, before parent expansion.
pub trait Reranker: Send + Sync {
    fn id(&self) -> String;
    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>>;
}

impl Reranker for cardinal_embed::CrossEncoder {
    fn id(&self) -> String {
        cardinal_embed::CrossEncoder::id(self)
    }

    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>> {
        Ok(cardinal_embed::CrossEncoder::score(self, query, passages)?)
    }
}
