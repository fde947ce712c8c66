//! Judge calibration against human labels: the frozen constants and the pure statistics.
//!
//! **Frozen here, in one place** (changing any of them is a visible code change reviewed like
//! any other, never a flag):
//! - the bins: 1–2 low, 3 mid, 4–5 high ([`Bin::of`], shared with the column guard);
//! - the agreement gate: binned agreement ≥ [`AGREEMENT_GATE`] (0.70);
//! - the gated dimensions: [`GATED_DIMENSIONS`] (groundedness, faithfulness).
//!
//! Statistics per (dimension, slice): binned agreement (share of items whose judge bin equals
//! the human bin) with n and a seeded percentile-bootstrap 95 % interval; the 3×3 confusion
//! matrix (rows = human bin, columns = judge bin, order low, mid, high); quadratic-weighted
//! Cohen's κ on the 1–5 scores; and the items where judge and human are furthest apart.

use serde::{Deserialize, Serialize};

use crate::aggregate::Interval;
use crate::guard::Bin;
use crate::rng::SplitMix64;

/// The agreement gate: a gated dimension passes when its binned agreement is at least this.
pub const AGREEMENT_GATE: f64 = 0.70;

/// The dimensions whose agreement is gated.
pub const GATED_DIMENSIONS: [&str; 2] = ["groundedness", "faithfulness"];

/// Bootstrap resamples of the agreement interval.
pub const CALIBRATION_RESAMPLES: usize = 2000;

/// Seed of every calibration random stream.
pub const CALIBRATION_SEED: u64 = 20_261_202;

/// The bins in matrix order.
pub const BINS: [Bin; 3] = [Bin::Low, Bin::Mid, Bin::High];

fn bin_index(score: u8) -> Option<usize> {
    Bin::of(score).and_then(|b| BINS.iter().position(|x| *x == b))
}

/// One item scored by both the human and the judge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    /// Calibration item id.
    pub item_id: String,
    /// 1–5.
    pub human: u8,
    /// 1–5.
    pub judge: u8,
}

/// Agreement statistics of one (dimension, slice).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Items scored by both.
    pub n: usize,
    /// Share of items in the same bin; `None` when n = 0.
    pub agreement: Option<f64>,
    /// Percentile bootstrap interval of the agreement; `None` when n < 2.
    pub ci: Option<Interval>,
    /// Rows: human bin; columns: judge bin (low, mid, high).
    pub confusion: [[usize; 3]; 3],
    /// Quadratic-weighted Cohen's κ on the 1–5 scale; `None` when undefined (n = 0, or no
    /// expected disagreement, e.g. both raters constant).
    pub kappa_quadratic: Option<f64>,
    /// Up to [`WORST_N`] items with the largest |judge − human|, largest first, ties by id.
    pub worst: Vec<Pair>,
}

/// How many disagreements a report lists per (dimension, slice).
pub const WORST_N: usize = 5;

/// Agreement of `pairs`. Scores outside 1..=5 are skipped (they cannot come from a parsed
/// verdict or a validated label). `stream` names the random stream (dimension and slice), so
/// every interval is reproducible on its own.
pub fn agreement(pairs: &[Pair], stream: &str) -> Agreement {
    let pairs: Vec<&Pair> = pairs
        .iter()
        .filter(|p| bin_index(p.human).is_some() && bin_index(p.judge).is_some())
        .collect();
    let n = pairs.len();
    let mut confusion = [[0usize; 3]; 3];
    let mut hits = Vec::with_capacity(n);
    for p in &pairs {
        let (h, j) = (bin_index(p.human), bin_index(p.judge));
        if let (Some(h), Some(j)) = (h, j) {
            confusion[h][j] += 1;
            hits.push(if h == j { 1.0 } else { 0.0 });
        }
    }
    let agreement = (n > 0).then(|| hits.iter().sum::<f64>() / n as f64);
    let ci = bootstrap(&hits, stream);
    let kappa_quadratic = quadratic_kappa(&pairs);
    let mut worst: Vec<Pair> = pairs
        .iter()
        .filter(|p| p.human != p.judge)
        .map(|p| (*p).clone())
        .collect();
    worst.sort_by(|a, b| {
        let da = a.human.abs_diff(a.judge);
        let db = b.human.abs_diff(b.judge);
        db.cmp(&da).then_with(|| a.item_id.cmp(&b.item_id))
    });
    worst.truncate(WORST_N);
    Agreement {
        n,
        agreement,
        ci,
        confusion,
        kappa_quadratic,
        worst,
    }
}

/// Whether an agreement passes the frozen gate (n = 0 fails: nothing was shown).
pub fn passes_gate(a: &Agreement) -> bool {
    a.agreement.is_some_and(|x| x >= AGREEMENT_GATE)
}

fn bootstrap(hits: &[f64], stream: &str) -> Option<Interval> {
    let mut rng = SplitMix64::for_stream(CALIBRATION_SEED, &["calibration", stream]);
    crate::aggregate::bootstrap_ci(hits, CALIBRATION_RESAMPLES, 0.95, &mut rng)
}

/// Quadratic-weighted κ over the 5-point scale: `1 − Σ w·O / Σ w·E` with
/// `w_ij = (i − j)² / 16`, O the observed and E the chance-expected joint counts.
fn quadratic_kappa(pairs: &[&Pair]) -> Option<f64> {
    let n = pairs.len();
    if n == 0 {
        return None;
    }
    let mut observed = [[0f64; 5]; 5];
    let mut rows = [0f64; 5];
    let mut cols = [0f64; 5];
    for p in pairs {
        let (h, j) = (usize::from(p.human) - 1, usize::from(p.judge) - 1);
        observed[h][j] += 1.0;
        rows[h] += 1.0;
        cols[j] += 1.0;
    }
    let (mut num, mut den) = (0.0, 0.0);
    for i in 0..5 {
        for j in 0..5 {
            let w = ((i as f64 - j as f64).powi(2)) / 16.0;
            num += w * observed[i][j];
            den += w * rows[i] * cols[j] / n as f64;
        }
    }
    (den > 0.0).then(|| 1.0 - num / den)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(u8, u8)]) -> Vec<Pair> {
        v.iter()
            .enumerate()
            .map(|(i, &(h, j))| Pair {
                item_id: format!("i{i:02}"),
                human: h,
                judge: j,
            })
            .collect()
    }

    #[test]
    fn frozen_constants() {
        // A change here must be deliberate: these pin the calibration contract.
        assert_eq!(AGREEMENT_GATE, 0.70);
        assert_eq!(GATED_DIMENSIONS, ["groundedness", "faithfulness"]);
        let bins: Vec<Option<usize>> = (0..=6).map(bin_index).collect();
        assert_eq!(
            bins,
            vec![None, Some(0), Some(0), Some(1), Some(2), Some(2), None]
        );
    }

    #[test]
    fn agreement_is_binned_and_the_matrix_counts_every_pair() {
        // Same bin: (1,2), (4,5), (3,3); different: (2,3), (5,1).
        let a = agreement(&pairs(&[(1, 2), (4, 5), (3, 3), (2, 3), (5, 1)]), "t");
        assert_eq!(a.n, 5);
        assert_eq!(a.agreement, Some(0.6));
        assert_eq!(a.confusion, [[1, 1, 0], [0, 1, 0], [1, 0, 1]]);
        assert!(!passes_gate(&a));
        // Largest gap first.
        assert_eq!((a.worst[0].human, a.worst[0].judge), (5, 1));
        assert_eq!(a.worst.len(), 4);
        let ci = a.ci.unwrap();
        assert!(ci.low <= 0.6 && 0.6 <= ci.high && ci.low >= 0.0 && ci.high <= 1.0);
        // Seeded: the same input gives the same interval.
        assert_eq!(
            agreement(&pairs(&[(1, 2), (4, 5), (3, 3), (2, 3), (5, 1)]), "t").ci,
            Some(ci)
        );
    }

    #[test]
    fn gate_boundary_is_inclusive() {
        // 7 of 10 in the same bin: exactly the gate.
        let mut v = vec![(5, 4); 7];
        v.extend([(1, 5), (5, 1), (3, 1)]);
        let a = agreement(&pairs(&v), "t");
        assert_eq!(a.agreement, Some(0.7));
        assert!(passes_gate(&a));
        assert!(!passes_gate(&agreement(&[], "t")));
    }

    #[test]
    fn quadratic_kappa_hand_computed() {
        // Perfect agreement with spread: κ = 1.
        let a = agreement(&pairs(&[(1, 1), (3, 3), (5, 5)]), "t");
        assert!((a.kappa_quadratic.unwrap() - 1.0).abs() < 1e-12);
        // Hand-computed: pairs (1,2), (2,1), (5,5), (4,5).
        // O: w(1,2)=1/16, w(2,1)=1/16, w(4,5)=1/16 -> Σ wO = 3/16.
        // rows h: 1,2,4,5 each 1; cols j: 1:1, 2:1, 5:2. n = 4.
        // Σ w E = Σ_i Σ_j w_ij r_i c_j / 4, computed below by hand:
        // h=1: j=1 0, j=2 1/16*1, j=5 16/16*2 -> 1/16 + 2 = 33/16
        // h=2: j=1 1/16, j=2 0, j=5 9/16*2 -> 1/16 + 18/16 = 19/16
        // h=4: j=1 9/16, j=2 4/16, j=5 1/16*2 -> 15/16
        // h=5: j=1 16/16, j=2 9/16, j=5 0 -> 25/16
        // total = 92/16, / 4 = 23/16. κ = 1 - (3/16)/(23/16) = 20/23.
        let a = agreement(&pairs(&[(1, 2), (2, 1), (5, 5), (4, 5)]), "t");
        assert!((a.kappa_quadratic.unwrap() - 20.0 / 23.0).abs() < 1e-12);
        // Both raters constant: κ undefined.
        assert_eq!(
            agreement(&pairs(&[(4, 4), (4, 4)]), "t").kappa_quadratic,
            None
        );
    }

    #[test]
    fn out_of_range_scores_are_skipped() {
        let a = agreement(&pairs(&[(0, 3), (3, 3), (3, 9)]), "t");
        assert_eq!(a.n, 1);
        assert_eq!(a.agreement, Some(1.0));
        assert_eq!(a.ci, None);
    }
}
