//! `verify_store` on the bundled KB with a hashing toy embedder: a sound store passes; a store
//! whose vectors came from another model under the same id fails, chunk by chunk.

use std::path::Path;

use cardinal_embed::Embedder;
use cardinal_kb::{ChunkerConfig, KnowledgeBase};
use cardinal_retrieval::store::{EmbeddedStore, VectorStore};
use cardinal_retrieval::{ingest, verify_store};

/// 16 pseudo-random values per text from a seeded sha256 (distinct texts, distinct vectors).
struct Hashing {
    seed: &'static str,
}

impl Embedder for Hashing {
    fn id(&self) -> String {
        "hashing-toy".into()
    }
    fn dim(&self) -> usize {
        16
    }
    fn embed_queries(&self, t: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        Ok(t.iter()
            .map(|s| {
                let hex = cardinal_digest::sha256_hex(format!("{}|{s}", self.seed));
                hex.as_bytes()
                    .chunks(4)
                    .map(|c| {
                        let v = u16::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap();
                        v as f32 / 32768.0 - 1.0
                    })
                    .collect()
            })
            .collect())
    }
    fn embed_passages(&self, t: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        self.embed_queries(t)
    }
}

#[test]
fn verification_passes_on_a_sound_store_and_fails_on_swapped_vectors() {
    let kb =
        KnowledgeBase::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/kb")).unwrap();
    let chunker = ChunkerConfig::default();
    let tmp = tempfile::tempdir().unwrap();
    let mut store = EmbeddedStore::open(tmp.path()).unwrap();
    let good = Hashing { seed: "a" };
    ingest(&mut store, &good, &kb, &chunker, 64, &mut |_, _| {}).unwrap();
    let r = verify_store(&store, &good, &kb, &chunker, 40).unwrap();
    assert_eq!(r.checked, 40);
    assert!(r.ok(), "{:?}", r.mismatches);
    // Same id, other vectors: nothing comes back as itself with cosine >= 0.999.
    let other = Hashing { seed: "b" };
    let r = verify_store(&store, &other, &kb, &chunker, 40).unwrap();
    assert_eq!(r.mismatches.len(), 40, "{:?}", r.mismatches);
    // Asking for more than the KB has checks every chunk once.
    let all = verify_store(&store, &good, &kb, &chunker, 1_000_000).unwrap();
    assert_eq!(all.checked, store.len().unwrap());
    assert!(all.ok());
}
