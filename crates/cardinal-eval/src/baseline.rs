//! The committed baseline: written from an aggregate, **really loaded** and compared.
//!
//! A baseline file stores, per slice and key, the mean and its n, plus metadata (the retrieval k
//! and a description of the case files). [`compare`] checks every (slice, key) of either side:
//!
//! - **direction rule**: each key's direction comes from the metric registry
//!   ([`crate::metrics`]); a key the registry does not define is an error, never a guess;
//! - a higher-is-better key **regresses** when `current < baseline - tolerance`, a lower-is-better
//!   key when `current > baseline + tolerance` (tolerance is absolute, in the metric's units;
//!   an extra `1e-12` absorbs JSON float round-trip noise so equal values never regress);
//! - a key present in the baseline but **missing now** is a regression (a metric that silently
//!   stops being computed must not pass); a key that is **new** now is reported, not a regression;
//! - a change of n is flagged (`n_changed`) but is not by itself a regression.

use std::fmt::{self, Write as _};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::aggregate::Aggregate;
use crate::error::{EvalError, Result};
use crate::render::text_table;

/// Version of the baseline file schema.
pub const BASELINE_SCHEMA_VERSION: u32 = 1;

/// Slack added to every tolerance so float round-trips through JSON never count as a change.
const ROUNDING_SLACK: f64 = 1e-12;

/// What the baseline was measured on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaselineMeta {
    /// The retrieval top-k the sweep used. Comparing against a sweep with another k is
    /// meaningless; callers should check it (see [`Baseline::check_k`]).
    pub k: usize,
    /// Description of the case files (for example `data/cases/*.jsonl, 120 cases`).
    pub cases: String,
    /// Free-form note (agent mode, model, judge...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The run manifest of the sweep the baseline was taken from (every number-changing
    /// setting); the harness refuses to compare runs whose manifests differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<serde_json::Value>,
}

/// A stored mean with its n.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BaselineValue {
    /// The mean.
    pub mean: f64,
    /// Number of cases carrying the key.
    pub n: usize,
}

/// The baseline file: `{"schema_version": 1, "meta": {...}, "slices": {slice: {key: {mean, n}}}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// [`BASELINE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// What the baseline was measured on.
    pub meta: BaselineMeta,
    /// Slice name → key → mean and n. Slices without any key are omitted.
    pub slices:
        std::collections::BTreeMap<String, std::collections::BTreeMap<String, BaselineValue>>,
}

#[derive(Deserialize)]
struct VersionProbe {
    schema_version: u32,
}

impl Baseline {
    /// The baseline of an aggregate: every slice's means with their n.
    pub fn from_aggregate(aggregate: &Aggregate, meta: BaselineMeta) -> Self {
        let slices = aggregate
            .slices
            .iter()
            .filter(|s| !s.metrics.is_empty())
            .map(|s| {
                let values = s
                    .metrics
                    .iter()
                    .map(|(k, m)| {
                        (
                            k.clone(),
                            BaselineValue {
                                mean: m.mean,
                                n: m.n,
                            },
                        )
                    })
                    .collect();
                (s.name.clone(), values)
            })
            .collect();
        Self {
            schema_version: BASELINE_SCHEMA_VERSION,
            meta,
            slices,
        }
    }

    /// Reads a baseline file. Errors (with the path) when it cannot be read, is not JSON of
    /// this schema, or carries another schema version.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = fs::read_to_string(path).map_err(|source| EvalError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let parse_err = |source| EvalError::Parse {
            path: path.to_path_buf(),
            source,
        };
        let probe: VersionProbe = serde_json::from_str(&text).map_err(parse_err)?;
        if probe.schema_version != BASELINE_SCHEMA_VERSION {
            return Err(EvalError::SchemaVersion {
                path: path.to_path_buf(),
                found: probe.schema_version,
                expected: BASELINE_SCHEMA_VERSION,
            });
        }
        serde_json::from_str(&text).map_err(parse_err)
    }

    /// Writes the baseline as pretty JSON (stable key order, trailing newline) atomically: to a
    /// temporary file in the same directory, flushed to disk, then renamed over `path`.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let io_err = |source| EvalError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut json =
            serde_json::to_string_pretty(self).map_err(|e| io_err(std::io::Error::other(e)))?;
        json.push('\n');
        let tmp = temp_path(path);
        let write = || -> std::io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(json.as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, path)
        };
        write().map_err(|e| {
            // Best effort: do not leave the temporary file behind.
            let _ = fs::remove_file(&tmp);
            io_err(e)
        })
    }

    /// Errors-as-text when the baseline was measured with another retrieval k.
    pub fn check_k(&self, configured_top_k: usize) -> std::result::Result<(), String> {
        if self.meta.k == configured_top_k {
            Ok(())
        } else {
            Err(format!(
                "the baseline was measured with k = {}, this sweep uses k = {configured_top_k}",
                self.meta.k
            ))
        }
    }
}

/// `dir/.name.tmp-<pid>` beside `path`, so the final rename stays on one file system.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "baseline.json".to_string());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

pub use crate::metrics::Direction;

/// The outcome of one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffStatus {
    /// Within tolerance.
    Ok,
    /// Better than the baseline by more than the tolerance (consider updating the baseline).
    Improved,
    /// Worse than the baseline by more than the tolerance.
    Regressed,
    /// In the baseline, not computed now: a regression.
    MissingNow,
    /// Computed now, not in the baseline: reported only.
    New,
}

impl DiffStatus {
    /// Short label for tables.
    pub fn label(self) -> &'static str {
        match self {
            DiffStatus::Ok => "ok",
            DiffStatus::Improved => "improved",
            DiffStatus::Regressed => "REGRESSED",
            DiffStatus::MissingNow => "MISSING (regression)",
            DiffStatus::New => "new",
        }
    }
}

/// One compared aggregate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffEntry {
    /// Slice name.
    pub slice: String,
    /// Score key.
    pub key: String,
    /// Direction used.
    pub direction: Direction,
    /// Baseline mean and n, if the baseline has the key.
    pub baseline: Option<BaselineValue>,
    /// Current mean and n, if the sweep has the key.
    pub current: Option<BaselineValue>,
    /// `current - baseline` when both exist.
    pub delta: Option<f64>,
    /// Outcome.
    pub status: DiffStatus,
    /// True for `Regressed` and `MissingNow`.
    pub regressed: bool,
    /// True when both sides exist and their n differ.
    pub n_changed: bool,
}

/// Every compared aggregate, in slice then key order (baseline slice order is lexicographic).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineDiff {
    /// The tolerance used.
    pub tolerance: f64,
    /// One entry per (slice, key) present on either side.
    pub entries: Vec<DiffEntry>,
}

impl BaselineDiff {
    /// True when any entry regressed (exit 1).
    pub fn has_regressions(&self) -> bool {
        self.entries.iter().any(|e| e.regressed)
    }

    /// The regressed entries.
    pub fn regressions(&self) -> impl Iterator<Item = &DiffEntry> {
        self.entries.iter().filter(|e| e.regressed)
    }

    /// The diff as a plain text table, followed by a one-line verdict.
    pub fn render_table(&self) -> String {
        let header = ["slice", "key", "baseline", "current", "delta", "status"];
        let rows: Vec<Vec<String>> = self
            .entries
            .iter()
            .map(|e| {
                let side = |v: Option<BaselineValue>| {
                    v.map_or("—".to_string(), |v| format!("{:.4} (n={})", v.mean, v.n))
                };
                let mut status = e.status.label().to_string();
                if e.n_changed {
                    status.push_str(", n changed");
                }
                vec![
                    e.slice.clone(),
                    e.key.clone(),
                    side(e.baseline),
                    side(e.current),
                    e.delta.map_or("—".to_string(), |d| format!("{d:+.4}")),
                    status,
                ]
            })
            .collect();
        let mut out = text_table(&header, &rows);
        let n_reg = self.regressions().count();
        let _ = writeln!(
            out,
            "{} of {} aggregates regressed (tolerance {})",
            n_reg,
            self.entries.len(),
            self.tolerance
        );
        out
    }
}

impl fmt::Display for BaselineDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render_table())
    }
}

/// Compares every (slice, key) of the baseline and the current aggregate (see the module
/// documentation for the direction rule and what regresses). Errors when `tolerance` is
/// negative or not finite (a NaN tolerance would otherwise pass everything).
pub fn compare(baseline: &Baseline, current: &Aggregate, tolerance: f64) -> Result<BaselineDiff> {
    if !tolerance.is_finite() || tolerance < 0.0 {
        return Err(EvalError::InvalidThreshold {
            what: "tolerance",
            value: tolerance,
            why: "must be a finite number >= 0",
        });
    }
    let now = Baseline::from_aggregate(current, baseline.meta.clone());
    let mut pairs: std::collections::BTreeSet<(&str, &str)> = Default::default();
    for side in [&baseline.slices, &now.slices] {
        for (slice, keys) in side {
            pairs.extend(keys.keys().map(|k| (slice.as_str(), k.as_str())));
        }
    }
    let get = |b: &Baseline, s: &str, k: &str| b.slices.get(s).and_then(|m| m.get(k)).copied();
    let slack = tolerance + ROUNDING_SLACK;
    let entries = pairs
        .into_iter()
        .map(|(slice, key)| {
            let direction = crate::metrics::direction(key)
                .ok_or_else(|| EvalError::UnknownMetric(key.to_string()))?;
            let (base, cur) = (get(baseline, slice, key), get(&now, slice, key));
            let (status, delta, n_changed) = match (base, cur) {
                (Some(b), Some(c)) => {
                    let delta = c.mean - b.mean;
                    let signed = match direction {
                        Direction::HigherIsBetter => delta,
                        Direction::LowerIsBetter => -delta,
                    };
                    let status = if signed < -slack {
                        DiffStatus::Regressed
                    } else if signed > slack {
                        DiffStatus::Improved
                    } else {
                        DiffStatus::Ok
                    };
                    (status, Some(delta), b.n != c.n)
                }
                (Some(_), None) => (DiffStatus::MissingNow, None, false),
                _ => (DiffStatus::New, None, false),
            };
            Ok(DiffEntry {
                slice: slice.to_string(),
                key: key.to_string(),
                direction,
                baseline: base,
                current: cur,
                delta,
                status,
                regressed: matches!(status, DiffStatus::Regressed | DiffStatus::MissingNow),
                n_changed,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(BaselineDiff { tolerance, entries })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{aggregate, AggregateConfig, CaseScores};

    /// (case id, language, scores).
    type Spec<'a> = (&'a str, &'a str, &'a [(&'a str, f64)]);

    fn agg(cases: &[Spec<'_>]) -> Aggregate {
        let cases: Vec<CaseScores> = cases
            .iter()
            .map(|(id, lang, scores)| {
                scores
                    .iter()
                    .fold(CaseScores::new(*id, *lang, "golden", true), |c, (k, v)| {
                        c.with_score(*k, *v)
                    })
            })
            .collect();
        let cfg = AggregateConfig {
            bootstrap_resamples: 10,
            permutations: 10,
            ..AggregateConfig::default()
        };
        aggregate(&cases, &cfg).unwrap()
    }

    fn meta() -> BaselineMeta {
        BaselineMeta {
            k: 5,
            cases: "data/cases/*.jsonl".into(),
            note: None,
            manifest: None,
        }
    }

    #[test]
    fn from_aggregate_keeps_means_and_n_per_slice() {
        let a = agg(&[
            ("1", "en", &[("retrieval_hit_at_k", 1.0)]),
            ("2", "pt-BR", &[("retrieval_hit_at_k", 0.0)]),
        ]);
        let b = Baseline::from_aggregate(&a, meta());
        assert_eq!(
            b.slices["overall"]["retrieval_hit_at_k"],
            BaselineValue { mean: 0.5, n: 2 }
        );
        assert_eq!(
            b.slices["lang:en"]["retrieval_hit_at_k"],
            BaselineValue { mean: 1.0, n: 1 }
        );
        assert_eq!(b.slices["gold:golden"]["retrieval_hit_at_k"].n, 2);
        // Empty slices (gold:adversarial here) are omitted.
        assert!(!b.slices.contains_key("gold:adversarial"));
    }

    #[test]
    fn save_then_load_roundtrips_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baseline.json");
        let a = agg(&[
            ("1", "en", &[("retrieval_hit_at_k", 1.0 / 3.0)]),
            ("2", "en", &[("retrieval_hit_at_k", 0.1)]),
        ]);
        let b = Baseline::from_aggregate(&a, meta());
        b.save(&path).unwrap();
        b.save(&path).unwrap(); // overwrite
        assert_eq!(Baseline::load(&path).unwrap(), b);
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["baseline.json"]);
        // The same aggregate compares clean against its own saved baseline at tolerance 0.
        let diff = compare(&Baseline::load(&path).unwrap(), &a, 0.0).unwrap();
        assert!(!diff.has_regressions(), "{diff}");
        assert!(diff.entries.iter().all(|e| e.status == DiffStatus::Ok));
    }

    #[test]
    fn load_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.json");
        let e = Baseline::load(&missing).unwrap_err();
        assert!(matches!(e, EvalError::Io { .. }));
        assert!(e.to_string().contains("nope.json"));

        let garbage = dir.path().join("garbage.json");
        fs::write(&garbage, "{not json").unwrap();
        assert!(matches!(
            Baseline::load(&garbage),
            Err(EvalError::Parse { .. })
        ));

        let future = dir.path().join("future.json");
        fs::write(&future, r#"{"schema_version": 99, "whatever": true}"#).unwrap();
        assert!(matches!(
            Baseline::load(&future),
            Err(EvalError::SchemaVersion { found: 99, .. })
        ));
    }

    #[test]
    fn save_into_a_missing_directory_fails_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let b = Baseline::from_aggregate(&agg(&[]), meta());
        let e = b.save(dir.path().join("no/such/dir/b.json")).unwrap_err();
        assert!(matches!(e, EvalError::Io { .. }));
    }

    #[test]
    fn regression_beyond_tolerance_only() {
        let base = Baseline::from_aggregate(
            &agg(&[
                ("1", "en", &[("retrieval_hit_at_k", 1.0)]),
                ("2", "en", &[("retrieval_hit_at_k", 1.0)]),
            ]),
            meta(),
        );
        let now = agg(&[
            ("1", "en", &[("retrieval_hit_at_k", 1.0)]),
            ("2", "en", &[("retrieval_hit_at_k", 0.8)]),
        ]); // mean 0.9
        let d = compare(&base, &now, 0.05).unwrap();
        assert!(d.has_regressions());
        let e = d
            .entries
            .iter()
            .find(|e| e.slice == "overall" && e.key == "retrieval_hit_at_k")
            .unwrap();
        assert_eq!(e.status, DiffStatus::Regressed);
        assert!((e.delta.unwrap() + 0.1).abs() < 1e-12);
        assert!(!compare(&base, &now, 0.1).unwrap().has_regressions());
    }

    #[test]
    fn lower_is_better_keys_regress_upwards() {
        let base =
            Baseline::from_aggregate(&agg(&[("1", "en", &[("false_refusal", 0.1)])]), meta());
        let worse = agg(&[("1", "en", &[("false_refusal", 0.3)])]);
        let better = agg(&[("1", "en", &[("false_refusal", 0.0)])]);
        assert!(compare(&base, &worse, 0.05).unwrap().has_regressions());
        let d = compare(&base, &better, 0.05).unwrap();
        assert!(!d.has_regressions());
        assert!(d.entries.iter().all(|e| e.status == DiffStatus::Improved));
    }

    #[test]
    fn hallucination_regresses_downwards_like_its_rubric() {
        // 5 = nothing unsupported: a drop is a regression, not an improvement.
        let base =
            Baseline::from_aggregate(&agg(&[("1", "en", &[("hallucination", 4.5)])]), meta());
        let d = compare(&base, &agg(&[("1", "en", &[("hallucination", 3.0)])]), 0.1).unwrap();
        assert!(d.has_regressions());
        assert!(d.entries.iter().all(|e| e.status == DiffStatus::Regressed));
        let d = compare(&base, &agg(&[("1", "en", &[("hallucination", 5.0)])]), 0.1).unwrap();
        assert!(d.entries.iter().all(|e| e.status == DiffStatus::Improved));
    }

    #[test]
    fn a_key_the_registry_does_not_define_is_an_error() {
        let base = Baseline::from_aggregate(&agg(&[("1", "en", &[("made_up", 1.0)])]), meta());
        assert!(matches!(
            compare(&base, &agg(&[("1", "en", &[("made_up", 0.0)])]), 0.0),
            Err(EvalError::UnknownMetric(k)) if k == "made_up"
        ));
    }

    #[test]
    fn missing_now_regresses_new_does_not() {
        let base =
            Baseline::from_aggregate(&agg(&[("1", "en", &[("citation_coverage", 1.0)])]), meta());
        let now = agg(&[("1", "en", &[("citation_correctness", 1.0)])]);
        let d = compare(&base, &now, 0.5).unwrap();
        let status = |key: &str| {
            d.entries
                .iter()
                .find(|e| e.slice == "overall" && e.key == key)
                .unwrap()
                .status
        };
        assert_eq!(status("citation_coverage"), DiffStatus::MissingNow);
        assert_eq!(status("citation_correctness"), DiffStatus::New);
        assert!(d.has_regressions());
        assert!(d.regressions().all(|e| e.key == "citation_coverage"));
    }

    #[test]
    fn n_changes_are_flagged() {
        let base =
            Baseline::from_aggregate(&agg(&[("1", "en", &[("retrieval_hit_at_k", 1.0)])]), meta());
        let now = agg(&[
            ("1", "en", &[("retrieval_hit_at_k", 1.0)]),
            ("2", "en", &[("retrieval_hit_at_k", 1.0)]),
        ]);
        let d = compare(&base, &now, 0.0).unwrap();
        assert!(!d.has_regressions());
        assert!(d.entries.iter().all(|e| e.n_changed));
        assert!(d.render_table().contains("n changed"));
    }

    #[test]
    fn bad_tolerance_is_an_error() {
        let a = agg(&[]);
        let b = Baseline::from_aggregate(&a, meta());
        for t in [f64::NAN, -0.01, f64::INFINITY] {
            assert!(matches!(
                compare(&b, &a, t),
                Err(EvalError::InvalidThreshold { .. })
            ));
        }
    }

    #[test]
    fn table_lists_every_entry_and_a_verdict() {
        let base = Baseline::from_aggregate(&agg(&[("1", "en", &[("escalated", 1.0)])]), meta());
        let now = agg(&[("1", "en", &[("escalated", 0.0)])]);
        let t = compare(&base, &now, 0.0).unwrap().render_table();
        let expected = "\
slice        key        baseline      current       delta    status
-----------  ---------  ------------  ------------  -------  ---------
gold:golden  escalated  1.0000 (n=1)  0.0000 (n=1)  -1.0000  REGRESSED
lang:en      escalated  1.0000 (n=1)  0.0000 (n=1)  -1.0000  REGRESSED
overall      escalated  1.0000 (n=1)  0.0000 (n=1)  -1.0000  REGRESSED
type:golden  escalated  1.0000 (n=1)  0.0000 (n=1)  -1.0000  REGRESSED
4 of 4 aggregates regressed (tolerance 0)
";
        assert_eq!(t, expected);
    }

    #[test]
    fn k_mismatch_is_reported() {
        let b = Baseline::from_aggregate(&agg(&[]), meta());
        assert!(b.check_k(5).is_ok());
        assert!(b.check_k(3).unwrap_err().contains("k = 5"));
    }
}
