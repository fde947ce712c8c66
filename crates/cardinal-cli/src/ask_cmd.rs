//! `cardinal ask`: one turn of the agent, with the chosen generator.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cardinal_agent::{Agent, Generator, Turn};
use cardinal_kb::Lang;
use cardinal_llm::{CacheMode, CachedModel, ChatModel, GenParams, OpenAiClient, OpenAiConfig};

use crate::retrieval_cmd::prepare;
use crate::settings::Settings;
use crate::Outcome;

/// Which generator answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LlmChoice {
    /// Deterministic: the most relevant claims of the top card (no LLM).
    Extractive,
    /// Any OpenAI-compatible chat-completions endpoint (--llm-url, --llm-model, $OPENAI_API_KEY).
    Openai,
}

/// LLM flags shared by the commands that generate or judge.
#[derive(Debug, Clone, clap::Args)]
pub struct LlmArgs {
    /// Generator.
    #[arg(long, value_enum, default_value = "extractive")]
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
    #[arg(long, default_value_t = 256)]
    pub max_tokens: u32,
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
    let inner: Box<dyn ChatModel> = match args.llm {
        LlmChoice::Extractive => return Ok(None),
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
        if let Some(c) = cache {
            let st = c.stats();
            eprintln!(
                "cache: {} hit(s), {} model call(s)",
                st.hits, st.model_calls
            );
        }
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
