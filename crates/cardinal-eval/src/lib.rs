//! The pure core of Cardinal's evaluation harness: no models, no HTTP, no I/O except reading and
//! writing baseline files.
//!
//! - [`retrieval`] — the ADR-0023 triad (`retrieval_hit_at_k`, `retrieval_recall_at_k`,
//!   `retrieval_ndcg_at_k`) over retrieved ids; empty gold ⇒ no keys.
//! - [`citation`] — `citation_coverage`, `citation_correctness`, `refusal_correctness`, and the
//!   per-case safety scores (`unsafe_refused`, `false_refusal`, `escalated`, `answered_rest`)
//!   with the Wilson interval used to report them.
//! - [`aggregate`] — means over the cases that carry each key, with n, seeded bootstrap CIs,
//!   slices (overall, language, case type, gold-labelled golden vs adversarial) and per-language
//!   differences with a seeded permutation test.
//! - [`gate`] — the `--min-retrieval-recall` / `--min-retrieval-hit` floors (inactive by default).
//! - [`baseline`] — the committed baseline file: save, load, compare with a tolerance.
//! - [`guard`] — the ADR-0029 faithfulness column guard.
//! - [`metrics`] — the metric registry: name, construct, direction, range, empty-gold rule,
//!   evaluator of every score key.
//! - [`calibration`] — frozen calibration constants (bins, gate 0.70, gated dimensions) and the
//!   agreement statistics (binned agreement, confusion matrix, quadratic κ, bootstrap CI).
//! - [`render`] — Markdown and terminal tables, with the recall caveat.
//!
//! # `report.json` schema (version 1)
//!
//! [`Aggregate`] serialises (serde_json) to the following. Field order is as listed; maps have
//! keys in lexicographic order; the output is a deterministic function of the set of case scores
//! and the config (not of case order). Numbers are JSON numbers (all finite: non-finite scores
//! are rejected on input).
//!
//! ```text
//! {
//!   "schema_version": 1,
//!   "config": {
//!     "bootstrap_resamples": 2000,      // resamples per (slice, key)
//!     "permutations": 5000,             // permutations per (key, language pair)
//!     "seed": 20260529,                 // seed of every random stream
//!     "confidence": 0.95,               // level of every "ci"
//!     "indicative_min_n": 30,           // n below which a language delta is indicative
//!     "alpha": 0.05                     // p at or above which a language delta is indicative
//!   },
//!   "n_cases": 120,                     // cases aggregated
//!   "slices": [                         // fixed order: overall, lang:*, type:*, gold:golden,
//!                                       // gold:adversarial (the two gold slices always present)
//!     {
//!       "name": "lang:es-419",          // "overall" | "lang:<tag>" | "type:<case type>"
//!                                       // | "gold:golden" | "gold:adversarial"
//!       "dim": "lang",                  // "overall" | "lang" | "case_type" | "gold_labelled"
//!       "value": "es-419",              // null for overall
//!       "n_cases": 40,                  // cases in the slice, whatever keys they carry
//!       "metrics": {                    // only keys at least one case of the slice carries
//!         "retrieval_hit_at_k": {
//!           "mean": 0.862,              // over the cases carrying the key
//!           "n": 29,                    // cases carrying the key (>= 1)
//!           "ci": { "low": 0.724, "high": 0.966 }   // percentile bootstrap; null when n < 2
//!         }
//!       },
//!       "errors": { "faithfulness": 2 } // evaluator failures per key (judge_error); never scores
//!     }
//!   ],
//!   "lang_deltas": [                    // every key x pair of languages both carrying the key,
//!     {                                 // ordered by key, then lang_a, then lang_b (lang_a < lang_b)
//!       "key": "retrieval_hit_at_k",
//!       "lang_a": "en", "lang_b": "es-419",
//!       "n_a": 60, "n_b": 29,
//!       "mean_a": 0.9, "mean_b": 0.862,
//!       "delta": 0.038,                 // mean_a - mean_b
//!       "p_value": 0.61,                // two-sided permutation test, (hits + 1) / (perms + 1)
//!       "indicative": true              // n_a < 30 || n_b < 30 || p_value >= 0.05
//!     }
//!   ]
//! }
//! ```
//!
//! Compatible additions (new fields, new slices, new keys) keep version 1; removing or renaming
//! a field, or changing a meaning, bumps [`AGGREGATE_SCHEMA_VERSION`].
//!
//! # Baseline file schema (version 1)
//!
//! ```text
//! {
//!   "schema_version": 1,
//!   "meta": { "k": 5, "cases": "data/cases/*.jsonl (120 cases)", "note": "extractive agent" },
//!   "slices": { "<slice name>": { "<key>": { "mean": 0.862, "n": 29 } } }
//! }
//! ```
//!
//! See [`baseline`] for the comparison and direction rules.

pub mod aggregate;
pub mod baseline;
pub mod calibration;
pub mod citation;
pub mod error;
pub mod gate;
pub mod guard;
pub mod metrics;
pub mod render;
pub mod retrieval;
mod rng;
pub mod shortcut;

pub use aggregate::{
    aggregate, slice_name, Aggregate, AggregateConfig, Aggregator, CaseScores, Interval, LangDelta,
    MetricSummary, Slice, SliceCollector, SliceDim, AGGREGATE_SCHEMA_VERSION, DEFAULT_SEED,
};
pub use baseline::{
    compare, Baseline, BaselineDiff, BaselineMeta, BaselineValue, DiffEntry, DiffStatus, Direction,
    BASELINE_SCHEMA_VERSION,
};
pub use citation::{
    citation_correctness, citation_coverage, citation_scores, refusal_correctness, safety_scores,
    wilson_95, CitationInput, SafetyExpect, SafetyInput, ANSWERED_REST_KEY, CORRECTNESS_KEY,
    COVERAGE_KEY, ESCALATED_KEY, FALSE_REFUSAL_KEY, REFUSAL_KEY, UNSAFE_REFUSED_KEY,
};
pub use error::{EvalError, Result};
pub use gate::{check_gates, GateConfig, GateFailure};
pub use guard::{faithfulness_column_guard, Bin, GuardStatus, DEFAULT_GUARD_MIN_N};
pub use render::{render_markdown, render_terminal, RECALL_CAVEAT};
pub use retrieval::{
    card_id, dedup_first, hit_at_k, ndcg_at_k, recall_at_k, RetrievalRecall, HIT_KEY, NDCG_KEY,
    RECALL_KEY,
};
