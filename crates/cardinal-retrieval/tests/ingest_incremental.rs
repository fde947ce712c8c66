//! Incremental ingest by card content hash, on the bundled KB with a counting toy embedder.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use cardinal_embed::Embedder;
use cardinal_kb::{ChunkerConfig, KnowledgeBase};
use cardinal_retrieval::ingest;
use cardinal_retrieval::store::{EmbeddedStore, VectorStore};

struct Counting {
    id: &'static str,
    passages: AtomicUsize,
}

impl Embedder for Counting {
    fn id(&self) -> String {
        self.id.into()
    }
    fn dim(&self) -> usize {
        3
    }
    fn embed_queries(&self, t: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        Ok(t.iter().map(|s| vec![s.len() as f32, 1.0, 0.5]).collect())
    }
    fn embed_passages(&self, t: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        self.passages.fetch_add(t.len(), Ordering::SeqCst);
        self.embed_queries(t)
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

fn kb_copy(tmp: &Path) -> PathBuf {
    let kb = tmp.join("kb");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/kb"),
        &kb,
    );
    kb
}

#[test]
fn only_changed_cards_are_re_embedded() {
    let tmp = tempfile::tempdir().unwrap();
    let kb_dir = kb_copy(tmp.path());
    let store_dir = tmp.path().join("store");
    let chunker = ChunkerConfig::default();
    let emb = Counting {
        id: "toy-1",
        passages: AtomicUsize::new(0),
    };
    let kb = KnowledgeBase::load(&kb_dir).unwrap();

    let mut store = EmbeddedStore::open(&store_dir).unwrap();
    let first = ingest(&mut store, &emb, &kb, &chunker, 64, &mut |_, _| {}).unwrap();
    assert_eq!(first.cards_embedded, kb.len());
    assert_eq!(first.chunks_embedded, first.chunks_total);
    assert_eq!(emb.passages.load(Ordering::SeqCst), first.chunks_total);

    // Unchanged: nothing embedded, from a freshly opened store.
    let mut store = EmbeddedStore::open(&store_dir).unwrap();
    let again = ingest(&mut store, &emb, &kb, &chunker, 64, &mut |_, _| {}).unwrap();
    assert_eq!((again.cards_embedded, again.chunks_embedded), (0, 0));

    // One card edited, one removed: only the edited card is embedded again.
    let edited = kb_dir.join("es-419/refills.md");
    let text = std::fs::read_to_string(&edited).unwrap();
    std::fs::write(
        &edited,
        text.replacen("## Reglas", "- Un dato nuevo y sintético.\n\n## Reglas", 1),
    )
    .unwrap();
    std::fs::remove_file(kb_dir.join("pt-BR/refills.md")).unwrap();
    let (kb2, _diags) = KnowledgeBase::load_lenient(&kb_dir).unwrap();
    let before = emb.passages.load(Ordering::SeqCst);
    let third = ingest(&mut store, &emb, &kb2, &chunker, 64, &mut |_, _| {}).unwrap();
    assert_eq!(third.cards_embedded, 1);
    assert_eq!(third.cards_removed, 1);
    let refills_chunks = kb2
        .get("refills.es-419")
        .map(|cf| cardinal_kb::chunk_card(&cf.card, &chunker).len())
        .unwrap();
    assert_eq!(emb.passages.load(Ordering::SeqCst) - before, refills_chunks);
    assert_eq!(store.len().unwrap(), third.chunks_total);
    assert!(!store.card_hashes().unwrap().contains_key("refills.pt-BR"));

    // A different embedder rebuilds everything.
    let other = Counting {
        id: "toy-2",
        passages: AtomicUsize::new(0),
    };
    let rebuilt = ingest(&mut store, &other, &kb2, &chunker, 64, &mut |_, _| {}).unwrap();
    assert!(rebuilt.rebuilt);
    assert_eq!(rebuilt.cards_embedded, kb2.len());
}
