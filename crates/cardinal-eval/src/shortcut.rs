//! Shortcut baselines: how well a trivial predictor of the label bin does, so that an
//! agreement figure is never read without them.
//!
//! - the **majority bin** (the most frequent bin of the fitting items);
//! - the **best one-feature threshold rule** over surface features of the answer: two cut
//!   points split the feature's range into three intervals, each interval predicts one bin;
//!   the feature, cut points and bins are chosen to maximise agreement on the fitting items.
//!
//! Both are *fitted on one set of items (dev) and scored on another (test)*; a caller that fits
//! and scores on the same items gets an optimistic figure and should say so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use cardinal_kb::text::{citation_markers, sentences};

use crate::guard::Bin;

/// Surface features of an answer.
pub const FEATURES: [&str; 6] = [
    "length",
    "sentences",
    "citations",
    "cited_fraction",
    "last_sentence_cited",
    "digits",
];

fn strip_markers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find(']') {
            Some(close) if citation_markers(&rest[open..open + close + 2]) == 1 => {
                rest = &after[close + 1..];
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The surface features of an answer, in [`FEATURES`] order.
pub fn features(answer: &str) -> [f64; 6] {
    let ss = sentences(answer);
    let cited: Vec<bool> = ss.iter().map(|s| citation_markers(s) > 0).collect();
    let n = ss.len().max(1) as f64;
    [
        answer.chars().count() as f64,
        ss.len() as f64,
        citation_markers(answer) as f64,
        cited.iter().filter(|c| **c).count() as f64 / n,
        if cited.last().copied().unwrap_or(false) {
            1.0
        } else {
            0.0
        },
        strip_markers(answer)
            .chars()
            .filter(char::is_ascii_digit)
            .count() as f64,
    ]
}

/// A fitted one-feature rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdRule {
    pub feature: String,
    /// value < low → bins[0]; low ≤ value < high → bins[1]; else bins[2].
    pub low: f64,
    pub high: f64,
    pub bins: [Bin; 3],
}

impl ThresholdRule {
    pub fn predict(&self, x: f64) -> Bin {
        if x < self.low {
            self.bins[0]
        } else if x < self.high {
            self.bins[1]
        } else {
            self.bins[2]
        }
    }
}

const ALL_BINS: [Bin; 3] = [Bin::Low, Bin::Mid, Bin::High];

fn bin_idx(b: Bin) -> usize {
    match b {
        Bin::Low => 0,
        Bin::Mid => 1,
        Bin::High => 2,
    }
}

/// The most frequent bin (ties: low < mid < high order).
pub fn majority(ys: &[Bin]) -> Option<Bin> {
    let mut c = [0usize; 3];
    for y in ys {
        c[bin_idx(*y)] += 1;
    }
    if ys.is_empty() {
        return None;
    }
    let best = (0..3).max_by(|&a, &b| c[a].cmp(&c[b]).then(b.cmp(&a)))?;
    Some(ALL_BINS[best])
}

/// Fit the best two-cut rule on one feature's values `xs` with bins `ys`.
pub fn fit_feature(name: &str, xs: &[f64], ys: &[Bin]) -> Option<(ThresholdRule, usize)> {
    if xs.is_empty() {
        return None;
    }
    let mut vals: Vec<f64> = xs.to_vec();
    vals.sort_by(f64::total_cmp);
    vals.dedup();
    let mut cuts = vec![f64::NEG_INFINITY];
    cuts.extend(vals.windows(2).map(|w| (w[0] + w[1]) / 2.0));
    cuts.push(f64::INFINITY);
    // Order items by value once; count bins per interval via prefix sums over sorted cuts.
    let mut best: Option<(ThresholdRule, usize)> = None;
    for (i, &lo) in cuts.iter().enumerate() {
        for &hi in &cuts[i..] {
            let mut counts = [[0usize; 3]; 3];
            for (x, y) in xs.iter().zip(ys) {
                let g = if *x < lo {
                    0
                } else if *x < hi {
                    1
                } else {
                    2
                };
                counts[g][bin_idx(*y)] += 1;
            }
            let mut bins = [Bin::Mid; 3];
            let mut hits = 0;
            for g in 0..3 {
                let k = (0..3)
                    .max_by(|&a, &b| counts[g][a].cmp(&counts[g][b]).then(b.cmp(&a)))
                    .unwrap_or(1);
                bins[g] = ALL_BINS[k];
                hits += counts[g][k];
            }
            if best.as_ref().is_none_or(|(_, h)| hits > *h) {
                best = Some((
                    ThresholdRule {
                        feature: name.to_string(),
                        low: lo,
                        high: hi,
                        bins,
                    },
                    hits,
                ));
            }
        }
    }
    best
}

/// The shortcut baselines of one (dimension, slice).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shortcuts {
    /// Items fitted on and scored on.
    pub n_fit: usize,
    pub n_score: usize,
    /// Majority bin of the fitting items, and its agreement on the scored items.
    pub majority_bin: Option<Bin>,
    pub majority_agreement: Option<f64>,
    /// Per feature: the rule fitted on the fitting items, and its agreement on the scored items.
    pub rules: BTreeMap<String, (ThresholdRule, f64)>,
    /// The feature whose rule fitted best (on the fitting items), and its scored agreement.
    pub best_feature: Option<String>,
    pub best_agreement: Option<f64>,
}

impl Shortcuts {
    /// How much the best one-feature rule beats the majority bin on the scored items.
    pub fn best_margin(&self) -> Option<f64> {
        Some(self.best_agreement? - self.majority_agreement?)
    }

    /// The largest margin of any feature's rule over the majority bin on the scored items.
    pub fn max_margin(&self) -> Option<f64> {
        let m = self.majority_agreement?;
        self.rules
            .values()
            .map(|(_, a)| a - m)
            .max_by(f64::total_cmp)
    }
}

/// Fit the majority bin and the one-feature rules on `fit` (answers with their human bins) and
/// score them on `score`.
pub fn shortcuts(fit: &[(&str, Bin)], score: &[(&str, Bin)]) -> Shortcuts {
    let fx: Vec<[f64; 6]> = fit.iter().map(|(a, _)| features(a)).collect();
    let fy: Vec<Bin> = fit.iter().map(|(_, b)| *b).collect();
    let sx: Vec<[f64; 6]> = score.iter().map(|(a, _)| features(a)).collect();
    let sy: Vec<Bin> = score.iter().map(|(_, b)| *b).collect();
    let agree = |pred: &dyn Fn(usize) -> Bin| -> Option<f64> {
        (!sy.is_empty())
            .then(|| (0..sy.len()).filter(|&i| pred(i) == sy[i]).count() as f64 / sy.len() as f64)
    };
    let majority_bin = majority(&fy);
    let majority_agreement = majority_bin.and_then(|m| agree(&|_| m));
    let mut rules = BTreeMap::new();
    let mut best: Option<(String, usize, f64)> = None;
    for (j, name) in FEATURES.iter().enumerate() {
        let xs: Vec<f64> = fx.iter().map(|f| f[j]).collect();
        if let Some((rule, hits)) = fit_feature(name, &xs, &fy) {
            let a = agree(&|i| rule.predict(sx[i][j])).unwrap_or(0.0);
            if best.as_ref().is_none_or(|(_, h, _)| hits > *h) {
                best = Some((name.to_string(), hits, a));
            }
            rules.insert(name.to_string(), (rule, a));
        }
    }
    Shortcuts {
        n_fit: fit.len(),
        n_score: score.len(),
        majority_bin,
        majority_agreement,
        rules,
        best_feature: best.as_ref().map(|b| b.0.clone()),
        best_agreement: best.map(|b| b.2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_of_an_answer() {
        let f = features("Call 555-0142 [a.en]. It is free.");
        assert_eq!(f[1], 2.0); // sentences
        assert_eq!(f[2], 1.0); // citations
        assert_eq!(f[3], 0.5); // cited fraction
        assert_eq!(f[4], 0.0); // last sentence cited
        assert_eq!(f[5], 7.0); // digits, markers excluded
    }

    #[test]
    fn a_length_shortcut_is_found_and_scored_out_of_sample() {
        // Short answers are low, long ones high: a leaky corpus.
        let mk = |n: usize, b: Bin| ("x".repeat(n), b);
        let fit: Vec<(String, Bin)> = (0..30)
            .map(|i| {
                if i % 2 == 0 {
                    mk(10 + i, Bin::Low)
                } else {
                    mk(200 + i, Bin::High)
                }
            })
            .collect();
        let score: Vec<(String, Bin)> = (0..10)
            .map(|i| {
                if i % 2 == 0 {
                    mk(15 + i, Bin::Low)
                } else {
                    mk(300 + i, Bin::High)
                }
            })
            .collect();
        let f: Vec<(&str, Bin)> = fit.iter().map(|(a, b)| (a.as_str(), *b)).collect();
        let s: Vec<(&str, Bin)> = score.iter().map(|(a, b)| (a.as_str(), *b)).collect();
        let sc = shortcuts(&f, &s);
        assert_eq!(sc.rules["length"].1, 1.0);
        assert_eq!(sc.majority_agreement, Some(0.5));
        assert!(sc.max_margin().unwrap() > 0.49);
    }

    #[test]
    fn no_shortcut_in_random_labels() {
        // Bins independent of length: the fitted rule does no better than chance out of sample.
        let bins = [Bin::Low, Bin::Mid, Bin::High];
        let mk = |i: usize| ("y".repeat(20 + (i * 37) % 400), bins[(i * 7 + i / 3) % 3]);
        let fit: Vec<(String, Bin)> = (0..60).map(mk).collect();
        let score: Vec<(String, Bin)> = (60..120).map(mk).collect();
        let f: Vec<(&str, Bin)> = fit.iter().map(|(a, b)| (a.as_str(), *b)).collect();
        let s: Vec<(&str, Bin)> = score.iter().map(|(a, b)| (a.as_str(), *b)).collect();
        let sc = shortcuts(&f, &s);
        assert!(sc.rules["length"].1 < 0.6, "{:?}", sc.rules["length"]);
    }
}
