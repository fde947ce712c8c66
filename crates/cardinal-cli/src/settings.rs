//! Configuration: raw options from `cardinal.toml` (all optional) resolved into settings,
//! with command-line flags applied last.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cardinal_retrieval::RetrievalConfig;
use serde::Deserialize;

/// The file read when `--config` is not given (if it exists).
pub const DEFAULT_CONFIG: &str = "cardinal.toml";

/// `cardinal.toml` as written: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub retrieval: Option<RetrievalConfig>,
    #[serde(default)]
    pub embedder: Option<RawEmbedder>,
    #[serde(default)]
    pub store: Option<RawStore>,
    #[serde(default)]
    pub reranker: Option<RawReranker>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReranker {
    /// A Hugging Face sequence-classification directory.
    pub model: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEmbedder {
    /// A pinned model name (see `cardinal models list`) or a Hugging Face directory path.
    pub model: Option<String>,
    pub query_prefix: Option<String>,
    pub passage_prefix: Option<String>,
    pub batch_size: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    /// `embedded` (default) or `chroma`.
    pub backend: Option<String>,
    pub path: Option<PathBuf>,
    pub chroma_url: Option<String>,
    pub collection: Option<String>,
}

/// Which vector store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreBackend {
    Embedded { path: PathBuf },
    Chroma { url: String, collection: String },
}

/// Resolved settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub retrieval: RetrievalConfig,
    pub embedder: String,
    pub query_prefix: Option<String>,
    pub passage_prefix: Option<String>,
    pub batch_size: usize,
    pub store: StoreBackend,
    /// Cross-encoder directory; `None` = no re-ranking.
    pub reranker: Option<PathBuf>,
}

/// Command-line overrides shared by the commands that retrieve.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RetrievalArgs {
    /// Configuration file (default: ./cardinal.toml when present).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Embedder: a pinned model name (default e5-small) or a Hugging Face model directory.
    #[arg(long, global = true)]
    pub embedder: Option<String>,
    /// Vector store backend: embedded (default, no server) or chroma.
    #[arg(long, global = true, value_parser = ["embedded", "chroma"])]
    pub store: Option<String>,
    /// Embedded store directory (default .cardinal/store).
    #[arg(long, global = true)]
    pub store_path: Option<PathBuf>,
    /// Chroma server URL (default $CARDINAL_CHROMA_URL or http://127.0.0.1:8000).
    #[arg(long, global = true)]
    pub chroma_url: Option<String>,
    /// Re-rank fused candidates with a local cross-encoder (a Hugging Face sequence-classification
    /// directory). Off by default.
    #[arg(long, global = true)]
    pub reranker: Option<PathBuf>,
}

impl Settings {
    /// Read the config file (if any) and apply the flags.
    pub fn load(args: &RetrievalArgs) -> Result<Self> {
        let raw = match &args.config {
            Some(p) => read_raw(p)?,
            None if Path::new(DEFAULT_CONFIG).is_file() => read_raw(Path::new(DEFAULT_CONFIG))?,
            None => RawConfig::default(),
        };
        let retrieval = raw.retrieval.unwrap_or_default();
        retrieval.validate()?;
        let emb = raw.embedder.unwrap_or_default();
        let st = raw.store.unwrap_or_default();
        let backend = args
            .store
            .clone()
            .or(st.backend)
            .unwrap_or_else(|| "embedded".into());
        let store = match backend.as_str() {
            "embedded" => StoreBackend::Embedded {
                path: args
                    .store_path
                    .clone()
                    .or(st.path)
                    .unwrap_or_else(|| PathBuf::from(".cardinal/store")),
            },
            "chroma" => StoreBackend::Chroma {
                url: args
                    .chroma_url
                    .clone()
                    .or(st.chroma_url)
                    .or_else(|| std::env::var("CARDINAL_CHROMA_URL").ok())
                    .unwrap_or_else(|| "http://127.0.0.1:8000".into()),
                collection: st.collection.unwrap_or_else(|| "cardinal-kb".into()),
            },
            other => bail!("unknown store backend `{other}` (embedded or chroma)"),
        };
        Ok(Settings {
            retrieval,
            embedder: args
                .embedder
                .clone()
                .or(emb.model)
                .unwrap_or_else(|| "e5-small".into()),
            query_prefix: emb.query_prefix,
            passage_prefix: emb.passage_prefix,
            batch_size: emb.batch_size.unwrap_or(16),
            store,
            reranker: args.reranker.clone().or(raw.reranker.and_then(|r| r.model)),
        })
    }
}

fn read_raw(path: &Path) -> Result<RawConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
            .unwrap_or(0);
        anyhow::anyhow!("{}:{line}: {}", path.display(), e.message().trim())
    })
}
