//! `cardinal ingest` and `cardinal search` (index preparation lives in the run library).

use std::path::Path;

use anyhow::Result;
use cardinal_harness::{Index, Observer, Settings};
use cardinal_kb::{KnowledgeBase, Lang};
use cardinal_retrieval::{Mode, Retrieval};
use serde_json::json;

use crate::Outcome;

pub fn ingest(
    data: &Path,
    s: &Settings,
    json_out: bool,
    verify: Option<usize>,
    obs: &dyn Observer,
) -> Result<Outcome> {
    let (p, repair) = cardinal_harness::index::ingest_and_repair(data, s, verify, obs)?;
    let r = &p.ingest;
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({ "store": p.retriever.store().describe(), "report": r, "chunks_per_second": r.chunks_per_second(), "repair": repair })
            )?
        );
    } else {
        if let Some(why) = &repair.reset {
            println!("repaired: the damaged store was rebuilt ({why})");
        }
        if let Some(v) = &repair.verify {
            println!(
                "verify: {} of {} chunks re-embedded, {} mismatched{}",
                v.checked,
                v.chunks_total,
                v.mismatches.len(),
                match &repair.after_rebuild {
                    Some(a) => format!(
                        "; rebuilt, then {} of {} mismatched",
                        a.mismatches.len(),
                        a.checked
                    ),
                    None => String::new(),
                }
            );
        }
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
    s: &Settings,
    query: &str,
    lang: Lang,
    mode: Mode,
    json_out: bool,
    obs: &dyn Observer,
) -> Result<Outcome> {
    let p = Index::prepare(data, s, obs)?;
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
