//! Flags shared by several commands, and their translation into the run library's
//! [`Overrides`] (flags win over their environment variables; both win over `cardinal.toml`;
//! a flag not given is `None`, so it never hides a file value).

use std::path::PathBuf;

use cardinal_harness::{Overrides, Settings};

/// Retrieval flags (global: given before or after the command; an error on commands that do
/// not retrieve).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RetrievalArgs {
    /// Configuration file (default: ./cardinal.toml when present).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Embedder: a pinned model name (default e5-small) or a Hugging Face model directory.
    #[arg(long, global = true, env = "CARDINAL_EMBEDDER")]
    pub embedder: Option<String>,
    /// Vector store backend: embedded (default, no server) or chroma.
    #[arg(long, global = true, env = "CARDINAL_STORE", value_parser = ["embedded", "chroma"])]
    pub store: Option<String>,
    /// Embedded store directory (default .cardinal/store).
    #[arg(long, global = true, env = "CARDINAL_STORE_PATH")]
    pub store_path: Option<PathBuf>,
    /// Chroma server URL (default http://127.0.0.1:8000).
    #[arg(long, global = true, env = "CARDINAL_CHROMA_URL")]
    pub chroma_url: Option<String>,
    /// Re-rank fused candidates with a local cross-encoder (a Hugging Face sequence-classification
    /// directory). Off by default.
    #[arg(long, global = true)]
    pub reranker: Option<PathBuf>,
    /// Set by `search -k`.
    #[arg(skip)]
    pub top_k: Option<usize>,
}

impl RetrievalArgs {
    /// The first retrieval flag given explicitly on the command line, for commands that do not
    /// retrieve. (Environment variables are settings of the shell, not flags of this call, and
    /// are not an error.)
    pub fn first_given(&self) -> Option<&'static str> {
        let from_cli =
            |name: &str| std::env::args().any(|a| a == name || a.starts_with(&format!("{name}=")));
        [
            ("--config", self.config.is_some()),
            ("--embedder", self.embedder.is_some()),
            ("--store", self.store.is_some()),
            ("--store-path", self.store_path.is_some()),
            ("--chroma-url", self.chroma_url.is_some()),
            ("--reranker", self.reranker.is_some()),
        ]
        .into_iter()
        .find(|(name, set)| *set && from_cli(name))
        .map(|(name, _)| name)
    }
}

/// The agent's generator flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LlmArgs {
    /// Generator: local (Qwen2.5-Coder-1.5B, default), local-small (0.5B), extractive (no LLM)
    /// or openai (any OpenAI-compatible endpoint).
    #[arg(long, env = "CARDINAL_LLM", value_parser = ["local", "local-small", "extractive", "openai"])]
    pub llm: Option<String>,
    /// Base URL of the OpenAI-compatible endpoint, including /v1 (default http://127.0.0.1:8080/v1).
    #[arg(long, env = "CARDINAL_LLM_URL")]
    pub llm_url: Option<String>,
    /// Model name sent to the endpoint (default `default`).
    #[arg(long, env = "CARDINAL_LLM_MODEL")]
    pub llm_model: Option<String>,
    /// Name of the environment variable holding the API key (default OPENAI_API_KEY).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Maximum tokens generated per answer (default 192).
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Threads of the local model (default: every core up to 8).
    #[arg(long, env = "CARDINAL_THREADS")]
    pub threads: Option<usize>,
    /// Context window of the local model in tokens (default 4096).
    #[arg(long)]
    pub context_size: Option<u32>,
    /// Bypass the response cache and the query-vector cache (query vectors are then kept in
    /// memory for this run only).
    #[arg(long)]
    pub no_cache: bool,
    /// Cache directory: model responses and query vectors (default .cardinal/cache).
    #[arg(long, env = "CARDINAL_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Endpoint connect timeout in seconds (default 5).
    #[arg(long)]
    pub connect_timeout: Option<f64>,
    /// Endpoint timeout per attempt in seconds (default 60).
    #[arg(long)]
    pub request_timeout: Option<f64>,
    /// Endpoint attempts per call, the first included (default 3).
    #[arg(long)]
    pub attempts: Option<u32>,
    /// Upper bound of one retry backoff in seconds (default 10).
    #[arg(long)]
    pub max_backoff: Option<f64>,
}

/// The judge flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct JudgeArgs {
    /// Judge model: local (1.5B, default), local-small (0.5B), openai, or none (deterministic
    /// evaluators only).
    #[arg(long, env = "CARDINAL_JUDGE", value_parser = ["none", "local", "local-small", "openai"])]
    pub judge: Option<String>,
    /// Base URL of the judge's OpenAI-compatible endpoint (default: the --llm-url value).
    #[arg(long, env = "CARDINAL_JUDGE_URL")]
    pub judge_url: Option<String>,
    /// Model name of the judge's endpoint (default: the --llm-model value).
    #[arg(long, env = "CARDINAL_JUDGE_MODEL")]
    pub judge_model: Option<String>,
    /// Judge scorer: checks-v2 (support likelihood and surface evidence, combined by weights
    /// fitted on dev, with the yes/no checks the calibration reads; default for an in-process
    /// judge), checks-v1 (yes/no checks read from token probabilities; default for an
    /// OpenAI-compatible judge, which cannot score a given reply's tokens), rubric-v1 (one
    /// holistic 1-5 rubric generation per dimension) or probe-v1 (a linear probe on the
    /// in-process judge's hidden state; needs its committed fit; no hallucination score).
    #[arg(long, value_parser = ["checks-v1", "checks-v2", "rubric-v1", "probe-v1"])]
    pub scorer: Option<String>,
    /// The checks scorer's fitted calibration (default: data/judge/<scorer>.<model>.json when it
    /// exists, else uncalibrated).
    #[arg(long)]
    pub judge_calibration: Option<PathBuf>,
}

/// Resolve the settings from the retrieval, generator and judge flags.
pub fn settings(
    r: &RetrievalArgs,
    llm: Option<&LlmArgs>,
    judge: Option<&JudgeArgs>,
) -> anyhow::Result<Settings> {
    let d = LlmArgs::default();
    let l = llm.unwrap_or(&d);
    let dj = JudgeArgs::default();
    let j = judge.unwrap_or(&dj);
    let o = Overrides {
        config: r.config.clone(),
        embedder: r.embedder.clone(),
        store: r.store.clone(),
        store_path: r.store_path.clone(),
        chroma_url: r.chroma_url.clone(),
        reranker: r.reranker.clone(),
        top_k: r.top_k,
        llm: l.llm.clone(),
        llm_url: l.llm_url.clone(),
        llm_model: l.llm_model.clone(),
        api_key_env: l.api_key_env.clone(),
        max_tokens: l.max_tokens,
        threads: l.threads,
        context_size: l.context_size,
        cache_dir: l.cache_dir.clone(),
        no_cache: l.no_cache,
        judge: j.judge.clone(),
        judge_url: j.judge_url.clone(),
        judge_model: j.judge_model.clone(),
        scorer: j.scorer.clone(),
        judge_calibration: j.judge_calibration.clone(),
        connect_timeout_secs: l.connect_timeout,
        request_timeout_secs: l.request_timeout,
        attempts: l.attempts,
        max_backoff_secs: l.max_backoff,
    };
    let s = Settings::load(&o)?;
    reject_unused(&s)?;
    Ok(s)
}

/// Was `flag` given on this command line (as `--flag value` or `--flag=value`)?
fn given(flag: &str) -> bool {
    std::env::args().any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}

/// A flag given on the command line that the resolved settings do not use is an error, not
/// silently ignored.
pub fn reject_unused(s: &Settings) -> anyhow::Result<()> {
    use cardinal_harness::settings::{Backend, StoreBackend};
    let llm_openai = s.llm.backend == Backend::Openai;
    let judge_openai = s.judge.backend == Some(Backend::Openai);
    let any_local = s.llm.backend.local_model().is_some()
        || s.judge.backend.and_then(|b| b.local_model()).is_some();
    let embedded = matches!(s.store, StoreBackend::Embedded { .. });
    let rules: [(&str, bool, &str); 9] = [
        (
            "--llm-url",
            llm_openai || judge_openai,
            "--llm openai or --judge openai",
        ),
        (
            "--llm-model",
            llm_openai || judge_openai,
            "--llm openai or --judge openai",
        ),
        (
            "--api-key-env",
            llm_openai || judge_openai,
            "an openai backend",
        ),
        ("--judge-url", judge_openai, "--judge openai"),
        ("--judge-model", judge_openai, "--judge openai"),
        (
            "--threads",
            any_local,
            "a local model (--llm/--judge local or local-small)",
        ),
        (
            "--context-size",
            any_local,
            "a local model (--llm/--judge local or local-small)",
        ),
        ("--chroma-url", !embedded, "--store chroma"),
        ("--store-path", embedded, "--store embedded"),
    ];
    for (flag, used, needs) in rules {
        if given(flag) && !used {
            return Err(anyhow::Error::new(cardinal_harness::HarnessError::Input(
                format!("{flag} is not used with these settings (it needs {needs})"),
            )));
        }
    }
    if s.judge.backend.is_none() {
        if let Some(f) = ["--scorer", "--judge-calibration"]
            .iter()
            .find(|f| given(f))
        {
            return Err(anyhow::Error::new(cardinal_harness::HarnessError::Input(
                format!("{f} is not used with --judge none"),
            )));
        }
    }
    if given("--judge-calibration") && s.judge.scorer == "rubric-v1" {
        return Err(anyhow::Error::new(cardinal_harness::HarnessError::Input(
            "--judge-calibration is used by the fitted scorers only (checks-v1, checks-v2, probe-v1)".into(),
        )));
    }
    let endpoint_flags = [
        "--connect-timeout",
        "--request-timeout",
        "--attempts",
        "--max-backoff",
    ];
    if !(llm_openai || judge_openai) {
        if let Some(f) = endpoint_flags.iter().find(|f| given(f)) {
            return Err(anyhow::Error::new(cardinal_harness::HarnessError::Input(
                format!("{f} is not used with these settings (it needs an openai backend)"),
            )));
        }
    }
    Ok(())
}
