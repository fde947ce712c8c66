//! Toys shared by the agent's integration tests: a deterministic character n-gram embedder and
//! the real KB indexed with it in a temporary store. Each test binary uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use cardinal_embed::Embedder;
use cardinal_kb::KnowledgeBase;
use cardinal_retrieval::store::EmbeddedStore;
use cardinal_retrieval::{indexed_chunks, ingest, RetrievalConfig, Retriever};

/// Bag of hashed character `n`-grams of the lower-cased text, `dim` dims, unit length; `salt`
/// seeds the hash.
pub fn ngram_vector(text: &str, n: usize, dim: usize, salt: u32) -> Vec<f32> {
    let mut v = vec![0f32; dim];
    let chars: Vec<char> = text.to_lowercase().chars().collect();
    for w in chars.windows(n) {
        let h = w
            .iter()
            .fold(salt, |h, c| h.wrapping_mul(31).wrapping_add(*c as u32));
        v[h as usize % dim] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.iter().map(|x| x / norm).collect()
}

/// [`ngram_vector`] as an embedder (queries and passages alike) under the identity `id`.
pub struct NGrams {
    pub id: &'static str,
    pub n: usize,
    pub dim: usize,
    pub salt: u32,
}

/// The query embedder of the toy world: character trigrams, 32 dims.
pub const TRIGRAMS: NGrams = NGrams {
    id: "trigram-toy",
    n: 3,
    dim: 32,
    salt: 7,
};

impl Embedder for NGrams {
    fn id(&self) -> String {
        self.id.into()
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed_queries(&self, texts: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| ngram_vector(t, self.n, self.dim, self.salt))
            .collect())
    }
    fn embed_passages(&self, texts: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        self.embed_queries(texts)
    }
}

/// The bundled data directory.
pub fn data_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data")
}

/// The real KB, indexed with [`TRIGRAMS`] in a temporary embedded store (kept alive by the
/// returned directory), and a retriever over it with the default configuration.
pub fn toy_retriever() -> (Arc<KnowledgeBase>, Retriever, tempfile::TempDir) {
    let kb = Arc::new(KnowledgeBase::load(&data_dir().join("kb")).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let cfg = RetrievalConfig::default();
    let mut store = EmbeddedStore::open(dir.path()).unwrap();
    ingest(
        &mut store,
        &TRIGRAMS,
        &kb,
        &cfg.chunker(),
        64,
        &mut |_, _| {},
    )
    .unwrap();
    let chunks = indexed_chunks(&kb, &cfg.chunker());
    let retriever =
        Retriever::new(cfg, &chunks, Box::new(store), Arc::new(TRIGRAMS), None).unwrap();
    (kb, retriever, dir)
}
