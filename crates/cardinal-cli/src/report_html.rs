//! report.html for sweeps and calibrations (`cardinal-report`), with the KB's card texts and the
//! labelled corpus for the rationales.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use cardinal_harness::sweep::SweepReport;

/// Render `<run_dir>/report.html` of a sweep.
pub fn sweep(
    data: &Path,
    run_dir: &Path,
    gates: Option<cardinal_eval::GateConfig>,
) -> Result<PathBuf> {
    let mut opts = cardinal_report::SweepOptions {
        gates,
        ..Default::default()
    };
    if let Ok(kb) = cardinal_kb::KnowledgeBase::load(&data.join("kb")) {
        opts.card_texts = kb
            .cards
            .iter()
            .map(|cf| (cf.card.id.clone(), cf.card.full_text().to_string()))
            .collect::<BTreeMap<_, _>>();
    }
    if let Ok(text) = std::fs::read_to_string(run_dir.join("report.json")) {
        if let Ok(r) = serde_json::from_str::<SweepReport>(&text) {
            opts.baseline = r.run.baseline.clone();
        }
    }
    Ok(cardinal_report::write_sweep(run_dir, &opts)?)
}

/// Render `<dir>/report.html` of a calibration.
pub fn calibration(data: &Path, dir: &Path) -> Result<PathBuf> {
    let opts = cardinal_report::CalibrationOptions {
        labels_dir: Some(data.join("calibration")),
        ..Default::default()
    };
    Ok(cardinal_report::write_calibration(dir, &opts)?)
}
