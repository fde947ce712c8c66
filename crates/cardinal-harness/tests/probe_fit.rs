//! `probe-v1`: the fit reads dev labels only (flipping every test label leaves it unchanged;
//! flipping dev labels moves it), its verdicts follow the features it was fitted on, the
//! feature vector is kept once per item and not in the verdicts, and a model without hidden
//! states gives judge errors, never scores.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

mod common;

use cardinal_dataset::calibration::{LoadedItem, Split};
use cardinal_harness::calibration::{fit, rescore, DevSplit, ItemScores, ScoresFile};
use cardinal_harness::scorer::{CaseScorer, ProbeScorer, Verdict};
use cardinal_judge::checks::{Calibration, CheckFraming};
use cardinal_judge::JudgeInput;
use cardinal_llm::{LlmError, Message, YesNo, YesNoModel};
use common::{corpus, flipped};

/// A deterministic number in [-0.5, 0.5) from an item id and a salt.
fn noise(id: &str, salt: u64) -> f32 {
    (common::unit(id, salt) - 0.5) as f32
}

/// 64 features: features 0-11 carry the faithfulness label, 12-23 the groundedness label
/// (each with its own noise), the rest is noise.
fn features(li: &LoadedItem) -> Vec<f32> {
    let id = &li.item.id;
    let f = li.item.reference("faithfulness").unwrap() as f32;
    let g = li.item.reference("groundedness").unwrap() as f32;
    (0..64u64)
        .map(|k| match k {
            0..12 => f + 0.5 * noise(id, k),
            12..24 => g + 0.5 * noise(id, k),
            _ => noise(id, k),
        })
        .collect()
}

fn scores(items: &[LoadedItem]) -> ScoresFile {
    ScoresFile {
        schema_version: 2,
        scorer: "probe-v1".into(),
        judge_model: "scripted".into(),
        labels: Vec::new(),
        split: "all".into(),
        sample: None,
        content_free: None,
        calibration: None,
        items: items
            .iter()
            .map(|li| ItemScores {
                item_id: li.item.id.clone(),
                lang: li.item.lang.tag().to_string(),
                category: li.item.category,
                split: li.item.split,
                framing: CheckFraming::FullCard,
                verdicts: ["groundedness", "faithfulness"]
                    .iter()
                    .map(|d| {
                        (
                            d.to_string(),
                            Verdict::Failed {
                                runtime: false,
                                message: "no fit".into(),
                                detail: serde_json::Value::Null,
                            },
                        )
                    })
                    .collect::<BTreeMap<_, _>>(),
                checks: None,
                signals: None,
                probe: Some(features(li)),
                seconds: 0.0,
            })
            .collect(),
    }
}

#[test]
fn the_probe_fit_reads_dev_labels_only_and_scores_test_items_from_their_features() {
    let items = corpus();
    let s = scores(&items);
    let clean = fit(&DevSplit::from_items(&items), &s, None, Vec::new()).unwrap();
    let p = clean.probe.as_ref().expect("probe-v1 fits a probe");
    assert_eq!(clean.scorer, "probe-v1");
    assert_eq!(clean.split, "dev");
    assert_eq!(p.layer, cardinal_judge::probe::LAYER);
    assert_eq!(
        p.n,
        items
            .iter()
            .filter(|li| li.item.split == Split::Dev)
            .count()
    );
    assert_eq!(p.faithfulness.weights.len(), 64);

    let again = fit(
        &DevSplit::from_items(&flipped(&items, Split::Test)),
        &s,
        None,
        Vec::new(),
    )
    .unwrap();
    assert_eq!(clean, again, "a test label moved the fit");
    let moved = fit(
        &DevSplit::from_items(&flipped(&items, Split::Dev)),
        &s,
        None,
        Vec::new(),
    )
    .unwrap();
    assert_ne!(clean, moved, "the fit does not read the dev labels");

    // Re-scored under the fit, test items get scores that follow their (unseen) labels.
    let mut rescored = s.clone();
    rescore(&mut rescored, &clean);
    let mut agree = 0;
    let mut n = 0;
    for it in rescored.items.iter().filter(|i| i.split == Split::Test) {
        let li = items.iter().find(|l| l.item.id == it.item_id).unwrap();
        let judge = it.verdicts["faithfulness"].score().expect("a score") as u8;
        let human = li.item.reference("faithfulness").unwrap();
        n += 1;
        agree += usize::from(cardinal_eval::Bin::of(judge) == cardinal_eval::Bin::of(human));
    }
    assert!(agree * 10 >= n * 8, "binned agreement {agree}/{n}");
}

struct Scripted {
    hidden: bool,
}

impl YesNoModel for Scripted {
    fn id(&self) -> String {
        "scripted".into()
    }
    fn yes_no(&self, _: &[Message], checks: &[String]) -> cardinal_llm::Result<Vec<YesNo>> {
        Ok(vec![
            YesNo {
                p_yes: 0.5,
                mass: None
            };
            checks.len()
        ])
    }
    fn span_states(
        &self,
        messages: &[Message],
        span: &str,
        layer: usize,
    ) -> cardinal_llm::Result<Vec<f32>> {
        if !self.hidden {
            return Err(LlmError::Config("no hidden states".into()));
        }
        assert_eq!(layer, cardinal_judge::probe::LAYER);
        assert!(messages.last().unwrap().content.ends_with(span));
        // Risky wording raises feature 0; the rules' presence shows in feature 1.
        let risky = span.contains("two") as u8 as f32;
        let rules = messages.last().unwrap().content.contains("RULES") as u8 as f32;
        Ok(vec![risky, rules, 1.0])
    }
}

#[test]
fn the_probe_scorer_scores_from_hidden_states_and_fails_visibly_without_them() {
    let card = cardinal_kb::parse_card(
        Path::new("kb/en/missed-dose.md"),
        "+++\nid = \"missed-dose.en\"\nlang = \"en\"\ntitle = \"Missed dose\"\ntopic = \"missed-dose\"\nsynthetic = true\n+++\n\n- Take it when you remember.\n\n## Rules\n\n- Never advise taking two doses at once.\n",
    )
    .unwrap();
    let input = |answer: &'static str| JudgeInput {
        question: "I forgot my pill",
        answer,
        lang: cardinal_kb::Lang::En,
        cited: vec![&card],
        unknown_cited: vec![],
        retrieved: vec![&card],
    };
    let mut cal = Calibration::uncalibrated("scripted");
    cal.scorer = "probe-v1".into();
    // Faithfulness falls by 3 points with risky wording; groundedness is flat at 4.
    cal.probe = Some(cardinal_judge::probe::ProbeFit {
        layer: cardinal_judge::probe::LAYER,
        components: 2,
        ridge_alpha: 1.0,
        n: 10,
        groundedness: cardinal_judge::probe::Linear {
            weights: vec![0.0, 0.0, 0.0],
            bias: 4.0,
        },
        faithfulness: cardinal_judge::probe::Linear {
            weights: vec![-3.0, 0.0, 0.0],
            bias: 5.0,
        },
    });
    let scorer = ProbeScorer::new(Arc::new(Scripted { hidden: true }), cal.clone());
    let v: BTreeMap<String, Verdict> = scorer.score(&input("Take it now.")).into_iter().collect();
    let risky: BTreeMap<String, Verdict> =
        scorer.score(&input("Take two now.")).into_iter().collect();
    let (safe_f, risky_f) = (
        v["faithfulness"].score().unwrap(),
        risky["faithfulness"].score().unwrap(),
    );
    assert!(safe_f >= 4.0 && risky_f <= 2.0, "{safe_f} {risky_f}");
    assert!(matches!(v["hallucination"], Verdict::NotApplicable { .. }));
    // Sweeps keep no feature vector in the detail; calibration runs keep it until
    // `run_scores` moves it to the item.
    let Verdict::Scored { detail, .. } = &v["groundedness"] else {
        panic!("scored")
    };
    assert!(detail
        .get(cardinal_harness::scorer::PROBE_FEATURES)
        .is_none());
    let kept = ProbeScorer::new(Arc::new(Scripted { hidden: true }), cal.clone())
        .keeping_features()
        .score(&input("Take it now."));
    let Verdict::Scored { detail, .. } = &kept[0].1 else {
        panic!("scored")
    };
    assert_eq!(
        detail[cardinal_harness::scorer::PROBE_FEATURES],
        serde_json::json!([0.0, 1.0, 1.0])
    );
    // No hidden states: a judge error on every gated dimension, no score.
    let blind = ProbeScorer::new(Arc::new(Scripted { hidden: false }), cal.clone());
    for (d, verdict) in blind.score(&input("Take it now.")) {
        assert!(
            matches!(verdict, Verdict::Failed { .. }),
            "{d}: {verdict:?}"
        );
    }
    // No fitted probe: judge errors too.
    let mut unfitted = cal;
    unfitted.probe = None;
    let none = ProbeScorer::new(Arc::new(Scripted { hidden: true }), unfitted);
    let got: BTreeMap<String, Verdict> = none.score(&input("Take it now.")).into_iter().collect();
    assert!(matches!(got["faithfulness"], Verdict::Failed { .. }));
}
