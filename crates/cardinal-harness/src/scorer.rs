//! Judge-based scorers behind one seam: a [`CaseScorer`] turns one answered case into a verdict
//! per dimension. The sweep and the calibration run do not know how a scorer asks its model.
//!
//! - `rubric-v1`: one holistic 1–5 rubric prompt per dimension, the reply parsed strictly
//!   (the scorer of ADR-0029 as first built).
//! - `checks-v1` (default): the rubric decomposed into yes/no checks read from token
//!   probabilities (`cardinal_judge::checks`), mapped to 1–5 by a calibration fitted on the dev
//!   split of the calibration corpus.
//! - `checks-v2`: the checks plus the model's support likelihood and surface evidence, combined
//!   by weights fitted on dev.
//! - `probe-v1`: a linear probe on the in-process judge's hidden state (block 14's output
//!   averaged over the answer), fitted on dev; groundedness and faithfulness only.

use std::sync::Arc;

use cardinal_judge::{Dimension, Judge, JudgeInput, JudgeOutcome};
use cardinal_llm::ChatModel;
use serde::{Deserialize, Serialize};

/// The verdict on one dimension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Verdict {
    /// A score on the dimension's 1–5 scale, and everything that produced it.
    Scored {
        score: f64,
        detail: serde_json::Value,
    },
    /// No verdict: counted as a judge error, never a score. `runtime` is true when the model or
    /// endpoint could not be reached (as opposed to an unreadable reply).
    Failed {
        runtime: bool,
        message: String,
        detail: serde_json::Value,
    },
    /// The dimension does not apply (e.g. nothing real was cited): no key.
    NotApplicable { reason: String },
}

impl Verdict {
    pub fn score(&self) -> Option<f64> {
        match self {
            Verdict::Scored { score, .. } => Some(*score),
            _ => None,
        }
    }
}

/// A judge-based scorer of answered cases.
pub trait CaseScorer: Send + Sync {
    /// Scorer family and version, e.g. `rubric-v1`.
    fn name(&self) -> String;
    /// The judge model's id.
    fn model_id(&self) -> String;
    /// Digest of fitted parameters (calibration), if the scorer has any.
    fn calibration_id(&self) -> Option<String> {
        None
    }
    /// Verdicts per dimension name, in a fixed order.
    fn score(&self, input: &JudgeInput<'_>) -> Vec<(String, Verdict)>;
}

/// `rubric-v1`: the holistic rubric judge, one generation per dimension.
pub struct RubricScorer {
    judge: Judge,
    dimensions: Vec<Dimension>,
}

impl RubricScorer {
    /// All three dimensions (groundedness, faithfulness, hallucination).
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        RubricScorer {
            judge: Judge::new(model),
            dimensions: Dimension::ALL.to_vec(),
        }
    }

    /// Only these dimensions (calibration judges the gated ones only).
    pub fn with_dimensions(mut self, dimensions: &[Dimension]) -> Self {
        self.dimensions = dimensions.to_vec();
        self
    }

    pub fn judge(&self) -> &Judge {
        &self.judge
    }
}

/// A rubric outcome as a verdict.
pub fn verdict_of(outcome: &JudgeOutcome) -> Verdict {
    let detail = serde_json::to_value(outcome).unwrap_or(serde_json::Value::Null);
    match outcome {
        JudgeOutcome::Scored { score, .. } => Verdict::Scored {
            score: score.as_f64(),
            detail,
        },
        JudgeOutcome::Failed { kind, message, .. } => Verdict::Failed {
            runtime: *kind == cardinal_judge::FailureKind::Transport,
            message: message.clone(),
            detail,
        },
        JudgeOutcome::NotApplicable { reason } => Verdict::NotApplicable {
            reason: reason.to_string(),
        },
    }
}

impl CaseScorer for RubricScorer {
    fn name(&self) -> String {
        "rubric-v1".into()
    }

    fn model_id(&self) -> String {
        self.judge.model_id()
    }

    fn score(&self, input: &JudgeInput<'_>) -> Vec<(String, Verdict)> {
        self.dimensions
            .iter()
            .map(|d| {
                (
                    d.name().to_string(),
                    verdict_of(&self.judge.score(*d, input)),
                )
            })
            .collect()
    }
}

/// How the checks scorer frames the cards.
pub use cardinal_judge::checks::CheckFraming;

/// `checks-v1`: yes/no checks read from probabilities; see `cardinal_judge::checks`.
pub struct ChecksScorer {
    model: Arc<dyn cardinal_llm::YesNoModel>,
    calibration: cardinal_judge::checks::Calibration,
    framing: CheckFraming,
    /// Ask the hallucination (`invented`) checks.
    hallucination: bool,
    /// `checks-v2`: also read the [`cardinal_judge::checks::Signals`].
    signals: bool,
    /// Ask every check kind, also those the calibration gives no weight (calibration runs:
    /// the report scores every variant from the same checks). Off, only
    /// [`cardinal_judge::checks::Calibration::needed_checks`] are asked.
    every_check: bool,
}

impl ChecksScorer {
    pub fn new(
        model: Arc<dyn cardinal_llm::YesNoModel>,
        calibration: cardinal_judge::checks::Calibration,
    ) -> Self {
        ChecksScorer {
            model,
            calibration,
            framing: CheckFraming::FullCard,
            hallucination: true,
            signals: false,
            every_check: false,
        }
    }

    /// The scorer by name: `checks-v1`, or `checks-v2` (the checks plus signals).
    pub fn named(
        name: &str,
        model: Arc<dyn cardinal_llm::YesNoModel>,
        calibration: cardinal_judge::checks::Calibration,
    ) -> Self {
        let mut s = Self::new(model, calibration);
        s.signals = name == cardinal_judge::checks::SCORER_V2;
        s
    }

    /// The same scorer without the hallucination checks (its verdict is then not applicable):
    /// calibration labels have no hallucination score, so it does not pay for them.
    pub fn without_hallucination(mut self) -> Self {
        self.hallucination = false;
        self
    }

    /// The same scorer asking every check kind, whatever the calibration reads (calibration
    /// runs, whose report scores every variant from the same checks).
    pub fn with_every_check(mut self) -> Self {
        self.every_check = true;
        self
    }

    /// The check kinds this scorer asks of a case.
    pub fn asked_checks(&self) -> Vec<cardinal_judge::checks::CheckKind> {
        if self.every_check {
            cardinal_judge::checks::CheckKind::every(self.hallucination)
        } else {
            self.calibration.needed_checks(self.hallucination)
        }
    }

    /// The same scorer with another framing (the header-only control).
    pub fn with_framing(mut self, framing: CheckFraming) -> Self {
        self.framing = framing;
        self
    }

    pub fn calibration(&self) -> &cardinal_judge::checks::Calibration {
        &self.calibration
    }

    /// Run the checks of one input: the plan and the results (or the model's error).
    pub fn run_checks(
        &self,
        input: &JudgeInput<'_>,
    ) -> Result<
        (
            cardinal_judge::checks::CheckPlan,
            Vec<cardinal_judge::checks::CheckResult>,
            Option<cardinal_judge::checks::Signals>,
        ),
        cardinal_llm::LlmError,
    > {
        let plan = cardinal_judge::checks::plan_kinds(input, self.framing, &self.asked_checks());
        let texts: Vec<String> = plan.checks.iter().map(|c| c.text.clone()).collect();
        // Nothing to ask (a calibration that reads no check, hallucination off): no pass.
        let answers = if texts.is_empty() {
            Vec::new()
        } else {
            self.model.yes_no(&plan.messages, &texts)?
        };
        let results = cardinal_judge::checks::results(&plan, &answers);
        let signals = if self.signals {
            let (with, without) = cardinal_judge::checks::support_messages(input);
            let answer = vec![input.answer.trim().to_string()];
            let lp_with = self.model.reply_logprobs(&with, &answer)?;
            let lp_without = self.model.reply_logprobs(&without, &answer)?;
            let support_pmi = match (lp_with.first(), lp_without.first()) {
                (Some(a), Some(b)) => a - b,
                _ => {
                    return Err(cardinal_llm::LlmError::Local(
                        "the model scored no token of the answer".into(),
                    ))
                }
            };
            Some(cardinal_judge::checks::Signals {
                support_pmi,
                evidence: cardinal_judge::evidence::evidence(
                    &plan.sentences,
                    &cardinal_judge::checks::header_text(input),
                    input.question,
                ),
            })
        } else {
            None
        };
        Ok((plan, results, signals))
    }

    /// Verdicts from already computed check results (re-scoring under another calibration).
    pub fn verdicts(
        calibration: &cardinal_judge::checks::Calibration,
        plan_sentences: &[String],
        plan_rules: &[String],
        results: &[cardinal_judge::checks::CheckResult],
        signals: Option<&cardinal_judge::checks::Signals>,
    ) -> Vec<(String, Verdict)> {
        let Some((raw, scores)) = calibration.scores_with(results, signals) else {
            return ["groundedness", "faithfulness", "hallucination"]
                .iter()
                .map(|d| {
                    (
                        d.to_string(),
                        Verdict::Failed {
                            runtime: false,
                            message: "the calibration combines signals that were not read (a checks-v2 calibration used with checks-v1)".into(),
                            detail: serde_json::Value::Null,
                        },
                    )
                })
                .collect();
        };
        let mut detail = serde_json::json!({
            "raw": raw,
            "sentences": plan_sentences,
            "rules": plan_rules,
            "checks": results,
        });
        if let (Some(sig), Some(obj)) = (signals, detail.as_object_mut()) {
            obj.insert("signals".into(), serde_json::json!(sig));
        }
        let asked_invented = results
            .iter()
            .any(|r| r.kind == cardinal_judge::checks::CheckKind::Invented);
        ["groundedness", "faithfulness", "hallucination"]
            .iter()
            .zip(scores)
            .map(|(d, s)| {
                let verdict = if *d == "hallucination" && !asked_invented {
                    Verdict::NotApplicable {
                        reason: "the hallucination checks were not asked".into(),
                    }
                } else {
                    Verdict::Scored {
                        score: s as f64,
                        detail: detail.clone(),
                    }
                };
                (d.to_string(), verdict)
            })
            .collect()
    }
}

impl CaseScorer for ChecksScorer {
    fn name(&self) -> String {
        if self.signals {
            cardinal_judge::checks::SCORER_V2.into()
        } else {
            cardinal_judge::checks::SCORER.into()
        }
    }

    fn model_id(&self) -> String {
        self.model.id()
    }

    fn calibration_id(&self) -> Option<String> {
        Some(self.calibration.id())
    }

    fn score(&self, input: &JudgeInput<'_>) -> Vec<(String, Verdict)> {
        if input.cited.is_empty() {
            return nothing_cited();
        }
        match self.run_checks(input) {
            Ok((plan, results, signals)) => Self::verdicts(
                &self.calibration,
                &plan.sentences,
                &plan.rules,
                &results,
                signals.as_ref(),
            ),
            Err(e) => failed_all(&e, !matches!(e, cardinal_llm::LlmError::Malformed { .. })),
        }
    }
}

/// `probe-v1`: a linear probe on the judge model's hidden state; see
/// `cardinal_judge::probe`. Scores groundedness and faithfulness; hallucination is not one of
/// its constructs (not applicable).
pub struct ProbeScorer {
    model: Arc<dyn cardinal_llm::YesNoModel>,
    calibration: cardinal_judge::checks::Calibration,
    framing: CheckFraming,
    /// Put the feature vector in the verdicts' detail (`probe_features`: calibration runs,
    /// which fit on it); off in sweeps, whose artifacts need not carry 1,536 numbers a case.
    keep_features: bool,
}

/// The detail key of the probe's feature vector.
pub const PROBE_FEATURES: &str = "probe_features";

impl ProbeScorer {
    pub fn new(
        model: Arc<dyn cardinal_llm::YesNoModel>,
        calibration: cardinal_judge::checks::Calibration,
    ) -> Self {
        ProbeScorer {
            model,
            calibration,
            framing: CheckFraming::FullCard,
            keep_features: false,
        }
    }

    /// The same scorer with another framing (the header-only control).
    pub fn with_framing(mut self, framing: CheckFraming) -> Self {
        self.framing = framing;
        self
    }

    /// The same scorer keeping the feature vector in the verdicts' detail.
    pub fn keeping_features(mut self) -> Self {
        self.keep_features = true;
        self
    }

    /// The feature vector of one case (the model's block output averaged over the answer).
    pub fn features(&self, input: &JudgeInput<'_>) -> Result<Vec<f32>, cardinal_llm::LlmError> {
        let plan = cardinal_judge::probe::plan(input, self.framing);
        self.model.span_states(
            &plan.messages,
            &plan.span,
            self.calibration
                .probe
                .as_ref()
                .map_or(cardinal_judge::probe::LAYER, |p| p.layer),
        )
    }

    /// Verdicts from a feature vector under `calibration` (also re-scoring stored features).
    /// Without a fitted probe, or with features of another width, the gated dimensions are
    /// judge errors, never a made-up score.
    pub fn verdicts(
        calibration: &cardinal_judge::checks::Calibration,
        features: &[f32],
        keep_features: bool,
    ) -> Vec<(String, Verdict)> {
        let mut detail = serde_json::json!({ "width": features.len() });
        if let (true, Some(obj)) = (keep_features, detail.as_object_mut()) {
            obj.insert(PROBE_FEATURES.into(), serde_json::json!(features));
        }
        let fail = |message: String, detail: &serde_json::Value| Verdict::Failed {
            runtime: false,
            message,
            detail: detail.clone(),
        };
        let mut out: Vec<(String, Verdict)> = Vec::new();
        for (dim, cuts) in [
            ("groundedness", &calibration.groundedness),
            ("faithfulness", &calibration.faithfulness),
        ] {
            let verdict = match &calibration.probe {
                None => fail(
                    "probe-v1 has no fitted probe for this model (run `cardinal calibrate --scorer probe-v1 --split dev --fit`)".into(),
                    &detail,
                ),
                Some(fit) => {
                    let lin = if dim == "groundedness" {
                        &fit.groundedness
                    } else {
                        &fit.faithfulness
                    };
                    match lin.raw(features) {
                        Some(raw) => {
                            let mut d = detail.clone();
                            if let Some(obj) = d.as_object_mut() {
                                obj.insert("raw".into(), serde_json::json!(raw));
                                obj.insert(
                                    "predicted".into(),
                                    serde_json::json!(lin.predict(features)),
                                );
                            }
                            Verdict::Scored {
                                score: cuts.score(raw) as f64,
                                detail: d,
                            }
                        }
                        None => fail(
                            format!(
                                "the probe was fitted on {} features but the model gave {}",
                                lin.weights.len(),
                                features.len()
                            ),
                            &detail,
                        ),
                    }
                }
            };
            out.push((dim.to_string(), verdict));
        }
        out.push((
            "hallucination".into(),
            Verdict::NotApplicable {
                reason: "probe-v1 does not measure hallucination".into(),
            },
        ));
        out
    }
}

impl CaseScorer for ProbeScorer {
    fn name(&self) -> String {
        cardinal_judge::probe::SCORER.into()
    }

    fn model_id(&self) -> String {
        self.model.id()
    }

    fn calibration_id(&self) -> Option<String> {
        Some(self.calibration.id())
    }

    fn score(&self, input: &JudgeInput<'_>) -> Vec<(String, Verdict)> {
        if input.cited.is_empty() {
            return nothing_cited();
        }
        match self.features(input) {
            Ok(x) => Self::verdicts(&self.calibration, &x, self.keep_features),
            Err(e) => failed_all(&e, !matches!(e, cardinal_llm::LlmError::Config(_))),
        }
    }
}

/// The three dimensions, in a scorer's order.
const DIMENSIONS: [&str; 3] = ["groundedness", "faithfulness", "hallucination"];

/// Every dimension not applicable: nothing cited is a card.
fn nothing_cited() -> Vec<(String, Verdict)> {
    DIMENSIONS
        .iter()
        .map(|d| {
            (
                d.to_string(),
                Verdict::NotApplicable {
                    reason: "no cited id is a card of the knowledge base".into(),
                },
            )
        })
        .collect()
}

/// Every dimension a judge error from the model's error (`runtime`: the model or endpoint
/// could not be used, as opposed to an unreadable reply).
fn failed_all(e: &cardinal_llm::LlmError, runtime: bool) -> Vec<(String, Verdict)> {
    DIMENSIONS
        .iter()
        .map(|d| {
            (
                d.to_string(),
                Verdict::Failed {
                    runtime,
                    message: e.to_string(),
                    detail: serde_json::Value::Null,
                },
            )
        })
        .collect()
}

/// The committed calibration file of the checks scorer for a local judge model.
pub fn default_calibration_path(
    data: &std::path::Path,
    s: &crate::Settings,
) -> Option<std::path::PathBuf> {
    let name = s.judge.backend?.local_model()?;
    let scorer = if cardinal_judge::checks::is_fitted_scorer(&s.judge.scorer) {
        s.judge.scorer.as_str()
    } else {
        cardinal_judge::checks::SCORER
    };
    Some(data.join("judge").join(format!("{scorer}.{name}.json")))
}

/// Load a calibration file, checking it belongs to the scorer and model.
pub fn load_calibration(
    path: &std::path::Path,
    scorer: &str,
    model_id: &str,
) -> crate::Result<cardinal_judge::checks::Calibration> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        crate::HarnessError::Input(format!(
            "cannot read the judge calibration {}: {e}",
            path.display()
        ))
    })?;
    let c: cardinal_judge::checks::Calibration = serde_json::from_str(&text).map_err(|e| {
        crate::HarnessError::Input(format!(
            "{}:{}: not a judge calibration: {e}",
            path.display(),
            e.line()
        ))
    })?;
    if c.scorer != scorer {
        return Err(crate::HarnessError::Input(format!(
            "{} is a calibration of {} but the scorer is {scorer}",
            path.display(),
            c.scorer
        )));
    }
    if c.model_id != model_id {
        return Err(crate::HarnessError::Input(format!(
            "{} was fitted for {} but the judge is {model_id}",
            path.display(),
            c.model_id
        )));
    }
    Ok(c)
}

/// The calibration the checks scorer of `s` reads for the judge `model_id`: the file
/// `s.judge.calibration` names, else the committed file of the scorer and model when it exists;
/// `None` when there is neither (see [`uncalibrated`]).
pub fn committed_calibration(
    data: &std::path::Path,
    s: &crate::Settings,
    model_id: &str,
) -> crate::Result<Option<cardinal_judge::checks::Calibration>> {
    match (&s.judge.calibration, default_calibration_path(data, s)) {
        (Some(p), _) => load_calibration(p, &s.judge.scorer, model_id).map(Some),
        (None, Some(p)) if p.is_file() => load_calibration(&p, &s.judge.scorer, model_id).map(Some),
        _ => Ok(None),
    }
}

/// No fit, for `scorer` and the judge `model_id`: default cut points, no correction.
pub fn uncalibrated(scorer: &str, model_id: &str) -> cardinal_judge::checks::Calibration {
    let mut c = cardinal_judge::checks::Calibration::uncalibrated(model_id);
    c.scorer = scorer.into();
    c
}

/// The scorer the settings ask for; `None` without a judge.
pub fn build_scorer(
    data: &std::path::Path,
    s: &crate::Settings,
    chat: Option<&crate::models::SharedModel>,
    obs: &dyn crate::Observer,
) -> crate::Result<Option<Box<dyn CaseScorer>>> {
    if s.judge.backend.is_none() {
        return Ok(None);
    }
    match s.judge.scorer.as_str() {
        "rubric-v1" => {
            let model = match chat {
                Some(m) => m.clone(),
                None => match crate::models::judge_model(s, None, obs)? {
                    Some(m) => m,
                    None => return Ok(None),
                },
            };
            Ok(Some(Box::new(RubricScorer::new(
                model as Arc<dyn ChatModel>,
            ))))
        }
        cardinal_judge::probe::SCORER => {
            let Some(probe) = crate::models::judge_probe(s, obs)? else {
                return Ok(None);
            };
            let Some(calibration) = committed_calibration(data, s, &probe.id())? else {
                return Err(crate::HarnessError::Input(format!(
                    "probe-v1 has no fitted probe for {} (run `cardinal calibrate --scorer probe-v1 --split dev --fit`)",
                    probe.id()
                )));
            };
            Ok(Some(Box::new(ProbeScorer::new(probe, calibration))))
        }
        _ => {
            let Some(probe) = crate::models::judge_probe(s, obs)? else {
                return Ok(None);
            };
            let calibration = match committed_calibration(data, s, &probe.id())? {
                Some(c) => c,
                None => {
                    obs.note("note: the judge runs uncalibrated (no fitted calibration for this model; see `cardinal calibrate --fit`)");
                    uncalibrated(&s.judge.scorer, &probe.id())
                }
            };
            Ok(Some(Box::new(ChecksScorer::named(
                &s.judge.scorer,
                probe,
                calibration,
            ))))
        }
    }
}
