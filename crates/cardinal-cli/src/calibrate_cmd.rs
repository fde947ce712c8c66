//! `cardinal calibrate`: the judge against the labelled corpus in `data/calibration/` — fitted
//! on the dev split, reported on the test split (see `cardinal_harness::calibration`).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Result;
use cardinal_dataset::calibration::{load_calibration_dir, LoadedItem, Split};
use cardinal_harness::calibration::{self as cal, ScoresFile, SCORES_SCHEMA_VERSION};
use cardinal_harness::scorer::{CaseScorer, CheckFraming, ChecksScorer, ProbeScorer};
use cardinal_harness::{HarnessError, Observer};
use cardinal_kb::KnowledgeBase;

use crate::args::{LlmArgs, RetrievalArgs};
use crate::Outcome;

#[derive(Debug, Clone, clap::Args)]
pub struct CalibrateArgs {
    /// The judge model (`--llm`: local = Qwen2.5-Coder-1.5B, default; local-small; openai) and
    /// its options.
    #[command(flatten)]
    pub llm: LlmArgs,
    /// Scorer: checks-v2 (the checks plus the model's support likelihood and surface evidence,
    /// combined by weights fitted on dev; default with an in-process model), checks-v1 (yes/no
    /// checks read from token probabilities; default with --llm openai, whose endpoint cannot
    /// score a given reply's tokens), rubric-v1 (the holistic 1–5 rubric) or probe-v1 (a
    /// linear probe on the in-process model's hidden state, fitted on dev by --fit).
    #[arg(long, value_parser = ["checks-v2", "checks-v1", "rubric-v1", "probe-v1"])]
    pub scorer: Option<String>,
    /// Which split to judge: test (default: claims are made on test), dev (what --fit reads)
    /// or all.
    #[arg(long, value_parser = ["dev", "test", "all"], default_value = "test")]
    pub split: String,
    /// Judge N items of the split, stratified by language × category (a quick look; the
    /// report says so).
    #[arg(long)]
    pub sample: Option<usize>,
    /// Directory of the labelled corpus (default: <data>/calibration).
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Output directory: judge-scores.json, calibration.md, calibration.json.
    #[arg(long, default_value = ".cardinal/calibration")]
    pub out: PathBuf,
    /// Do not run the judge: report from this judge-scores file (refused if the labels changed
    /// since it was written).
    #[arg(long)]
    pub from_scores: Option<PathBuf>,
    /// Fit the scorer's calibration on the dev split and write it (needs --split dev, or
    /// --from-scores of a dev run): checks-v1/v2 content-free correction, cut points and
    /// weights; probe-v1 the linear probe and its cut points (the dev report then shows the
    /// probe's in-sample verdicts).
    #[arg(long)]
    pub fit: bool,
    /// Where --fit writes (default: <data>/judge/<scorer>.<model>.json), and which calibration
    /// the checks scorer uses otherwise (default: that file when it exists).
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    /// With --from-scores: score the stored check probabilities (and checks-v2 signals) again
    /// under --calibration (default: the committed calibration of the scores' scorer and model)
    /// instead of reporting the verdicts as stored. No model runs.
    #[arg(long)]
    pub rescore: bool,
    /// Skip the ADR-0029 header-only control.
    #[arg(long)]
    pub no_control: bool,
    /// Print the corpus check (counts, spreads, shortcut baselines, split, second labels,
    /// inter-annotator agreement) and exit (1 when it finds problems).
    #[arg(long)]
    pub balance: bool,
    /// Print the balance as JSON (with --balance).
    #[arg(long)]
    pub json: bool,
}

fn input(msg: String) -> anyhow::Error {
    anyhow::Error::new(HarnessError::Input(msg))
}

/// Load and validate the corpus like `cardinal data check` (file:line on every problem).
pub(crate) fn load(data: &Path, dir: &Path) -> Result<(KnowledgeBase, Vec<LoadedItem>)> {
    let kb = KnowledgeBase::load(&data.join("kb"))?;
    let (cases, case_diags) = cardinal_dataset::load_case_dir(&data.join("cases"))?;
    let (items, mut diags) = load_calibration_dir(dir)?;
    diags.extend(case_diags);
    diags.extend(cardinal_dataset::calibration::check_calibration(
        &kb, &cases, &items,
    ));
    if !diags.is_empty() {
        return Err(input(format!(
            "the calibration corpus has problems (the same check as `cardinal data check`):\n{diags}"
        )));
    }
    if items.is_empty() {
        return Err(input(format!("no calibration items in {}", dir.display())));
    }
    Ok((kb, items))
}

pub fn calibrate(data: &Path, args: &CalibrateArgs, obs: &dyn Observer) -> Result<Outcome> {
    let dir = args
        .labels
        .clone()
        .unwrap_or_else(|| data.join("calibration"));
    if args.rescore && args.from_scores.is_none() {
        return Err(input("--rescore needs --from-scores".into()));
    }
    let (kb, items) = load(data, &dir)?;
    if args.balance {
        let r = cardinal_harness::corpus::check(&kb, &items);
        if args.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            print!("{}", cardinal_harness::corpus::render(&r));
        }
        return Ok(if r.problems.is_empty() {
            Outcome::Pass
        } else {
            Outcome::GateFailed
        });
    }
    let now = cal::labels_hashes(&dir)?;
    let scores = match &args.from_scores {
        Some(path) => {
            let text = fs::read_to_string(path)
                .map_err(|e| input(format!("cannot read {}: {e}", path.display())))?;
            let file: ScoresFile = serde_json::from_str(&text).map_err(|e| {
                input(format!(
                    "{}:{}: not a judge-scores file of schema {SCORES_SCHEMA_VERSION}: {e}",
                    path.display(),
                    e.line()
                ))
            })?;
            if file.schema_version != SCORES_SCHEMA_VERSION {
                return Err(input(format!(
                    "{}: schema_version {} (this cardinal reads {SCORES_SCHEMA_VERSION})",
                    path.display(),
                    file.schema_version
                )));
            }
            cal::check_anchor(&file.labels, &now).map_err(|e| {
                anyhow::Error::new(e).context(format!("{} cannot be compared", path.display()))
            })?;
            file
        }
        None => judge(data, &kb, &items, &now, args, obs)?,
    };
    let mut scores = scores;
    if args.rescore {
        if !cardinal_judge::checks::is_fitted_scorer(&scores.scorer) {
            return Err(input(format!(
                "--rescore re-scores the checks and probe scorers only (the scores are {})",
                scores.scorer
            )));
        }
        let path = match &args.calibration {
            Some(p) => p.clone(),
            None => data.join("judge").join(format!(
                "{}.{}.json",
                scores.scorer,
                model_file_name(args.llm.llm.as_deref(), &scores.judge_model)
            )),
        };
        let c =
            cardinal_harness::scorer::load_calibration(&path, &scores.scorer, &scores.judge_model)?;
        cal::rescore(&mut scores, &c);
        obs.note(&format!("re-scored under {}", path.display()));
    }
    fs::create_dir_all(&args.out)
        .map_err(|e| anyhow::Error::new(HarnessError::io("creating", &args.out)(e)))?;
    let mut refitted = false;
    if args.fit {
        let c = fit(data, &items, &scores, &now, args, obs)?;
        // The probe has no verdict before its fit: report the dev items under it (in-sample).
        if scores.scorer == cardinal_judge::probe::SCORER {
            cal::rescore(&mut scores, &c);
            refitted = true;
        }
    }
    if args.from_scores.is_none() || args.rescore || refitted {
        let path = args.out.join("judge-scores.json");
        cardinal_harness::rundir::write_atomic(
            &path,
            serde_json::to_string_pretty(&scores)?.as_bytes(),
        )?;
        obs.note(&format!("judge scores: {}", path.display()));
    }
    let report = cal::report(&items, &scores)?;
    cardinal_harness::rundir::write_atomic(
        &args.out.join("calibration.md"),
        cal::render_markdown(&report).as_bytes(),
    )?;
    cardinal_harness::rundir::write_atomic(
        &args.out.join("calibration.json"),
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )?;
    print!("{}", cal::render_terminal(&report));
    match crate::report_html::calibration(data, &args.out) {
        Ok(p) => obs.note(&format!("html: {}", p.display())),
        Err(e) => obs.note(&format!("note: report.html not written: {e:#}")),
    }
    obs.note(&format!(
        "report: {}",
        args.out.join("calibration.md").display()
    ));
    if report.split != "test" {
        obs.note(&format!(
            "note: these figures are on the {} split; claims are made on test",
            report.split
        ));
    }
    let failed: Vec<&cal::GateRow> = report.gate.iter().filter(|g| !g.pass).collect();
    for g in &failed {
        obs.note(&format!(
            "calibration gate failed: {} / {} binned agreement {} < {} (n = {})",
            g.dimension,
            g.slice,
            g.agreement
                .map(|a| format!("{a:.3}"))
                .unwrap_or_else(|| "n/a".into()),
            g.threshold,
            g.n
        ));
    }
    Ok(if failed.is_empty() {
        Outcome::Pass
    } else {
        Outcome::GateFailed
    })
}

fn split_of(s: &str) -> Option<Split> {
    match s {
        "dev" => Some(Split::Dev),
        "test" => Some(Split::Test),
        _ => None,
    }
}

fn judge(
    data: &Path,
    kb: &KnowledgeBase,
    items: &[LoadedItem],
    labels: &[cal::LabelsHash],
    args: &CalibrateArgs,
    obs: &dyn Observer,
) -> Result<ScoresFile> {
    let mut s = crate::args::settings(&RetrievalArgs::default(), Some(&args.llm), None)?;
    s.judge.backend = match s.llm.backend {
        cardinal_harness::settings::Backend::Extractive => {
            return Err(input(
                "the judge needs a model: --llm local, local-small or openai (not extractive)"
                    .into(),
            ))
        }
        b => Some(b),
    };
    s.judge.url = s.llm.url.clone();
    s.judge.model = s.llm.model.clone();
    let scorer_name = args
        .scorer
        .clone()
        .unwrap_or_else(|| cardinal_harness::settings::default_scorer(s.judge.backend).to_string());
    s.judge.scorer = scorer_name.clone();
    s.judge.calibration = if args.fit {
        None
    } else {
        args.calibration.clone()
    };
    let mut selected = cal::select_split(items, split_of(&args.split));
    if let Some(n) = args.sample {
        let strata: Vec<String> = selected
            .iter()
            .map(|li| format!("{}/{:?}", li.item.lang.tag(), li.item.category))
            .collect();
        let picked = cardinal_harness::sample::stratified(
            strata
                .iter()
                .cloned()
                .zip(selected.iter().map(|li| li.item.id.as_str())),
            n,
            cardinal_harness::sample::DEFAULT_SAMPLE_SEED,
        );
        selected = picked.into_iter().map(|i| selected[i].clone()).collect();
    }
    let (scores, content_free, calibration) = if scorer_name == cardinal_judge::probe::SCORER {
        let (probe, calibration) = judge_and_calibration(data, &s, args, &scorer_name, obs)?;
        if calibration.probe.is_none() && !args.fit {
            obs.note("note: probe-v1 has no fitted probe for this model: every verdict is a judge error until `--split dev --fit` has run");
        }
        let scorer = ProbeScorer::new(probe.clone(), calibration.clone()).keeping_features();
        let control = (!args.no_control).then(|| {
            ProbeScorer::new(probe, calibration.clone())
                .keeping_features()
                .with_framing(CheckFraming::HeaderOnly)
        });
        let v = cal::run_scores(
            kb,
            &selected,
            &scorer,
            control.as_ref().map(|c| c as &dyn CaseScorer),
            obs,
        );
        (v, None, Some(calibration))
    } else if scorer_name == "rubric-v1" {
        let model = cardinal_harness::models::judge_model(&s, None, obs)?
            .ok_or_else(|| input("no judge model".into()))?;
        let scorer = cardinal_harness::scorer::RubricScorer::new(
            model as std::sync::Arc<dyn cardinal_llm::ChatModel>,
        )
        .with_dimensions(&[
            cardinal_judge::Dimension::Groundedness,
            cardinal_judge::Dimension::Faithfulness,
        ]);
        let v = cal::run_scores(kb, &selected, &scorer, None, obs);
        (v, None, None)
    } else {
        let (probe, calibration) = judge_and_calibration(data, &s, args, &scorer_name, obs)?;
        let content_free = cal::measure_content_free(&probe)?;
        // Every check is asked, also those the calibration gives no weight: the report scores
        // each variant (checks only, every dev-fitted candidate) from the same checks.
        let scorer = ChecksScorer::named(&scorer_name, probe.clone(), calibration.clone())
            .without_hallucination()
            .with_every_check();
        let control = (!args.no_control).then(|| {
            ChecksScorer::named(&scorer_name, probe, calibration.clone())
                .without_hallucination()
                .with_every_check()
                .with_framing(CheckFraming::HeaderOnly)
        });
        let v = cal::run_scores(
            kb,
            &selected,
            &scorer,
            control.as_ref().map(|c| c as &dyn CaseScorer),
            obs,
        );
        (v, Some(content_free), Some(calibration))
    };
    let model_id = match (&calibration, scores.first()) {
        (Some(c), _) => c.model_id.clone(),
        _ => scores
            .iter()
            .flat_map(|s| s.verdicts.values())
            .find_map(|v| match v {
                cardinal_harness::scorer::Verdict::Scored { detail, .. } => detail
                    .pointer("/calls/0/model")
                    .and_then(|m| m.as_str())
                    .map(str::to_string),
                _ => None,
            })
            .unwrap_or_else(|| s.llm.backend.name().to_string()),
    };
    Ok(ScoresFile {
        schema_version: SCORES_SCHEMA_VERSION,
        scorer: scorer_name.clone(),
        judge_model: model_id,
        labels: labels.to_vec(),
        split: args.split.clone(),
        sample: args.sample,
        content_free,
        calibration,
        items: scores,
    })
}

/// The in-process (or endpoint) judge of a fitted scorer and the calibration it starts from:
/// the committed one (or --calibration), none with --fit (which starts from no fit and leaves
/// `s.judge.calibration` unset: it names the output).
fn judge_and_calibration(
    data: &Path,
    s: &cardinal_harness::Settings,
    args: &CalibrateArgs,
    scorer_name: &str,
    obs: &dyn Observer,
) -> Result<(
    std::sync::Arc<dyn cardinal_llm::YesNoModel>,
    cardinal_judge::checks::Calibration,
)> {
    let probe = cardinal_harness::models::judge_probe(s, obs)?
        .ok_or_else(|| input("no judge model".into()))?;
    let committed = if args.fit {
        None
    } else {
        cardinal_harness::scorer::committed_calibration(data, s, &probe.id())?
    };
    let calibration = committed
        .unwrap_or_else(|| cardinal_harness::scorer::uncalibrated(scorer_name, &probe.id()));
    Ok((probe, calibration))
}

fn fit(
    data: &Path,
    items: &[LoadedItem],
    scores: &ScoresFile,
    labels: &[cal::LabelsHash],
    args: &CalibrateArgs,
    obs: &dyn Observer,
) -> Result<cardinal_judge::checks::Calibration> {
    if !cardinal_judge::checks::is_fitted_scorer(&scores.scorer) {
        return Err(input(
            "--fit fits the checks and probe scorers only (checks-v1, checks-v2, probe-v1)".into(),
        ));
    }
    let dev = cal::DevSplit::from_items(items);
    let fitted_on = labels
        .iter()
        .map(|h| (h.file.clone(), h.sha256.clone()))
        .collect();
    let c = cal::fit(&dev, scores, scores.content_free.clone(), fitted_on)?;
    let path = match &args.calibration {
        Some(p) => p.clone(),
        None => {
            let name = model_file_name(args.llm.llm.as_deref(), &c.model_id);
            data.join("judge")
                .join(format!("{}.{name}.json", scores.scorer))
        }
    };
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| anyhow::Error::new(HarnessError::io("creating", parent)(e)))?;
    }
    cardinal_harness::rundir::write_atomic(&path, serde_json::to_string_pretty(&c)?.as_bytes())?;
    // Items with full-card checks in the scores (a --sample run judges fewer than the split).
    let judged: std::collections::BTreeSet<&str> = scores
        .items
        .iter()
        .filter(|s| (s.checks.is_some() || s.probe.is_some()) && dev.contains(&s.item_id))
        .map(|s| s.item_id.as_str())
        .collect();
    obs.note(&format!(
        "fitted on {} judged dev item(s) of {}: {} (content-free correction: {})",
        judged.len(),
        dev.len(),
        path.display(),
        if c.content_free.is_some() {
            "yes"
        } else {
            "no"
        }
    ));
    Ok(c)
}

/// The name the fitted calibration file carries: the registry name of the local judge model
/// (`--llm local` → qwen2.5-coder-1.5b), else a file-name-safe form of the model id.
fn model_file_name(llm: Option<&str>, model_id: &str) -> String {
    let backend = cardinal_harness::settings::Backend::parse(llm.unwrap_or("local"));
    if let Some(name) = backend.and_then(|b| b.local_model()) {
        return name.to_string();
    }
    model_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
