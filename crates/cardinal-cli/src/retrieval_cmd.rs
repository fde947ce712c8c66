//! The imperative shell around retrieval: models, store, ingest; `cardinal ingest` and
//! `cardinal search`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use cardinal_embed::{BertEmbedder, EmbedderOptions};
use cardinal_kb::{KnowledgeBase, Lang};
use cardinal_models::PullOptions;
use cardinal_retrieval::store::{ChromaStore, EmbeddedStore, VectorStore};
use cardinal_retrieval::{IngestReport, Mode, Retrieval, Retriever};
use serde_json::json;

use crate::progress::Progress;
use crate::settings::{Settings, StoreBackend};
use crate::Outcome;

/// Load the embedder named by the settings: a pinned model (pulled on first use) or a directory.
pub fn open_embedder(s: &Settings) -> Result<Arc<BertEmbedder>> {
    let as_path = PathBuf::from(&s.embedder);
    let (dir, q, p) = if as_path.is_dir() {
        // A user's Hugging Face directory: prefixes from the config, else from a manifest if any.
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
        let progress = crate::models_cmd::progress;
        let inst = cardinal_models::ensure(&s.embedder, &PullOptions::from_env(&progress))
            .with_context(|| format!("embedder `{}`", s.embedder))?;
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
        ..Default::default()
    };
    let e = BertEmbedder::load(&dir, options)
        .with_context(|| format!("loading embedder from {}", dir.display()))?;
    Ok(Arc::new(e))
}

pub fn open_store(s: &Settings) -> Result<Box<dyn VectorStore>> {
    Ok(match &s.store {
        StoreBackend::Embedded { path } => Box::new(
            EmbeddedStore::open(path)
                .with_context(|| format!("opening store {}", path.display()))?,
        ),
        StoreBackend::Chroma { url, collection } => Box::new(
            ChromaStore::connect(url, "default_tenant", "default_database", collection)
                .with_context(|| format!("connecting to Chroma at {url}"))?,
        ),
    })
}

/// Everything retrieval needs, brought up to date with the KB.
pub struct Prepared {
    pub kb: KnowledgeBase,
    pub retriever: Retriever,
    pub ingest: IngestReport,
}

/// Load the KB, the embedder and the store; re-ingest what changed; build the retriever.
pub fn prepare(data: &Path, s: &Settings) -> Result<Prepared> {
    let kb = KnowledgeBase::load(&data.join("kb"))?;
    let embedder = open_embedder(s)?;
    let mut store = open_store(s)?;
    let chunker = s.retrieval.chunker();
    let mut bar = Progress::new("embedding chunks");
    let report = cardinal_retrieval::ingest(
        store.as_mut(),
        embedder.as_ref(),
        &kb,
        &chunker,
        s.batch_size,
        &mut |done, total| bar.update(done, total),
    )?;
    let chunks = cardinal_retrieval::indexed_chunks(&kb, &chunker);
    let reranker: Option<Box<dyn cardinal_retrieval::Reranker>> = match &s.reranker {
        Some(dir) => Some(Box::new(
            cardinal_embed::CrossEncoder::load(dir)
                .with_context(|| format!("loading the cross-encoder from {}", dir.display()))?,
        )),
        None => None,
    };
    let retriever = Retriever::new(s.retrieval.clone(), &chunks, store, embedder, reranker)?;
    Ok(Prepared {
        kb,
        retriever,
        ingest: report,
    })
}

pub fn ingest(data: &Path, s: &Settings, json_out: bool) -> Result<Outcome> {
    let p = prepare(data, s)?;
    let r = &p.ingest;
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({ "store": p.retriever.store().describe(), "report": r, "chunks_per_second": r.chunks_per_second() })
            )?
        );
    } else {
        println!(
            "{}: {} cards ({} re-embedded, {} removed{}), {} chunks embedded of {}, {:.1}s, {:.1} chunks/s",
            p.retriever.store().describe(),
            r.cards,
            r.cards_embedded,
            r.cards_removed,
            if r.rebuilt { ", rebuilt for a new embedder" } else { "" },
            r.chunks_embedded,
            r.chunks_total,
            r.seconds,
            r.chunks_per_second()
        );
    }
    Ok(Outcome::Pass)
}

pub fn search(
    data: &Path,
    s: &mut Settings,
    query: &str,
    lang: Lang,
    k: Option<usize>,
    mode: Mode,
    json_out: bool,
) -> Result<Outcome> {
    if let Some(k) = k {
        s.retrieval.top_k = k;
        s.retrieval.candidates = s.retrieval.candidates.max(k);
    }
    let p = prepare(data, s)?;
    let res = p.retriever.retrieve(query, lang, mode)?;
    if json_out {
        println!("{}", serde_json::to_string_pretty(&res)?);
    } else {
        print!("{}", render_search(&p.kb, &res));
    }
    Ok(Outcome::Pass)
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

fn render_search(kb: &KnowledgeBase, r: &Retrieval) -> String {
    let mut out = format!(
        "{:>4}  {:<36} {:>8} {:>6} {:>7} {:>6} {:>8}  title\n",
        "rank", "card", "fused", "dense#", "cosine", "bm25#", "bm25"
    );
    for c in &r.cards {
        let title = kb
            .get(&c.card_id)
            .map(|cf| cf.card.title.as_str())
            .unwrap_or("");
        out.push_str(&format!(
            "{:>4}  {:<36} {:>8.5} {:>6} {:>7} {:>6} {:>8}  {title}\n",
            c.rank,
            c.card_id,
            c.fused_score,
            opt(c.dense_rank),
            opt(c.dense_similarity.map(|s| format!("{s:.3}"))),
            opt(c.lexical_rank),
            opt(c.lexical_score.map(|s| format!("{s:.2}"))),
        ));
    }
    match r.best_similarity {
        Some(b) if r.below_floor => out.push_str(&format!(
            "best cosine {b:.3} is under the floor {:.2}: no relevant card\n",
            r.min_similarity
        )),
        Some(b) => out.push_str(&format!(
            "best cosine {b:.3} (floor {:.2})\n",
            r.min_similarity
        )),
        None => out.push_str("dense retrieval not run: the similarity floor does not apply\n"),
    }
    out
}
