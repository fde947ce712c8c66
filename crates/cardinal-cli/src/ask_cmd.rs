//! `cardinal ask`: one turn of the agent, with the chosen generator.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Result};
use cardinal_agent::Turn;
use cardinal_harness::{models, Index, Observer, Settings};
use cardinal_kb::Lang;

use crate::Outcome;

pub fn ask(
    data: &Path,
    s: &Settings,
    question: &str,
    lang: Option<Lang>,
    json_out: bool,
    obs: &dyn Observer,
) -> Result<Outcome> {
    if question.trim().is_empty() {
        bail!(cardinal_harness::HarnessError::Input(
            "the question is empty".into()
        ));
    }
    let index = Index::prepare(data, s, obs)?;
    let (generator, cache) = models::generator(s, obs)?;
    let agent = models::agent(
        Arc::new(index.kb),
        Arc::new(index.retriever),
        generator,
        s,
        obs,
    )?;
    if cache.is_some() {
        obs.note("thinking (the local model takes 10-60 s per answer on 2 cores)...");
    }
    let turn = agent.answer(question, lang)?;
    if json_out {
        println!("{}", serde_json::to_string_pretty(&turn)?);
    } else {
        print!("{}", render(&turn));
    }
    if let Some(c) = cache {
        let st = c.stats();
        obs.note(&format!(
            "cache: {} hit(s), {} model call(s)",
            st.hits, st.model_calls
        ));
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
