//! Judge `probe-v1`: a linear probe on the judge model's hidden state.
//!
//! The model reads a short instruction, the cited cards (facts, and rules unless the framing
//! is the header-only control), the question and the answer; the output of transformer block
//! [`LAYER`] averaged over the answer's tokens is the case's feature vector (1,536 numbers for
//! Qwen2.5-Coder-1.5B). Nothing is generated and nothing is parsed.
//!
//! **Fit** (dev split only; the caller passes dev rows, see `cardinal_harness::calibration`):
//! per gated dimension, the features are standardised, reduced to their first
//! [`COMPONENTS`] principal components, and a ridge regression (α = [`RIDGE_ALPHA`]) predicts the
//! human 1–5 score; the three steps are linear, so they are folded into one weight vector and a
//! bias ([`Linear`]). The prediction is squashed to (0, 1) (`raw`, higher is better) and cut
//! points fitted on dev map it to 1–5 ([`crate::checks::Cuts`]).
//!
//! The reading (block 14 of 28, the mean over the answer), the 32 components and α = 10 were
//! chosen on dev and frozen before the test split was read (docs/calibration.md). What the
//! probe measures: it separates risky advice from safe answers; it does **not** read the cited
//! card's rules (the ADR-0029 control gives the same agreement without them).

use cardinal_llm::Message;
use serde::{Deserialize, Serialize};

use crate::checks::{card_block, CheckFraming};
use crate::prompt::JudgeInput;

/// Scorer family name and version.
pub const SCORER: &str = "probe-v1";
/// The transformer block whose output is read (0-based; the 1.5B has 28).
pub const LAYER: usize = 14;
/// Principal components kept.
pub const COMPONENTS: usize = 32;
/// Ridge penalty on the components.
pub const RIDGE_ALPHA: f64 = 10.0;

/// The probe's system message (the same for every case).
pub const INSTRUCTIONS: &str = "You review an assistant's ANSWER to a patient's QUESTION \
against knowledge CARDS. The cards' FACTS are the only source of truth, and an answer must \
never do what a card's RULES forbid. Read the answer carefully.";

/// The prompt of one case and the span whose hidden states are averaged (the answer, which
/// ends the last message).
#[derive(Debug, Clone)]
pub struct ProbePlan {
    pub messages: Vec<Message>,
    pub span: String,
}

/// Build the probe's prompt for one case.
pub fn plan(input: &JudgeInput<'_>, framing: CheckFraming) -> ProbePlan {
    let mut user = String::from("CARDS\n");
    let mut rules = Vec::new();
    for card in &input.cited {
        user.push_str(&card_block(card, framing, &mut rules));
    }
    if input.cited.is_empty() {
        user.push_str("(no card)\n");
    }
    let span = input.answer.trim().to_string();
    user.push_str(&format!(
        "\nQUESTION: {}\n\nANSWER:\n{span}",
        input.question.trim()
    ));
    ProbePlan {
        messages: vec![Message::system(INSTRUCTIONS), Message::user(user)],
        span,
    }
}

/// One dimension's fitted map: `w · x + bias` predicts the 1–5 score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Linear {
    pub weights: Vec<f32>,
    pub bias: f64,
}

impl Linear {
    /// The predicted 1–5 score (unclamped); `None` when the widths differ.
    pub fn predict(&self, x: &[f32]) -> Option<f64> {
        if x.len() != self.weights.len() {
            return None;
        }
        Some(
            self.bias
                + self
                    .weights
                    .iter()
                    .zip(x)
                    .map(|(&w, &v)| w as f64 * v as f64)
                    .sum::<f64>(),
        )
    }

    /// The prediction squashed to (0, 1), increasing: what the cut points read.
    pub fn raw(&self, x: &[f32]) -> Option<f64> {
        self.predict(x).map(squash)
    }
}

/// (0, 1) from a 1–5 prediction: a logistic centred on 3.
pub fn squash(pred: f64) -> f64 {
    1.0 / (1.0 + (-(pred - 3.0)).exp())
}

/// The fitted probe of the gated dimensions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeFit {
    pub layer: usize,
    pub components: usize,
    pub ridge_alpha: f64,
    /// Dev items the fit read.
    pub n: usize,
    pub groundedness: Linear,
    pub faithfulness: Linear,
}

/// Why a fit is impossible.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    #[error("no rows to fit on")]
    Empty,
    #[error("feature vectors have different widths ({0} and {1})")]
    Width(usize, usize),
    #[error("a feature is not a finite number")]
    NotFinite,
}

/// Fit one dimension: standardise, PCA (`components`), ridge (`alpha`), folded into a
/// [`Linear`]. Pure: the caller decides which rows it reads (dev only).
pub fn fit_linear(
    rows: &[(&[f32], u8)],
    components: usize,
    alpha: f64,
) -> Result<Linear, FitError> {
    let n = rows.len();
    let Some(d) = rows.first().map(|r| r.0.len()) else {
        return Err(FitError::Empty);
    };
    for r in rows {
        if r.0.len() != d {
            return Err(FitError::Width(d, r.0.len()));
        }
        if r.0.iter().any(|x| !x.is_finite()) {
            return Err(FitError::NotFinite);
        }
    }
    // Standardise (population standard deviation, as scikit-learn's StandardScaler).
    let mut mean = vec![0f64; d];
    for r in rows {
        for (m, &x) in mean.iter_mut().zip(r.0) {
            *m += x as f64;
        }
    }
    mean.iter_mut().for_each(|m| *m /= n as f64);
    let mut sd = vec![0f64; d];
    for r in rows {
        for ((s, &x), m) in sd.iter_mut().zip(r.0).zip(&mean) {
            *s += (x as f64 - m).powi(2);
        }
    }
    sd.iter_mut().for_each(|s| {
        *s = (*s / n as f64).sqrt();
        if *s < 1e-12 {
            *s = 1.0;
        }
    });
    let z: Vec<Vec<f64>> = rows
        .iter()
        .map(|r| {
            r.0.iter()
                .zip(&mean)
                .zip(&sd)
                .map(|((&x, m), s)| (x as f64 - m) / s)
                .collect()
        })
        .collect();
    // PCA through the n × n Gram matrix (n is the number of dev items, far below d).
    let mut gram = vec![vec![0f64; n]; n];
    for i in 0..n {
        for j in i..n {
            let v: f64 = z[i].iter().zip(&z[j]).map(|(a, b)| a * b).sum();
            gram[i][j] = v;
            gram[j][i] = v;
        }
    }
    let (values, vectors) = symmetric_eigen(gram);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    let y_mean = rows.iter().map(|r| r.1 as f64).sum::<f64>() / n as f64;
    // Ridge on the component scores t_k = sqrt(λ_k)·u_k (orthogonal, TᵀT = diag λ):
    // β_k = t_kᵀ(y − ȳ) / (λ_k + α); the axis in standardised space is v_k = Zᵀu_k / sqrt(λ_k),
    // so the standardised weight vector is Σ_k β_k v_k = Σ_k c_k Zᵀu_k with
    // c_k = β_k / sqrt(λ_k) = u_kᵀ(y − ȳ) / (λ_k + α).
    let mut w_std = vec![0f64; d];
    for &k in order.iter().take(components.min(n)) {
        let lambda = values[k];
        if lambda <= 1e-9 * values[order[0]].max(1e-300) {
            continue;
        }
        let u: Vec<f64> = (0..n).map(|i| vectors[i][k]).collect();
        let uy: f64 = u
            .iter()
            .zip(rows)
            .map(|(ui, r)| ui * (r.1 as f64 - y_mean))
            .sum();
        let c = uy / (lambda + alpha);
        for (zi, ui) in z.iter().zip(&u) {
            let f = c * ui;
            for (w, zv) in w_std.iter_mut().zip(zi) {
                *w += f * zv;
            }
        }
    }
    // Back to raw features: w·((x − μ)/σ) = (w/σ)·x − Σ wμ/σ.
    let weights: Vec<f64> = w_std.iter().zip(&sd).map(|(w, s)| w / s).collect();
    let bias = y_mean - weights.iter().zip(&mean).map(|(w, m)| w * m).sum::<f64>();
    Ok(Linear {
        weights: weights.into_iter().map(|w| w as f32).collect(),
        bias,
    })
}

/// Eigenvalues and eigenvectors (columns) of a symmetric matrix, by cyclic Jacobi rotations.
pub fn symmetric_eigen(mut a: Vec<Vec<f64>>) -> (Vec<f64>, Vec<Vec<f64>>) {
    let n = a.len();
    let mut v = vec![vec![0f64; n]; n];
    for (i, row) in v.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    let norm: f64 = a.iter().flatten().map(|x| x * x).sum::<f64>().sqrt();
    for _sweep in 0..60 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i][j] * a[i][j])
            .sum::<f64>()
            .sqrt();
        if off <= 1e-13 * norm.max(1e-300) {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p][q];
                if apq.abs() <= 1e-300 {
                    continue;
                }
                let theta = (a[q][q] - a[p][p]) / (2.0 * apq);
                let sign = if theta >= 0.0 { 1.0 } else { -1.0 };
                let t = sign / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for row in a.iter_mut() {
                    let (akp, akq) = (row[p], row[q]);
                    row[p] = c * akp - s * akq;
                    row[q] = s * akp + c * akq;
                }
                let (lo, hi) = a.split_at_mut(q);
                for (x, y) in lo[p].iter_mut().zip(hi[0].iter_mut()) {
                    let (apk, aqk) = (*x, *y);
                    *x = c * apk - s * aqk;
                    *y = s * apk + c * aqk;
                }
                for row in v.iter_mut() {
                    let (vkp, vkq) = (row[p], row[q]);
                    row[p] = c * vkp - s * vkq;
                    row[q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i][i]).collect(), v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jacobi_recovers_eigenpairs() {
        let a = vec![
            vec![4.0, 1.0, 0.5],
            vec![1.0, 3.0, 0.2],
            vec![0.5, 0.2, 1.0],
        ];
        let (vals, vecs) = symmetric_eigen(a.clone());
        for k in 0..3 {
            for i in 0..3 {
                let av: f64 = (0..3).map(|j| a[i][j] * vecs[j][k]).sum();
                assert!((av - vals[k] * vecs[i][k]).abs() < 1e-9, "pair {k} row {i}");
            }
        }
        let trace: f64 = vals.iter().sum();
        assert!((trace - 8.0).abs() < 1e-9);
    }

    fn xorshift(seed: u64) -> impl FnMut() -> f32 {
        let mut rng = seed;
        move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % 10_000) as f32 / 10_000.0 - 0.5
        }
    }

    /// With every component kept, the fold is the ridge solution on standardised features:
    /// the gradient of ‖y − ȳ − Zw‖² + α‖w‖² vanishes at the weights it returns.
    #[test]
    fn with_every_component_the_fit_is_the_ridge_solution() {
        let mut next = xorshift(7);
        let data: Vec<(Vec<f32>, u8)> = (0..30)
            .map(|i| {
                let x: Vec<f32> = (0..6).map(|k| next() * (k + 1) as f32 + k as f32).collect();
                (x, 1 + (i % 5) as u8)
            })
            .collect();
        let rows: Vec<(&[f32], u8)> = data.iter().map(|(x, y)| (x.as_slice(), *y)).collect();
        let alpha = 2.0;
        let lin = fit_linear(&rows, 6, alpha).unwrap();
        let n = rows.len() as f64;
        let mean: Vec<f64> = (0..6)
            .map(|k| rows.iter().map(|r| r.0[k] as f64).sum::<f64>() / n)
            .collect();
        let sd: Vec<f64> = (0..6)
            .map(|k| {
                (rows
                    .iter()
                    .map(|r| (r.0[k] as f64 - mean[k]).powi(2))
                    .sum::<f64>()
                    / n)
                    .sqrt()
            })
            .collect();
        let w_std: Vec<f64> = (0..6).map(|k| lin.weights[k] as f64 * sd[k]).collect();
        let y_mean = rows.iter().map(|r| r.1 as f64).sum::<f64>() / n;
        for k in 0..6 {
            let mut grad = alpha * w_std[k];
            for r in &rows {
                let z: Vec<f64> = (0..6).map(|j| (r.0[j] as f64 - mean[j]) / sd[j]).collect();
                let fit: f64 = z.iter().zip(&w_std).map(|(a, b)| a * b).sum();
                grad -= z[k] * (r.1 as f64 - y_mean - fit);
            }
            assert!(grad.abs() < 1e-3, "gradient {grad} at weight {k}");
        }
        // The intercept makes the mean prediction the mean label.
        let mean_pred: f64 = rows.iter().map(|r| lin.predict(r.0).unwrap()).sum::<f64>() / n;
        assert!((mean_pred - y_mean).abs() < 1e-4);
    }

    /// A signal shared by many features (as in a hidden state) is a leading component, so a
    /// few components find it among many noise features.
    #[test]
    fn a_few_components_find_a_signal_shared_by_many_features() {
        let mut next = xorshift(12345);
        let data: Vec<(Vec<f32>, u8)> = (0..60)
            .map(|i| {
                let label = 1 + (i % 5) as u8;
                let x: Vec<f32> = (0..40)
                    .map(|k| {
                        let carrier = if k < 12 { label as f32 } else { 0.0 };
                        carrier + next() + 50.0
                    })
                    .collect();
                (x, label)
            })
            .collect();
        let rows: Vec<(&[f32], u8)> = data.iter().map(|(x, y)| (x.as_slice(), *y)).collect();
        let lin = fit_linear(&rows, 8, 1.0).unwrap();
        let hits = data
            .iter()
            .filter(|(x, y)| (lin.predict(x).unwrap() - *y as f64).abs() < 0.5)
            .count();
        assert!(hits >= 55, "{hits} of 60 within half a point");
        // Per feature, the carriers weigh more than the noise (which the 8 components also
        // pick up in part).
        let carried = lin.weights[..12].iter().map(|w| w.abs()).sum::<f32>() / 12.0;
        let noise = lin.weights[12..].iter().map(|w| w.abs()).sum::<f32>() / 28.0;
        assert!(carried > 1.5 * noise, "{carried} vs {noise}");
        // Width mismatch and empty input are errors, not scores.
        assert_eq!(lin.predict(&[0.0; 3]), None);
        assert_eq!(fit_linear(&[], 8, 1.0), Err(FitError::Empty));
    }

    #[test]
    fn the_header_only_plan_hides_the_rules_and_ends_with_the_answer() {
        let card = cardinal_kb::parse_card(
            std::path::Path::new("kb/en/missed-dose.md"),
            "+++\nid = \"missed-dose.en\"\nlang = \"en\"\ntitle = \"Missed dose\"\ntopic = \"missed-dose\"\nsynthetic = true\n+++\n\n- Take it when you remember.\n\n## Rules\n\n- Never advise a double dose.\n",
        )
        .unwrap();
        let input = JudgeInput {
            question: "I forgot my pill",
            answer: " Take two now. ",
            lang: cardinal_kb::Lang::En,
            cited: vec![&card],
            unknown_cited: vec![],
            retrieved: vec![],
        };
        let full = plan(&input, CheckFraming::FullCard);
        let head = plan(&input, CheckFraming::HeaderOnly);
        assert_eq!(full.span, "Take two now.");
        for p in [&full, &head] {
            assert!(p.messages[1].content.ends_with(&p.span));
        }
        assert!(full.messages[1].content.contains("double dose"));
        assert!(!head.messages[1].content.contains("double dose"));
    }
}
