//! The ADR-0023 retrieval triad: hit@k, recall@k and nDCG@k over **retrieved** card ids.
//!
//! Pinned decisions (ADR-0023), all implemented here:
//! - metrics are computed on the ids the retriever returned, in rank order — never on the ids the
//!   answer cited. Card identity is the parent id when present, else the chunk id ([`card_id`]);
//! - ids are deduplicated by first occurrence **before** the top-k cut-off ([`dedup_first`]), so a
//!   duplicate can neither count a gain twice nor push a later card out of the top k; gold ids are
//!   deduplicated too;
//! - `retrieval_hit_at_k` is the primary success figure (gold is disjunctive: one acceptable card
//!   satisfies the citation contract); `retrieval_recall_at_k` is a conservative lower bound
//!   (retrieving one of two acceptable cards scores 0.5); `retrieval_ndcg_at_k` is binary-gain nDCG
//!   normalised against the ideal ranking of `min(|gold|, k)` relevant cards, so it never
//!   exceeds 1.0 even when not all gold cards fit in k;
//! - **empty gold ⇒ no keys at all** (not 0.0, not 1.0): the aggregator averages over the cases
//!   that carry a key, so the corpus mean covers exactly the gold-labelled cases with an honest n.
//!   Which cases are scored is decided by label presence, never by case type.

use std::collections::{BTreeMap, HashSet};

use crate::error::{EvalError, Result};

/// Score key of hit@k (1.0 when at least one gold card is in the top k).
pub const HIT_KEY: &str = "retrieval_hit_at_k";
/// Score key of recall@k (|gold ∩ top-k| / |gold|; a lower bound under disjunctive gold).
pub const RECALL_KEY: &str = "retrieval_recall_at_k";
/// Score key of binary-gain nDCG@k.
pub const NDCG_KEY: &str = "retrieval_ndcg_at_k";

/// The retrieval-recall evaluator: emits the ADR-0023 triad for one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrievalRecall {
    k: usize,
}

impl RetrievalRecall {
    /// The evaluator for the configured retrieval top-k (the caller passes the configured value,
    /// so the metric's cut-off is the one the agent used). Errors when `k` is 0.
    pub fn new(configured_top_k: usize) -> Result<Self> {
        if configured_top_k == 0 {
            return Err(EvalError::ZeroK);
        }
        Ok(Self {
            k: configured_top_k,
        })
    }

    /// Constructor override for deterministic tests: the same evaluator with an explicit `k`,
    /// independent of any configuration. Errors when `k` is 0.
    pub fn with_k(k: usize) -> Result<Self> {
        Self::new(k)
    }

    /// The cut-off this evaluator scores at.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Scores one case: `gold` is the case's disjunctive `must_cite_one_of`, `retrieved` the card
    /// ids the retriever returned in rank order.
    ///
    /// Returns exactly the three keys [`HIT_KEY`], [`RECALL_KEY`] and [`NDCG_KEY`], each in
    /// `[0, 1]`, when gold is non-empty, and an **empty map** when gold is empty (ADR-0023 (B)).
    pub fn score<G, R>(&self, gold: &[G], retrieved: &[R]) -> BTreeMap<String, f64>
    where
        G: AsRef<str>,
        R: AsRef<str>,
    {
        let mut out = BTreeMap::new();
        let (Some(hit), Some(recall), Some(ndcg)) = (
            hit_at_k(gold, retrieved, self.k),
            recall_at_k(gold, retrieved, self.k),
            ndcg_at_k(gold, retrieved, self.k),
        ) else {
            return out;
        };
        out.insert(HIT_KEY.to_string(), hit);
        out.insert(RECALL_KEY.to_string(), recall);
        out.insert(NDCG_KEY.to_string(), ndcg);
        out
    }
}

/// Card identity of a retrieved chunk: its parent card id when present, else its own id.
pub fn card_id<'a>(parent_id: Option<&'a str>, chunk_id: &'a str) -> &'a str {
    parent_id.unwrap_or(chunk_id)
}

/// The ids in order of first occurrence, later duplicates removed.
pub fn dedup_first<S: AsRef<str>>(ids: &[S]) -> Vec<&str> {
    let mut seen = HashSet::with_capacity(ids.len());
    ids.iter()
        .map(AsRef::as_ref)
        .filter(|id| seen.insert(*id))
        .collect()
}

/// Deduplicated gold set and deduplicated top-k, or `None` when there is nothing to score.
fn prepare<'g, 'r, G, R>(
    gold: &'g [G],
    retrieved: &'r [R],
    k: usize,
) -> Option<(HashSet<&'g str>, Vec<&'r str>)>
where
    G: AsRef<str>,
    R: AsRef<str>,
{
    let gold: HashSet<&str> = gold.iter().map(AsRef::as_ref).collect();
    if gold.is_empty() || k == 0 {
        return None;
    }
    let mut top = dedup_first(retrieved);
    top.truncate(k);
    Some((gold, top))
}

/// hit@k: 1.0 when at least one gold id is among the first `k` distinct retrieved ids, else 0.0.
///
/// `None` when `gold` is empty (the case carries no retrieval label) or `k` is 0.
pub fn hit_at_k<G: AsRef<str>, R: AsRef<str>>(
    gold: &[G],
    retrieved: &[R],
    k: usize,
) -> Option<f64> {
    let (gold, top) = prepare(gold, retrieved, k)?;
    Some(if top.iter().any(|id| gold.contains(id)) {
        1.0
    } else {
        0.0
    })
}

/// recall@k: |gold ∩ top-k| / |gold| over distinct ids — a conservative lower bound under
/// disjunctive gold (one of two acceptable cards scores 0.5 although the contract is met).
///
/// `None` when `gold` is empty or `k` is 0.
pub fn recall_at_k<G: AsRef<str>, R: AsRef<str>>(
    gold: &[G],
    retrieved: &[R],
    k: usize,
) -> Option<f64> {
    let (gold, top) = prepare(gold, retrieved, k)?;
    let found = top.iter().filter(|id| gold.contains(*id)).count();
    Some(found as f64 / gold.len() as f64)
}

/// nDCG@k with binary gain: DCG = Σ over ranks i = 1..=k of rel_i / log2(i + 1), divided by the
/// DCG of the ideal ranking, which puts `min(|gold|, k)` relevant cards first. Always in `[0, 1]`.
///
/// `None` when `gold` is empty or `k` is 0.
pub fn ndcg_at_k<G: AsRef<str>, R: AsRef<str>>(
    gold: &[G],
    retrieved: &[R],
    k: usize,
) -> Option<f64> {
    let (gold, top) = prepare(gold, retrieved, k)?;
    let discount = |rank0: usize| 1.0 / ((rank0 + 2) as f64).log2();
    let dcg: f64 = top
        .iter()
        .enumerate()
        .filter(|(_, id)| gold.contains(*id))
        .map(|(i, _)| discount(i))
        .sum();
    let ideal: f64 = (0..gold.len().min(k)).map(discount).sum();
    // Guard against rounding pushing a perfect ranking a hair above 1.
    Some((dcg / ideal).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|x| x.to_string()).collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn pinned_example_gold_ab_retrieved_xayb_k3() {
        let gold = s(&["a", "b"]);
        let retrieved = s(&["x", "a", "y", "b"]);
        let m = RetrievalRecall::with_k(3).unwrap().score(&gold, &retrieved);
        assert_eq!(m.len(), 3);
        assert_eq!(m[HIT_KEY], 1.0);
        assert_eq!(m[RECALL_KEY], 0.5);
        let l3 = 3f64.log2();
        assert!(close(m[NDCG_KEY], (1.0 / l3) / (1.0 + 1.0 / l3)));
        assert!(close(m[NDCG_KEY], 0.386_852_807_234_541_6));
    }

    #[test]
    fn perfect_single_gold() {
        let m = RetrievalRecall::with_k(5)
            .unwrap()
            .score(&["a"], &["a", "b"]);
        assert_eq!((m[HIT_KEY], m[RECALL_KEY], m[NDCG_KEY]), (1.0, 1.0, 1.0));
    }

    #[test]
    fn more_gold_than_k_ndcg_is_normalised_against_ideal() {
        // 3 gold, k = 2, both slots relevant: recall 2/3, but the ranking is ideal (nDCG 1).
        let m = RetrievalRecall::with_k(2)
            .unwrap()
            .score(&["a", "b", "c"], &["a", "b", "c"]);
        assert_eq!(m[HIT_KEY], 1.0);
        assert!(close(m[RECALL_KEY], 2.0 / 3.0));
        assert!(close(m[NDCG_KEY], 1.0));
    }

    #[test]
    fn gold_at_rank_two_single_gold() {
        // gold {b}, [a, b], k = 2: DCG = 1/log2(3), ideal = 1.
        let m = RetrievalRecall::with_k(2)
            .unwrap()
            .score(&["b"], &["a", "b"]);
        assert!(close(m[NDCG_KEY], 1.0 / 3f64.log2()));
        assert_eq!(m[HIT_KEY], 1.0);
    }

    #[test]
    fn duplicates_are_removed_before_the_cutoff() {
        // Without dedup the top-2 would be [a, a] and miss b.
        let m = RetrievalRecall::with_k(2)
            .unwrap()
            .score(&["b"], &["a", "a", "b"]);
        assert_eq!(m[HIT_KEY], 1.0);
        assert_eq!(m[RECALL_KEY], 1.0);
        // A duplicated gold card does not count twice.
        let m = RetrievalRecall::with_k(2)
            .unwrap()
            .score(&["b", "c"], &["b", "b"]);
        assert_eq!(m[RECALL_KEY], 0.5);
        assert!(close(m[NDCG_KEY], 1.0 / (1.0 + 1.0 / 3f64.log2())));
    }

    #[test]
    fn gold_duplicates_do_not_change_the_denominator() {
        let a = RetrievalRecall::with_k(3)
            .unwrap()
            .score(&["a", "a", "b"], &["a"]);
        let b = RetrievalRecall::with_k(3)
            .unwrap()
            .score(&["a", "b"], &["a"]);
        assert_eq!(a, b);
        assert_eq!(a[RECALL_KEY], 0.5);
    }

    #[test]
    fn miss_scores_zero_on_all_three() {
        let m = RetrievalRecall::with_k(3)
            .unwrap()
            .score(&["g"], &["a", "b", "c", "g"]);
        assert_eq!((m[HIT_KEY], m[RECALL_KEY], m[NDCG_KEY]), (0.0, 0.0, 0.0));
    }

    #[test]
    fn empty_gold_yields_no_keys() {
        let none: [&str; 0] = [];
        assert!(RetrievalRecall::with_k(3)
            .unwrap()
            .score(&none, &["a"])
            .is_empty());
        assert!(RetrievalRecall::with_k(3)
            .unwrap()
            .score(&none, &none)
            .is_empty());
        assert_eq!(hit_at_k(&none, &["a"], 3), None);
        assert_eq!(recall_at_k(&none, &["a"], 3), None);
        assert_eq!(ndcg_at_k(&none, &["a"], 3), None);
    }

    #[test]
    fn empty_retrieval_with_gold_scores_zero() {
        let none: [&str; 0] = [];
        let m = RetrievalRecall::with_k(3).unwrap().score(&["a"], &none);
        assert_eq!((m[HIT_KEY], m[RECALL_KEY], m[NDCG_KEY]), (0.0, 0.0, 0.0));
    }

    #[test]
    fn zero_k_is_rejected() {
        assert!(matches!(RetrievalRecall::new(0), Err(EvalError::ZeroK)));
        assert!(matches!(RetrievalRecall::with_k(0), Err(EvalError::ZeroK)));
        assert_eq!(hit_at_k(&["a"], &["a"], 0), None);
        assert_eq!(RetrievalRecall::new(4).unwrap().k(), 4);
    }

    #[test]
    fn card_identity_prefers_parent() {
        assert_eq!(card_id(Some("flu.en"), "flu.en#2"), "flu.en");
        assert_eq!(card_id(None, "flu.en#2"), "flu.en#2");
    }

    #[test]
    fn dedup_keeps_first_occurrence_order() {
        assert_eq!(dedup_first(&["b", "a", "b", "c", "a"]), vec!["b", "a", "c"]);
    }
}
