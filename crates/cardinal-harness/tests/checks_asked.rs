//! The checks scorer asks only the checks its calibration reads: under a `checks-v2`
//! calibration whose gated scores combine the support likelihood and the evidence (as the
//! committed one does), a sweep asks the claim and invented-detail checks that the
//! hallucination score reads, and nothing else, with the same three scores as when every check
//! is asked; a calibration run (`with_every_check`) asks them all.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cardinal_harness::scorer::{CaseScorer, ChecksScorer};
use cardinal_judge::checks::{Aggregation, Aggregations, Calibration, Cuts, SCORER_V2};
use cardinal_judge::JudgeInput;
use cardinal_llm::{LlmError, Message, YesNo, YesNoModel};

/// P(Yes) from the check's text (so a check gets the same answer whoever else is asked) and
/// a reply likelihood that depends on whether the facts are in the prompt.
#[derive(Default)]
struct Scripted {
    checks: Mutex<Vec<String>>,
    passes: AtomicUsize,
}

impl YesNoModel for Scripted {
    fn id(&self) -> String {
        "scripted".into()
    }
    fn yes_no(&self, _messages: &[Message], checks: &[String]) -> Result<Vec<YesNo>, LlmError> {
        self.passes.fetch_add(1, Ordering::Relaxed);
        self.checks
            .lock()
            .map_err(|_| LlmError::Local("poisoned".into()))?
            .extend(checks.iter().cloned());
        Ok(checks
            .iter()
            .map(|c| YesNo {
                p_yes: (c.len() % 7) as f64 / 7.0 + 0.05,
                mass: Some(0.9),
            })
            .collect())
    }
    fn reply_logprobs(
        &self,
        messages: &[Message],
        pieces: &[String],
    ) -> Result<Vec<f64>, LlmError> {
        let with_facts = messages.iter().any(|m| m.content.contains("these facts"));
        Ok(pieces
            .iter()
            .map(|_| if with_facts { -0.8 } else { -2.1 })
            .collect())
    }
}

fn aggregation(features: Vec<usize>, weights: Vec<f64>) -> Aggregation {
    Aggregation {
        mean: vec![0.0; features.len()],
        sd: vec![1.0; features.len()],
        features,
        weights,
        intercept: 3.0,
        cuts: Cuts([0.3, 0.45, 0.6, 0.75]),
    }
}

fn calibration(g: Aggregation, f: Aggregation) -> Calibration {
    let mut c = Calibration::uncalibrated("scripted");
    c.scorer = SCORER_V2.into();
    c.aggregation = Some(Aggregations {
        groundedness: g,
        faithfulness: f,
        groundedness_candidates: Vec::new(),
        faithfulness_candidates: Vec::new(),
        chosen: ("support likelihood + evidence".into(), "x".into()),
    });
    c
}

fn scores(v: &[(String, cardinal_harness::scorer::Verdict)]) -> Vec<(String, Option<f64>)> {
    v.iter().map(|(d, v)| (d.clone(), v.score())).collect()
}

#[test]
fn a_calibration_that_reads_no_check_asks_only_the_hallucination_checks_with_the_same_scores() {
    let card = cardinal_kb::parse_card(
        std::path::Path::new("kb/en/missed-dose.md"),
        "+++\nid = \"missed-dose.en\"\nlang = \"en\"\ntitle = \"Missed dose\"\ntopic = \"missed-dose\"\nsynthetic = true\n+++\n\n- Take a missed dose when you remember.\n- Call the pharmacy at 555-0150.\n\n## Rules\n\n- Never advise taking two doses at once.\n- Do not interpret symptoms.\n",
    )
    .unwrap();
    let input = JudgeInput {
        question: "I forgot my pill this morning, what now?",
        answer: "Take it when you remember [missed-dose.en]. The pharmacy is at 555-0199. Or take two tomorrow.",
        lang: cardinal_kb::Lang::En,
        cited: vec![&card],
        unknown_cited: vec![],
        retrieved: vec![&card],
    };
    let lean_cal = calibration(
        aggregation(vec![2, 3, 4, 5], vec![0.6, 0.4, 0.1, 0.1]),
        aggregation(vec![0, 2, 3], vec![0.0, 0.5, 0.2]),
    );

    let lean_model = Arc::new(Scripted::default());
    let lean = ChecksScorer::named(SCORER_V2, lean_model.clone(), lean_cal.clone());
    let lean_scores = scores(&lean.score(&input));
    let every_model = Arc::new(Scripted::default());
    let every = ChecksScorer::named(SCORER_V2, every_model.clone(), lean_cal).with_every_check();
    let every_scores = scores(&every.score(&input));

    let asked = lean_model.checks.lock().unwrap().clone();
    let all = every_model.checks.lock().unwrap().clone();
    // Three sentences: claim + invented each; every check adds supported and contradicts per
    // sentence and one per rule.
    assert_eq!(asked.len(), 3 * 2, "{asked:?}");
    assert_eq!(all.len(), 3 * 4 + 2, "{all:?}");
    assert!(asked.iter().all(|c| all.contains(c)));
    assert!(asked
        .iter()
        .all(|c| c.contains("a claim") || c.contains("specific detail")));
    assert_eq!(lean_scores, every_scores);
    assert!(
        lean_scores.iter().all(|(_, s)| s.is_some()),
        "{lean_scores:?}"
    );

    // Without the hallucination checks nothing is asked and no yes/no pass is made; the gated
    // scores stay the same.
    let none_model = Arc::new(Scripted::default());
    let none = ChecksScorer::named(SCORER_V2, none_model.clone(), lean.calibration().clone())
        .without_hallucination();
    let none_scores = scores(&none.score(&input));
    assert_eq!(none_model.passes.load(Ordering::Relaxed), 0);
    assert_eq!(none_scores[..2], lean_scores[..2]);
    assert_eq!(none_scores[2].1, None);

    // A calibration that weighs a check feature asks every check.
    let reads = calibration(
        aggregation(vec![2], vec![1.0]),
        aggregation(vec![1, 2], vec![0.3, 1.0]),
    );
    let reads_model = Arc::new(Scripted::default());
    ChecksScorer::named(SCORER_V2, reads_model.clone(), reads).score(&input);
    assert_eq!(reads_model.checks.lock().unwrap().len(), all.len());
}
