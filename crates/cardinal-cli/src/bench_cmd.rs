//! `cardinal bench retrieval`: ingest throughput and query latency on the real KB, plus the
//! dense-similarity distribution that the minimum-similarity floor is chosen from.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use cardinal_dataset::CaseType;
use cardinal_kb::KnowledgeBase;
use cardinal_retrieval::store::EmbeddedStore;
use cardinal_retrieval::{indexed_chunks, Mode, Retriever};
use serde_json::json;

use crate::progress::Progress;
use crate::retrieval_cmd::open_embedder;
use crate::settings::Settings;
use crate::Outcome;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

pub fn retrieval(data: &Path, s: &Settings, json_out: bool) -> Result<Outcome> {
    let kb = KnowledgeBase::load(&data.join("kb"))?;
    let (cases, diags) = cardinal_dataset::load_case_dir(&data.join("cases"))?;
    if !diags.is_empty() {
        anyhow::bail!("the cases have problems; run `cardinal data check`\n{diags}");
    }
    let embedder = open_embedder(s)?;
    let tmp = std::env::temp_dir().join(format!("cardinal-bench-{}", std::process::id()));
    let mut store = EmbeddedStore::open(&tmp)?;
    let chunker = s.retrieval.chunker();
    let mut bar = Progress::new("bench ingest");
    let report = cardinal_retrieval::ingest(
        &mut store,
        embedder.as_ref(),
        &kb,
        &chunker,
        s.batch_size,
        &mut |d, t| bar.update(d, t),
    )?;
    let chunks = indexed_chunks(&kb, &chunker);
    let retriever = Retriever::new(
        s.retrieval.clone(),
        &chunks,
        Box::new(store),
        embedder,
        None,
    )?;
    let mut latency = serde_json::Map::new();
    let mut lines = vec![format!(
        "ingest: {} chunks of {} cards in {:.1}s = {:.1} chunks/s",
        report.chunks_embedded,
        report.cards,
        report.seconds,
        report.chunks_per_second()
    )];
    let mut sims_gold = Vec::new();
    let mut sims_none = Vec::new();
    for (name, mode) in [
        ("dense", Mode::DenseOnly),
        ("lexical", Mode::LexicalOnly),
        ("hybrid", Mode::Hybrid),
    ] {
        let mut ms = Vec::with_capacity(cases.len());
        for lc in &cases {
            let t = Instant::now();
            let r = retriever.retrieve(&lc.case.question, lc.case.lang, mode)?;
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            if mode == Mode::DenseOnly {
                if let Some(b) = r.best_similarity {
                    if lc.case.has_gold() {
                        sims_gold.push(b as f64);
                    } else if lc.case.case_type == CaseType::NoMatch {
                        sims_none.push(b as f64);
                    }
                }
            }
        }
        ms.sort_by(f64::total_cmp);
        let (p50, p95) = (percentile(&ms, 0.5), percentile(&ms, 0.95));
        lines.push(format!(
            "{name:<8} query latency over {} queries: p50 {p50:.1} ms, p95 {p95:.1} ms",
            ms.len()
        ));
        latency.insert(
            name.into(),
            json!({ "n": ms.len(), "p50_ms": p50, "p95_ms": p95 }),
        );
    }
    sims_gold.sort_by(f64::total_cmp);
    sims_none.sort_by(f64::total_cmp);
    let dist = |v: &[f64]| {
        json!({ "n": v.len(), "min": percentile(v, 0.0), "p10": percentile(v, 0.1),
                "p50": percentile(v, 0.5), "p90": percentile(v, 0.9), "max": percentile(v, 1.0) })
    };
    let floor = s.retrieval.min_similarity as f64;
    let gold_under = sims_gold.iter().filter(|&&x| x < floor).count();
    let none_under = sims_none.iter().filter(|&&x| x < floor).count();
    lines.push(format!(
        "best dense cosine, gold cases: {}; no_match cases: {}",
        dist(&sims_gold),
        dist(&sims_none)
    ));
    lines.push(format!(
        "floor {floor:.2}: {gold_under}/{} gold cases under it (wrongly refused), {none_under}/{} no_match cases under it (correctly refused)",
        sims_gold.len(),
        sims_none.len()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "ingest": report, "chunks_per_second": report.chunks_per_second(),
                "latency": latency, "best_similarity": { "gold": dist(&sims_gold), "no_match": dist(&sims_none) },
                "floor": floor, "gold_under_floor": gold_under, "no_match_under_floor": none_under,
            }))?
        );
    } else {
        for l in lines {
            println!("{l}");
        }
    }
    Ok(Outcome::Pass)
}
