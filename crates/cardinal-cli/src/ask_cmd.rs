//! `cardinal ask`: one turn of the agent, with the chosen generator.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cardinal_agent::{Agent, Generator, Turn};
use cardinal_kb::Lang;
use cardinal_llm::{CacheMode, CachedModel, ChatModel, GenParams, OpenAiClient, OpenAiConfig};
use cardinal_llm_local::{LocalModel, LocalOptions};
use cardinal_models::PullOptions;

use crate::retrieval_cmd::prepare;
use crate::settings::Settings;
use crate::Outcome;

/// Which generator answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LlmChoice {
    /// In-process Qwen2.5-Coder-1.5B-Instruct Q4_K_M (llama.cpp), pulled on first use.
    Local,
    /// In-process Qwen2.5-Coder-0.5B-Instruct Q4_K_M (llama.cpp), pulled on first use.
    LocalSmall,
    /// Deterministic: the most relevant claims of the top card (no LLM).
    Extractive,
    /// Any OpenAI-compatible chat-completions endpoint (--llm-url, --llm-model, $OPENAI_API_KEY).
    Openai,
}

/// LLM flags shared by the commands that generate or judge.
#[derive(Debug, Clone, clap::Args)]
pub struct LlmArgs {
    /// Generator.
    #[arg(long, value_enum, default_value = "local")]
    pub llm: LlmChoice,
    /// Base URL of the OpenAI-compatible endpoint, including /v1 ($CARDINAL_LLM_URL).
    #[arg(
        long,
        env = "CARDINAL_LLM_URL",
        default_value = "http://127.0.0.1:8080/v1"
    )]
    pub llm_url: String,
    /// Model name sent to the endpoint ($CARDINAL_LLM_MODEL).
    #[arg(long, env = "CARDINAL_LLM_MODEL", default_value = "default")]
    pub llm_model: String,
    /// Name of the environment variable holding the API key.
    #[arg(long, default_value = "OPENAI_API_KEY")]
    pub api_key_env: String,
    /// Maximum tokens generated per answer.
    #[arg(long, default_value_t = 192)]
    pub max_tokens: u32,
    /// Threads of the local model (default: $CARDINAL_THREADS, else every core up to 8).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Context window of the local model in tokens (prompt + answer).
    #[arg(long, default_value_t = 4096)]
    pub context_size: u32,
    /// Bypass the response cache (.cardinal/cache).
    #[arg(long)]
    pub no_cache: bool,
    /// Response cache directory.
    #[arg(long, default_value = ".cardinal/cache")]
    pub cache_dir: PathBuf,
}

/// A chat model behind the response cache, shared by agent and judge.
pub type SharedModel = Arc<CachedModel<Box<dyn ChatModel>>>;

/// The chat model for the flags, wrapped in the response cache; `None` for extractive.
pub fn chat_model(args: &LlmArgs) -> Result<Option<SharedModel>> {
    model_for(args.llm, args)
}

/// The chat model for `choice` (URL, model name, cache and local options from `args`), behind
/// the response cache; `None` for extractive.
pub fn model_for(choice: LlmChoice, args: &LlmArgs) -> Result<Option<SharedModel>> {
    let inner: Box<dyn ChatModel> = match choice {
        LlmChoice::Extractive => return Ok(None),
        LlmChoice::Local | LlmChoice::LocalSmall => {
            Box::new(load_local(local_model_name(choice), args)?)
        }
        LlmChoice::Openai => {
            let mut cfg = OpenAiConfig::new(args.llm_url.clone(), args.llm_model.clone());
            cfg.api_key_env = args.api_key_env.clone();
            Box::new(OpenAiClient::new(cfg).context("configuring the OpenAI-compatible client")?)
        }
    };
    let cached = CachedModel::new(
        inner,
        &args.cache_dir,
        CacheMode::from_no_cache(args.no_cache),
    )
    .with_context(|| format!("opening the response cache {}", args.cache_dir.display()))?;
    Ok(Some(Arc::new(cached)))
}

/// The registry name of the local model a choice stands for.
pub fn local_model_name(choice: LlmChoice) -> &'static str {
    match choice {
        LlmChoice::LocalSmall => "qwen2.5-coder-0.5b",
        _ => "qwen2.5-coder-1.5b",
    }
}

/// Load a registry GGUF model in-process, pulling it first when it is not installed.
pub fn load_local(name: &str, args: &LlmArgs) -> Result<LocalModel> {
    let progress = |line: &str| eprintln!("{line}");
    let installed = cardinal_models::ensure(name, &PullOptions::from_env(&progress))
        .with_context(|| format!("installing the local model {name}"))?;
    let file = installed
        .manifest
        .files
        .iter()
        .find(|f| f.name.ends_with(".gguf"))
        .with_context(|| format!("the installed model {name} has no .gguf file"))?;
    let path = installed.file(&file.name);
    eprintln!("loading {name} ({})", path.display());
    LocalModel::load(
        &path,
        LocalOptions {
            threads: args.threads,
            context_size: args.context_size,
            sha256: Some(file.sha256.clone()),
            ..LocalOptions::default()
        },
    )
    .with_context(|| format!("loading {}", path.display()))
}

pub fn generator(args: &LlmArgs) -> Result<(Generator, Option<SharedModel>)> {
    Ok(match chat_model(args)? {
        None => (Generator::Extractive, None),
        Some(m) => (
            Generator::Llm {
                model: m.clone() as Arc<dyn ChatModel>,
                params: GenParams {
                    max_tokens: args.max_tokens,
                    ..GenParams::default()
                },
            },
            Some(m),
        ),
    })
}

pub fn ask(
    data: &Path,
    s: &Settings,
    question: &str,
    lang: Option<Lang>,
    llm: &LlmArgs,
    json_out: bool,
) -> Result<Outcome> {
    if question.trim().is_empty() {
        bail!("the question is empty");
    }
    let p = prepare(data, s)?;
    let (generator, cache) = generator(llm)?;
    let agent = Agent::new(Arc::new(p.kb), Arc::new(p.retriever), generator);
    let turn = agent.answer(question, lang)?;
    if json_out {
        println!("{}", serde_json::to_string_pretty(&turn)?);
    } else {
        print!("{}", render(&turn));
    }
    if let Some(c) = cache {
        let st = c.stats();
        eprintln!(
            "cache: {} hit(s), {} model call(s)",
            st.hits, st.model_calls
        );
    }
    Ok(Outcome::Pass)
}

fn render(t: &Turn) -> String {
    let mut out = format!("{}\n\n", t.answer);
    if t.refused {
        out.push_str(&format!(
            "refused: {}\n",
            t.refusal_reason.map(|r| r.as_str()).unwrap_or("unknown")
        ));
    }
    out.push_str(&format!(
        "lang {}{} · generator {} · {:.0} ms\n",
        t.lang,
        if t.lang_detected { " (detected)" } else { "" },
        t.generator,
        t.timings.total_ms
    ));
    out.push_str("retrieved:");
    for c in &t.retrieval.cards {
        let cited = if t.citations.contains(&c.card_id) {
            " (cited)"
        } else {
            ""
        };
        out.push_str(&format!(" {}. {}{cited}", c.rank, c.card_id));
    }
    out.push('\n');
    if !t.dropped_citations.is_empty() {
        out.push_str(&format!(
            "dropped citations of cards not retrieved: {}\n",
            t.dropped_citations.join(", ")
        ));
    }
    out
}
