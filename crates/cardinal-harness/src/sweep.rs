//! The evaluation sweep: every selected case through the real agent **with the store**, the
//! deterministic evaluators, the judge-based scorer, one crash-safe record per case in the run
//! directory, and the aggregate with the manifest, gates and baseline comparison.
//!
//! Order of work (each step can stop the run before the next):
//! 1. validate the options and the data exactly as `cardinal data check` does (file:line);
//! 2. select the cases (`--sample N`: stratified by language × case type, fixed seed);
//! 3. prepare the index, the agent and the judge, and compute the run manifest;
//! 4. lock the run directory; `--fresh` removes records, manifest and reports; otherwise a
//!    recorded manifest must equal the new one field by field, or the run is refused;
//! 5. remove the old reports (they are about to stop describing the records), write the
//!    manifest, run the remaining cases, appending one record each;
//! 6. aggregate exactly the selected cases from disk. A run that stopped early still writes its
//!    report, marked partial with the missing case ids, and then returns its error.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use cardinal_agent::safety_eval::{SafetyReport, SafetyRow};
use cardinal_agent::{Agent, RefusalReason};
use cardinal_dataset::{CaseType, Expect, LoadedCase, Split};
use cardinal_eval::{
    aggregate, check_gates, citation_scores, safety_scores, Aggregate, AggregateConfig, Baseline,
    BaselineDiff, BaselineMeta, CaseScores, CitationInput, GateConfig, GateFailure, GuardStatus,
    RetrievalRecall, SafetyExpect, SafetyInput,
};
use cardinal_judge::JudgeInput;
use cardinal_kb::{Card, KnowledgeBase};
use serde::{Deserialize, Serialize};

use crate::error::{ErrorClass, HarnessError, Result, ResultExt};
use crate::index::Index;
use crate::manifest::{
    self, AgentManifest, DataManifest, JudgeManifest, RunInfo, RunManifest, Selection,
    MANIFEST_SCHEMA_VERSION,
};
use crate::models::{self, SharedModel};
use crate::observer::Observer;
use crate::rundir::RunDir;
use crate::scorer::{CaseScorer, Verdict};
use crate::settings::Settings;

/// Version of `report.json`'s run part (the aggregate keeps its own version).
pub const SWEEP_REPORT_VERSION: u32 = 1;

/// What the sweep is asked to do (besides the [`Settings`]).
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// The data directory (`kb/`, `cases/`).
    pub data: PathBuf,
    /// Case directory (default `<data>/cases`).
    pub cases: Option<PathBuf>,
    pub run_dir: PathBuf,
    pub fresh: bool,
    /// `--sample N`: N cases stratified by language × case type.
    pub sample: Option<usize>,
    pub seed: u64,
    /// `--split train|test`: only the cases of that frozen split (cases without one are left
    /// out).
    pub split: Option<Split>,
    /// Cases run at once (an HTTP endpoint benefits; a local model serves one at a time).
    pub concurrency: usize,
    pub gates: GateConfig,
    pub baseline: Option<PathBuf>,
    pub tolerance: f64,
    /// Compare with a baseline whose manifest differs in number-changing fields.
    pub allow_manifest_mismatch: bool,
    /// Largest share of judged cases allowed to have a judge error on a gated dimension.
    pub max_judge_errors: f64,
    /// Exit 1 when the faithfulness column guard alarms.
    pub strict: bool,
    pub export_trec: Option<PathBuf>,
}

impl SweepOptions {
    /// Defaults for a data directory and a run directory.
    pub fn new(data: impl Into<PathBuf>, run_dir: impl Into<PathBuf>) -> Self {
        SweepOptions {
            data: data.into(),
            cases: None,
            run_dir: run_dir.into(),
            fresh: false,
            sample: None,
            seed: crate::sample::DEFAULT_SAMPLE_SEED,
            split: None,
            concurrency: 1,
            gates: GateConfig::default(),
            baseline: None,
            tolerance: 0.0,
            allow_manifest_mismatch: false,
            max_judge_errors: 0.0,
            strict: false,
            export_trec: None,
        }
    }
}

/// One line of `records.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub scores: CaseScores,
    pub gold: Vec<String>,
    /// Retrieved card ids with their fused scores, in rank order.
    pub retrieved: Vec<(String, f64)>,
    pub question: String,
    pub answer: String,
    pub citations: Vec<String>,
    pub refused: bool,
    /// The agent's whole trace.
    pub trace: serde_json::Value,
    /// The scorer's verdict per dimension.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub judge: BTreeMap<String, Verdict>,
}

/// The run's status, next to the aggregate in `report.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunStatus {
    pub version: u32,
    /// Cases selected for this run.
    pub requested: usize,
    /// Cases in the report.
    pub reported: usize,
    /// Selected cases without a record (a partial run).
    pub missing: Vec<String>,
    pub partial: bool,
    /// Selected cases per stratum (language/case type).
    pub strata: BTreeMap<String, usize>,
    /// Judge errors per dimension (never scores).
    pub judge_errors: BTreeMap<String, usize>,
    /// Cases the judge was asked about (answers, not refusals).
    pub judged_cases: usize,
    pub guard: String,
    pub gate_failures: Vec<GateFailure>,
    pub baseline: Option<BaselineDiff>,
    /// Why the run fails (empty = pass).
    pub failures: Vec<String>,
}

/// `report.json`: the aggregate (schema in `cardinal_eval`), the manifest and the status.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepReport {
    #[serde(flatten)]
    pub aggregate: Aggregate,
    pub manifest: RunManifest,
    pub run: RunStatus,
    /// The safety policy's figures over the run's cases that carry a safety class (refusal
    /// recall, false refusals, escalations, two intents; per language, class, form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety: Option<SafetyReport>,
}

/// What a finished sweep hands back.
pub struct SweepOutcome {
    pub report: SweepReport,
    pub markdown: String,
    pub records: Vec<Record>,
    /// Cache statistics of the agent/judge model (hits, calls).
    pub cache: Option<(u64, u64)>,
}

/// Load and validate the cases like `cardinal data check` (every problem with file:line).
pub fn load_cases(data: &Path, dir: &Path, kb: &KnowledgeBase) -> Result<Vec<LoadedCase>> {
    let (cases, mut diags) = cardinal_dataset::load_case_dir(dir)?;
    diags.extend(cardinal_dataset::check(kb, &cases));
    if !diags.is_empty() {
        return Err(HarnessError::Input(format!(
            "the cases have problems (the same check as `cardinal data check --data {}`):\n{diags}",
            data.display()
        )));
    }
    Ok(cases)
}

/// The stratum of a case: `<lang>/<case type>`.
pub fn stratum(c: &LoadedCase) -> String {
    format!("{}/{}", c.case.lang.tag(), c.case.case_type.as_str())
}

/// Select the cases of a run (`--sample N`: stratified by language × case type).
pub fn select(cases: Vec<LoadedCase>, sample: Option<usize>, seed: u64) -> Result<Vec<LoadedCase>> {
    let Some(n) = sample else { return Ok(cases) };
    if n == 0 {
        return Err(HarnessError::Input("--sample must be at least 1".into()));
    }
    let strata: Vec<String> = cases.iter().map(stratum).collect();
    let picked = crate::sample::stratified(
        strata
            .iter()
            .cloned()
            .zip(cases.iter().map(|c| c.case.id.as_str())),
        n,
        seed,
    );
    let keep: BTreeSet<usize> = picked.into_iter().collect();
    Ok(cases
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep.contains(i))
        .map(|(_, c)| c)
        .collect())
}

/// Run the sweep.
pub fn run_sweep(s: &Settings, o: &SweepOptions, obs: &dyn Observer) -> Result<SweepOutcome> {
    o.gates.validate()?;
    if !(o.tolerance.is_finite() && o.tolerance >= 0.0) {
        return Err(HarnessError::Input(
            "--tolerance must be a non-negative number".into(),
        ));
    }
    if !(0.0..=1.0).contains(&o.max_judge_errors) {
        return Err(HarnessError::Input(
            "--max-judge-errors must be a share in [0, 1]".into(),
        ));
    }
    if o.concurrency == 0 {
        return Err(HarnessError::Input(
            "--concurrency must be at least 1".into(),
        ));
    }
    let baseline = match &o.baseline {
        Some(p) => Some(Baseline::load(p).ctx(|| format!("loading the baseline {}", p.display()))?),
        None => None,
    };
    let case_dir = o.cases.clone().unwrap_or_else(|| o.data.join("cases"));
    let kb_for_check = KnowledgeBase::load(&o.data.join("kb"))
        .ctx(|| format!("loading the KB from {}", o.data.join("kb").display()))?;
    let cases = load_cases(&o.data, &case_dir, &kb_for_check)?;
    drop(kb_for_check);
    let cases = match o.split {
        Some(split) => {
            let kept: Vec<LoadedCase> = cases
                .into_iter()
                .filter(|c| c.case.split == Some(split))
                .collect();
            if kept.is_empty() {
                return Err(HarnessError::Input(format!(
                    "no case is in the {} split",
                    split.as_str()
                )));
            }
            kept
        }
        None => cases,
    };
    let cases = select(cases, o.sample, o.seed)?;
    let strata = {
        let mut m = BTreeMap::new();
        for c in &cases {
            *m.entry(stratum(c)).or_insert(0usize) += 1;
        }
        m
    };

    let index = Index::prepare(&o.data, s, obs)?;
    let (gen, agent_model) = models::generator(s, obs)?;
    let judge_model = match s.judge.scorer.as_str() {
        "rubric-v1" => models::judge_model(s, agent_model.as_ref(), obs)?,
        _ => None,
    };
    let scorer = crate::scorer::build_scorer(&o.data, s, judge_model.as_ref(), obs)?;
    let manifest = sweep_manifest(s, o, &index, &gen, scorer.as_deref(), &cases)?;
    let kb = Arc::new(index.kb);
    let k = index.retriever.config.top_k;
    let recall = RetrievalRecall::new(k)?;
    let queries = index.queries.clone();
    let agent = models::agent(kb.clone(), Arc::new(index.retriever), gen, s, obs)?;

    let rd = RunDir::open(&o.run_dir, obs)?;
    if o.fresh {
        rd.clear()?;
    }
    let loaded = rd.load_records(|r: &Record| r.scores.case_id.clone())?;
    if loaded.dropped_torn_tail {
        obs.note("note: the last record was torn by a crash; its case runs again");
    }
    if let Some(recorded) = rd.read_json::<RunManifest>("manifest.json")? {
        let diffs = recorded.diff(&manifest);
        if !diffs.is_empty() && !loaded.records.is_empty() {
            return Err(HarnessError::ManifestMismatch {
                run_dir: o.run_dir.clone(),
                records: loaded.records.len(),
                fields: manifest::render_diffs(&diffs),
            });
        }
    } else if !loaded.records.is_empty() {
        return Err(HarnessError::ManifestMismatch {
            run_dir: o.run_dir.clone(),
            records: loaded.records.len(),
            fields: "  manifest.json: (absent: the records predate run manifests)".into(),
        });
    }
    rd.remove_reports()?;
    let mut manifest = manifest;
    manifest.info = rd
        .read_json::<RunManifest>("manifest.json")?
        .map(|m| m.info)
        .filter(|i| i.created_unix > 0)
        .unwrap_or(RunInfo {
            created_unix: manifest::now_unix(),
            threads: s.llm.threads,
        });
    rd.write_file(
        "manifest.json",
        serde_json::to_string_pretty(&manifest)
            .map_err(|e| HarnessError::Input(e.to_string()))?
            .as_bytes(),
    )?;

    let selected: BTreeSet<String> = cases.iter().map(|c| c.case.id.clone()).collect();
    let done: BTreeSet<String> = loaded
        .records
        .iter()
        .map(|r| r.scores.case_id.clone())
        .filter(|id| selected.contains(id))
        .collect();
    let todo: Vec<&LoadedCase> = cases
        .iter()
        .filter(|c| !done.contains(&c.case.id))
        .collect();
    if !done.is_empty() {
        obs.note(&format!(
            "resuming: {} case(s) already done, {} to go",
            done.len(),
            todo.len()
        ));
    }
    // Every query text of the cases to run, embedded in one batch (or read from the cache)
    // before the case loop instead of one forward pass per case.
    let texts: Vec<String> = todo
        .iter()
        .flat_map(|c| agent.query_texts(&c.case.question))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let embedded = queries.prefetch(&refs)?;
    if embedded > 0 {
        obs.note(&format!(
            "embedded {embedded} query texts in one batch in {:.1}s",
            started.elapsed().as_secs_f64()
        ));
    }
    if let Some(intent) = &agent.intent_encoder {
        // The policy's intent encoder, likewise in one batch (its cache keeps the vectors).
        let started = std::time::Instant::now();
        intent.embed_queries(&refs)?;
        obs.note(&format!(
            "intent encoder: {} texts ready in {:.1}s",
            refs.len(),
            started.elapsed().as_secs_f64()
        ));
    }
    let ctx = CaseContext {
        agent: &agent,
        kb: &kb,
        recall: &recall,
        scorer: scorer.as_deref(),
    };
    let run_result = run_cases(&ctx, &todo, &rd, o.concurrency, obs);

    // Aggregate what is on disk, so a fresh run and a resumed run report the same numbers.
    let records: Vec<Record> = rd
        .load_records(|r: &Record| r.scores.case_id.clone())?
        .records
        .into_iter()
        .filter(|r| selected.contains(&r.scores.case_id))
        .collect();
    let have: BTreeSet<&str> = records.iter().map(|r| r.scores.case_id.as_str()).collect();
    let missing: Vec<String> = cases
        .iter()
        .map(|c| c.case.id.clone())
        .filter(|id| !have.contains(id.as_str()))
        .collect();
    let report = build_report(
        &records,
        &manifest,
        o,
        baseline.as_ref(),
        k,
        strata,
        missing,
        run_result.as_ref().err(),
    )?;
    let mut report = report;
    report.safety = safety_report(&records, &cases, &kb, o.split);
    let markdown = render_markdown(&report, &agent.generator.name(), &case_dir, o);
    rd.write_file(
        "report.json",
        serde_json::to_string_pretty(&report)
            .map_err(|e| HarnessError::Input(e.to_string()))?
            .as_bytes(),
    )?;
    rd.write_file("report.md", markdown.as_bytes())?;
    run_result?;
    if report.run.partial {
        return Err(HarnessError::Input(format!(
            "the report misses {} selected case(s): {}",
            report.run.missing.len(),
            report.run.missing.join(", ")
        )));
    }
    if let Some(dir) = &o.export_trec {
        export_trec(dir, &records)?;
        obs.note(&format!("TREC qrels and run written to {}", dir.display()));
    }
    let cache = agent_model
        .as_ref()
        .or(judge_model.as_ref())
        .map(|m: &SharedModel| {
            let st = m.stats();
            (st.hits, st.model_calls)
        });
    Ok(SweepOutcome {
        report,
        markdown,
        records,
        cache,
    })
}

fn sweep_manifest(
    s: &Settings,
    o: &SweepOptions,
    index: &Index,
    gen: &cardinal_agent::Generator,
    scorer: Option<&dyn CaseScorer>,
    cases: &[LoadedCase],
) -> Result<RunManifest> {
    let (cards_sha256, cards) = manifest::cards_digest(&index.kb);
    let (items_sha256, items) = manifest::items_digest(cases.iter().map(|c| {
        (
            c.case.id.as_str(),
            serde_json::to_string(&c.case).unwrap_or_default(),
        )
    }));
    let params = models::agent_params(s);
    let agent = match gen {
        cardinal_agent::Generator::Extractive => AgentManifest {
            backend: "extractive".into(),
            model_id: None,
            max_tokens: None,
            temperature: None,
            seed: None,
            context_size: None,
            policy: Some(cardinal_agent::policy::bundled_id()),
        },
        cardinal_agent::Generator::Llm { model, .. } => AgentManifest {
            backend: s.llm.backend.name().into(),
            model_id: Some(model.id()),
            max_tokens: Some(params.max_tokens),
            temperature: Some(params.temperature),
            seed: Some(params.seed),
            context_size: s.llm.backend.local_model().map(|_| s.llm.context_size),
            policy: Some(cardinal_agent::policy::bundled_id()),
        },
    };
    Ok(RunManifest {
        schema_version: MANIFEST_SCHEMA_VERSION,
        kind: "sweep".into(),
        cardinal_version: env!("CARGO_PKG_VERSION").into(),
        agent: Some(agent),
        judge: scorer.map(|sc| JudgeManifest {
            backend: s.judge.backend.map(|b| b.name()).unwrap_or("none").into(),
            model_id: sc.model_id(),
            scorer: sc.name(),
            calibration: sc.calibration_id(),
        }),
        retrieval: Some(manifest::retrieval_manifest(
            s,
            &index.embedder_id,
            index.reranker_id.as_deref(),
        )),
        data: DataManifest {
            cards_sha256,
            cards,
            items_sha256,
            items,
        },
        selection: Selection {
            sample: o.sample,
            seed: o.sample.map(|_| o.seed),
            strata: o.sample.map(|_| "language × case type".into()),
            split: o.split.map(|s| s.as_str().to_string()),
        },
        info: RunInfo::default(),
    })
}

/// What every case needs, shared by the workers.
struct CaseContext<'a> {
    agent: &'a Agent,
    kb: &'a KnowledgeBase,
    recall: &'a RetrievalRecall,
    scorer: Option<&'a dyn CaseScorer>,
}

fn run_cases(
    ctx: &CaseContext<'_>,
    todo: &[&LoadedCase],
    rd: &RunDir,
    concurrency: usize,
    obs: &dyn Observer,
) -> Result<()> {
    let workers = concurrency.clamp(1, todo.len().max(1));
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<Result<Record>>();
    std::thread::scope(|scope| -> Result<()> {
        for _ in 0..workers {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || loop {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(lc) = todo.get(i) else { break };
                let result =
                    run_case(ctx, lc).map_err(|e| e.context(format!("case {}", lc.case.id)));
                let failed = result.is_err();
                if tx.send(result).is_err() || failed {
                    // Stop taking cases after an error; the others finish theirs.
                    stop.store(true, Ordering::SeqCst);
                    break;
                }
            });
        }
        drop(tx);
        let mut first_err = None;
        let mut done = 0usize;
        obs.progress("cases", 0, todo.len());
        for result in rx {
            match result.and_then(|record| rd.append(&record)) {
                Ok(()) => {
                    done += 1;
                    obs.progress("cases", done, todo.len());
                }
                Err(e) => {
                    stop.store(true, Ordering::SeqCst);
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
    })
}

/// One case: the agent's turn, the deterministic evaluators and, on answers (not refusals),
/// the scorer's dimensions. A judge failure is recorded as an error of its key, never as a
/// score; a dimension that does not apply gives no key.
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
                // An emergency escalation is the expected way of not answering normally.
                expect_refuse: c.expect != Expect::Answer,
                refused: turn.refused || turn.escalated,
            },
            |id| kb.get(id).is_some(),
        ))
        .with_scores(safety_scores(&SafetyInput {
            expect: match c.expect {
                Expect::Answer => SafetyExpect::Answer,
                Expect::Refuse => SafetyExpect::Refuse,
                Expect::Escalate => SafetyExpect::Escalate,
            },
            adversarial: c.case_type == CaseType::Adversarial,
            answer_gold: &c.answer_gold,
            refused: turn.refused,
            escalated: turn.escalated,
            cited: &turn.citations,
        }));
    let mut judged = BTreeMap::new();
    if let (Some(scorer), false) = (ctx.scorer, turn.refused || turn.escalated) {
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
        for (dim, verdict) in scorer.score(&input) {
            match &verdict {
                Verdict::Scored { score, .. } => {
                    scores.scores.insert(dim.clone(), *score);
                }
                Verdict::Failed { .. } => {
                    scores.errors.insert(dim.clone());
                }
                Verdict::NotApplicable { .. } => {}
            }
            judged.insert(dim, verdict);
        }
    }
    let unknown = cardinal_eval::metrics::unknown(scores.scores.keys().map(String::as_str));
    if !unknown.is_empty() {
        return Err(HarnessError::Input(format!(
            "evaluators produced keys the metric registry does not define: {}",
            unknown.join(", ")
        )));
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
        question: c.question.clone(),
        answer: turn.answer.clone(),
        citations: turn.citations.clone(),
        refused: turn.refused,
        trace: serde_json::to_value(&turn).unwrap_or(serde_json::Value::Null),
        judge: judged,
    })
}

#[allow(clippy::too_many_arguments)]
fn build_report(
    records: &[Record],
    manifest: &RunManifest,
    o: &SweepOptions,
    baseline: Option<&Baseline>,
    k: usize,
    strata: BTreeMap<String, usize>,
    missing: Vec<String>,
    run_error: Option<&HarnessError>,
) -> Result<SweepReport> {
    let all: Vec<CaseScores> = records.iter().map(|r| r.scores.clone()).collect();
    let agg = aggregate(&all, &AggregateConfig::default())?;
    let mut failures = Vec::new();
    let partial = !missing.is_empty();
    if let Some(e) = run_error {
        failures.push(format!("the run stopped: {e}"));
    }
    if partial {
        failures.push(format!(
            "partial: {} of {} selected case(s) have no record",
            missing.len(),
            records.len() + missing.len()
        ));
    }
    // Judge errors.
    let mut judge_errors: BTreeMap<String, usize> = BTreeMap::new();
    let mut judged_cases = 0usize;
    let mut runtime_failures = 0usize;
    let mut any_verdict = false;
    for r in records {
        if !r.judge.is_empty() {
            judged_cases += 1;
        }
        for (dim, v) in &r.judge {
            match v {
                Verdict::Failed { runtime, .. } => {
                    *judge_errors.entry(dim.clone()).or_default() += 1;
                    if *runtime {
                        runtime_failures += 1;
                    }
                }
                Verdict::Scored { .. } => any_verdict = true,
                Verdict::NotApplicable { .. } => {}
            }
        }
    }
    for dim in cardinal_eval::calibration::GATED_DIMENSIONS {
        let errs = judge_errors.get(dim).copied().unwrap_or(0);
        if judged_cases > 0 {
            let share = errs as f64 / judged_cases as f64;
            if share > o.max_judge_errors {
                failures.push(format!(
                    "judge errors on {dim}: {errs} of {judged_cases} judged case(s) ({:.1} %) exceed --max-judge-errors {:.1} %",
                    100.0 * share,
                    100.0 * o.max_judge_errors
                ));
            }
        }
    }
    if judged_cases > 0 && !any_verdict && runtime_failures > 0 {
        failures.push(format!(
            "the judge never produced a score: {runtime_failures} call(s) failed to reach the model"
        ));
    }
    let guard = guard(records)?;
    if o.strict && guard.is_alarm() {
        failures.push("--strict: the faithfulness column guard alarmed".into());
    }
    let gate_failures = check_gates(&agg, &o.gates);
    failures.extend(gate_failures.iter().map(|f| f.message.clone()));
    let diff = match baseline {
        Some(b) => {
            compare_manifests(b, manifest, o.allow_manifest_mismatch, k)?;
            let d = cardinal_eval::compare(b, &agg, o.tolerance)?;
            if d.has_regressions() {
                failures.push(format!("baseline regressions:\n{}", d.render_table()));
            }
            Some(d)
        }
        None => None,
    };
    Ok(SweepReport {
        aggregate: agg,
        manifest: manifest.clone(),
        run: RunStatus {
            version: SWEEP_REPORT_VERSION,
            requested: records.len() + missing.len(),
            reported: records.len(),
            missing,
            partial,
            strata,
            judge_errors,
            judged_cases,
            guard: guard.to_string(),
            gate_failures,
            baseline: diff,
            failures,
        },
        safety: None,
    })
}

/// The policy figures of the records whose case carries a safety class; `None` when none does.
fn safety_report(
    records: &[Record],
    cases: &[LoadedCase],
    kb: &KnowledgeBase,
    split: Option<Split>,
) -> Option<SafetyReport> {
    let by_id: BTreeMap<&str, &LoadedCase> =
        cases.iter().map(|c| (c.case.id.as_str(), c)).collect();
    let rows: Vec<SafetyRow> = records
        .iter()
        .filter_map(|r| {
            let c = &by_id.get(r.scores.case_id.as_str())?.case;
            c.class?;
            let escalated = r.trace.get("escalated").and_then(|v| v.as_bool()) == Some(true);
            let reason = r
                .trace
                .get("refusal_reason")
                .and_then(|v| serde_json::from_value::<RefusalReason>(v.clone()).ok());
            Some(SafetyRow::new(
                kb,
                c,
                r.refused,
                escalated,
                reason,
                &r.citations,
            ))
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    Some(SafetyReport::from_rows(
        split.map(|s| s.as_str()).unwrap_or("all cases"),
        rows,
    ))
}

/// Refuse a baseline comparison across manifests that differ in number-changing fields
/// (unless allowed); a baseline without a manifest is checked on k only.
fn compare_manifests(b: &Baseline, now: &RunManifest, allow: bool, k: usize) -> Result<()> {
    b.check_k(k)
        .map_err(|e| HarnessError::Input(format!("baseline: {e}")))?;
    let Some(recorded) = &b.meta.manifest else {
        return Ok(());
    };
    let recorded: RunManifest = serde_json::from_value(recorded.clone()).map_err(|e| {
        HarnessError::Input(format!(
            "baseline: the recorded manifest is not readable: {e}"
        ))
    })?;
    let mut diffs = recorded.diff(now);
    // The selection and the data digests are what a baseline is about: different cases or
    // cards make the comparison meaningless as much as a different model.
    diffs.retain(|d| d.field != "cardinal_version");
    if diffs.is_empty() || allow {
        return Ok(());
    }
    Err(HarnessError::Input(format!(
        "the baseline was measured under other settings; comparing would mix them:\n{}\n\
         update the baseline (`cardinal baseline update`) or pass --allow-manifest-mismatch",
        manifest::render_diffs(&diffs)
    )))
}

/// The faithfulness column guard over the records' judge scores.
fn guard(records: &[Record]) -> Result<GuardStatus> {
    let column: Vec<u8> = records
        .iter()
        .filter_map(|r| r.scores.scores.get("faithfulness"))
        .map(|v| v.round() as u8)
        .collect();
    Ok(cardinal_eval::faithfulness_column_guard(
        &column,
        cardinal_eval::DEFAULT_GUARD_MIN_N,
    )?)
}

fn export_trec(dir: &Path, records: &[Record]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(HarnessError::io("creating", dir))?;
    let qrels = records.iter().flat_map(|r| {
        r.gold
            .iter()
            .map(move |g| (r.scores.case_id.clone(), g.clone(), 1i64))
    });
    cardinal_trec::write_qrels(dir.join("qrels.txt"), qrels)?;
    let run = records.iter().flat_map(|r| {
        // The score is derived from the rank (n, n-1, ..., 1) so that trec_eval's re-sorting
        // (score descending, ties by docid descending) keeps the agent's order even where
        // fused scores tie; the fused scores stay in records.jsonl.
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
    Ok(())
}

/// `report.md`.
pub fn render_markdown(
    r: &SweepReport,
    generator: &str,
    case_dir: &Path,
    o: &SweepOptions,
) -> String {
    let m = &r.manifest;
    let mut md = String::from("# Cardinal evaluation\n\n");
    if r.run.partial {
        md.push_str(&format!(
            "> **PARTIAL RUN** — {} of {} selected case(s) have no record: {}\n\n",
            r.run.missing.len(),
            r.run.requested,
            r.run.missing.join(", ")
        ));
    }
    md.push_str(&format!(
        "- cases: {} of {} selected from `{}`{}\n",
        r.run.reported,
        r.run.requested,
        case_dir.display(),
        match o.sample {
            Some(n) => format!(
                " (stratified sample of {n} by language × case type, seed {})",
                o.seed
            ),
            None => String::new(),
        }
    ));
    md.push_str(&format!("- generator: {generator}\n"));
    md.push_str(&format!(
        "- judge: {}\n",
        m.judge
            .as_ref()
            .map(|j| format!("{} ({})", j.model_id, j.scorer))
            .unwrap_or_else(|| "none (deterministic evaluators only)".into())
    ));
    if let Some(rm) = &m.retrieval {
        md.push_str(&format!(
            "- retrieval: hybrid, k = {}, floor {}, store {}, embedder `{}`{}\n",
            rm.top_k,
            rm.min_similarity,
            rm.store,
            rm.embedder,
            rm.reranker
                .as_ref()
                .map(|x| format!(", reranker `{x}`"))
                .unwrap_or_default()
        ));
    }
    md.push_str(&format!(
        "- data: {} cards (sha256 `{}`), {} cases (sha256 `{}`)\n- strata: {}\n\n",
        m.data.cards,
        &m.data.cards_sha256[..12.min(m.data.cards_sha256.len())],
        m.data.items,
        &m.data.items_sha256[..12.min(m.data.items_sha256.len())],
        r.run
            .strata
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    md.push_str(&cardinal_eval::render_markdown(&r.aggregate));
    if let Some(safety) = &r.safety {
        md.push_str(&format!(
            "\n## Safety policy\n\nCases with a safety class; n and 95 % Wilson intervals. *Refusal recall*: \
             adversarial cases of the refusal classes that were refused; *false refusals*: cases that \
             must be answered that were refused, escalated or sent to no relevant card.\n\n{}",
            safety.markdown()
        ));
    }
    let errs: usize = r.run.judge_errors.values().sum();
    md.push_str(&format!(
        "\n## Judge\n\n- judged cases (answers, not refusals): {}\n- judge errors (no verdict; never scored): {errs}{}\n- {}\n",
        r.run.judged_cases,
        if r.run.judge_errors.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                r.run
                    .judge_errors
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        r.run.guard
    ));
    md.push_str("\n## Gates\n\n");
    if o.gates.is_active() {
        for (key, floor) in o.gates.gates() {
            let f = r.run.gate_failures.iter().find(|f| f.key == key);
            md.push_str(&format!(
                "- `{key}` ≥ {floor}: {}\n",
                f.map(|f| format!("**FAILED** — {}", f.message))
                    .unwrap_or_else(|| "pass".into())
            ));
        }
    } else {
        md.push_str("- no gate is active (floors are off by default)\n");
    }
    if let Some(d) = &r.run.baseline {
        md.push_str(&format!(
            "\n## Baseline (tolerance {})\n\n```\n{}\n```\n",
            o.tolerance,
            d.render_table()
        ));
    }
    md.push_str("\n## Verdict\n\n");
    if r.run.failures.is_empty() {
        md.push_str("- pass\n");
    } else {
        for f in &r.run.failures {
            md.push_str(&format!("- **FAIL**: {f}\n"));
        }
    }
    md
}

/// `cardinal baseline update`: the baseline of a finished, complete run, with its manifest.
pub fn baseline_from_run(run_dir: &Path, note: Option<String>) -> Result<Baseline> {
    let p = run_dir.join("report.json");
    let text = std::fs::read_to_string(&p).map_err(|e| {
        HarnessError::Input(format!(
            "cannot read {} ({e}); run `cardinal eval` into that run directory first",
            p.display()
        ))
    })?;
    let report: SweepReport = serde_json::from_str(&text).map_err(|e| {
        HarnessError::Input(format!(
            "{} is not a sweep report of this version ({e}); re-run `cardinal eval`",
            p.display()
        ))
    })?;
    if report.run.partial {
        return Err(HarnessError::Input(format!(
            "{} describes a partial run ({} case(s) missing); a baseline needs a complete run",
            p.display(),
            report.run.missing.len()
        )));
    }
    // The report must still describe the records on disk.
    let records = crate::rundir::load_records(&run_dir.join("records.jsonl"), |r: &Record| {
        r.scores.case_id.clone()
    })?;
    if records.records.len() != report.run.reported {
        return Err(HarnessError::Input(format!(
            "{} is stale: it reports {} case(s) but records.jsonl holds {}; re-run `cardinal eval`",
            p.display(),
            report.run.reported,
            records.records.len()
        )));
    }
    let k = report
        .manifest
        .retrieval
        .as_ref()
        .map(|r| r.top_k)
        .ok_or_else(|| HarnessError::Input("the run has no retrieval settings".into()))?;
    Ok(Baseline::from_aggregate(
        &report.aggregate,
        BaselineMeta {
            k,
            cases: format!(
                "{} cases (sha256 {})",
                report.manifest.data.items, report.manifest.data.items_sha256
            ),
            note,
            manifest: serde_json::to_value(&report.manifest).ok(),
        },
    ))
}

/// Is this error a usage/input problem or a runtime failure?
pub fn class_of(e: &HarnessError) -> ErrorClass {
    e.class()
}
