//! Self-contained HTML reports of Cardinal's evaluation sweeps and judge calibrations.
//!
//! One `report.html` per run: inline CSS, inline SVG plots (drawn by plotters' SVG backend),
//! for the sweep page a little inline script (case filters, opening a case); no network fetch,
//! no CDN. The HTML comes from minijinja templates embedded in the crate, with auto-escaping on
//! everything: card text, questions, answers and judge rationales are untrusted input and
//! render as text.
//!
//! # API
//!
//! ```text
//! // Sweep: RUN_DIR holds report.json (required, cardinal_eval::Aggregate), records.jsonl
//! // (one record per case; optional) and manifest.json (any JSON; optional).
//! render_sweep(run_dir) -> Result<String>
//! render_sweep_with(run_dir, &SweepOptions { card_texts, baseline, gates, title }) -> Result<String>
//! write_sweep(run_dir, &SweepOptions) -> Result<PathBuf>          // RUN_DIR/report.html
//!
//! // Calibration: DIR holds calibration.json (required) and judge-scores.json (optional).
//! render_calibration(dir) -> Result<String>
//! render_calibration_with(dir, &CalibrationOptions { labels_dir, title }) -> Result<String>
//! write_calibration(dir, &CalibrationOptions) -> Result<PathBuf>  // DIR/report.html
//! ```
//!
//! Every option is optional ([`SweepOptions::default`], [`CalibrationOptions::default`]):
//! - [`SweepOptions::card_texts`]: card id → text (pass the knowledge base) so the answer's
//!   `[card-id]` citations and the retrieved cards link to the card text;
//! - [`SweepOptions::baseline`]: a [`cardinal_eval::BaselineDiff`] — deltas per slice and key,
//!   baseline means drawn on the bars;
//! - [`SweepOptions::gates`]: the [`cardinal_eval::GateConfig`] the run used — re-checked on
//!   the aggregate, failures shown;
//! - [`CalibrationOptions::labels_dir`]: the labelled corpus (`data/calibration/`) — human
//!   rationales and the judge-vs-human scatter.
//!
//! Inputs are read leniently where they are expected to grow: a record is read through a view
//! that ignores unknown fields and defaults every optional one; a judge outcome, a manifest,
//! and statistics a newer `calibration.json` adds (shortcut baselines, a human ceiling) are
//! shown generically. A torn last line of `records.jsonl` (an interrupted write) is skipped
//! with a visible note; any other malformed input is a [`ReportError`].
//!
//! # What the pages show
//!
//! **Sweep**: the manifest; gates and which failed; refusals (per language and case type,
//! wrong refusals) and judge errors (per key and slice) counted; per metric a bar chart over
//! the slices (overall, languages, case types, gold-labelled) with 95 % CI whiskers and n;
//! language differences with the permutation test's reading; the baseline comparison; the
//! per-case table, filterable by language, case type, failed metric (or judge error) and
//! refusal, each row opening the case: question, answer with linked citations, cited /
//! dropped / gold cards, retrieved cards with ranks and scores, verdicts, and every judge
//! dimension with its status, score, rationale, checks and raw replies; the card texts.
//!
//! **Calibration**: the gate verdicts; per dimension an agreement chart (slices, CI, n, the
//! gate, reference agreements); per dimension × slice the 3×3 confusion heatmap, the jittered
//! judge-vs-human scatter, agreement and κ against the gate, and the largest disagreements with
//! the human and judge rationales; the ADR-0029 header-only control; any further fields.

mod calibration;
mod error;
mod html;
mod json;
mod plots;
mod sweep;

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

pub use calibration::{CalibrationOptions, CALIBRATION_JSON, JUDGE_SCORES_JSON};
pub use error::{ReportError, Result};
pub use sweep::{SweepOptions, MANIFEST_JSON, RECORDS_JSONL, REPORT_JSON};

/// The file both pages are written to, in the directory they were rendered from.
pub const REPORT_HTML: &str = "report.html";

/// The sweep page of `run_dir`, with no extra input.
pub fn render_sweep(run_dir: impl AsRef<Path>) -> Result<String> {
    render_sweep_with(run_dir, &SweepOptions::default())
}

/// The sweep page of `run_dir`.
pub fn render_sweep_with(run_dir: impl AsRef<Path>, opts: &SweepOptions) -> Result<String> {
    sweep::render(run_dir.as_ref(), opts)
}

/// Renders the sweep page and writes it to `run_dir/report.html` (atomically); returns the path.
pub fn write_sweep(run_dir: impl AsRef<Path>, opts: &SweepOptions) -> Result<PathBuf> {
    let run_dir = run_dir.as_ref();
    let html = render_sweep_with(run_dir, opts)?;
    write_atomic(&run_dir.join(REPORT_HTML), &html)
}

/// The calibration page of `dir`, with no extra input.
pub fn render_calibration(dir: impl AsRef<Path>) -> Result<String> {
    render_calibration_with(dir, &CalibrationOptions::default())
}

/// The calibration page of `dir`.
pub fn render_calibration_with(dir: impl AsRef<Path>, opts: &CalibrationOptions) -> Result<String> {
    calibration::render(dir.as_ref(), opts)
}

/// Renders the calibration page and writes it to `dir/report.html` (atomically); returns the
/// path.
pub fn write_calibration(dir: impl AsRef<Path>, opts: &CalibrationOptions) -> Result<PathBuf> {
    let dir = dir.as_ref();
    let html = render_calibration_with(dir, opts)?;
    write_atomic(&dir.join(REPORT_HTML), &html)
}

/// Writes to a temporary file beside `path`, then renames it over `path`.
fn write_atomic(path: &Path, text: &str) -> Result<PathBuf> {
    let tmp = path.with_file_name(format!(".{REPORT_HTML}.tmp-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    };
    write().map_err(|source| {
        let _ = fs::remove_file(&tmp);
        ReportError::Io {
            path: path.to_path_buf(),
            source,
        }
    })?;
    Ok(path.to_path_buf())
}
