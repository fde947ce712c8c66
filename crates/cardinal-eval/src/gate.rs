//! Absolute floors on the overall retrieval means (ADR-0023 (D)): published, inactive by default.
//!
//! A gate compares the **overall** mean of its key (not a slice, not a CI bound) with its floor:
//! `mean < floor` fails. A gate on a key that no case carries (n = 0: no gold-labelled case, or
//! the retrieval evaluator did not run) is a failure with its own message, never a silent pass.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::aggregate::Aggregate;
use crate::error::{EvalError, Result};
use crate::retrieval::{HIT_KEY, RECALL_KEY};

/// Floors for the CLI flags `--min-retrieval-recall` and `--min-retrieval-hit`.
/// Both `None` by default: no gate is active.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GateConfig {
    /// Floor on the overall mean of `retrieval_recall_at_k`.
    pub min_retrieval_recall: Option<f64>,
    /// Floor on the overall mean of `retrieval_hit_at_k`.
    pub min_retrieval_hit: Option<f64>,
}

impl GateConfig {
    /// True when at least one gate is set.
    pub fn is_active(&self) -> bool {
        self.min_retrieval_recall.is_some() || self.min_retrieval_hit.is_some()
    }

    /// The active gates as (key, floor) pairs, recall first.
    pub fn gates(&self) -> Vec<(&'static str, f64)> {
        [
            (RECALL_KEY, self.min_retrieval_recall),
            (HIT_KEY, self.min_retrieval_hit),
        ]
        .into_iter()
        .filter_map(|(k, f)| f.map(|f| (k, f)))
        .collect()
    }

    /// Checks that every set floor is a number in `[0, 1]` (for flag parsing: exit 2, not 1).
    pub fn validate(&self) -> Result<()> {
        for (_, floor) in self.gates() {
            validate_floor(floor)?;
        }
        Ok(())
    }
}

fn validate_floor(floor: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&floor) {
        return Err(EvalError::InvalidThreshold {
            what: "gate floor",
            value: floor,
            why: "must be a number in [0, 1]",
        });
    }
    Ok(())
}

/// One failed gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateFailure {
    /// The gated key.
    pub key: String,
    /// The floor.
    pub floor: f64,
    /// The overall mean, `None` when no case carries the key.
    pub actual: Option<f64>,
    /// Number of cases carrying the key.
    pub n: usize,
    /// A one-line explanation for humans.
    pub message: String,
}

impl fmt::Display for GateFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Checks every active gate against the overall slice; an empty vector means pass (exit 0),
/// anything else fails (exit 1). An invalid floor (NaN, outside `[0, 1]`) is reported as a
/// failure too, so it can never pass silently.
pub fn check_gates(aggregate: &Aggregate, config: &GateConfig) -> Vec<GateFailure> {
    let mut failures = Vec::new();
    for (key, floor) in config.gates() {
        let metric = aggregate.overall().and_then(|s| s.metrics.get(key));
        let (actual, n) = metric.map_or((None, 0), |m| (Some(m.mean), m.n));
        let message = if let Err(e) = validate_floor(floor) {
            format!("gate {key}: {e}")
        } else if let Some(mean) = actual {
            if mean >= floor {
                continue;
            }
            format!("gate {key}: mean {mean:.4} (n = {n}) is below the floor {floor:.4}")
        } else {
            format!(
                "gate {key}: no case carries this key (n = 0), so the floor {floor:.4} cannot be \
                 checked; a gate with nothing to measure fails (are there gold-labelled cases, \
                 and did the retrieval evaluator run?)"
            )
        };
        failures.push(GateFailure {
            key: key.to_string(),
            floor,
            actual,
            n,
            message,
        });
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{aggregate, AggregateConfig, CaseScores};

    fn agg(hits: &[f64], recalls: &[f64]) -> Aggregate {
        let cases: Vec<CaseScores> = hits
            .iter()
            .zip(recalls)
            .enumerate()
            .map(|(i, (&h, &r))| {
                CaseScores::new(i.to_string(), "en", "golden", true)
                    .with_score(HIT_KEY, h)
                    .with_score(RECALL_KEY, r)
            })
            .collect();
        let cfg = AggregateConfig {
            bootstrap_resamples: 10,
            permutations: 10,
            ..AggregateConfig::default()
        };
        aggregate(&cases, &cfg).unwrap()
    }

    #[test]
    fn inactive_by_default() {
        let c = GateConfig::default();
        assert!(!c.is_active());
        assert!(check_gates(&agg(&[0.0], &[0.0]), &c).is_empty());
        // Inactive gates pass even with no retrieval keys at all.
        assert!(check_gates(&agg(&[], &[]), &c).is_empty());
    }

    #[test]
    fn passes_at_or_above_the_floor() {
        let c = GateConfig {
            min_retrieval_recall: Some(0.5),
            min_retrieval_hit: Some(1.0),
        };
        assert!(check_gates(&agg(&[1.0, 1.0], &[1.0, 0.0]), &c).is_empty());
    }

    #[test]
    fn fails_below_the_floor_with_n() {
        let c = GateConfig {
            min_retrieval_recall: Some(0.6),
            min_retrieval_hit: Some(0.9),
        };
        let f = check_gates(&agg(&[1.0, 1.0], &[1.0, 0.0]), &c);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].key, RECALL_KEY);
        assert_eq!(f[0].actual, Some(0.5));
        assert_eq!(f[0].n, 2);
        assert!(f[0].message.contains("below the floor"), "{}", f[0]);
        assert!(f[0].message.contains("n = 2"), "{}", f[0]);
    }

    #[test]
    fn a_gate_on_an_absent_key_fails() {
        let c = GateConfig {
            min_retrieval_hit: Some(0.0),
            ..GateConfig::default()
        };
        let f = check_gates(&agg(&[], &[]), &c);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].actual, f[0].n), (None, 0));
        assert!(f[0].message.contains("n = 0"), "{}", f[0]);
    }

    #[test]
    fn invalid_floors_fail_and_do_not_validate() {
        for bad in [f64::NAN, -0.1, 1.5] {
            let c = GateConfig {
                min_retrieval_recall: Some(bad),
                ..GateConfig::default()
            };
            assert!(c.validate().is_err());
            assert_eq!(check_gates(&agg(&[1.0], &[1.0]), &c).len(), 1);
        }
    }
}
