//! Aggregation with honest n: per-key means over the cases that **carry** the key, seeded
//! bootstrap confidence intervals, slices, and per-language differences with a permutation test.
//!
//! Shape: an [`Aggregator`] collects [`CaseScores`] into one [`SliceCollector`] per slice
//! (overall, per language, per case type, gold-labelled golden / adversarial); collectors can be
//! built on parts of the cases and merged (like tantivy's `Collector`/`merge_fruits`), then
//! [`Aggregator::finish`] turns them into an [`Aggregate`]. [`aggregate`] does all of it at once.
//!
//! Determinism: every value list is sorted before its mean, bootstrap or permutation test, and
//! every random stream is seeded from [`AggregateConfig::seed`] plus the slice and key it serves.
//! The result therefore depends only on the multiset of case scores — not on case order (a
//! concurrent or resumed run reproduces the same report byte for byte) and not on which slices
//! or keys exist besides.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::{EvalError, Result};
use crate::rng::SplitMix64;

/// Version of the [`Aggregate`] JSON schema (see the crate documentation).
pub const AGGREGATE_SCHEMA_VERSION: u32 = 1;

/// Default seed of the bootstrap and permutation streams (ADR-0023's date).
pub const DEFAULT_SEED: u64 = 20_260_529;

/// The `case_type` value of golden cases.
pub const GOLDEN: &str = "golden";
/// The `case_type` value of adversarial cases.
pub const ADVERSARIAL: &str = "adversarial";

/// The scores of one case: the aggregator's input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseScores {
    /// Case id, unique within a sweep.
    pub case_id: String,
    /// Language tag (`en`, `es-419`, `pt-BR`).
    pub lang: String,
    /// Case type (`golden`, `adversarial`, `capability`, `no_match`).
    pub case_type: String,
    /// Whether the case carries gold labels (`must_cite_one_of` non-empty).
    pub has_gold: bool,
    /// Every key an evaluator emitted for this case. A key that is absent is **not** a 0.
    pub scores: BTreeMap<String, f64>,
    /// Keys whose evaluator failed on this case (for example a judge dimension after bounded
    /// retries). Counted per slice in [`Slice::errors`], never turned into a score.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub errors: BTreeSet<String>,
}

impl CaseScores {
    /// A case with no scores yet.
    pub fn new(
        case_id: impl Into<String>,
        lang: impl Into<String>,
        case_type: impl Into<String>,
        has_gold: bool,
    ) -> Self {
        Self {
            case_id: case_id.into(),
            lang: lang.into(),
            case_type: case_type.into(),
            has_gold,
            scores: BTreeMap::new(),
            errors: BTreeSet::new(),
        }
    }

    /// Adds the keys of one evaluator's output (later values overwrite earlier ones).
    pub fn with_scores(mut self, scores: BTreeMap<String, f64>) -> Self {
        self.scores.extend(scores);
        self
    }

    /// Adds one score.
    pub fn with_score(mut self, key: impl Into<String>, value: f64) -> Self {
        self.scores.insert(key.into(), value);
        self
    }

    /// Records that the evaluator of `key` failed on this case.
    pub fn with_error(mut self, key: impl Into<String>) -> Self {
        self.errors.insert(key.into());
        self
    }

    fn validate(&self) -> Result<()> {
        for (key, &value) in &self.scores {
            if !value.is_finite() {
                return Err(EvalError::NonFiniteScore {
                    case_id: self.case_id.clone(),
                    key: key.clone(),
                    value,
                });
            }
            if self.errors.contains(key) {
                return Err(EvalError::ScoredAndFailed {
                    case_id: self.case_id.clone(),
                    key: key.clone(),
                });
            }
        }
        Ok(())
    }
}

/// Settings of the statistics. The defaults are the documented report settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AggregateConfig {
    /// Bootstrap resamples per (slice, key). Default 2000.
    pub bootstrap_resamples: usize,
    /// Permutations per language pair and key. Default 5000.
    pub permutations: usize,
    /// Seed of every random stream. Default [`DEFAULT_SEED`].
    pub seed: u64,
    /// Confidence level of the intervals. Default 0.95.
    pub confidence: f64,
    /// A language difference is indicative when either side has fewer cases than this.
    /// Default 30.
    pub indicative_min_n: usize,
    /// A language difference is indicative when its p-value is at least this. Default 0.05.
    pub alpha: f64,
}

impl Default for AggregateConfig {
    fn default() -> Self {
        Self {
            bootstrap_resamples: 2000,
            permutations: 5000,
            seed: DEFAULT_SEED,
            confidence: 0.95,
            indicative_min_n: 30,
            alpha: 0.05,
        }
    }
}

impl AggregateConfig {
    /// Checks that every setting is usable.
    pub fn validate(&self) -> Result<()> {
        if self.bootstrap_resamples == 0 {
            return Err(EvalError::InvalidConfig(
                "bootstrap_resamples must be at least 1".into(),
            ));
        }
        if self.permutations == 0 {
            return Err(EvalError::InvalidConfig(
                "permutations must be at least 1".into(),
            ));
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(EvalError::InvalidConfig(format!(
                "confidence must be in (0, 1), got {}",
                self.confidence
            )));
        }
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return Err(EvalError::InvalidConfig(format!(
                "alpha must be in (0, 1), got {}",
                self.alpha
            )));
        }
        Ok(())
    }
}

/// The dimension a slice cuts along.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SliceDim {
    /// All cases.
    Overall,
    /// Cases of one language.
    Lang,
    /// Cases of one case type.
    CaseType,
    /// Gold-labelled cases of one type: `golden` or `adversarial` (ADR-0023 (C)).
    GoldLabelled,
}

impl SliceDim {
    /// The prefix of slice names of this dimension (`overall`, `lang`, `type`, `gold`).
    pub fn prefix(self) -> &'static str {
        match self {
            SliceDim::Overall => "overall",
            SliceDim::Lang => "lang",
            SliceDim::CaseType => "type",
            SliceDim::GoldLabelled => "gold",
        }
    }

    /// A human title for reports.
    pub fn title(self) -> &'static str {
        match self {
            SliceDim::Overall => "Overall",
            SliceDim::Lang => "By language",
            SliceDim::CaseType => "By case type",
            SliceDim::GoldLabelled => "Gold-labelled: golden vs adversarial",
        }
    }
}

/// The stable name of a slice: `overall`, `lang:<tag>`, `type:<case type>` or
/// `gold:<golden|adversarial>`. Baselines key on it.
pub fn slice_name(dim: SliceDim, value: Option<&str>) -> String {
    match (dim, value) {
        (SliceDim::Overall, _) | (_, None) => dim.prefix().to_string(),
        (_, Some(v)) => format!("{}:{v}", dim.prefix()),
    }
}

/// A closed interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
}

/// One key's statistics within one slice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSummary {
    /// Mean over the cases of the slice that carry the key.
    pub mean: f64,
    /// Number of cases of the slice that carry the key (always ≥ 1: a key no case carries is
    /// not listed).
    pub n: usize,
    /// Percentile bootstrap interval of the mean at [`AggregateConfig::confidence`]; `None`
    /// when `n < 2` (a one-case interval would be a misleading point).
    pub ci: Option<Interval>,
}

/// The statistics of one slice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    /// Stable name, see [`slice_name`].
    pub name: String,
    /// The dimension.
    pub dim: SliceDim,
    /// The value along the dimension (`None` for overall).
    pub value: Option<String>,
    /// Number of cases in the slice, whatever keys they carry.
    pub n_cases: usize,
    /// Per-key statistics, keys in lexicographic order.
    pub metrics: BTreeMap<String, MetricSummary>,
    /// Per-key count of evaluator failures (keys with no failure are not listed).
    pub errors: BTreeMap<String, usize>,
}

/// A per-language difference of one key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LangDelta {
    /// The score key.
    pub key: String,
    /// First language (lexicographically smaller tag).
    pub lang_a: String,
    /// Second language.
    pub lang_b: String,
    /// Cases of `lang_a` carrying the key.
    pub n_a: usize,
    /// Cases of `lang_b` carrying the key.
    pub n_b: usize,
    /// Mean in `lang_a`.
    pub mean_a: f64,
    /// Mean in `lang_b`.
    pub mean_b: f64,
    /// `mean_a - mean_b`.
    pub delta: f64,
    /// Two-sided permutation-test p-value, `(hits + 1) / (permutations + 1)` (never 0).
    pub p_value: f64,
    /// True when `n_a` or `n_b` is below [`AggregateConfig::indicative_min_n`] or `p_value`
    /// is at least [`AggregateConfig::alpha`]: read as a hint, not as a tested difference.
    pub indicative: bool,
}

/// The aggregated sweep: what the report renders and the baseline stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    /// [`AGGREGATE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The statistics settings used.
    pub config: AggregateConfig,
    /// Number of cases aggregated.
    pub n_cases: usize,
    /// Slices in a fixed order: overall; languages; case types; gold-labelled golden, then
    /// gold-labelled adversarial (both always present, possibly with no cases).
    pub slices: Vec<Slice>,
    /// Differences for every key and every pair of languages in which both carry the key,
    /// ordered by key, then language pair.
    pub lang_deltas: Vec<LangDelta>,
}

impl Aggregate {
    /// The slice with this name.
    pub fn slice(&self, name: &str) -> Option<&Slice> {
        self.slices.iter().find(|s| s.name == name)
    }

    /// The overall slice.
    pub fn overall(&self) -> Option<&Slice> {
        self.slice(SliceDim::Overall.prefix())
    }

    /// The statistics of `key` in slice `slice`, if any case of the slice carries it.
    pub fn metric(&self, slice: &str, key: &str) -> Option<&MetricSummary> {
        self.slice(slice)?.metrics.get(key)
    }

    /// Total evaluator failures of `key` over all cases.
    pub fn errors_of(&self, key: &str) -> usize {
        self.overall()
            .and_then(|s| s.errors.get(key).copied())
            .unwrap_or(0)
    }
}

/// Collects the values of one slice; mergeable.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SliceCollector {
    n_cases: usize,
    values: BTreeMap<String, Vec<f64>>,
    errors: BTreeMap<String, usize>,
}

impl SliceCollector {
    /// Adds one case's keys (only the keys it carries).
    pub fn collect(&mut self, case: &CaseScores) {
        self.n_cases += 1;
        for (key, &value) in &case.scores {
            self.values.entry(key.clone()).or_default().push(value);
        }
        for key in &case.errors {
            *self.errors.entry(key.clone()).or_default() += 1;
        }
    }

    /// Adds everything another collector of the same slice collected.
    pub fn merge(&mut self, other: SliceCollector) {
        self.n_cases += other.n_cases;
        for (key, values) in other.values {
            self.values.entry(key).or_default().extend(values);
        }
        for (key, count) in other.errors {
            *self.errors.entry(key).or_default() += count;
        }
    }

    /// The slice's statistics.
    pub fn finish(mut self, dim: SliceDim, value: Option<&str>, cfg: &AggregateConfig) -> Slice {
        let name = slice_name(dim, value);
        let metrics = self
            .values
            .iter_mut()
            .map(|(key, values)| {
                values.sort_by(f64::total_cmp);
                let mut rng = SplitMix64::for_stream(cfg.seed, &["bootstrap", &name, key]);
                let summary = MetricSummary {
                    mean: mean(values),
                    n: values.len(),
                    ci: bootstrap_ci(values, cfg.bootstrap_resamples, cfg.confidence, &mut rng),
                };
                (key.clone(), summary)
            })
            .collect();
        Slice {
            name,
            dim,
            value: value.map(str::to_string),
            n_cases: self.n_cases,
            metrics,
            errors: self.errors,
        }
    }
}

/// Routes cases into slice collectors; mergeable, then finished into an [`Aggregate`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Aggregator {
    case_ids: BTreeSet<String>,
    overall: SliceCollector,
    by_lang: BTreeMap<String, SliceCollector>,
    by_type: BTreeMap<String, SliceCollector>,
    gold_golden: SliceCollector,
    gold_adversarial: SliceCollector,
}

impl Aggregator {
    /// An empty aggregator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one case. Errors on a duplicate case id, a non-finite score, or a key that is both
    /// scored and recorded as failed.
    pub fn add(&mut self, case: &CaseScores) -> Result<()> {
        case.validate()?;
        if !self.case_ids.insert(case.case_id.clone()) {
            return Err(EvalError::DuplicateCase(case.case_id.clone()));
        }
        self.overall.collect(case);
        self.by_lang
            .entry(case.lang.clone())
            .or_default()
            .collect(case);
        self.by_type
            .entry(case.case_type.clone())
            .or_default()
            .collect(case);
        if case.has_gold {
            match case.case_type.as_str() {
                GOLDEN => self.gold_golden.collect(case),
                ADVERSARIAL => self.gold_adversarial.collect(case),
                _ => {}
            }
        }
        Ok(())
    }

    /// Merges an aggregator built over other cases. Errors when both saw the same case id.
    pub fn merge(&mut self, other: Aggregator) -> Result<()> {
        if let Some(dup) = self.case_ids.intersection(&other.case_ids).next() {
            return Err(EvalError::DuplicateCase(dup.clone()));
        }
        self.case_ids.extend(other.case_ids);
        self.overall.merge(other.overall);
        for (lang, c) in other.by_lang {
            self.by_lang.entry(lang).or_default().merge(c);
        }
        for (t, c) in other.by_type {
            self.by_type.entry(t).or_default().merge(c);
        }
        self.gold_golden.merge(other.gold_golden);
        self.gold_adversarial.merge(other.gold_adversarial);
        Ok(())
    }

    /// Computes every slice and the per-language differences.
    pub fn finish(self, cfg: &AggregateConfig) -> Result<Aggregate> {
        cfg.validate()?;
        let lang_deltas = lang_deltas(&self.by_lang, cfg);
        let mut slices = vec![self.overall.finish(SliceDim::Overall, None, cfg)];
        slices.extend(
            self.by_lang
                .into_iter()
                .map(|(l, c)| c.finish(SliceDim::Lang, Some(&l), cfg)),
        );
        slices.extend(
            self.by_type
                .into_iter()
                .map(|(t, c)| c.finish(SliceDim::CaseType, Some(&t), cfg)),
        );
        slices.push(
            self.gold_golden
                .finish(SliceDim::GoldLabelled, Some(GOLDEN), cfg),
        );
        slices.push(
            self.gold_adversarial
                .finish(SliceDim::GoldLabelled, Some(ADVERSARIAL), cfg),
        );
        Ok(Aggregate {
            schema_version: AGGREGATE_SCHEMA_VERSION,
            config: *cfg,
            n_cases: self.case_ids.len(),
            slices,
            lang_deltas,
        })
    }
}

/// Aggregates a sweep in one call (see [`Aggregator`]).
pub fn aggregate(cases: &[CaseScores], cfg: &AggregateConfig) -> Result<Aggregate> {
    let mut agg = Aggregator::new();
    for case in cases {
        agg.add(case)?;
    }
    agg.finish(cfg)
}

/// Mean of a non-empty slice.
fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// Quantile of sorted values by linear interpolation (Hyndman–Fan type 7, R's default).
fn quantile(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Percentile bootstrap interval of the mean of `sorted` (`None` when fewer than 2 values).
/// The one bootstrap of the crate (aggregation and calibration agreement both use it).
pub(crate) fn bootstrap_ci(
    sorted: &[f64],
    resamples: usize,
    confidence: f64,
    rng: &mut SplitMix64,
) -> Option<Interval> {
    let n = sorted.len();
    if n < 2 || resamples == 0 {
        return None;
    }
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| sorted[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    Some(Interval {
        low: quantile(&means, tail),
        high: quantile(&means, 1.0 - tail),
    })
}

/// Two-sided permutation test of the difference of means of `a` and `b` (both non-empty):
/// `(1 + #{|Δ_perm| ≥ |Δ_obs|}) / (1 + permutations)`.
fn permutation_p_value(a: &[f64], b: &[f64], permutations: usize, rng: &mut SplitMix64) -> f64 {
    let (na, nb) = (a.len(), b.len());
    let mut pool: Vec<f64> = a.iter().chain(b).copied().collect();
    let total: f64 = pool.iter().sum();
    let observed = (mean(a) - mean(b)).abs();
    // Rounding noise must not turn an exact tie into a miss.
    let eps = 1e-9 * (1.0 + observed);
    let mut extreme = 0usize;
    for _ in 0..permutations {
        // Partial Fisher–Yates: a uniformly random subset of size na lands in pool[..na].
        for i in 0..na {
            let j = i + rng.below(pool.len() - i);
            pool.swap(i, j);
        }
        let sum_a: f64 = pool[..na].iter().sum();
        let d = (sum_a / na as f64 - (total - sum_a) / nb as f64).abs();
        if d >= observed - eps {
            extreme += 1;
        }
    }
    (extreme + 1) as f64 / (permutations + 1) as f64
}

fn lang_deltas(
    by_lang: &BTreeMap<String, SliceCollector>,
    cfg: &AggregateConfig,
) -> Vec<LangDelta> {
    let keys: BTreeSet<&String> = by_lang.values().flat_map(|c| c.values.keys()).collect();
    let langs: Vec<&String> = by_lang.keys().collect();
    let mut out = Vec::new();
    for key in keys {
        for (i, lang_a) in langs.iter().enumerate() {
            for lang_b in &langs[i + 1..] {
                let (Some(a), Some(b)) = (
                    by_lang[*lang_a].values.get(key),
                    by_lang[*lang_b].values.get(key),
                ) else {
                    continue;
                };
                let mut a = a.clone();
                let mut b = b.clone();
                a.sort_by(f64::total_cmp);
                b.sort_by(f64::total_cmp);
                let mut rng =
                    SplitMix64::for_stream(cfg.seed, &["permutation", key, lang_a, lang_b]);
                let p_value = permutation_p_value(&a, &b, cfg.permutations, &mut rng);
                let (mean_a, mean_b) = (mean(&a), mean(&b));
                out.push(LangDelta {
                    key: key.clone(),
                    lang_a: (*lang_a).clone(),
                    lang_b: (*lang_b).clone(),
                    n_a: a.len(),
                    n_b: b.len(),
                    mean_a,
                    mean_b,
                    delta: mean_a - mean_b,
                    p_value,
                    indicative: a.len() < cfg.indicative_min_n
                        || b.len() < cfg.indicative_min_n
                        || p_value >= cfg.alpha,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: &str, lang: &str, t: &str, gold: bool, scores: &[(&str, f64)]) -> CaseScores {
        scores
            .iter()
            .fold(CaseScores::new(id, lang, t, gold), |c, (k, v)| {
                c.with_score(*k, *v)
            })
    }

    fn fast() -> AggregateConfig {
        AggregateConfig {
            bootstrap_resamples: 500,
            permutations: 1000,
            ..AggregateConfig::default()
        }
    }

    #[test]
    fn missing_key_is_not_a_zero() {
        let cases = [
            case("1", "en", "golden", true, &[("retrieval_hit_at_k", 1.0)]),
            case(
                "2",
                "en",
                "capability",
                false,
                &[("refusal_correctness", 1.0)],
            ),
        ];
        let a = aggregate(&cases, &fast()).unwrap();
        let m = a.metric("overall", "retrieval_hit_at_k").unwrap();
        assert_eq!((m.mean, m.n), (1.0, 1));
        assert_eq!(m.ci, None);
        assert_eq!(a.overall().unwrap().n_cases, 2);
        assert_eq!(a.n_cases, 2);
    }

    #[test]
    fn slices_have_their_own_n() {
        let cases = [
            case("1", "en", "golden", true, &[("h", 1.0)]),
            case("2", "en", "adversarial", true, &[("h", 0.0)]),
            case("3", "es-419", "adversarial", false, &[("r", 1.0)]),
            case("4", "pt-BR", "golden", true, &[("h", 1.0)]),
            case("5", "pt-BR", "no_match", false, &[("r", 0.0)]),
        ];
        let a = aggregate(&cases, &fast()).unwrap();
        let names: Vec<&str> = a.slices.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "overall",
                "lang:en",
                "lang:es-419",
                "lang:pt-BR",
                "type:adversarial",
                "type:golden",
                "type:no_match",
                "gold:golden",
                "gold:adversarial"
            ]
        );
        assert_eq!(a.metric("overall", "h").unwrap().n, 3);
        assert_eq!(a.metric("lang:en", "h").unwrap().n, 2);
        assert!(a.metric("lang:es-419", "h").is_none());
        assert_eq!(a.slice("type:adversarial").unwrap().n_cases, 2);
        // The gold-less adversarial case is in type:adversarial, not in gold:adversarial.
        assert_eq!(a.slice("gold:adversarial").unwrap().n_cases, 1);
        assert_eq!(a.metric("gold:adversarial", "h").unwrap().mean, 0.0);
        assert_eq!(a.metric("gold:golden", "h").unwrap().n, 2);
        assert_eq!(a.metric("gold:golden", "h").unwrap().mean, 1.0);
    }

    #[test]
    fn gold_slices_exist_even_when_empty() {
        let a = aggregate(&[case("1", "en", "capability", false, &[])], &fast()).unwrap();
        let g = a.slice("gold:golden").unwrap();
        assert_eq!(g.n_cases, 0);
        assert!(g.metrics.is_empty());
        assert!(a.slice("gold:adversarial").is_some());
    }

    #[test]
    fn empty_input_aggregates_to_empty_slices() {
        let a = aggregate(&[], &fast()).unwrap();
        assert_eq!(a.n_cases, 0);
        assert_eq!(a.slices.len(), 3);
        assert!(a.lang_deltas.is_empty());
    }

    #[test]
    fn ci_brackets_the_mean_and_is_deterministic() {
        let cases: Vec<CaseScores> = (0..100)
            .map(|i| {
                case(
                    &i.to_string(),
                    "en",
                    "golden",
                    true,
                    &[("h", f64::from(i % 2))],
                )
            })
            .collect();
        let a = aggregate(&cases, &AggregateConfig::default()).unwrap();
        let m = a.metric("overall", "h").unwrap();
        assert_eq!(m.mean, 0.5);
        let ci = m.ci.unwrap();
        assert!(ci.low < 0.5 && ci.high > 0.5);
        // Normal approximation: ±1.96·0.05 ≈ ±0.098.
        assert!((ci.low - 0.40).abs() < 0.03, "{ci:?}");
        assert!((ci.high - 0.60).abs() < 0.03, "{ci:?}");
        let b = aggregate(&cases, &AggregateConfig::default()).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn constant_values_give_a_degenerate_interval() {
        let cases: Vec<CaseScores> = (0..5)
            .map(|i| case(&i.to_string(), "en", "golden", true, &[("h", 1.0)]))
            .collect();
        let a = aggregate(&cases, &fast()).unwrap();
        let ci = a.metric("overall", "h").unwrap().ci.unwrap();
        assert_eq!((ci.low, ci.high), (1.0, 1.0));
    }

    #[test]
    fn case_order_does_not_change_the_result() {
        let mut cases: Vec<CaseScores> = (0..40)
            .map(|i| {
                let lang = ["en", "es-419", "pt-BR"][i % 3];
                case(
                    &format!("c{i}"),
                    lang,
                    "golden",
                    true,
                    &[("h", ((i * 7) % 5) as f64 / 4.0)],
                )
            })
            .collect();
        let a = aggregate(&cases, &fast()).unwrap();
        cases.reverse();
        cases.swap(3, 17);
        let b = aggregate(&cases, &fast()).unwrap();
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
    }

    #[test]
    fn merge_equals_single_pass() {
        let cases: Vec<CaseScores> = (0..30)
            .map(|i| {
                let lang = ["en", "pt-BR"][i % 2];
                let t = ["golden", "adversarial", "no_match"][i % 3];
                case(
                    &format!("c{i}"),
                    lang,
                    t,
                    t != "no_match",
                    &[("h", (i % 4) as f64)],
                )
            })
            .collect();
        let whole = aggregate(&cases, &fast()).unwrap();
        let mut left = Aggregator::new();
        let mut right = Aggregator::new();
        for (i, c) in cases.iter().enumerate() {
            if i % 3 == 0 { &mut left } else { &mut right }
                .add(c)
                .unwrap();
        }
        left.merge(right).unwrap();
        assert_eq!(left.finish(&fast()).unwrap(), whole);
    }

    #[test]
    fn duplicates_and_bad_values_are_rejected() {
        let c = case("1", "en", "golden", true, &[("h", 1.0)]);
        assert!(matches!(
            aggregate(&[c.clone(), c.clone()], &fast()),
            Err(EvalError::DuplicateCase(id)) if id == "1"
        ));
        let mut left = Aggregator::new();
        left.add(&c).unwrap();
        let mut right = Aggregator::new();
        right.add(&c).unwrap();
        assert!(matches!(
            left.merge(right),
            Err(EvalError::DuplicateCase(_))
        ));
        let nan = case("2", "en", "golden", true, &[("h", f64::NAN)]);
        assert!(matches!(
            aggregate(&[nan], &fast()),
            Err(EvalError::NonFiniteScore { .. })
        ));
        let both = case("3", "en", "golden", true, &[("j", 4.0)]).with_error("j");
        assert!(matches!(
            aggregate(&[both], &fast()),
            Err(EvalError::ScoredAndFailed { .. })
        ));
    }

    #[test]
    fn errors_are_counted_not_scored() {
        let cases = [
            case("1", "en", "golden", true, &[("faithfulness", 5.0)]),
            CaseScores::new("2", "en", "golden", true).with_error("faithfulness"),
        ];
        let a = aggregate(&cases, &fast()).unwrap();
        assert_eq!(a.metric("overall", "faithfulness").unwrap().n, 1);
        assert_eq!(a.errors_of("faithfulness"), 1);
        assert_eq!(a.slice("lang:en").unwrap().errors["faithfulness"], 1);
    }

    #[test]
    fn config_is_validated() {
        for bad in [
            AggregateConfig {
                confidence: 1.0,
                ..fast()
            },
            AggregateConfig {
                confidence: f64::NAN,
                ..fast()
            },
            AggregateConfig {
                alpha: 0.0,
                ..fast()
            },
            AggregateConfig {
                bootstrap_resamples: 0,
                ..fast()
            },
            AggregateConfig {
                permutations: 0,
                ..fast()
            },
        ] {
            assert!(matches!(
                aggregate(&[], &bad),
                Err(EvalError::InvalidConfig(_))
            ));
        }
    }

    #[test]
    fn identical_languages_are_not_different() {
        let cases: Vec<CaseScores> = (0..60)
            .map(|i| {
                let lang = if i < 30 { "en" } else { "es-419" };
                case(
                    &format!("c{i}"),
                    lang,
                    "golden",
                    true,
                    &[("h", f64::from(i % 2))],
                )
            })
            .collect();
        let a = aggregate(&cases, &fast()).unwrap();
        assert_eq!(a.lang_deltas.len(), 1);
        let d = &a.lang_deltas[0];
        assert_eq!((d.lang_a.as_str(), d.lang_b.as_str()), ("en", "es-419"));
        assert_eq!(d.delta, 0.0);
        assert_eq!(d.p_value, 1.0);
        assert!(d.indicative);
    }

    #[test]
    fn a_large_clear_difference_is_not_indicative() {
        let cases: Vec<CaseScores> = (0..80)
            .map(|i| {
                let (lang, v) = if i < 40 {
                    ("en", f64::from(i % 10 != 0)) // 0.9
                } else {
                    ("pt-BR", f64::from(i % 10 < 3)) // 0.3
                };
                case(&format!("c{i}"), lang, "golden", true, &[("h", v)])
            })
            .collect();
        let a = aggregate(&cases, &AggregateConfig::default()).unwrap();
        let d = &a.lang_deltas[0];
        assert!((d.delta - 0.6).abs() < 1e-12);
        assert!(d.p_value < 0.001, "{}", d.p_value);
        assert!(!d.indicative);
        assert_eq!((d.n_a, d.n_b), (40, 40));
    }

    #[test]
    fn a_clear_difference_on_small_n_stays_indicative() {
        let cases: Vec<CaseScores> = (0..40)
            .map(|i| {
                let (lang, v) = if i < 20 { ("en", 1.0) } else { ("pt-BR", 0.0) };
                case(&format!("c{i}"), lang, "golden", true, &[("h", v)])
            })
            .collect();
        let a = aggregate(&cases, &fast()).unwrap();
        let d = &a.lang_deltas[0];
        assert!(d.p_value < 0.01);
        assert!(d.indicative, "n = 20 < 30");
    }

    #[test]
    fn deltas_cover_every_pair_that_carries_the_key() {
        let cases = [
            case("1", "en", "golden", true, &[("h", 1.0), ("r", 1.0)]),
            case("2", "es-419", "golden", true, &[("h", 0.0)]),
            case("3", "pt-BR", "golden", true, &[("h", 1.0), ("r", 0.0)]),
        ];
        let a = aggregate(&cases, &fast()).unwrap();
        let pairs: Vec<(&str, &str, &str)> = a
            .lang_deltas
            .iter()
            .map(|d| (d.key.as_str(), d.lang_a.as_str(), d.lang_b.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("h", "en", "es-419"),
                ("h", "en", "pt-BR"),
                ("h", "es-419", "pt-BR"),
                ("r", "en", "pt-BR")
            ]
        );
    }

    #[test]
    fn json_roundtrip_and_field_names() {
        let cases = [
            case("1", "en", "golden", true, &[("h", 1.0)]),
            case("2", "es-419", "golden", true, &[("h", 0.0)]),
        ];
        let a = aggregate(&cases, &fast()).unwrap();
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["schema_version"], 1);
        assert_eq!(json["slices"][0]["name"], "overall");
        assert_eq!(json["slices"][0]["dim"], "overall");
        assert_eq!(json["slices"][1]["dim"], "lang");
        assert_eq!(json["slices"][0]["metrics"]["h"]["n"], 2);
        assert!(json["slices"][0]["metrics"]["h"]["ci"]["low"].is_number());
        assert_eq!(json["lang_deltas"][0]["indicative"], true);
        let back: Aggregate = serde_json::from_value(json).unwrap();
        assert_eq!(back, a);
    }

    #[test]
    fn quantile_interpolates() {
        let v = [0.0, 1.0, 2.0, 3.0];
        assert_eq!(quantile(&v, 0.0), 0.0);
        assert_eq!(quantile(&v, 1.0), 3.0);
        assert_eq!(quantile(&v, 0.5), 1.5);
        assert_eq!(quantile(&[7.0], 0.3), 7.0);
    }
}
