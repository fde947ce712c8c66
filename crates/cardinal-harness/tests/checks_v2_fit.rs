//! `checks-v2`'s fit reads dev labels only: the weights combining checks and signals, the
//! evidence-only baseline and the cut points are the same after every test label is flipped to
//! the other end of the scale, and they change when dev labels are (so the comparison can fail).

use std::collections::BTreeMap;

mod common;

use cardinal_dataset::calibration::{LoadedItem, Split};
use cardinal_harness::calibration::{fit, DevSplit, ItemScores, ScoresFile};
use cardinal_judge::checks::{CheckFraming, CheckKind, CheckResult, Signals, SCORER_V2};
use cardinal_judge::evidence::Evidence;
use common::{corpus, flipped, unit};

fn scores(items: &[LoadedItem]) -> ScoresFile {
    let items = items
        .iter()
        .map(|li| {
            let id = &li.item.id;
            // Signals that lean toward each item's own groundedness label, with noise, so the
            // fitted weights depend on the labels.
            let g = li.item.reference("groundedness").unwrap() as f64;
            let checks = vec![
                CheckResult {
                    kind: CheckKind::Claim,
                    target: 1,
                    p_yes: 0.5 + 0.5 * unit(id, 1),
                    mass: Some(0.9),
                },
                CheckResult {
                    kind: CheckKind::Supported,
                    target: 1,
                    p_yes: unit(id, 2),
                    mass: Some(0.9),
                },
                CheckResult {
                    kind: CheckKind::Breaks,
                    target: 1,
                    p_yes: unit(id, 3),
                    mass: Some(0.9),
                },
            ];
            ItemScores {
                item_id: id.clone(),
                lang: li.item.lang.tag().to_string(),
                category: li.item.category,
                split: li.item.split,
                framing: CheckFraming::FullCard,
                verdicts: BTreeMap::new(),
                checks: Some(checks),
                signals: Some(Signals {
                    support_pmi: g / 5.0 + unit(id, 4),
                    evidence: Evidence {
                        coverage_mean: unit(id, 5),
                        coverage_min: unit(id, 6) * unit(id, 5),
                        new_numbers: (unit(id, 7) * 3.0) as usize,
                    },
                }),
                probe: None,
                seconds: 0.0,
            }
        })
        .collect();
    ScoresFile {
        schema_version: 2,
        scorer: SCORER_V2.into(),
        judge_model: "scripted".into(),
        labels: Vec::new(),
        split: "all".into(),
        sample: None,
        content_free: None,
        calibration: None,
        items,
    }
}

#[test]
fn the_v2_fit_never_reads_a_test_label() {
    let all = corpus();
    // Every test item and a quarter of the dev items (the leave-one-out selection is cubic in
    // the dev items; a quarter keeps this quick and still fits on dozens).
    let items: Vec<LoadedItem> = all
        .into_iter()
        .enumerate()
        .filter(|(i, li)| li.item.split == Split::Test || i % 4 == 0)
        .map(|(_, li)| li)
        .collect();
    assert!(items.iter().any(|li| li.item.split == Split::Test));
    // The scores are made once, from the clean labels, for dev and test items alike.
    let s = scores(&items);
    let clean = fit(&DevSplit::from_items(&items), &s, None, Vec::new()).unwrap();
    let aggs = clean
        .aggregation
        .as_ref()
        .expect("checks-v2 fits an aggregation");
    assert_eq!(clean.scorer, SCORER_V2);
    assert_eq!(clean.split, "dev");
    for a in [&aggs.groundedness, &aggs.faithfulness] {
        assert!(a.weights.iter().all(|&w| w >= 0.0), "{a:?}");
    }
    assert_eq!(
        aggs.groundedness_candidates.len(),
        cardinal_judge::checks::CANDIDATES.len()
    );
    // The support signal follows groundedness here: the chosen set uses it, with weight.
    let pmi = aggs.groundedness.features.iter().position(|&f| f == 2);
    assert!(
        pmi.is_some_and(|k| aggs.groundedness.weights[k] > 0.0),
        "{aggs:?}"
    );

    let test_poisoned = flipped(&items, Split::Test);
    let again = fit(&DevSplit::from_items(&test_poisoned), &s, None, Vec::new()).unwrap();
    assert_eq!(clean, again, "a test label moved the fit");

    let dev_poisoned = flipped(&items, Split::Dev);
    let moved = fit(&DevSplit::from_items(&dev_poisoned), &s, None, Vec::new()).unwrap();
    assert_ne!(clean, moved, "the fit does not read the dev labels at all");
}
