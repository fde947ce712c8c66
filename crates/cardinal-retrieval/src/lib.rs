//! Hybrid retrieval of Cardinal.
//!
//! Chunks of the knowledge base are searched two ways — BM25 with language-aware analysis
//! ([`lexical`]) and exact cosine over dense embeddings in a [`store::VectorStore`] — then fused
//! by reciprocal rank fusion, optionally re-ranked by a cross-encoder, expanded to their parent
//! cards (first occurrence wins) and cut to the configured top-k ([`hybrid`]).

pub mod config;
pub mod error;
pub mod hybrid;
pub mod ingest;
pub mod lexical;
pub mod rerank;
pub mod store;
pub mod verify;

pub use config::RetrievalConfig;
pub use error::{Result, RetrievalError};
pub use hybrid::{Mode, Retrieval, RetrievedCard, Retriever};
pub use ingest::{ingest, IngestReport};
pub use rerank::Reranker;
pub use verify::{verify_store, VerifyReport, VERIFY_MIN_COSINE};

use cardinal_kb::{ChunkerConfig, KnowledgeBase, Lang};

/// A chunk as the retrievers see it: the card title leads the chunk text, so a chunk of the
/// rules section still says what it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedChunk {
    pub chunk_id: String,
    /// Parent card id (card identity).
    pub card_id: String,
    pub lang: Lang,
    pub topic: String,
    pub text: String,
}

/// Every chunk of the KB in indexable form, in card order.
pub fn indexed_chunks(kb: &KnowledgeBase, chunker: &ChunkerConfig) -> Vec<IndexedChunk> {
    kb.cards
        .iter()
        .flat_map(|cf| {
            let card = &cf.card;
            cardinal_kb::chunk_card(card, chunker)
                .into_iter()
                .map(move |ch| IndexedChunk {
                    card_id: ch.card_id().to_string(),
                    chunk_id: ch.id,
                    lang: card.lang,
                    topic: card.topic.clone(),
                    text: format!("{}\n{}", card.title, ch.text.trim()),
                })
        })
        .collect()
}
