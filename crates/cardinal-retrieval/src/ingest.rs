//! Ingest: chunk the KB, embed what changed, update the store. Incremental by card content hash.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use cardinal_embed::Embedder;
use cardinal_kb::{ChunkerConfig, KnowledgeBase};

use crate::error::Result;
use crate::store::{StoredChunk, VectorStore};
use crate::{indexed_chunks, IndexedChunk};

/// What an ingest did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct IngestReport {
    pub cards: usize,
    pub cards_embedded: usize,
    pub cards_removed: usize,
    pub chunks_embedded: usize,
    pub chunks_total: usize,
    /// True when the store was rebuilt because the embedder changed.
    pub rebuilt: bool,
    pub seconds: f64,
}

impl IngestReport {
    pub fn chunks_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.chunks_embedded as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Content hash of a card as stored: embedder, chunking and every chunk's text.
fn card_hash(embedder_id: &str, chunker: &ChunkerConfig, chunks: &[&IndexedChunk]) -> String {
    let mut h = cardinal_digest::Digest::new()
        .part(embedder_id)
        .part(chunker.max_chars.to_le_bytes());
    for c in chunks {
        h.push(&c.chunk_id);
        h.push(&c.text);
    }
    h.hex()
}

/// Bring `store` up to date with `kb`. `progress(done, total)` is called after each batch of
/// embedded chunks.
pub fn ingest(
    store: &mut dyn VectorStore,
    embedder: &dyn Embedder,
    kb: &KnowledgeBase,
    chunker: &ChunkerConfig,
    batch: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<IngestReport> {
    let start = Instant::now();
    let embedder_id = embedder.id();
    let mut report = IngestReport {
        cards: kb.len(),
        ..Default::default()
    };
    if store.embedder_id()?.is_some_and(|id| id != embedder_id) {
        store.clear()?;
        report.rebuilt = true;
    }
    let chunks = indexed_chunks(kb, chunker);
    report.chunks_total = chunks.len();
    let mut by_card: BTreeMap<&str, Vec<&IndexedChunk>> = BTreeMap::new();
    for c in &chunks {
        by_card.entry(c.card_id.as_str()).or_default().push(c);
    }
    let stored = store.card_hashes()?;
    let mut changed: Vec<(&str, String)> = Vec::new();
    for (card, cs) in &by_card {
        let h = card_hash(&embedder_id, chunker, cs);
        if stored.get(*card) != Some(&h) {
            changed.push((card, h));
        }
    }
    let current: BTreeSet<&str> = by_card.keys().copied().collect();
    let mut remove: Vec<String> = stored
        .keys()
        .filter(|c| !current.contains(c.as_str()))
        .cloned()
        .collect();
    report.cards_removed = remove.len();
    let todo: Vec<(&IndexedChunk, &str)> = changed
        .iter()
        .flat_map(|(card, h)| by_card[card].iter().map(move |c| (*c, h.as_str())))
        .collect();
    let total = todo.len();
    let mut add = Vec::with_capacity(total);
    for part in todo.chunks(batch.max(1)) {
        let texts: Vec<&str> = part.iter().map(|(c, _)| c.text.as_str()).collect();
        let vectors = embedder.embed_passages(&texts)?;
        for ((c, h), v) in part.iter().zip(vectors) {
            add.push(StoredChunk {
                chunk: (*c).clone(),
                card_hash: h.to_string(),
                vector: v,
            });
        }
        progress(add.len(), total);
    }
    report.cards_embedded = changed.len();
    report.chunks_embedded = add.len();
    remove.extend(changed.iter().map(|(c, _)| c.to_string()));
    if !remove.is_empty() || !add.is_empty() {
        store.apply(&embedder_id, &remove, add)?;
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}
