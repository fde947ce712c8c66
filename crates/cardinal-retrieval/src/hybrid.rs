//! The hybrid pipeline: dense + BM25 → reciprocal rank fusion → optional re-ranker → parent
//! cards, first occurrence wins → top-k.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cardinal_embed::Embedder;
use cardinal_kb::Lang;
use serde::Serialize;

use crate::config::RetrievalConfig;
use crate::error::Result;
use crate::lexical::LexicalIndex;
use crate::rerank::Reranker;
use crate::store::VectorStore;
use crate::IndexedChunk;

/// Which retrievers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Hybrid,
    DenseOnly,
    LexicalOnly,
}

/// One retrieved card with everything needed to explain its place.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievedCard {
    pub card_id: String,
    /// 1-based rank among cards.
    pub rank: usize,
    /// The chunk that brought the card in (its best fused chunk).
    pub chunk_id: String,
    pub fused_score: f32,
    /// 1-based rank of that chunk in the dense list, if it was there.
    pub dense_rank: Option<usize>,
    /// Best dense cosine of any of the card's chunks.
    pub dense_similarity: Option<f32>,
    pub lexical_rank: Option<usize>,
    pub lexical_score: Option<f32>,
    pub rerank_score: Option<f32>,
}

/// The result of one retrieval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Retrieval {
    pub mode: Mode,
    pub cards: Vec<RetrievedCard>,
    /// Best dense cosine over all dense hits (None when dense did not run or found nothing).
    pub best_similarity: Option<f32>,
    /// The configured floor.
    pub min_similarity: f32,
    /// True when dense ran and its best similarity is under the floor: no relevant card.
    pub below_floor: bool,
}

impl Retrieval {
    /// Retrieved card ids in rank order.
    pub fn card_ids(&self) -> Vec<String> {
        self.cards.iter().map(|c| c.card_id.clone()).collect()
    }
}

/// Hybrid retriever over one store and one lexical index.
pub struct Retriever {
    pub config: RetrievalConfig,
    lexical: LexicalIndex,
    store: Box<dyn VectorStore>,
    embedder: Arc<dyn Embedder>,
    reranker: Option<Box<dyn Reranker>>,
    texts: HashMap<String, String>,
}

#[derive(Default)]
struct Candidate {
    card_id: String,
    fused: f32,
    dense_rank: Option<usize>,
    dense_sim: Option<f32>,
    lexical_rank: Option<usize>,
    lexical_score: Option<f32>,
    rerank: Option<f32>,
}

impl Retriever {
    /// Build over the given chunks (the lexical index is rebuilt in memory) and store.
    pub fn new(
        config: RetrievalConfig,
        chunks: &[IndexedChunk],
        store: Box<dyn VectorStore>,
        embedder: Arc<dyn Embedder>,
        reranker: Option<Box<dyn Reranker>>,
    ) -> Result<Self> {
        config.validate()?;
        Ok(Retriever {
            lexical: LexicalIndex::build(chunks)?,
            texts: chunks
                .iter()
                .map(|c| (c.chunk_id.clone(), c.text.clone()))
                .collect(),
            config,
            store,
            embedder,
            reranker,
        })
    }

    pub fn store(&self) -> &dyn VectorStore {
        self.store.as_ref()
    }

    /// The query embedder (shared with callers that need the same query vector, such as the
    /// agent's safety policy: one embedding per turn).
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// The query vector of `query`, as dense retrieval computes it.
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        Ok(self
            .embedder
            .embed_queries(&[query])?
            .into_iter()
            .next()
            .unwrap_or_default())
    }

    /// Retrieve the top-k cards of language `lang` for `query`.
    pub fn retrieve(&self, query: &str, lang: Lang, mode: Mode) -> Result<Retrieval> {
        self.retrieve_with_vector(query, None, lang, mode)
    }

    /// [`Retriever::retrieve`] with the query vector already computed (by
    /// [`Retriever::embed_query`]); `None` embeds the query here.
    pub fn retrieve_with_vector(
        &self,
        query: &str,
        query_vector: Option<&[f32]>,
        lang: Lang,
        mode: Mode,
    ) -> Result<Retrieval> {
        let cfg = &self.config;
        let mut cands: BTreeMap<String, Candidate> = BTreeMap::new();
        let mut best_similarity = None;
        if mode != Mode::LexicalOnly {
            let qv = match query_vector {
                Some(v) => v.to_vec(),
                None => self.embed_query(query)?,
            };
            let hits = self.store.query(&qv, lang, cfg.candidates)?;
            best_similarity = hits.first().map(|h| h.similarity);
            for (i, h) in hits.into_iter().enumerate() {
                let c = cands.entry(h.chunk_id).or_default();
                c.card_id = h.card_id;
                c.dense_rank = Some(i + 1);
                c.dense_sim = Some(h.similarity);
                c.fused += cfg.dense_weight / (cfg.k_rrf + (i + 1) as f32);
            }
        }
        if mode != Mode::DenseOnly {
            for (i, h) in self
                .lexical
                .search(query, lang, cfg.candidates)?
                .into_iter()
                .enumerate()
            {
                let c = cands.entry(h.chunk_id).or_default();
                c.card_id = h.card_id;
                c.lexical_rank = Some(i + 1);
                c.lexical_score = Some(h.score);
                c.fused += cfg.lexical_weight / (cfg.k_rrf + (i + 1) as f32);
            }
        }
        let mut ranked: Vec<(String, Candidate)> = cands.into_iter().collect();
        // Fused score descending; ties by chunk id so results are deterministic.
        ranked.sort_by(|a, b| b.1.fused.total_cmp(&a.1.fused).then_with(|| a.0.cmp(&b.0)));
        if let Some(rr) = &self.reranker {
            let n = cfg.rerank_candidates.min(ranked.len());
            let passages: Vec<&str> = ranked[..n]
                .iter()
                .map(|(id, _)| self.texts.get(id).map(String::as_str).unwrap_or(""))
                .collect();
            let scores = rr.score(query, &passages)?;
            for ((_, c), s) in ranked[..n].iter_mut().zip(scores) {
                c.rerank = Some(s);
            }
            ranked[..n].sort_by(|a, b| {
                b.1.rerank
                    .unwrap_or(f32::MIN)
                    .total_cmp(&a.1.rerank.unwrap_or(f32::MIN))
                    .then_with(|| a.0.cmp(&b.0))
            });
        }
        let mut best_sim_of_card: HashMap<&str, f32> = HashMap::new();
        for (_, c) in &ranked {
            if let Some(s) = c.dense_sim {
                let e = best_sim_of_card.entry(c.card_id.as_str()).or_insert(s);
                *e = e.max(s);
            }
        }
        let mut cards: Vec<RetrievedCard> = Vec::new();
        for (chunk_id, c) in &ranked {
            if cards.len() == cfg.top_k {
                break;
            }
            if cards.iter().any(|r| r.card_id == c.card_id) {
                continue;
            }
            cards.push(RetrievedCard {
                card_id: c.card_id.clone(),
                rank: cards.len() + 1,
                chunk_id: chunk_id.clone(),
                fused_score: c.fused,
                dense_rank: c.dense_rank,
                dense_similarity: best_sim_of_card.get(c.card_id.as_str()).copied(),
                lexical_rank: c.lexical_rank,
                lexical_score: c.lexical_score,
                rerank_score: c.rerank,
            });
        }
        Ok(Retrieval {
            mode,
            // A NaN similarity (a damaged vector) is below every floor.
            below_floor: best_similarity.is_some_and(|s| s.is_nan() || s < cfg.min_similarity)
                || (mode != Mode::LexicalOnly && best_similarity.is_none()),
            best_similarity,
            min_similarity: cfg.min_similarity,
            cards,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EmbeddedStore, StoredChunk, VectorStore};

    /// A toy embedder: a bag of known words, so tests control similarities exactly.
    struct Toy;
    const VOCAB: [&str; 5] = ["insulin", "fridge", "refill", "portal", "dose"];
    impl Embedder for Toy {
        fn id(&self) -> String {
            "toy".into()
        }
        fn dim(&self) -> usize {
            VOCAB.len()
        }
        fn embed_queries(&self, t: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
            self.embed_passages(t)
        }
        fn embed_passages(&self, t: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
            Ok(t.iter()
                .map(|s| {
                    let s = s.to_lowercase();
                    VOCAB
                        .iter()
                        .map(|w| s.matches(w).count() as f32 + 0.01)
                        .collect()
                })
                .collect())
        }
    }

    fn chunk(card: &str, n: usize, text: &str) -> IndexedChunk {
        IndexedChunk {
            chunk_id: format!("{card}#{n}"),
            card_id: card.into(),
            lang: Lang::En,
            topic: card.split('.').next().unwrap_or(card).into(),
            text: text.into(),
        }
    }

    fn retriever(
        reranker: Option<Box<dyn Reranker>>,
        cfg: RetrievalConfig,
    ) -> (tempfile::TempDir, Retriever) {
        let chunks = vec![
            chunk("insulin.en", 0, "insulin fridge insulin"),
            chunk("insulin.en", 1, "insulin pens travel"),
            chunk("refills.en", 0, "refill through the portal"),
            chunk("dose.en", 0, "dose missed dose"),
        ];
        let tmp = tempfile::tempdir().unwrap();
        let mut store = EmbeddedStore::open(tmp.path()).unwrap();
        let toy = Toy;
        let add = chunks
            .iter()
            .map(|c| StoredChunk {
                chunk: c.clone(),
                card_hash: "h".into(),
                vector: toy.embed_passages(&[&c.text]).unwrap().remove(0),
            })
            .collect();
        store.apply("toy", &[], add).unwrap();
        let r = Retriever::new(cfg, &chunks, Box::new(store), Arc::new(Toy), reranker).unwrap();
        (tmp, r)
    }

    #[test]
    fn fuses_dedupes_to_parent_cards_and_cuts_at_k() {
        let cfg = RetrievalConfig {
            top_k: 2,
            candidates: 10,
            ..Default::default()
        };
        let (_t, r) = retriever(None, cfg);
        let res = r
            .retrieve("insulin in the fridge", Lang::En, Mode::Hybrid)
            .unwrap();
        assert_eq!(res.cards.len(), 2);
        assert_eq!(res.cards[0].card_id, "insulin.en");
        assert_eq!(res.cards[0].chunk_id, "insulin.en#0");
        // Both insulin chunks matched, but the card appears once.
        assert_ne!(res.cards[1].card_id, "insulin.en");
        assert_eq!(res.cards[0].dense_rank, Some(1));
        assert_eq!(res.cards[0].lexical_rank, Some(1));
        let expected = 1.0 / 61.0 + 1.0 / 61.0;
        assert!((res.cards[0].fused_score - expected).abs() < 1e-6);
        assert!(res.best_similarity.unwrap() > 0.9);
    }

    #[test]
    fn floor_flags_queries_without_a_relevant_card() {
        let cfg = RetrievalConfig {
            min_similarity: 0.9,
            ..Default::default()
        };
        let (_t, r) = retriever(None, cfg);
        let hit = r
            .retrieve("insulin fridge", Lang::En, Mode::DenseOnly)
            .unwrap();
        assert!(!hit.below_floor, "{:?}", hit.best_similarity);
        let miss = r
            .retrieve("football scores tonight", Lang::En, Mode::DenseOnly)
            .unwrap();
        assert!(miss.below_floor);
        // Retrieval still returns cards under the floor (recall is measured on them).
        assert!(!miss.cards.is_empty());
        // Lexical only: the floor is not decidable.
        let lex = r.retrieve("football", Lang::En, Mode::LexicalOnly).unwrap();
        assert!(!lex.below_floor && lex.best_similarity.is_none());
    }

    struct PreferRefills;
    impl Reranker for PreferRefills {
        fn id(&self) -> String {
            "prefer-refills".into()
        }
        fn score(&self, _q: &str, passages: &[&str]) -> crate::Result<Vec<f32>> {
            Ok(passages
                .iter()
                .map(|p| if p.contains("portal") { 10.0 } else { 0.0 })
                .collect())
        }
    }

    #[test]
    fn reranker_reorders_fused_candidates() {
        let (_t, r) = retriever(Some(Box::new(PreferRefills)), RetrievalConfig::default());
        let res = r
            .retrieve("insulin fridge", Lang::En, Mode::Hybrid)
            .unwrap();
        assert_eq!(res.cards[0].card_id, "refills.en");
        assert_eq!(res.cards[0].rerank_score, Some(10.0));
    }
}
