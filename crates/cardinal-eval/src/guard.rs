//! The ADR-0029 faithfulness column guard.
//!
//! Truncating the judge's framing to the card header hides every rule and silently scores every
//! answer faithful: a faithfulness column that is **all high** is the signature of that bug, and
//! one that is **all low** is the mirror failure (a broken rubric or parser). The guard looks at
//! the 1–5 judge scores of a sweep, binned as 1–2 low, 3 mid, 4–5 high, and raises an alarm when
//! every score falls in the high bin or every score in the low bin — over at least `min_n`
//! scored cases (default [`DEFAULT_GUARD_MIN_N`] = 10); with fewer it reports `TooFew`.
//! A column that is all mid (3) is not flagged (not one of the two signatures).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{EvalError, Result};

/// Minimum number of scored cases before the guard judges a column.
pub const DEFAULT_GUARD_MIN_N: usize = 10;

/// The bin of a 1–5 judge score (the frozen calibration bins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bin {
    /// 1–2.
    Low,
    /// 3.
    Mid,
    /// 4–5.
    High,
}

impl Bin {
    /// The bin of a score, `None` outside 1..=5.
    pub fn of(score: u8) -> Option<Bin> {
        match score {
            1 | 2 => Some(Bin::Low),
            3 => Some(Bin::Mid),
            4 | 5 => Some(Bin::High),
            _ => None,
        }
    }
}

/// The guard's verdict on a faithfulness column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum GuardStatus {
    /// The column is mixed; `n` scores were checked.
    Ok {
        /// Number of scores.
        n: usize,
    },
    /// Every one of `n` scores is 4–5: the signature of header-only framing.
    AllHigh {
        /// Number of scores.
        n: usize,
    },
    /// Every one of `n` scores is 1–2.
    AllLow {
        /// Number of scores.
        n: usize,
    },
    /// Fewer than the minimum number of scores: the guard cannot judge.
    TooFew {
        /// Number of scores.
        n: usize,
    },
}

impl GuardStatus {
    /// True for `AllHigh` and `AllLow` (with `--strict` the CLI exits 1).
    pub fn is_alarm(&self) -> bool {
        matches!(
            self,
            GuardStatus::AllHigh { .. } | GuardStatus::AllLow { .. }
        )
    }
}

impl fmt::Display for GuardStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            GuardStatus::Ok { n } => {
                write!(f, "faithfulness column guard: ok (n = {n}, mixed scores)")
            }
            GuardStatus::AllHigh { n } => write!(
                f,
                "WARNING: faithfulness column guard: ALL {n} scores are high (4-5). This is the \
                 signature of a judge framed without the cards' rules (header-only truncation, \
                 ADR-0029); check the faithfulness framing before trusting this column."
            ),
            GuardStatus::AllLow { n } => write!(
                f,
                "WARNING: faithfulness column guard: ALL {n} scores are low (1-2). Check the \
                 faithfulness rubric, framing and output parsing before trusting this column."
            ),
            GuardStatus::TooFew { n } => write!(
                f,
                "faithfulness column guard: not checked, only {n} scored case(s)"
            ),
        }
    }
}

/// Checks a faithfulness column of 1–5 judge scores (judge errors excluded: they are not
/// scores). Errors when a score is outside 1..=5.
pub fn faithfulness_column_guard(scores: &[u8], min_n: usize) -> Result<GuardStatus> {
    let mut bins = Vec::with_capacity(scores.len());
    for &s in scores {
        bins.push(Bin::of(s).ok_or(EvalError::ScoreOutOfRange(s))?);
    }
    let n = bins.len();
    // An empty column is always "too few", even with min_n = 0.
    if n == 0 || n < min_n {
        return Ok(GuardStatus::TooFew { n });
    }
    Ok(if bins.iter().all(|&b| b == Bin::High) {
        GuardStatus::AllHigh { n }
    } else if bins.iter().all(|&b| b == Bin::Low) {
        GuardStatus::AllLow { n }
    } else {
        GuardStatus::Ok { n }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: usize = DEFAULT_GUARD_MIN_N;

    #[test]
    fn bins() {
        assert_eq!(Bin::of(1), Some(Bin::Low));
        assert_eq!(Bin::of(2), Some(Bin::Low));
        assert_eq!(Bin::of(3), Some(Bin::Mid));
        assert_eq!(Bin::of(4), Some(Bin::High));
        assert_eq!(Bin::of(5), Some(Bin::High));
        assert_eq!(Bin::of(0), None);
        assert_eq!(Bin::of(6), None);
    }

    #[test]
    fn all_high_is_flagged() {
        let s = [5, 4, 5, 5, 4, 5, 5, 5, 4, 5];
        assert_eq!(
            faithfulness_column_guard(&s, N).unwrap(),
            GuardStatus::AllHigh { n: 10 }
        );
        assert!(faithfulness_column_guard(&s, N).unwrap().is_alarm());
    }

    #[test]
    fn all_low_is_flagged() {
        let s = [1u8, 2, 1, 1, 2, 2, 1, 1, 1, 2, 1];
        assert_eq!(
            faithfulness_column_guard(&s, N).unwrap(),
            GuardStatus::AllLow { n: 11 }
        );
    }

    #[test]
    fn one_mid_or_opposite_score_clears_it() {
        let mut s = vec![5u8; 12];
        s[7] = 3;
        assert_eq!(
            faithfulness_column_guard(&s, N).unwrap(),
            GuardStatus::Ok { n: 12 }
        );
        let mut s = vec![1u8; 12];
        s[0] = 4;
        assert_eq!(
            faithfulness_column_guard(&s, N).unwrap(),
            GuardStatus::Ok { n: 12 }
        );
        // All mid is not one of the two signatures.
        assert_eq!(
            faithfulness_column_guard(&[3; 10], N).unwrap(),
            GuardStatus::Ok { n: 10 }
        );
    }

    #[test]
    fn too_few_below_min_n() {
        assert_eq!(
            faithfulness_column_guard(&[5; 9], N).unwrap(),
            GuardStatus::TooFew { n: 9 }
        );
        assert_eq!(
            faithfulness_column_guard(&[], N).unwrap(),
            GuardStatus::TooFew { n: 0 }
        );
        assert_eq!(
            faithfulness_column_guard(&[], 0).unwrap(),
            GuardStatus::TooFew { n: 0 }
        );
        assert_eq!(
            faithfulness_column_guard(&[5; 3], 3).unwrap(),
            GuardStatus::AllHigh { n: 3 }
        );
    }

    #[test]
    fn out_of_range_scores_are_errors() {
        assert!(matches!(
            faithfulness_column_guard(&[5, 5, 0], N),
            Err(EvalError::ScoreOutOfRange(0))
        ));
        assert!(faithfulness_column_guard(&[6], N).is_err());
    }

    #[test]
    fn messages_are_loud_and_json_is_tagged() {
        let s = GuardStatus::AllHigh { n: 10 };
        assert!(s.to_string().starts_with("WARNING"));
        assert!(s.to_string().contains("ALL 10"));
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"status":"all_high","n":10}"#
        );
    }
}
