//! [`Index::prepare`]: the one way to get a retriever over the knowledge base — load the KB,
//! the embedder and the store, re-ingest what changed, build the lexical index and (when
//! configured) the cross-encoder re-ranker. Used by search, ingest, ask, eval and bench.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cardinal_embed::{BertEmbedder, Embedder, EmbedderOptions, Engine, QueryCache};
use cardinal_kb::KnowledgeBase;
use cardinal_models::PullOptions;
use cardinal_retrieval::store::{ChromaStore, EmbeddedStore, VectorStore};
use cardinal_retrieval::{IngestReport, Retriever};

use crate::error::{HarnessError, Result, ResultExt};
use crate::observer::Observer;
use crate::settings::{Settings, StoreBackend};

/// Everything retrieval needs, brought up to date with the KB.
pub struct Index {
    pub kb: KnowledgeBase,
    pub retriever: Retriever,
    pub ingest: IngestReport,
    /// The embedder's id (model and prefixes), as recorded in run manifests.
    pub embedder_id: String,
    /// The re-ranker's id, when one is configured.
    pub reranker_id: Option<String>,
    /// The retriever's query embedder: vectors cached by text, in `<cache>/query-vectors/`
    /// unless `--no-cache` (then in memory).
    pub queries: Arc<QueryCache>,
}

impl Index {
    /// Load the KB from `<data>/kb`, open the configured store and bring it up to date.
    pub fn prepare(data: &Path, s: &Settings, obs: &dyn Observer) -> Result<Index> {
        let store = open_store(s)?;
        Self::prepare_with_store(data, s, store, obs)
    }

    /// As [`Index::prepare`], with a store the caller opened (e.g. a fresh temporary one).
    pub fn prepare_with_store(
        data: &Path,
        s: &Settings,
        mut store: Box<dyn VectorStore>,
        obs: &dyn Observer,
    ) -> Result<Index> {
        let kb_dir = data.join("kb");
        let kb = KnowledgeBase::load(&kb_dir)
            .ctx(|| format!("loading the KB from {}", kb_dir.display()))?;
        let embedder = open_embedder(s, obs)?;
        let embedder_id = embedder.id();
        let chunker = s.retrieval.chunker();
        let ingest = cardinal_retrieval::ingest(
            store.as_mut(),
            embedder.as_ref(),
            &kb,
            &chunker,
            s.batch_size,
            &mut |done, total| obs.progress("embedding chunks", done, total),
        )?;
        let chunks = cardinal_retrieval::indexed_chunks(&kb, &chunker);
        let (reranker, reranker_id): (Option<Box<dyn cardinal_retrieval::Reranker>>, _) =
            match &s.reranker {
                Some(dir) => {
                    let ce = cardinal_embed::CrossEncoder::load(dir)
                        .ctx(|| format!("loading the cross-encoder from {}", dir.display()))?;
                    let id = ce.id();
                    (Some(Box::new(ce)), Some(id))
                }
                None => (None, None),
            };
        let inner: Arc<dyn Embedder> = embedder;
        let queries = Arc::new(if s.no_cache {
            QueryCache::in_memory(inner)
        } else {
            let dir = s.cache_dir.join("query-vectors");
            QueryCache::open_in(inner, &dir)
                .ctx(|| format!("opening the query-vector cache in {}", dir.display()))?
        });
        let retriever = Retriever::new(
            s.retrieval.clone(),
            &chunks,
            store,
            queries.clone(),
            reranker,
        )?;
        Ok(Index {
            kb,
            retriever,
            ingest,
            embedder_id,
            reranker_id,
            queries,
        })
    }
}

/// What [`ingest_and_repair`] did besides ingesting.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Repair {
    /// Why a damaged embedded store was replaced by an empty one (then re-ingested).
    pub reset: Option<String>,
    /// `--verify`: the first verification.
    pub verify: Option<cardinal_retrieval::VerifyReport>,
    /// The store failed verification and was rebuilt; the verification after the rebuild.
    pub after_rebuild: Option<cardinal_retrieval::VerifyReport>,
}

/// `cardinal ingest`: [`Index::prepare`], except that a damaged embedded store is replaced by
/// an empty one and re-ingested instead of refused, and, with `verify = Some(n)`, `n` chunks
/// are re-embedded and looked up in the store; a store that fails is cleared and rebuilt, and
/// one that still fails after the rebuild is an error.
pub fn ingest_and_repair(
    data: &Path,
    s: &Settings,
    verify: Option<usize>,
    obs: &dyn Observer,
) -> Result<(Index, Repair)> {
    let mut repair = Repair::default();
    let store: Box<dyn VectorStore> = match &s.store {
        StoreBackend::Embedded { path } => {
            let (store, why) = EmbeddedStore::open_or_reset(path)
                .ctx(|| format!("opening the store {}", path.display()))?;
            if let Some(why) = &why {
                obs.note(&format!(
                    "the store {} was damaged ({why}); rebuilding it",
                    path.display()
                ));
            }
            repair.reset = why;
            Box::new(store)
        }
        StoreBackend::Chroma { .. } => open_store(s)?,
    };
    let mut index = Index::prepare_with_store(data, s, store, obs)?;
    let Some(n) = verify else {
        return Ok((index, repair));
    };
    let chunker = s.retrieval.chunker();
    let check = |index: &Index| {
        cardinal_retrieval::verify_store(
            index.retriever.store(),
            index.retriever.embedder().as_ref(),
            &index.kb,
            &chunker,
            n,
        )
        .ctx(|| "verifying the store".to_string())
    };
    let first = check(&index)?;
    repair.verify = Some(first.clone());
    if first.ok() {
        return Ok((index, repair));
    }
    obs.note(&format!(
        "verification: {} of {} re-embedded chunks do not come back from the store as themselves; rebuilding it",
        first.mismatches.len(),
        first.checked
    ));
    drop(index);
    let mut store = open_store(s)?;
    store
        .clear()
        .ctx(|| "clearing the store for a rebuild".to_string())?;
    index = Index::prepare_with_store(data, s, store, obs)?;
    let again = check(&index)?;
    repair.after_rebuild = Some(again.clone());
    if !again.ok() {
        return Err(HarnessError::Retrieval(
            cardinal_retrieval::RetrievalError::Store(format!(
                "the store still fails verification after a rebuild ({} of {} chunks, e.g. {})",
                again.mismatches.len(),
                again.checked,
                again.mismatches[0].chunk_id
            )),
        ));
    }
    Ok((index, repair))
}

/// Load the embedder named by the settings: a pinned model (pulled on first use) or a
/// Hugging Face directory.
pub fn open_embedder(s: &Settings, obs: &dyn Observer) -> Result<Arc<BertEmbedder>> {
    open_embedder_on(s, obs, Engine::default())
}

/// As [`open_embedder`], on a chosen forward pass (`cardinal bench embed` runs both).
pub fn open_embedder_on(
    s: &Settings,
    obs: &dyn Observer,
    engine: Engine,
) -> Result<Arc<BertEmbedder>> {
    let as_path = PathBuf::from(&s.embedder);
    let (dir, q, p) = if as_path.is_dir() {
        // A user's directory: prefixes from the config, else from a manifest if any.
        let manifest = as_path.join("manifest.json");
        let (mq, mp) = std::fs::read_to_string(&manifest)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .map(|v| {
                (
                    v["query_prefix"].as_str().unwrap_or("").to_string(),
                    v["passage_prefix"].as_str().unwrap_or("").to_string(),
                )
            })
            .unwrap_or_default();
        (as_path, mq, mp)
    } else {
        let note = |line: &str| obs.note(line);
        let inst = cardinal_models::ensure(&s.embedder, &PullOptions::from_env(&note))
            .ctx(|| format!("embedder `{}`", s.embedder))?;
        let (q, p) = (
            inst.manifest.query_prefix.clone(),
            inst.manifest.passage_prefix.clone(),
        );
        (inst.dir, q, p)
    };
    let options = EmbedderOptions {
        query_prefix: s.query_prefix.clone().unwrap_or(q),
        passage_prefix: s.passage_prefix.clone().unwrap_or(p),
        batch_size: s.batch_size,
        engine,
        ..Default::default()
    };
    let e = BertEmbedder::load(&dir, options)
        .ctx(|| format!("loading the embedder from {}", dir.display()))?;
    Ok(Arc::new(e))
}

/// Open the configured vector store.
pub fn open_store(s: &Settings) -> Result<Box<dyn VectorStore>> {
    Ok(match &s.store {
        StoreBackend::Embedded { path } => Box::new(
            EmbeddedStore::open(path).ctx(|| format!("opening the store {}", path.display()))?,
        ),
        StoreBackend::Chroma { url, collection } => Box::new(
            ChromaStore::connect(url, "default_tenant", "default_database", collection)
                .map_err(HarnessError::from)
                .map_err(|e| e.context(format!("connecting to Chroma at {url}")))?,
        ),
    })
}
