//! `cardinal eval` and `cardinal baseline update`: flags in, the run library's sweep, the
//! terminal table out, the verdict as the exit code.

use std::path::{Path, PathBuf};

use anyhow::Result;
use cardinal_eval::GateConfig;
use cardinal_harness::sweep::{run_sweep, SweepOptions};
use cardinal_harness::{Observer, Settings};

use crate::args::{JudgeArgs, LlmArgs};
use crate::Outcome;

#[derive(Debug, Clone, clap::Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub llm: LlmArgs,
    #[command(flatten)]
    pub judge: JudgeArgs,
    /// Case directory (default: <data>/cases).
    #[arg(long)]
    pub cases: Option<PathBuf>,
    /// Run directory: manifest.json, records.jsonl (resumable), report.md, report.json.
    #[arg(long, default_value = ".cardinal/runs/default")]
    pub run_dir: PathBuf,
    /// Start over: remove the run directory's records, manifest and reports first.
    #[arg(long)]
    pub fresh: bool,
    /// Run N cases stratified by language × case type (every stratum gets at least one when
    /// N allows, the rest in proportion), picked with --seed. The report says so.
    #[arg(long)]
    pub sample: Option<usize>,
    /// Seed of --sample.
    #[arg(long, default_value_t = cardinal_harness::sample::DEFAULT_SAMPLE_SEED)]
    pub seed: u64,
    /// Only the cases of one frozen split: `test` (claims are made on it), `train` (what the
    /// safety policy was fitted on) or `holdout` (a later, independently written batch, never
    /// fitted on). Cases without a split are left out. Default: every case.
    #[arg(long, value_parser = ["train", "test", "holdout"])]
    pub split: Option<String>,
    /// Gate: minimum mean retrieval_recall_at_k over gold-labelled cases (inactive by default).
    #[arg(long)]
    pub min_retrieval_recall: Option<f64>,
    /// Gate: minimum mean retrieval_hit_at_k over gold-labelled cases (inactive by default).
    #[arg(long)]
    pub min_retrieval_hit: Option<f64>,
    /// Compare every aggregate with this committed baseline; a regression beyond --tolerance
    /// fails. A baseline measured under a different manifest is refused.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Allowed drop of any mean (in the metric's direction) before the baseline comparison fails.
    #[arg(long, default_value_t = 0.0)]
    pub tolerance: f64,
    /// Compare with a baseline even when its manifest differs in number-changing fields.
    #[arg(long)]
    pub allow_manifest_mismatch: bool,
    /// Largest share of judged cases with a judge error on a gated dimension (groundedness,
    /// faithfulness) before the run fails (default 0: any judge error fails it).
    #[arg(long, default_value_t = 0.0)]
    pub max_judge_errors: f64,
    /// Write the sweep's qrels and run in TREC format into this directory.
    #[arg(long)]
    pub export_trec: Option<PathBuf>,
    /// Cases run at once. A local model serves one generation at a time, so more than 1 only
    /// helps with an HTTP endpoint.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Exit 1 when the faithfulness column guard alarms (every score high, or every score low).
    #[arg(long)]
    pub strict: bool,
}

pub fn eval(data: &Path, s: &Settings, args: &EvalArgs, obs: &dyn Observer) -> Result<Outcome> {
    let o = SweepOptions {
        data: data.to_path_buf(),
        cases: args.cases.clone(),
        run_dir: args.run_dir.clone(),
        fresh: args.fresh,
        sample: args.sample,
        split: args
            .split
            .as_deref()
            .and_then(cardinal_dataset::Split::parse),
        seed: args.seed,
        concurrency: args.concurrency,
        gates: GateConfig {
            min_retrieval_recall: args.min_retrieval_recall,
            min_retrieval_hit: args.min_retrieval_hit,
        },
        baseline: args.baseline.clone(),
        tolerance: args.tolerance,
        allow_manifest_mismatch: args.allow_manifest_mismatch,
        max_judge_errors: args.max_judge_errors,
        strict: args.strict,
        export_trec: args.export_trec.clone(),
    };
    let out = run_sweep(s, &o, obs)?;
    let r = &out.report;
    match crate::report_html::sweep(data, &args.run_dir, Some(o.gates)) {
        Ok(p) => obs.note(&format!("html: {}", p.display())),
        Err(e) => obs.note(&format!("note: report.html not written: {e:#}")),
    }
    print!("{}", cardinal_eval::render_terminal(&r.aggregate));
    if r.manifest.judge.is_some() {
        let errs: usize = r.run.judge_errors.values().sum();
        obs.note(&format!(
            "judge: {} judged case(s), {errs} judge error(s); {}",
            r.run.judged_cases, r.run.guard
        ));
    }
    if let Some((hits, calls)) = out.cache {
        obs.note(&format!("cache: {hits} hit(s), {calls} model call(s)"));
    }
    obs.note(&format!(
        "report: {}",
        args.run_dir.join("report.md").display()
    ));
    for f in &r.run.failures {
        obs.note(&format!("FAIL: {f}"));
    }
    Ok(if r.run.failures.is_empty() {
        Outcome::Pass
    } else {
        Outcome::GateFailed
    })
}

/// `cardinal baseline update`.
pub fn baseline_update(run_dir: &Path, out: &Path, note: Option<String>) -> Result<Outcome> {
    let b = cardinal_harness::sweep::baseline_from_run(run_dir, note)?;
    b.save(out)?;
    println!("baseline written to {}", out.display());
    Ok(Outcome::Pass)
}
