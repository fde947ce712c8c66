//! `cardinal bench retrieval`: ingest throughput and query latency on the real KB, plus the
//! dense-similarity distribution that the minimum-similarity floor is chosen from.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use cardinal_dataset::CaseType;
use cardinal_harness::{Index, Observer, Settings};
use cardinal_retrieval::store::EmbeddedStore;
use cardinal_retrieval::Mode;
use serde_json::json;

use crate::Outcome;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// The bundled cases, refused (input error) when the data gate would fail.
fn load_cases(data: &Path) -> Result<Vec<cardinal_dataset::LoadedCase>> {
    let (cases, diags) = cardinal_dataset::load_case_dir(&data.join("cases"))?;
    if !diags.is_empty() {
        anyhow::bail!(cardinal_harness::HarnessError::Input(format!(
            "the cases have problems; run `cardinal data check`\n{diags}"
        )));
    }
    Ok(cases)
}

/// The bundled KB, refused (input error) when a card does not parse.
fn load_kb(data: &Path) -> Result<cardinal_kb::KnowledgeBase> {
    let kb_dir = data.join("kb");
    Ok(cardinal_kb::KnowledgeBase::load(&kb_dir).map_err(|e| {
        cardinal_harness::HarnessError::Input(format!(
            "loading the KB from {}: {e}",
            kb_dir.display()
        ))
    })?)
}

pub fn retrieval(data: &Path, s: &Settings, json_out: bool, obs: &dyn Observer) -> Result<Outcome> {
    let cases = load_cases(data)?;
    // A fresh temporary store, so ingest is measured from scratch; the same preparation
    // (KB, embedder, reranker) as every other command.
    let tmp = tempdir_path();
    let store = EmbeddedStore::open(&tmp)?;
    let index = Index::prepare_with_store(data, s, Box::new(store), obs)?;
    let report = index.ingest.clone();
    let retriever = index.retriever;
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
    drop(retriever);
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

/// `cardinal bench embed`: native engine vs candle's BERT on the KB's chunks and the case
/// questions, paired and interleaved.
pub fn embed(
    data: &Path,
    s: &Settings,
    runs: usize,
    reference_runs: usize,
    json_out: bool,
    obs: &dyn Observer,
) -> Result<Outcome> {
    use cardinal_embed::{Embedder, Engine};
    let reference_runs = reference_runs.min(runs);
    if runs == 0 || reference_runs == 0 {
        anyhow::bail!(cardinal_harness::HarnessError::Input(
            "--runs and --reference-runs must be at least 1".into()
        ));
    }
    let kb = load_kb(data)?;
    let chunks = cardinal_retrieval::indexed_chunks(&kb, &s.retrieval.chunker());
    let passages: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    let cases = load_cases(data)?;
    let questions: Vec<&str> = cases.iter().map(|c| c.case.question.as_str()).collect();
    let engines = [Engine::Native, Engine::Candle];
    let models = engines
        .iter()
        .map(|&e| cardinal_harness::index::open_embedder_on(s, obs, e))
        .collect::<cardinal_harness::Result<Vec<_>>>()?;
    // Tokens as the model sees them (prefix included, truncated to its limit).
    let count = |texts: &[&str], passage: bool| -> Result<usize> {
        let mut n = 0;
        for t in texts {
            let ids = models[0].token_ids(&if passage {
                format!("{}{t}", models[0].options().passage_prefix)
            } else {
                format!("{}{t}", models[0].options().query_prefix)
            })?;
            n += ids.len().min(models[0].options().max_tokens);
        }
        Ok(n)
    };
    // The ceiling: e5-small costs ~2 × 21 M FLOP per token in its matrix products.
    let gflops = cardinal_embed::native::matmul_gflops(2048, 384, 1536, 9);
    let passage_tokens = count(&passages, true)?;
    let question_tokens = count(&questions, false)?;
    // secs[engine][0 = passages, 1 = questions batched]
    let mut secs = vec![[Vec::new(), Vec::new()]; engines.len()];
    // The native engine in every run; candle (the reference, ~2-3x slower) in the first
    // `reference_runs`, alternating which engine goes first.
    for r in 0..runs {
        for k in 0..engines.len() {
            let i = if r % 2 == 0 { k } else { engines.len() - 1 - k };
            if engines[i] == Engine::Candle && r >= reference_runs {
                continue;
            }
            obs.note(&format!(
                "run {}/{runs}: {} engine",
                r + 1,
                engines[i].name()
            ));
            let t = Instant::now();
            models[i].embed_passages(&passages)?;
            secs[i][0].push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            models[i].embed_queries(&questions)?;
            secs[i][1].push(t.elapsed().as_secs_f64());
        }
    }
    // One query per call, as a sweep that embeds inside its case loop does (native only).
    let mut one = Vec::with_capacity(questions.len());
    for q in &questions {
        let t = Instant::now();
        models[0].embed_queries(&[q])?;
        one.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    one.sort_by(f64::total_cmp);
    let mut rows = Vec::new();
    let mut lines = vec![format!(
        "embedding {} chunks ({passage_tokens} tokens) and {} questions ({question_tokens} \
         tokens); medians of {runs} runs (native), {reference_runs} (candle); {} threads",
        passages.len(),
        questions.len(),
        cardinal_embed::native::threads()
    )];
    let mut tps = [[0f64; 2]; 2];
    for (i, e) in engines.iter().enumerate() {
        for (j, (what, n, tokens)) in [
            ("chunks", passages.len(), passage_tokens),
            ("questions", questions.len(), question_tokens),
        ]
        .into_iter()
        .enumerate()
        {
            let m = median(secs[i][j].clone());
            tps[i][j] = tokens as f64 / m;
            lines.push(format!(
                "{:<7} {what:<10} {m:>7.2} s  {:>8.0} tokens/s  {:>7.1} texts/s",
                e.name(),
                tps[i][j],
                n as f64 / m
            ));
            rows.push(json!({
                "engine": e.name(), "texts": what, "n": n, "tokens": tokens,
                "median_seconds": m, "tokens_per_second": tps[i][j],
                "texts_per_second": n as f64 / m, "seconds": secs[i][j],
            }));
        }
    }
    let ratio = [tps[0][0] / tps[1][0], tps[0][1] / tps[1][1]];
    let kernel = if cardinal_embed::matmul::packed_kernel_available() {
        "packed AVX-512 kernel"
    } else {
        "gemm"
    };
    lines.push(format!(
        "matrix product 2048x384x1536 ({kernel}): {gflops:.1} GFLOP/s (the encoder's ceiling: \
         {:.0} tokens/s)",
        gflops * 1e9 / 42.5e6
    ));
    lines.push(format!(
        "native / candle: chunks {:.2}x, questions {:.2}x",
        ratio[0], ratio[1]
    ));
    let (p50, p95) = (percentile(&one, 0.5), percentile(&one, 0.95));
    lines.push(format!(
        "native, one question per call: p50 {p50:.1} ms, p95 {p95:.1} ms ({:.1} s for all)",
        one.iter().sum::<f64>() / 1000.0
    ));
    // The safety policy's intent encoder, when the bundled policy reads one: weights loaded
    // once (timed), then the questions with its prompt, medians of `runs`.
    let mut intent_json = serde_json::Value::Null;
    if let Some(info) = cardinal_agent::policy::bundled().intent_encoder.clone() {
        let note = |line: &str| obs.note(line);
        let inst =
            cardinal_models::ensure(&info.model, &cardinal_models::PullOptions::from_env(&note))?;
        let enc = cardinal_embed::GemmaEmbedder::load(
            &inst.dir,
            cardinal_embed::GemmaEmbedder::default_options(),
        )?;
        // The first call loads weights and tokenizer: that alone is the load time (counting
        // the questions' tokens is not part of it).
        let t = Instant::now();
        enc.token_ids("")?;
        let load = t.elapsed().as_secs_f64();
        let prompt = enc.options().query_prefix.clone();
        let mut tokens = 0;
        for q in &questions {
            tokens += enc.token_ids(&format!("{prompt}{q}"))?.len();
        }
        let mut runs_s = Vec::new();
        for r in 0..runs {
            obs.note(&format!(
                "run {}/{runs}: intent encoder {}",
                r + 1,
                info.model
            ));
            let t = Instant::now();
            enc.embed_queries(&questions)?;
            runs_s.push(t.elapsed().as_secs_f64());
        }
        let m = median(runs_s.clone());
        lines.push(format!(
            "intent encoder {} (the safety policy's): load {load:.2} s; {} questions ({tokens} \
             tokens) {m:.2} s, {:.0} tokens/s",
            info.model,
            questions.len(),
            tokens as f64 / m
        ));
        intent_json = json!({
            "model": info.model, "load_seconds": load, "tokens": tokens,
            "median_seconds": m, "tokens_per_second": tokens as f64 / m, "seconds": runs_s,
        });
    }
    if json_out {
        let v = json!({
            "intent_encoder": intent_json,
            "runs": runs, "reference_runs": reference_runs, "rows": rows,
            "ratio_native_over_candle": {"chunks": ratio[0], "questions": ratio[1]},
            "one_query_per_call_ms": {"p50": p50, "p95": p95},
            "target_tokens_per_second": 2000,
            "matmul_gflops": gflops, "matmul_kernel": kernel,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for l in lines {
            println!("{l}");
        }
    }
    Ok(Outcome::Pass)
}

fn tempdir_path() -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "cardinal-bench-{}-{}",
        std::process::id(),
        cardinal_harness::manifest::now_unix()
    ))
}

/// `cardinal bench trec`: ours vs trec_eval on a large generated set (see `cardinal_trec::bench`).
pub fn trec(
    queries: usize,
    docs: usize,
    runs: usize,
    trec_eval: Option<std::path::PathBuf>,
    dir: Option<std::path::PathBuf>,
) -> Result<Outcome> {
    let mut cfg = cardinal_trec::bench::BenchConfig {
        queries,
        docs_per_query: docs,
        runs,
        ..Default::default()
    };
    if let Some(p) = trec_eval {
        cfg.trec_eval = cardinal_trec::bench::TrecEvalBinary::Path(p);
    }
    if let Some(d) = dir {
        cfg.dir = d;
    }
    let report = cardinal_trec::bench::run(&cfg)?;
    print!("{}", report.render());
    Ok(Outcome::Pass)
}

/// `cardinal bench judge`: seconds per case of the checks judge on the local model (with
/// `signals`, checks-v2's two support-likelihood passes are timed too), with no
/// cache, over a stratified sample of labelled calibration items of the dev split (judged in
/// the calibration run's order, so the shared instructions stay in the KV cache as they do in
/// a sweep).
///
/// The checks asked are those the sweep's scorer asks: the committed calibration of the scorer
/// and model decides (`Calibration::needed_checks`: a calibration whose gated scores read no
/// check needs only the hallucination checks); `every_check` asks every kind, as a calibration
/// run does.
#[allow(clippy::too_many_arguments)]
pub fn judge(
    data: &Path,
    s: &Settings,
    items: usize,
    scorer: &str,
    hallucination: bool,
    every_check: bool,
    json_out: bool,
    obs: &dyn Observer,
) -> Result<Outcome> {
    use cardinal_dataset::calibration::Split;
    use cardinal_judge::checks::{plan_kinds, CheckFraming, CheckKind};
    use cardinal_judge::JudgeInput;
    use cardinal_llm::ChatModel as _;

    if items == 0 {
        anyhow::bail!(cardinal_harness::HarnessError::Input(
            "--items must be at least 1".into()
        ));
    }
    let name = match s.judge.backend {
        Some(b) => b.local_model().ok_or_else(|| {
            cardinal_harness::HarnessError::Input(
                "bench judge measures the in-process judge: --judge local or local-small".into(),
            )
        })?,
        None => "qwen2.5-coder-1.5b",
    };
    let (kb, all) = crate::calibrate_cmd::load(data, &data.join("calibration"))?;
    let dev = cardinal_harness::calibration::select_split(&all, Some(Split::Dev));
    let strata: Vec<String> = dev
        .iter()
        .map(|li| format!("{}/{:?}", li.item.lang.tag(), li.item.category))
        .collect();
    let mut picked: Vec<usize> = cardinal_harness::sample::stratified(
        strata
            .iter()
            .cloned()
            .zip(dev.iter().map(|li| li.item.id.as_str())),
        items,
        cardinal_harness::sample::DEFAULT_SAMPLE_SEED,
    );
    picked.sort_by(|&a, &b| {
        let (x, y) = (&dev[a].item, &dev[b].item);
        (x.lang.tag(), &x.cited, &x.id).cmp(&(y.lang.tag(), &y.cited, &y.id))
    });
    let model = cardinal_harness::models::shared_local(name, s, obs)?;
    let signals = scorer == "checks-v2";
    // probe-v1 asks no check: one pass that reads block 14 (and stops there).
    let probe = scorer == cardinal_judge::probe::SCORER;
    let kinds: Vec<CheckKind> = if probe {
        Vec::new()
    } else if every_check {
        CheckKind::every(hallucination)
    } else {
        // The calibration the sweep's scorer reads for this scorer and model.
        let mut sweep = s.clone();
        sweep.judge.scorer = scorer.into();
        let calibration =
            match cardinal_harness::scorer::committed_calibration(data, &sweep, &model.id())? {
                Some(c) => c,
                None => {
                    obs.note(
                    "note: no fitted calibration for this scorer and model: every check is asked",
                );
                    cardinal_harness::scorer::uncalibrated(scorer, &model.id())
                }
            };
        calibration.needed_checks(hallucination)
    };
    let asked = if probe {
        format!(
            "no check (block {}'s output over the answer)",
            cardinal_judge::probe::LAYER
        )
    } else if kinds == CheckKind::every(hallucination) {
        "every check".to_string()
    } else if kinds.is_empty() {
        "no check (the calibration reads none)".to_string()
    } else {
        format!(
            "{} only (the calibration reads no other)",
            kinds
                .iter()
                .map(|k| format!("{k:?}").to_lowercase())
                .collect::<Vec<_>>()
                .join(" + ")
        )
    };
    // The probe has no hallucination construct: say so instead of "on"/"off".
    let hallucination_checks = match (probe, hallucination) {
        (true, _) => "not scored",
        (false, true) => "on",
        (false, false) => "off",
    };
    obs.note(&format!(
        "bench judge: {scorer} {} on {} dev items, {} threads, hallucination checks {hallucination_checks}, asking {asked}",
        model.id(),
        picked.len(),
        model.threads(),
    ));
    let mut rows = Vec::with_capacity(picked.len());
    for (n, &i) in picked.iter().enumerate() {
        let it = &dev[i].item;
        let cards: Vec<&cardinal_kb::Card> = it
            .cited
            .iter()
            .filter_map(|id| kb.get(id).map(|f| &f.card))
            .collect();
        let input =
            JudgeInput::resolve(&it.question, &it.answer, it.lang, &it.cited, &cards, |id| {
                kb.get(id).map(|f| &f.card)
            });
        let plan = plan_kinds(&input, CheckFraming::FullCard, &kinds);
        let texts: Vec<String> = plan.checks.iter().map(|c| c.text.clone()).collect();
        let t = Instant::now();
        if probe {
            use cardinal_llm::YesNoModel as _;
            let p = cardinal_judge::probe::plan(&input, CheckFraming::FullCard);
            model.span_states(&p.messages, &p.span, cardinal_judge::probe::LAYER)?;
            let secs = t.elapsed().as_secs_f64();
            let stats = cardinal_llm_local::GenStats {
                prompt_tokens: model.count_prompt_tokens(&p.messages)?,
                ..Default::default()
            };
            obs.progress("judged", n + 1, picked.len());
            rows.push((it.id.clone(), secs, 0, stats));
            continue;
        }
        let mut stats = if texts.is_empty() {
            cardinal_llm_local::GenStats::default()
        } else {
            model.yes_no_with_stats(&plan.messages, &texts)?.1
        };
        if signals {
            use cardinal_llm::YesNoModel as _;
            let (with, without) = cardinal_judge::checks::support_messages(&input);
            let answer = vec![input.answer.trim().to_string()];
            for m in [&with, &without] {
                model.reply_logprobs(m, &answer)?;
                stats.prompt_tokens += model.count_prompt_tokens(m)?;
            }
        }
        let secs = t.elapsed().as_secs_f64();
        obs.progress("judged", n + 1, picked.len());
        rows.push((it.id.clone(), secs, plan.checks.len(), stats));
    }
    let mut secs: Vec<f64> = rows.iter().map(|r| r.1).collect();
    secs.sort_by(f64::total_cmp);
    let total: f64 = secs.iter().sum();
    let prompt: usize = rows.iter().map(|r| r.3.prompt_tokens).sum();
    let reused: usize = rows.iter().map(|r| r.3.reused_tokens).sum();
    let checks: usize = rows.iter().map(|r| r.2).sum();
    let n = rows.len() as f64;
    let summary = json!({
        "model": model.id(),
        "scorer": scorer,
        "checks_asked": kinds.iter().map(|k| format!("{k:?}").to_lowercase()).collect::<Vec<_>>(),
        "threads": model.threads(),
        "items": rows.len(),
        "hallucination_checks": hallucination,
        "seconds_per_case": { "median": percentile(&secs, 0.5), "p90": percentile(&secs, 0.9), "mean": total / n, "max": secs.last() },
        "checks_per_case": checks as f64 / n,
        "tokens_per_case": prompt as f64 / n,
        "reused_tokens_per_case": reused as f64 / n,
        "evaluated_tokens_per_second": (prompt - reused) as f64 / total,
        "target_seconds_per_case": 15.0,
        "cases": rows.iter().map(|r| json!({"id": r.0, "seconds": r.1, "checks": r.2, "prompt_tokens": r.3.prompt_tokens, "reused_tokens": r.3.reused_tokens})).collect::<Vec<_>>(),
    });
    if json_out {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!(
            "judge {scorer} {} ({} threads), {} dev items, hallucination checks {hallucination_checks}, asking {asked}",
            model.id(),
            model.threads(),
            rows.len(),
        );
        println!(
            "seconds per case: median {:.1}, p90 {:.1}, mean {:.1} (target <= 15)",
            percentile(&secs, 0.5),
            percentile(&secs, 0.9),
            total / n
        );
        println!(
            "per case: {:.1} checks, {:.0} tokens of which {:.0} reused from the KV cache; {:.1} evaluated tokens/s",
            checks as f64 / n,
            prompt as f64 / n,
            reused as f64 / n,
            (prompt - reused) as f64 / total
        );
    }
    Ok(Outcome::Pass)
}

/// One timed generation: prompt processing and decoding.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
struct LlmRun {
    prompt_tokens: usize,
    prompt_seconds: f64,
    generated_tokens: usize,
    decode_seconds: f64,
}

impl LlmRun {
    fn prompt_tps(&self) -> f64 {
        self.prompt_tokens as f64 / self.prompt_seconds
    }
    fn decode_tps(&self) -> f64 {
        self.generated_tokens as f64 / self.decode_seconds
    }
}

/// What `cardinal bench llm` measures and with what.
pub struct LlmBench {
    pub model: String,
    pub runs: usize,
    pub batch: u32,
    pub prompt_tokens: usize,
    pub gen_tokens: u32,
    /// The python of a llama-cpp-python install to time beside ours.
    pub peer_python: Option<std::path::PathBuf>,
    /// Flash attention on both sides.
    pub flash_attention: bool,
}

/// The benchmark prompt: a fixed instruction over KB cards (English, in file order) added until
/// the rendered prompt holds at least `target` tokens.
fn llm_bench_messages(
    kb: &cardinal_kb::KnowledgeBase,
    model: &cardinal_llm_local::LocalModel,
    target: usize,
) -> Result<Vec<cardinal_llm::Message>> {
    use cardinal_llm::Message;
    let build = |notes: &str| {
        vec![
            Message::system("You are a careful assistant for a clinic's support desk."),
            Message::user(format!(
                "Support notes:\n\n{notes}\nRewrite every note above as a long numbered list of \
                 short, plain sentences, one fact per line."
            )),
        ]
    };
    let mut notes = String::new();
    for f in &kb.cards {
        if f.card.lang != cardinal_kb::Lang::En {
            continue;
        }
        notes.push_str(f.card.full_text());
        notes.push('\n');
        let messages = build(&notes);
        if model.count_prompt_tokens(&messages)? >= target {
            return Ok(messages);
        }
    }
    Err(cardinal_harness::HarnessError::Input(format!(
        "the KB's English cards make a prompt of fewer than {target} tokens; ask for fewer with --prompt-tokens"
    ))
    .into())
}

/// Run the peer once with `runs` timed generations.
fn llm_peer_runs(
    python: &Path,
    gguf: &Path,
    prompt_file: &Path,
    cfg: &LlmBench,
    threads: usize,
    ctx: u32,
    runs: usize,
) -> Result<Vec<LlmRun>> {
    let peer_err = |m: String| {
        cardinal_harness::HarnessError::Llm(cardinal_llm::LlmError::Local(format!(
            "the peer (llama-cpp-python via {}): {m}",
            python.display()
        )))
    };
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(include_str!("llama_peer_bench.py"))
        .arg("--model")
        .arg(gguf)
        .arg("--prompt-file")
        .arg(prompt_file)
        .args(["--gen", &cfg.gen_tokens.to_string()])
        .args(["--threads", &threads.to_string()])
        .args(["--batch", &cfg.batch.to_string()])
        .args(["--ctx", &ctx.to_string()])
        .args(["--runs", &runs.to_string()])
        .args([
            "--flash-attn",
            if cfg.flash_attention { "on" } else { "off" },
        ])
        .output()
        .map_err(|e| peer_err(format!("cannot start it: {e}")))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        return Err(peer_err(format!(
            "it exited with {}: {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ))
        .into());
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let runs: Vec<LlmRun> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(serde_json::from_str)
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| peer_err(format!("unreadable output ({e}): {stdout}")))?;
    if runs.is_empty() {
        return Err(peer_err("it printed no measurement".into()).into());
    }
    Ok(runs)
}

/// `cardinal bench llm`: prompt processing and decode speed of the in-process llama.cpp on a
/// local model, and beside it (paired, alternating which goes first) llama-cpp-python on the
/// same GGUF, prompt tokens, context, batch and threads.
pub fn llm(
    data: &Path,
    s: &Settings,
    cfg: &LlmBench,
    json_out: bool,
    obs: &dyn Observer,
) -> Result<Outcome> {
    use cardinal_llm::GenParams;
    use cardinal_llm_local::{LocalModel, LocalOptions};
    if cfg.runs == 0 || cfg.batch == 0 || cfg.gen_tokens == 0 || cfg.prompt_tokens == 0 {
        anyhow::bail!(cardinal_harness::HarnessError::Input(
            "--runs, --batch, --gen-tokens and --prompt-tokens must be at least 1".into()
        ));
    }
    let kb = load_kb(data)?;
    let (gguf, sha256) = cardinal_harness::models::local_gguf(&cfg.model, obs)?;
    // No prefix cache: every run evaluates the whole prompt, as the peer does.
    let model = LocalModel::load(
        &gguf,
        LocalOptions {
            threads: s.llm.threads,
            context_size: s.llm.context_size,
            batch_size: cfg.batch,
            prefix_cache: false,
            sha256: Some(sha256),
            flash_attention: Some(cfg.flash_attention),
            ..LocalOptions::default()
        },
    )
    .map_err(cardinal_harness::HarnessError::Llm)?;
    let messages = llm_bench_messages(&kb, &model, cfg.prompt_tokens)?;
    let prompt_file = tempdir_path().with_extension("prompt.txt");
    std::fs::write(&prompt_file, model.render_prompt(&messages)?).map_err(
        cardinal_harness::HarnessError::io("writing the benchmark prompt", &prompt_file),
    )?;
    let params = GenParams {
        max_tokens: cfg.gen_tokens,
        ..GenParams::default()
    };
    let mut ours = Vec::with_capacity(cfg.runs);
    let mut peer = Vec::with_capacity(cfg.runs);
    // One warm-up of each (page cache, thread pools), then paired runs, alternating order.
    let result = (|| -> Result<()> {
        model.complete_with_stats(&messages, &params)?;
        let peer_python = cfg.peer_python.as_deref();
        for r in 0..cfg.runs {
            for side in if r % 2 == 0 { [0, 1] } else { [1, 0] } {
                match (side, peer_python) {
                    (0, _) => {
                        obs.note(&format!("run {}/{}: cardinal", r + 1, cfg.runs));
                        let (_, st) = model.complete_with_stats(&messages, &params)?;
                        ours.push(LlmRun {
                            prompt_tokens: st.prompt_tokens - st.reused_tokens,
                            prompt_seconds: st.prompt_seconds,
                            generated_tokens: st.generated_tokens,
                            decode_seconds: st.decode_seconds,
                        });
                    }
                    (_, Some(py)) => {
                        obs.note(&format!("run {}/{}: llama-cpp-python", r + 1, cfg.runs));
                        // Its first generation is its warm-up.
                        let got = llm_peer_runs(
                            py,
                            &gguf,
                            &prompt_file,
                            cfg,
                            model.threads(),
                            model.context_size(),
                            2,
                        )?;
                        peer.push(got[got.len() - 1]);
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&prompt_file);
    result?;
    let med = |v: &[LlmRun], f: fn(&LlmRun) -> f64| median(v.iter().map(f).collect());
    let summary = |v: &[LlmRun]| {
        json!({
            "prompt_tokens": v[0].prompt_tokens,
            "generated_tokens": med(v, |r| r.generated_tokens as f64),
            "prompt_tokens_per_second": med(v, LlmRun::prompt_tps),
            "decode_tokens_per_second": med(v, LlmRun::decode_tps),
            "prompt_tps_runs": v.iter().map(LlmRun::prompt_tps).collect::<Vec<_>>(),
            "decode_tps_runs": v.iter().map(LlmRun::decode_tps).collect::<Vec<_>>(),
        })
    };
    let mut lines = vec![format!(
        "{} ({}), {} threads, batch {}, context {}, flash attention {}; {} prompt tokens, up to {} generated; medians of {} runs",
        cfg.model,
        gguf.display(),
        model.threads(),
        cfg.batch,
        model.context_size(),
        if cfg.flash_attention { "on" } else { "off" },
        ours[0].prompt_tokens,
        cfg.gen_tokens,
        cfg.runs
    )];
    let row = |who: &str, v: &[LlmRun]| {
        format!(
            "{who:<17} prompt {:>7.1} tokens/s   decode {:>6.1} tokens/s   ({:.0} tokens generated)",
            med(v, LlmRun::prompt_tps),
            med(v, LlmRun::decode_tps),
            med(v, |r| r.generated_tokens as f64)
        )
    };
    lines.push(row("cardinal", &ours));
    let mut v = json!({
        "model": cfg.model, "threads": model.threads(), "batch": cfg.batch,
        "flash_attention": cfg.flash_attention,
        "context": model.context_size(), "runs": cfg.runs,
        "cardinal": summary(&ours),
    });
    if !peer.is_empty() {
        if peer[0].prompt_tokens != ours[0].prompt_tokens {
            lines.push(format!(
                "warning: the peer tokenised the prompt into {} tokens, cardinal into {}",
                peer[0].prompt_tokens, ours[0].prompt_tokens
            ));
        }
        lines.push(row("llama-cpp-python", &peer));
        let pp = med(&ours, LlmRun::prompt_tps) / med(&peer, LlmRun::prompt_tps);
        let dec = med(&ours, LlmRun::decode_tps) / med(&peer, LlmRun::decode_tps);
        lines.push(format!(
            "cardinal / llama-cpp-python: prompt {pp:.2}x, decode {dec:.2}x (target >= 0.95x on both)"
        ));
        v["peer"] = summary(&peer);
        v["ratio"] = json!({"prompt": pp, "decode": dec, "target": 0.95});
    }
    if json_out {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for l in lines {
            println!("{l}");
        }
    }
    Ok(Outcome::Pass)
}
