//! `cardinal eval`: the sweep. Every case runs through the real agent **with the store**; the
//! deterministic evaluators score each turn; records are appended and flushed per case (so a
//! re-run into the same run directory resumes); the aggregate is written as report.md and
//! report.json and printed; gates and the committed baseline decide the exit code.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cardinal_agent::Agent;
use cardinal_dataset::{Expect, LoadedCase};
use cardinal_eval::{
    aggregate, check_gates, citation_scores, AggregateConfig, Baseline, BaselineMeta, CaseScores,
    CitationInput, GateConfig, GuardStatus, RetrievalRecall,
};
use serde::{Deserialize, Serialize};

use cardinal_judge::{Dimension, Judge, JudgeInput, JudgeOutcome};
use cardinal_kb::{Card, KnowledgeBase};
use cardinal_llm::ChatModel;

use crate::ask_cmd::{generator, model_for, LlmArgs, LlmChoice, SharedModel};
use crate::progress::Progress;
use crate::retrieval_cmd::prepare;
use crate::settings::Settings;
use crate::Outcome;

#[derive(Debug, Clone, clap::Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub llm: LlmArgs,
    /// Case directory (default: <data>/cases).
    #[arg(long)]
    pub cases: Option<PathBuf>,
    /// Run directory: records.jsonl (resumable), report.md, report.json.
    #[arg(long, default_value = ".cardinal/runs/default")]
    pub run_dir: PathBuf,
    /// Discard the run directory's records instead of resuming.
    #[arg(long)]
    pub fresh: bool,
    /// Gate: minimum mean retrieval_recall_at_k over gold-labelled cases (inactive by default).
    #[arg(long)]
    pub min_retrieval_recall: Option<f64>,
    /// Gate: minimum mean retrieval_hit_at_k over gold-labelled cases (inactive by default).
    #[arg(long)]
    pub min_retrieval_hit: Option<f64>,
    /// Compare every aggregate with this committed baseline; a regression beyond --tolerance fails.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Allowed drop of any higher-is-better mean before the baseline comparison fails.
    #[arg(long, default_value_t = 0.0)]
    pub tolerance: f64,
    /// Write the sweep's qrels and run in TREC format into this directory.
    #[arg(long)]
    pub export_trec: Option<PathBuf>,
    /// Judge model for groundedness, faithfulness and hallucination (`none`: no judge keys).
    /// `openai` uses --judge-url/--judge-model (default: the --llm-url/--llm-model values).
    /// When it names the same model as --llm, the loaded model is shared.
    #[arg(long, value_enum, default_value = "local")]
    pub judge: JudgeChoice,
    /// Base URL of the judge's OpenAI-compatible endpoint (default: --llm-url).
    #[arg(long)]
    pub judge_url: Option<String>,
    /// Model name of the judge's endpoint (default: --llm-model).
    #[arg(long)]
    pub judge_model: Option<String>,
    /// Cases run at once. A local model serves one generation at a time, so more than 1 only
    /// helps with an HTTP endpoint.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Only the first N cases of each case file (quick looks; the report says so).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Exit 1 when the faithfulness column guard alarms (every score high, or every score low).
    #[arg(long)]
    pub strict: bool,
}

/// Which model judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum JudgeChoice {
    /// No judge: the deterministic evaluators only.
    None,
    /// Qwen2.5-Coder-1.5B-Instruct in-process.
    Local,
    /// Qwen2.5-Coder-0.5B-Instruct in-process.
    LocalSmall,
    /// An OpenAI-compatible endpoint.
    Openai,
}

impl JudgeChoice {
    fn as_llm(self) -> Option<LlmChoice> {
        match self {
            JudgeChoice::None => None,
            JudgeChoice::Local => Some(LlmChoice::Local),
            JudgeChoice::LocalSmall => Some(LlmChoice::LocalSmall),
            JudgeChoice::Openai => Some(LlmChoice::Openai),
        }
    }
}

/// The judge for the flags, sharing the agent's model when both name the same one.
pub fn build_judge(
    choice: JudgeChoice,
    judge_url: Option<&String>,
    judge_model: Option<&String>,
    llm: &LlmArgs,
    agent_model: Option<&SharedModel>,
) -> Result<Option<(Judge, SharedModel)>> {
    let Some(c) = choice.as_llm() else {
        return Ok(None);
    };
    let same_endpoint = judge_url.is_none_or(|u| *u == llm.llm_url)
        && judge_model.is_none_or(|m| *m == llm.llm_model);
    let model = match agent_model {
        Some(m) if c == llm.llm && same_endpoint => m.clone(),
        _ => {
            let mut args = llm.clone();
            if let Some(u) = judge_url {
                args.llm_url = u.clone();
            }
            if let Some(m) = judge_model {
                args.llm_model = m.clone();
            }
            model_for(c, &args)?.context("the judge needs a model")?
        }
    };
    Ok(Some((
        Judge::new(model.clone() as Arc<dyn ChatModel>),
        model,
    )))
}

/// One line of records.jsonl.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    scores: CaseScores,
    gold: Vec<String>,
    /// Retrieved card ids with their fused scores, in rank order.
    retrieved: Vec<(String, f64)>,
    answer: String,
    citations: Vec<String>,
    refused: bool,
    /// The agent's whole trace.
    trace: serde_json::Value,
    /// Judge outcome per dimension (every call, raw reply, verdict or failure).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    judge: BTreeMap<String, JudgeOutcome>,
}

/// Records already in the run directory; a torn last line (interrupted write) is dropped.
fn load_records(path: &Path) -> Result<Vec<Record>> {
    let Ok(text) = fs::read_to_string(path) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str::<Record>(line) {
            Ok(r) => out.push(r),
            Err(_) if i + 1 == lines.len() => {
                eprintln!(
                    "note: dropping an incomplete last record in {}",
                    path.display()
                );
                let kept: String = lines[..i].iter().map(|l| format!("{l}\n")).collect();
                fs::write(path, kept).with_context(|| format!("rewriting {}", path.display()))?;
            }
            Err(e) => bail!("{}:{}: not a record: {e}", path.display(), i + 1),
        }
    }
    Ok(out)
}

pub fn eval(data: &Path, s: &Settings, args: &EvalArgs) -> Result<Outcome> {
    let gates = GateConfig {
        min_retrieval_recall: args.min_retrieval_recall,
        min_retrieval_hit: args.min_retrieval_hit,
    };
    gates.validate()?;
    if !(args.tolerance.is_finite() && args.tolerance >= 0.0) {
        bail!("--tolerance must be a non-negative number");
    }
    let baseline = match &args.baseline {
        Some(p) => {
            Some(Baseline::load(p).with_context(|| format!("loading baseline {}", p.display()))?)
        }
        None => None,
    };
    let case_dir = args.cases.clone().unwrap_or_else(|| data.join("cases"));
    let (mut cases, diags) = cardinal_dataset::load_case_dir(&case_dir)?;
    if !diags.is_empty() {
        bail!("the cases have problems (run `cardinal data check`):\n{diags}");
    }
    if args.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    crate::keep_first_per_file(&mut cases, args.limit, |c| &c.path);
    let p = prepare(data, s)?;
    let kb = Arc::new(p.kb);
    let k = p.retriever.config.top_k;
    let recall = RetrievalRecall::new(k)?;
    let (gen, cache) = generator(&args.llm)?;
    let judge = build_judge(
        args.judge,
        args.judge_url.as_ref(),
        args.judge_model.as_ref(),
        &args.llm,
        cache.as_ref(),
    )?;
    let agent = Agent::new(kb.clone(), Arc::new(p.retriever), gen);

    fs::create_dir_all(&args.run_dir)
        .with_context(|| format!("creating {}", args.run_dir.display()))?;
    let records_path = args.run_dir.join("records.jsonl");
    if args.fresh {
        let _ = fs::remove_file(&records_path);
    }
    let records = load_records(&records_path)?;
    let known: BTreeSet<String> = cases.iter().map(|c| c.case.id.clone()).collect();
    let done: BTreeSet<String> = records
        .iter()
        .filter(|r| known.contains(&r.scores.case_id))
        .map(|r| r.scores.case_id.clone())
        .collect();
    let todo: Vec<&LoadedCase> = cases
        .iter()
        .filter(|c| !done.contains(&c.case.id))
        .collect();
    if !done.is_empty() {
        eprintln!(
            "resuming: {} case(s) already done, {} to go",
            done.len(),
            todo.len()
        );
    }
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&records_path)
        .with_context(|| format!("opening {}", records_path.display()))?;
    let mut bar = Progress::new("cases");
    let workers = args.concurrency.clamp(1, todo.len().max(1));
    let next = AtomicUsize::new(0);
    let ctx = CaseContext {
        agent: &agent,
        kb: &kb,
        recall: &recall,
        judge: judge.as_ref().map(|(j, _)| j),
    };
    let (tx, rx) = mpsc::channel::<Result<Record>>();
    std::thread::scope(|scope| -> Result<()> {
        for _ in 0..workers {
            let tx = tx.clone();
            let (next, todo, ctx) = (&next, &todo, &ctx);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(lc) = todo.get(i) else { break };
                let result = run_case(ctx, lc).with_context(|| format!("case {}", lc.case.id));
                let failed = result.is_err();
                if tx.send(result).is_err() || failed {
                    // Stop taking cases after an error; the others finish theirs.
                    next.store(todo.len(), Ordering::SeqCst);
                    break;
                }
            });
        }
        drop(tx);
        let mut first_err = None;
        let mut done = 0usize;
        for result in rx {
            match result {
                Ok(record) => {
                    writeln!(file, "{}", serde_json::to_string(&record)?)
                        .and_then(|_| file.flush())
                        .with_context(|| format!("writing {}", records_path.display()))?;
                    done += 1;
                    bar.update(done, todo.len());
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e.context(
                "the sweep stopped; finished cases are saved and a re-run resumes from them",
            )),
            None => Ok(()),
        }
    })?;
    drop(file);
    // Aggregate what is on disk, so a fresh run and a resumed run report the same numbers.
    let mut records = load_records(&records_path)?;
    records.retain(|r| known.contains(&r.scores.case_id));

    // Deterministic report: latency is reported in the trace but not aggregated, so re-runs
    // reproduce the same report.
    let all: Vec<CaseScores> = records
        .iter()
        .map(|r| {
            let mut s = r.scores.clone();
            s.scores.remove("latency_ms");
            s
        })
        .collect();
    let agg = aggregate(&all, &AggregateConfig::default())?;
    let guard_status = guard(&records)?;
    let mut md = format!(
        "# Cardinal evaluation\n\n- cases: {} from `{}`{}\n- generator: {}\n- judge: {}\n- retrieval: hybrid, k = {k}, store: {}\n\n",
        all.len(),
        case_dir.display(),
        args.limit
            .map(|n| format!(" (first {n} of each file: --limit)"))
            .unwrap_or_default(),
        agent.generator.name(),
        judge
            .as_ref()
            .map(|(j, _)| j.model_id())
            .unwrap_or_else(|| "none (deterministic evaluators only)".into()),
        agent.retriever.store().describe()
    );
    md.push_str(&cardinal_eval::render_markdown(&agg));
    let judge_errors: usize = records.iter().map(|r| r.scores.errors.len()).sum();
    md.push_str(&format!(
        "\n## Judge\n\n- judge errors (no verdict after retries, or transport failure; never scored): {judge_errors}\n- {guard_status}\n"
    ));
    let failures = check_gates(&agg, &gates);
    let diff = match &baseline {
        Some(b) => {
            if let Err(e) = b.check_k(k) {
                bail!("baseline: {e}");
            }
            Some(cardinal_eval::compare(b, &agg, args.tolerance)?)
        }
        None => None,
    };
    md.push_str("\n## Gates\n\n");
    if gates.is_active() {
        for (key, floor) in gates.gates() {
            let f = failures.iter().find(|f| f.key == key);
            md.push_str(&format!(
                "- `{key}` ≥ {floor}: {}\n",
                f.map(|f| format!("**FAILED** — {}", f.message))
                    .unwrap_or_else(|| "pass".into())
            ));
        }
    } else {
        md.push_str("- no gate is active (floors are off by default)\n");
    }
    if let Some(d) = &diff {
        md.push_str(&format!(
            "\n## Baseline (tolerance {})\n\n```\n{}\n```\n",
            args.tolerance,
            d.render_table()
        ));
    }
    fs::write(args.run_dir.join("report.md"), &md)?;
    fs::write(
        args.run_dir.join("report.json"),
        serde_json::to_string_pretty(&agg)?,
    )?;
    print!("{}", cardinal_eval::render_terminal(&agg));
    if judge.is_some() || guard_status.is_alarm() {
        eprintln!("judge errors: {judge_errors}");
        eprintln!("{guard_status}");
    }
    if let Some(c) = cache {
        let st = c.stats();
        eprintln!(
            "cache: {} hit(s), {} model call(s)",
            st.hits, st.model_calls
        );
    }
    if let Some(dir) = &args.export_trec {
        fs::create_dir_all(dir)?;
        let qrels = records.iter().flat_map(|r| {
            r.gold
                .iter()
                .map(move |g| (r.scores.case_id.clone(), g.clone(), 1i64))
        });
        cardinal_trec::write_qrels(dir.join("qrels.txt"), qrels)?;
        let run = records.iter().flat_map(|r| {
            // The score is derived from the rank (n, n-1, ..., 1) so that trec_eval's
            // re-sorting (score descending, ties by docid descending) keeps the agent's order
            // even where fused scores tie; the fused scores stay in records.jsonl.
            let n = r.retrieved.len();
            r.retrieved.iter().enumerate().map(move |(i, (id, _))| {
                (
                    r.scores.case_id.clone(),
                    id.clone(),
                    i + 1,
                    (n - i) as f64,
                    "cardinal",
                )
            })
        });
        cardinal_trec::write_run(dir.join("run.txt"), run)?;
        eprintln!("TREC qrels and run written to {}", dir.display());
    }
    eprintln!("report: {}", args.run_dir.join("report.md").display());
    let mut failed = false;
    for f in &failures {
        eprintln!("gate failed: {}", f.message);
        failed = true;
    }
    if args.strict && guard_status.is_alarm() {
        eprintln!("--strict: the faithfulness column guard alarmed");
        failed = true;
    }
    if let Some(d) = &diff {
        if d.has_regressions() {
            eprintln!("baseline regressions:\n{}", d.render_table());
            failed = true;
        }
    }
    Ok(if failed {
        Outcome::GateFailed
    } else {
        Outcome::Pass
    })
}

/// What every case needs, shared by the workers.
struct CaseContext<'a> {
    agent: &'a Agent,
    kb: &'a KnowledgeBase,
    recall: &'a RetrievalRecall,
    judge: Option<&'a Judge>,
}

/// One case: the agent's turn, the deterministic evaluators and, on answers (not refusals),
/// the judge's three dimensions. A judge failure is recorded as an error of its key, never as
/// a score; a dimension that does not apply (no real cited card) gives no key.
fn run_case(ctx: &CaseContext<'_>, lc: &LoadedCase) -> Result<Record> {
    let c = &lc.case;
    let kb = ctx.kb;
    let turn = ctx.agent.answer(&c.question, Some(c.lang))?;
    let retrieved = turn.retrieval.card_ids();
    let mut scores = CaseScores::new(&c.id, c.lang.tag(), c.case_type.as_str(), c.has_gold())
        .with_scores(ctx.recall.score(&c.must_cite_one_of, &retrieved))
        .with_scores(citation_scores(
            &CitationInput {
                gold: &c.must_cite_one_of,
                cited: &turn.citations,
                retrieved: &retrieved,
                expect_refuse: c.expect == Expect::Refuse,
                refused: turn.refused,
            },
            |id| kb.get(id).is_some(),
        ));
    scores
        .scores
        .insert("latency_ms".into(), turn.timings.total_ms);
    let mut judged = BTreeMap::new();
    if let (Some(judge), false) = (ctx.judge, turn.refused) {
        let retrieved_cards: Vec<&Card> = retrieved
            .iter()
            .filter_map(|id| kb.get(id).map(|f| &f.card))
            .collect();
        let input = JudgeInput::resolve(
            &c.question,
            &turn.answer,
            c.lang,
            &turn.citations,
            &retrieved_cards,
            |id| kb.get(id).map(|f| &f.card),
        );
        for d in Dimension::ALL {
            let outcome = judge.score(d, &input);
            match &outcome {
                JudgeOutcome::Scored { score, .. } => {
                    scores.scores.insert(d.name().into(), score.as_f64());
                }
                JudgeOutcome::Failed { .. } => {
                    scores.errors.insert(d.name().into());
                }
                JudgeOutcome::NotApplicable { .. } => {}
            }
            judged.insert(d.name().to_string(), outcome);
        }
    }
    Ok(Record {
        scores,
        gold: c.must_cite_one_of.clone(),
        retrieved: turn
            .retrieval
            .cards
            .iter()
            .map(|r| (r.card_id.clone(), r.fused_score as f64))
            .collect(),
        answer: turn.answer.clone(),
        citations: turn.citations.clone(),
        refused: turn.refused,
        trace: serde_json::to_value(&turn)?,
        judge: judged,
    })
}

/// The faithfulness column guard over the records' judge scores.
fn guard(records: &[Record]) -> Result<GuardStatus> {
    let column: Vec<u8> = records
        .iter()
        .filter_map(|r| r.scores.scores.get(Dimension::Faithfulness.name()))
        .map(|v| *v as u8)
        .collect();
    Ok(cardinal_eval::faithfulness_column_guard(
        &column,
        cardinal_eval::DEFAULT_GUARD_MIN_N,
    )?)
}

/// `cardinal baseline update`: write the aggregate of a run directory as the baseline file.
pub fn baseline_update(
    run_dir: &Path,
    out: &Path,
    k: usize,
    note: Option<String>,
) -> Result<Outcome> {
    let report = run_dir.join("report.json");
    let text = fs::read_to_string(&report)
        .with_context(|| format!("reading {} (run `cardinal eval` first)", report.display()))?;
    let agg: cardinal_eval::Aggregate = serde_json::from_str(&text)
        .with_context(|| format!("{} is not an aggregate report", report.display()))?;
    let b = Baseline::from_aggregate(
        &agg,
        BaselineMeta {
            k,
            cases: format!("{} cases", agg.n_cases),
            note,
        },
    );
    b.save(out)?;
    println!("baseline written to {}", out.display());
    Ok(Outcome::Pass)
}
