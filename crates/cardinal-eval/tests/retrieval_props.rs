//! Property tests of the ADR-0023 retrieval triad.

use cardinal_eval::{
    dedup_first, hit_at_k, ndcg_at_k, recall_at_k, RetrievalRecall, HIT_KEY, NDCG_KEY, RECALL_KEY,
};
use proptest::prelude::*;

/// Ids from a small alphabet so gold and retrieved overlap often.
fn ids(max_len: usize) -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec((0u8..10).prop_map(|i| format!("card{i}")), 0..max_len)
}

fn triad(gold: &[String], retrieved: &[String], k: usize) -> (f64, f64, f64) {
    let m = RetrievalRecall::with_k(k).unwrap().score(gold, retrieved);
    (m[HIT_KEY], m[RECALL_KEY], m[NDCG_KEY])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn all_in_unit_interval(gold in ids(6), retrieved in ids(15), k in 1usize..12) {
        prop_assume!(!gold.is_empty());
        let (h, r, n) = triad(&gold, &retrieved, k);
        for v in [h, r, n] {
            prop_assert!((0.0..=1.0).contains(&v), "{v}");
        }
    }

    #[test]
    fn hit_dominates_recall(gold in ids(6), retrieved in ids(15), k in 1usize..12) {
        prop_assume!(!gold.is_empty());
        let (h, r, n) = triad(&gold, &retrieved, k);
        prop_assert!(h >= r);
        prop_assert!(h == 0.0 || h == 1.0);
        if r > 0.0 {
            prop_assert_eq!(h, 1.0);
        }
        // The three agree on "something relevant is in the top k".
        prop_assert_eq!(h > 0.0, r > 0.0);
        prop_assert_eq!(h > 0.0, n > 0.0);
    }

    #[test]
    fn empty_gold_has_no_keys(retrieved in ids(15), k in 1usize..12) {
        let gold: Vec<String> = Vec::new();
        prop_assert!(RetrievalRecall::with_k(k).unwrap().score(&gold, &retrieved).is_empty());
        prop_assert_eq!(hit_at_k(&gold, &retrieved, k), None);
        prop_assert_eq!(recall_at_k(&gold, &retrieved, k), None);
        prop_assert_eq!(ndcg_at_k(&gold, &retrieved, k), None);
    }

    #[test]
    fn non_empty_gold_has_exactly_three_keys(gold in ids(6), retrieved in ids(15), k in 1usize..12) {
        prop_assume!(!gold.is_empty());
        let m = RetrievalRecall::with_k(k).unwrap().score(&gold, &retrieved);
        let keys: Vec<&str> = m.keys().map(String::as_str).collect();
        prop_assert_eq!(keys, vec![HIT_KEY, NDCG_KEY, RECALL_KEY]);
    }

    #[test]
    fn duplicates_change_nothing(
        gold in ids(6),
        retrieved in ids(15),
        k in 1usize..12,
        inserts in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>()), 0..8),
    ) {
        prop_assume!(!gold.is_empty() && !retrieved.is_empty());
        // Insert copies of earlier ids anywhere after their first occurrence.
        let mut noisy = retrieved.clone();
        for (src, dst) in inserts {
            let i = src.index(noisy.len());
            let at = i + 1 + dst.index(noisy.len() - i);
            let id = noisy[i].clone();
            noisy.insert(at, id);
        }
        prop_assert_eq!(dedup_first(&noisy), dedup_first(&retrieved));
        prop_assert_eq!(triad(&gold, &noisy, k), triad(&gold, &retrieved, k));
        // Duplicated gold changes nothing either.
        let mut gold2 = gold.clone();
        gold2.extend(gold.iter().cloned());
        prop_assert_eq!(triad(&gold2, &retrieved, k), triad(&gold, &retrieved, k));
    }

    #[test]
    fn permutations_and_additions_beyond_k_change_nothing(
        gold in ids(6),
        retrieved in ids(15),
        k in 1usize..12,
        tail in ids(10),
        seed in any::<u64>(),
    ) {
        prop_assume!(!gold.is_empty());
        let distinct: Vec<String> = dedup_first(&retrieved).into_iter().map(str::to_string).collect();
        let cut = k.min(distinct.len());
        let (head, rest) = distinct.split_at(cut);
        // Shuffle what lies beyond the first k distinct ids and append arbitrary ids.
        let mut rest = rest.to_vec();
        let mut s = seed;
        for i in (1..rest.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            rest.swap(i, (s >> 33) as usize % (i + 1));
        }
        let mut changed: Vec<String> = head.to_vec();
        if cut == k {
            changed.extend(rest);
            changed.extend(tail);
        }
        prop_assert_eq!(triad(&gold, &changed, k), triad(&gold, &retrieved, k));
    }

    #[test]
    fn gold_order_does_not_matter(gold in ids(6), retrieved in ids(15), k in 1usize..12) {
        prop_assume!(!gold.is_empty());
        let mut rev = gold.clone();
        rev.reverse();
        prop_assert_eq!(triad(&rev, &retrieved, k), triad(&gold, &retrieved, k));
    }

    #[test]
    fn ideal_ranking_scores_one(gold in ids(6), others in ids(10), k in 1usize..12) {
        prop_assume!(!gold.is_empty());
        // All distinct gold first, then non-gold: nDCG = 1 whatever k is, even when |gold| > k.
        let distinct_gold: Vec<String> = dedup_first(&gold).into_iter().map(str::to_string).collect();
        let mut ranking = distinct_gold.clone();
        ranking.extend(others.into_iter().filter(|o| !gold.contains(o)));
        let (h, r, n) = triad(&gold, &ranking, k);
        prop_assert_eq!(h, 1.0);
        prop_assert!((n - 1.0).abs() < 1e-12, "{n}");
        let expected_recall = k.min(distinct_gold.len()) as f64 / distinct_gold.len() as f64;
        prop_assert!((r - expected_recall).abs() < 1e-12);
    }

    #[test]
    fn recall_counts_distinct_gold_in_top_k(gold in ids(6), retrieved in ids(15), k in 1usize..12) {
        prop_assume!(!gold.is_empty());
        let g = dedup_first(&gold);
        let mut top = dedup_first(&retrieved);
        top.truncate(k);
        let found = g.iter().filter(|id| top.contains(id)).count();
        let r = recall_at_k(&gold, &retrieved, k).unwrap();
        prop_assert!((r - found as f64 / g.len() as f64).abs() < 1e-12);
    }
}
