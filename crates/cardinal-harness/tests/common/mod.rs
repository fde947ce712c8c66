//! Helpers shared by the fit tests: deterministic pseudo-random features from an item id, the
//! bundled calibration corpus, and a split with every label turned to the other end of the scale.

use std::path::Path;

use cardinal_dataset::calibration::{load_calibration_dir, LoadedItem, Split};

/// A deterministic number in [0, 1) from an item id and a salt.
pub fn unit(id: &str, salt: u64) -> f64 {
    let h = cardinal_digest::sha256_hex(format!("{salt}:{id}"));
    u64::from_str_radix(&h[..12], 16).unwrap() as f64 / (1u64 << 48) as f64
}

/// The bundled calibration corpus (`data/calibration`).
pub fn corpus() -> Vec<LoadedItem> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/calibration");
    load_calibration_dir(&dir).unwrap().0
}

/// `items` with every label (first and adjudicated) of `split` turned s → 6 − s.
pub fn flipped(items: &[LoadedItem], split: Split) -> Vec<LoadedItem> {
    let mut out = items.to_vec();
    for li in out.iter_mut().filter(|li| li.item.split == split) {
        let l = &mut li.item.labels;
        l.groundedness.score = 6 - l.groundedness.score;
        l.faithfulness.score = 6 - l.faithfulness.score;
        if let Some(a) = li.item.adjudicated.as_mut() {
            for adj in [a.groundedness.as_mut(), a.faithfulness.as_mut()]
                .into_iter()
                .flatten()
            {
                adj.score = 6 - adj.score;
            }
        }
    }
    out
}
