//! One settings layer: built-in defaults < `cardinal.toml` < environment < command-line flags,
//! resolved once into one typed [`Settings`] value.
//!
//! - [`RawConfig`] is the file as written (every key optional, unknown keys rejected with
//!   file:line).
//! - [`Overrides`] holds what the environment and the flags say (the binary fills it; a flag
//!   wins over its environment variable). Every field is optional: `None` means "not given", so
//!   a file value is never overwritten by a default.
//! - [`Settings::resolve`] applies the layers and validates the result.
//!
//! Environment variables (each the same as its flag): `CARDINAL_EMBEDDER`, `CARDINAL_STORE`,
//! `CARDINAL_STORE_PATH`, `CARDINAL_CHROMA_URL`, `CARDINAL_LLM`, `CARDINAL_LLM_URL`,
//! `CARDINAL_LLM_MODEL`, `CARDINAL_THREADS`, `CARDINAL_CACHE_DIR`, `CARDINAL_JUDGE`,
//! `CARDINAL_JUDGE_URL`, `CARDINAL_JUDGE_MODEL`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cardinal_retrieval::RetrievalConfig;
use serde::{Deserialize, Serialize};

use crate::error::{HarnessError, Result};

/// The file read when no `--config` is given (if it exists).
pub const DEFAULT_CONFIG: &str = "cardinal.toml";

/// `cardinal.toml` as written: every key optional.
#[derive(Debug, Default, Clone, Deserialize)]
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
    #[serde(default)]
    pub llm: Option<RawLlm>,
    #[serde(default)]
    pub judge: Option<RawJudge>,
    #[serde(default)]
    pub endpoint: Option<RawEndpoint>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReranker {
    /// A Hugging Face sequence-classification directory.
    pub model: Option<PathBuf>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEmbedder {
    /// A pinned model name (see `cardinal models list`) or a Hugging Face directory path.
    pub model: Option<String>,
    pub query_prefix: Option<String>,
    pub passage_prefix: Option<String>,
    pub batch_size: Option<usize>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    /// `embedded` (default) or `chroma`.
    pub backend: Option<String>,
    pub path: Option<PathBuf>,
    pub chroma_url: Option<String>,
    pub collection: Option<String>,
}

/// `[llm]`: the agent's generator.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLlm {
    /// `local`, `local-small`, `extractive` or `openai`.
    pub backend: Option<String>,
    pub url: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    pub max_tokens: Option<u32>,
    pub threads: Option<usize>,
    pub context_size: Option<u32>,
    pub cache_dir: Option<PathBuf>,
}

/// `[judge]`: the judge model and scorer.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJudge {
    /// `none`, `local`, `local-small` or `openai`.
    pub backend: Option<String>,
    pub url: Option<String>,
    pub model: Option<String>,
    /// `checks-v1`, `checks-v2` or `rubric-v1` (default: [`default_scorer`]).
    pub scorer: Option<String>,
    /// The checks scorer's fitted calibration file.
    pub calibration: Option<PathBuf>,
}

/// `[endpoint]`: timeouts and retries of OpenAI-compatible endpoints.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEndpoint {
    pub connect_timeout_secs: Option<f64>,
    pub request_timeout_secs: Option<f64>,
    /// Attempts per call, the first included (at least 1).
    pub attempts: Option<u32>,
    pub max_backoff_secs: Option<f64>,
}

/// The environment and the command line, as the binary read them. `None` = not given.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub embedder: Option<String>,
    pub store: Option<String>,
    pub store_path: Option<PathBuf>,
    pub chroma_url: Option<String>,
    pub reranker: Option<PathBuf>,
    pub top_k: Option<usize>,
    pub llm: Option<String>,
    pub llm_url: Option<String>,
    pub llm_model: Option<String>,
    pub api_key_env: Option<String>,
    pub max_tokens: Option<u32>,
    pub threads: Option<usize>,
    pub context_size: Option<u32>,
    pub cache_dir: Option<PathBuf>,
    pub no_cache: bool,
    pub judge: Option<String>,
    pub judge_url: Option<String>,
    pub judge_model: Option<String>,
    pub scorer: Option<String>,
    pub judge_calibration: Option<PathBuf>,
    pub connect_timeout_secs: Option<f64>,
    pub request_timeout_secs: Option<f64>,
    pub attempts: Option<u32>,
    pub max_backoff_secs: Option<f64>,
}

/// Which vector store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "backend", rename_all = "snake_case")]
pub enum StoreBackend {
    Embedded { path: PathBuf },
    Chroma { url: String, collection: String },
}

impl StoreBackend {
    /// `embedded` or `chroma`.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreBackend::Embedded { .. } => "embedded",
            StoreBackend::Chroma { .. } => "chroma",
        }
    }
}

/// A model backend for the agent or the judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// Deterministic extractive answers (agent only).
    Extractive,
    /// Qwen2.5-Coder-1.5B-Instruct Q4_K_M in-process.
    Local,
    /// Qwen2.5-Coder-0.5B-Instruct Q4_K_M in-process.
    LocalSmall,
    /// An OpenAI-compatible endpoint.
    Openai,
}

impl Backend {
    pub fn parse(s: &str) -> Option<Backend> {
        Some(match s {
            "extractive" => Backend::Extractive,
            "local" => Backend::Local,
            "local-small" => Backend::LocalSmall,
            "openai" => Backend::Openai,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Extractive => "extractive",
            Backend::Local => "local",
            Backend::LocalSmall => "local-small",
            Backend::Openai => "openai",
        }
    }

    /// The registry name of the local model, for the local backends.
    pub fn local_model(self) -> Option<&'static str> {
        match self {
            Backend::Local => Some("qwen2.5-coder-1.5b"),
            Backend::LocalSmall => Some("qwen2.5-coder-0.5b"),
            _ => None,
        }
    }
}

/// Timeouts and retries of OpenAI-compatible endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EndpointSettings {
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// Attempts per call, the first included.
    pub attempts: u32,
    pub max_backoff: Duration,
}

impl Default for EndpointSettings {
    /// Defaults for a server on this machine or the local network: 5 s to connect, 60 s per
    /// attempt, 3 attempts, backoff at most 10 s — a dead endpoint fails a call in about 3 min,
    /// not 10.
    fn default() -> Self {
        EndpointSettings {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            attempts: 3,
            max_backoff: Duration::from_secs(10),
        }
    }
}

impl EndpointSettings {
    /// The longest one call may take: every attempt timing out plus every backoff.
    pub fn worst_case(&self) -> Duration {
        let attempts = self.attempts.max(1);
        (self.connect_timeout + self.request_timeout) * attempts + self.max_backoff * (attempts - 1)
    }
}

/// The agent's generator settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmSettings {
    pub backend: Backend,
    pub url: String,
    pub model: String,
    pub api_key_env: String,
    pub max_tokens: u32,
    /// Local model threads (`None`: every core up to 8).
    pub threads: Option<usize>,
    pub context_size: u32,
}

/// The judge settings; `backend = None` means no judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeSettings {
    pub backend: Option<Backend>,
    pub url: String,
    pub model: String,
    /// `checks-v1`, `checks-v2` or `rubric-v1`.
    pub scorer: String,
    /// The checks scorer's calibration file; `None`: the committed default for the judge model
    /// when one exists (`data/judge/<scorer>.<model>.json`), else uncalibrated.
    pub calibration: Option<PathBuf>,
}

/// The scorers a judge can run.
pub const SCORERS: [&str; 4] = ["checks-v1", "checks-v2", "rubric-v1", "probe-v1"];

/// The judge scorer when none is named: `checks-v2` for an in-process judge (its committed
/// calibration agrees with the human labels better on the test split: groundedness 0.582 vs
/// 0.312; `docs/calibration.md`), `checks-v1` for an OpenAI-compatible endpoint, which cannot
/// score the tokens of a given reply (the support likelihood `checks-v2` reads).
pub fn default_scorer(backend: Option<Backend>) -> &'static str {
    match backend {
        Some(Backend::Openai) => "checks-v1",
        _ => "checks-v2",
    }
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
    pub llm: LlmSettings,
    pub judge: JudgeSettings,
    pub endpoint: EndpointSettings,
    pub cache_dir: PathBuf,
    pub no_cache: bool,
    /// Where the configuration came from (`None`: defaults only).
    pub config_file: Option<PathBuf>,
}

impl Settings {
    /// Defaults < the config file (`--config`, else `./cardinal.toml` when present) < `o`.
    pub fn load(o: &Overrides) -> Result<Self> {
        let (raw, file) = match &o.config {
            Some(p) => (read_raw(p)?, Some(p.clone())),
            None if Path::new(DEFAULT_CONFIG).is_file() => (
                read_raw(Path::new(DEFAULT_CONFIG))?,
                Some(PathBuf::from(DEFAULT_CONFIG)),
            ),
            None => (RawConfig::default(), None),
        };
        let mut s = Self::resolve(raw, o)?;
        s.config_file = file;
        Ok(s)
    }

    /// Apply the layers: defaults < `raw` < `o`. Pure.
    pub fn resolve(raw: RawConfig, o: &Overrides) -> Result<Self> {
        let input = |m: String| HarnessError::Input(m);
        let mut retrieval = raw.retrieval.unwrap_or_default();
        if let Some(k) = o.top_k {
            retrieval.top_k = k;
            retrieval.candidates = retrieval.candidates.max(k);
        }
        retrieval
            .validate()
            .map_err(|e| input(format!("retrieval settings: {e}")))?;
        let emb = raw.embedder.unwrap_or_default();
        let st = raw.store.unwrap_or_default();
        let backend = o
            .store
            .clone()
            .or(st.backend)
            .unwrap_or_else(|| "embedded".into());
        let store = match backend.as_str() {
            "embedded" => StoreBackend::Embedded {
                path: o
                    .store_path
                    .clone()
                    .or(st.path)
                    .unwrap_or_else(|| PathBuf::from(".cardinal/store")),
            },
            "chroma" => StoreBackend::Chroma {
                url: o
                    .chroma_url
                    .clone()
                    .or(st.chroma_url)
                    .unwrap_or_else(|| "http://127.0.0.1:8000".into()),
                collection: st.collection.unwrap_or_else(|| "cardinal-kb".into()),
            },
            other => {
                return Err(input(format!(
                    "unknown store backend `{other}` (embedded or chroma)"
                )))
            }
        };
        let rl = raw.llm.unwrap_or_default();
        let llm_backend = parse_backend(o.llm.as_deref().or(rl.backend.as_deref()), "llm")?
            .unwrap_or(Backend::Local);
        let llm = LlmSettings {
            backend: llm_backend,
            url: o
                .llm_url
                .clone()
                .or(rl.url)
                .unwrap_or_else(|| "http://127.0.0.1:8080/v1".into()),
            model: o
                .llm_model
                .clone()
                .or(rl.model)
                .unwrap_or_else(|| "default".into()),
            api_key_env: o
                .api_key_env
                .clone()
                .or(rl.api_key_env)
                .unwrap_or_else(|| "OPENAI_API_KEY".into()),
            max_tokens: o.max_tokens.or(rl.max_tokens).unwrap_or(192),
            threads: o.threads.or(rl.threads),
            context_size: o.context_size.or(rl.context_size).unwrap_or(4096),
        };
        if llm.max_tokens == 0 {
            return Err(input("--max-tokens must be at least 1".into()));
        }
        if llm.threads == Some(0) {
            return Err(input("--threads must be at least 1".into()));
        }
        let rj = raw.judge.unwrap_or_default();
        let judge_backend = match o.judge.as_deref().or(rj.backend.as_deref()) {
            Some("none") => None,
            other => Some(parse_backend(other, "judge")?.unwrap_or(Backend::Local)),
        };
        if judge_backend == Some(Backend::Extractive) {
            return Err(input(
                "--judge extractive is not a judge (none, local, local-small or openai)".into(),
            ));
        }
        let judge = JudgeSettings {
            backend: judge_backend,
            url: o
                .judge_url
                .clone()
                .or(rj.url)
                .unwrap_or_else(|| llm.url.clone()),
            model: o
                .judge_model
                .clone()
                .or(rj.model)
                .unwrap_or_else(|| llm.model.clone()),
            scorer: o
                .scorer
                .clone()
                .or(rj.scorer)
                .unwrap_or_else(|| default_scorer(judge_backend).into()),
            calibration: o.judge_calibration.clone().or(rj.calibration),
        };
        if !SCORERS.contains(&judge.scorer.as_str()) {
            return Err(input(format!(
                "unknown scorer `{}` (checks-v1, checks-v2, rubric-v1 or probe-v1)",
                judge.scorer
            )));
        }
        let re = raw.endpoint.unwrap_or_default();
        let d = EndpointSettings::default();
        let secs =
            |flag: Option<f64>, file: Option<f64>, def: Duration, name: &str| match flag.or(file) {
                None => Ok(def),
                Some(x) if x.is_finite() && x > 0.0 => Ok(Duration::from_secs_f64(x)),
                Some(x) => Err(input(format!(
                    "{name} must be a positive number of seconds, got {x}"
                ))),
            };
        let endpoint = EndpointSettings {
            connect_timeout: secs(
                o.connect_timeout_secs,
                re.connect_timeout_secs,
                d.connect_timeout,
                "connect timeout",
            )?,
            request_timeout: secs(
                o.request_timeout_secs,
                re.request_timeout_secs,
                d.request_timeout,
                "request timeout",
            )?,
            attempts: o.attempts.or(re.attempts).unwrap_or(d.attempts),
            max_backoff: secs(
                o.max_backoff_secs,
                re.max_backoff_secs,
                d.max_backoff,
                "backoff cap",
            )?,
        };
        if endpoint.attempts == 0 {
            return Err(input("attempts must be at least 1".into()));
        }
        Ok(Settings {
            retrieval,
            embedder: o
                .embedder
                .clone()
                .or(emb.model)
                .unwrap_or_else(|| "e5-small".into()),
            query_prefix: emb.query_prefix,
            passage_prefix: emb.passage_prefix,
            batch_size: emb.batch_size.unwrap_or(16).max(1),
            store,
            reranker: o.reranker.clone().or(raw.reranker.and_then(|r| r.model)),
            llm,
            judge,
            endpoint,
            cache_dir: o
                .cache_dir
                .clone()
                .or(rl.cache_dir)
                .unwrap_or_else(|| PathBuf::from(".cardinal/cache")),
            no_cache: o.no_cache,
            config_file: None,
        })
    }
}

fn parse_backend(s: Option<&str>, what: &str) -> Result<Option<Backend>> {
    match s {
        None => Ok(None),
        Some(v) => Backend::parse(v).map(Some).ok_or_else(|| {
            HarnessError::Input(format!(
                "unknown {what} backend `{v}` (local, local-small, extractive or openai)"
            ))
        }),
    }
}

/// Read and parse a configuration file (errors carry file:line).
pub fn read_raw(path: &Path) -> Result<RawConfig> {
    let text = std::fs::read_to_string(path).map_err(|e| HarnessError::Config {
        path: path.to_path_buf(),
        line: 0,
        message: format!("cannot read the configuration: {e}"),
    })?;
    parse_raw(path, &text)
}

/// Parse configuration text (errors carry file:line).
pub fn parse_raw(path: &Path, text: &str) -> Result<RawConfig> {
    toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
            .unwrap_or(0);
        HarnessError::Config {
            path: path.to_path_buf(),
            line,
            message: e.message().trim().to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> RawConfig {
        parse_raw(Path::new("cardinal.toml"), text).unwrap()
    }

    #[test]
    fn layers_apply_in_order() {
        // Defaults.
        let s = Settings::resolve(RawConfig::default(), &Overrides::default()).unwrap();
        assert_eq!(s.retrieval.top_k, 5);
        assert_eq!(s.embedder, "e5-small");
        assert_eq!(s.llm.backend, Backend::Local);
        assert_eq!(s.judge.backend, Some(Backend::Local));
        // File over defaults.
        let file = raw("[retrieval]\ntop_k = 3\ncandidates = 50\nk_rrf = 60.0\ndense_weight = 1.0\nlexical_weight = 1.0\nmin_similarity = 0.8\nrerank_candidates = 20\nchunk_max_chars = 400\n[llm]\nbackend = \"extractive\"\nmax_tokens = 64\n[judge]\nbackend = \"none\"\n");
        let s = Settings::resolve(file.clone(), &Overrides::default()).unwrap();
        assert_eq!(s.retrieval.top_k, 3);
        assert_eq!(s.llm.backend, Backend::Extractive);
        assert_eq!(s.llm.max_tokens, 64);
        assert_eq!(s.judge.backend, None);
        // Flags (and environment) over the file.
        let o = Overrides {
            top_k: Some(7),
            llm: Some("local-small".into()),
            judge: Some("local".into()),
            ..Default::default()
        };
        let s = Settings::resolve(file, &o).unwrap();
        assert_eq!(s.retrieval.top_k, 7);
        assert!(s.retrieval.candidates >= 7);
        assert_eq!(s.llm.backend, Backend::LocalSmall);
        assert_eq!(
            s.llm.max_tokens, 64,
            "a flag not given keeps the file value"
        );
        assert_eq!(s.judge.backend, Some(Backend::Local));
    }

    #[test]
    fn the_default_scorer_follows_the_judge_backend_and_a_named_one_wins() {
        let scorer = |judge: &str, scorer: Option<&str>| {
            let o = Overrides {
                judge: Some(judge.into()),
                scorer: scorer.map(str::to_string),
                ..Default::default()
            };
            Settings::resolve(RawConfig::default(), &o)
                .unwrap()
                .judge
                .scorer
        };
        assert_eq!(scorer("local", None), "checks-v2");
        assert_eq!(scorer("local-small", None), "checks-v2");
        // An OpenAI-compatible endpoint cannot score a given reply's tokens.
        assert_eq!(scorer("openai", None), "checks-v1");
        assert_eq!(scorer("local", Some("checks-v1")), "checks-v1");
        assert_eq!(scorer("openai", Some("rubric-v1")), "rubric-v1");
        let file = raw("[judge]\nscorer = \"rubric-v1\"\n");
        assert_eq!(
            Settings::resolve(file, &Overrides::default())
                .unwrap()
                .judge
                .scorer,
            "rubric-v1"
        );
    }

    #[test]
    fn config_errors_carry_file_and_line() {
        let e = parse_raw(Path::new("c.toml"), "[retrieval]\n\n[nope]\nx = 1\n").unwrap_err();
        assert!(e.to_string().starts_with("c.toml:3: "), "{e}");
    }

    #[test]
    fn endpoint_worst_case_is_bounded() {
        let e = EndpointSettings::default();
        assert_eq!(e.worst_case(), Duration::from_secs(65 * 3 + 20));
    }
}
