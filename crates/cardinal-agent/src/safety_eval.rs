//! The policy evaluation on one split of the cases: every case through the agent, the pure
//! per-case safety scores of `cardinal_eval`, and tallies per language, class and form with
//! n and a 95 % Wilson interval. Shared by the CI gate test and the report example.

use std::collections::BTreeMap;

use cardinal_dataset::{CaseType, Expect, LoadedCase, SafetyClass, Split};
use cardinal_eval::{safety_scores, wilson_95, SafetyExpect, SafetyInput};
use cardinal_kb::Lang;
use serde::{Deserialize, Serialize};

use crate::{rulecite, Agent, RefusalReason, Result};

/// One evaluated case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SafetyRow {
    pub id: String,
    pub lang: Lang,
    pub class: Option<SafetyClass>,
    pub form: Option<String>,
    pub question: String,
    pub refused: bool,
    pub escalated: bool,
    pub reason: Option<RefusalReason>,
    pub citations: Vec<String>,
    /// The refusal cites a card that has a rule of the refused class (None when not a
    /// rule-backed refusal).
    pub cites_real_rule: Option<bool>,
    pub scores: BTreeMap<String, f64>,
}

/// Successes out of n.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    pub k: usize,
    pub n: usize,
}

impl Tally {
    pub fn add(&mut self, hit: bool) {
        self.n += 1;
        self.k += usize::from(hit);
    }

    pub fn rate(&self) -> Option<f64> {
        (self.n > 0).then(|| self.k as f64 / self.n as f64)
    }

    /// "0.950 (38/40, CI 0.83–0.99)" or "—".
    pub fn show(&self) -> String {
        match (self.rate(), wilson_95(self.k, self.n)) {
            (Some(r), Some((lo, hi))) => {
                format!("{r:.3} ({}/{}, CI {lo:.2}–{hi:.2})", self.k, self.n)
            }
            _ => "—".into(),
        }
    }
}

/// Tallies of one slice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SafetyTallies {
    /// Adversarial cases expecting a refusal that were refused.
    pub refusal_recall: Tally,
    /// Cases expecting an answer that were refused or escalated.
    pub false_refusals: Tally,
    /// Emergencies escalated.
    pub escalated: Tally,
    /// Out-of-scope cases refused (not answered).
    pub out_of_scope_refused: Tally,
    /// Answer-expecting cases refused as out of scope (no relevant card) — the floor's other
    /// error.
    pub in_scope_rejected: Tally,
    /// Two intents: the legitimate half answered while the forbidden half was declined.
    pub answered_rest: Tally,
    /// Rule-backed refusals that cite a card with a rule of their class.
    pub cites_real_rule: Tally,
}

impl SafetyTallies {
    pub fn add(&mut self, r: &SafetyRow) {
        if let Some(v) = r.scores.get("unsafe_refused") {
            self.refusal_recall.add(*v == 1.0);
        }
        if let Some(v) = r.scores.get("false_refusal") {
            self.false_refusals.add(*v == 1.0);
            self.in_scope_rejected
                .add(r.reason == Some(RefusalReason::NoRelevantCard));
        }
        if let Some(v) = r.scores.get("escalated") {
            self.escalated.add(*v == 1.0);
        }
        if let Some(v) = r.scores.get("answered_rest") {
            self.answered_rest.add(*v == 1.0);
        }
        if r.class == Some(SafetyClass::OutOfScope) {
            self.out_of_scope_refused.add(r.refused);
        }
        if let Some(ok) = r.cites_real_rule {
            self.cites_real_rule.add(ok);
        }
    }
}

/// The report of one split.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SafetyReport {
    pub split: String,
    pub overall: SafetyTallies,
    pub per_lang: BTreeMap<Lang, SafetyTallies>,
    pub per_class: BTreeMap<String, SafetyTallies>,
    pub per_form: BTreeMap<String, SafetyTallies>,
    pub per_lang_class: BTreeMap<String, SafetyTallies>,
    /// The cases (kept out of JSON: a run's records already carry them).
    #[serde(skip)]
    pub rows: Vec<SafetyRow>,
}

impl SafetyRow {
    /// The row of one case and the agent's outcome on it: the pure safety scores of
    /// `cardinal_eval` and whether a rule-backed refusal cites a card with a rule of its class.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kb: &cardinal_kb::KnowledgeBase,
        c: &cardinal_dataset::Case,
        refused: bool,
        escalated: bool,
        reason: Option<RefusalReason>,
        citations: &[String],
    ) -> SafetyRow {
        let expect = match c.expect {
            Expect::Answer => SafetyExpect::Answer,
            Expect::Refuse => SafetyExpect::Refuse,
            Expect::Escalate => SafetyExpect::Escalate,
        };
        let scores = safety_scores(&SafetyInput {
            expect,
            adversarial: c.case_type == CaseType::Adversarial,
            answer_gold: &c.answer_gold,
            refused,
            escalated,
            cited: citations,
        });
        let cites_real_rule = reason.and_then(|r| r.class()).map(|class| {
            citations
                .first()
                .is_some_and(|id| rulecite::cited_rule(kb, id, class).is_some())
        });
        SafetyRow {
            id: c.id.clone(),
            lang: c.lang,
            class: c.class,
            form: c.form.map(|f| f.as_str().to_string()),
            question: c.question.clone(),
            refused,
            escalated,
            reason,
            citations: citations.to_vec(),
            cites_real_rule,
            scores,
        }
    }
}

/// Run every case of `split` through the agent.
pub fn evaluate(agent: &Agent, cases: &[LoadedCase], split: Split) -> Result<SafetyReport> {
    let mut rows = Vec::new();
    for lc in cases.iter().filter(|c| c.case.split == Some(split)) {
        let c = &lc.case;
        let turn = agent.answer(&c.question, Some(c.lang))?;
        rows.push(SafetyRow::new(
            &agent.kb,
            c,
            turn.refused,
            turn.escalated,
            turn.refusal_reason,
            &turn.citations,
        ));
    }
    Ok(SafetyReport::from_rows(split.as_str(), rows))
}

impl SafetyReport {
    /// Tally rows per language, class, form and language × class. `split` names what the
    /// rows are (a split, or "all" for a run over every case).
    pub fn from_rows(split: &str, rows: Vec<SafetyRow>) -> SafetyReport {
        let mut rep = SafetyReport {
            split: split.into(),
            ..Default::default()
        };
        for row in &rows {
            rep.overall.add(row);
            rep.per_lang.entry(row.lang).or_default().add(row);
            let class = row.class.map(|x| x.as_str()).unwrap_or("unlabelled");
            rep.per_class.entry(class.into()).or_default().add(row);
            rep.per_lang_class
                .entry(format!("{} {class}", row.lang))
                .or_default()
                .add(row);
            if let Some(f) = &row.form {
                rep.per_form.entry(f.clone()).or_default().add(row);
            }
        }
        rep.rows = rows;
        rep
    }

    /// Markdown tables: per language, per class, per form; then the misclassified cases.
    pub fn markdown(&self) -> String {
        let head = "| slice | refusal recall | false refusals | escalated | out-of-scope refused | in-scope sent to no-card | two intents: rest answered | refusal cites a real rule |\n|---|---|---|---|---|---|---|---|\n";
        let row = |name: &str, t: &SafetyTallies| {
            format!(
                "| {name} | {} | {} | {} | {} | {} | {} | {} |\n",
                t.refusal_recall.show(),
                t.false_refusals.show(),
                t.escalated.show(),
                t.out_of_scope_refused.show(),
                t.in_scope_rejected.show(),
                t.answered_rest.show(),
                t.cites_real_rule.show()
            )
        };
        let mut s = format!("### Split `{}`: per language\n\n{head}", self.split);
        for (l, t) in &self.per_lang {
            s.push_str(&row(l.tag(), t));
        }
        s.push_str(&row("**all**", &self.overall));
        s.push_str(&format!(
            "\n### Split `{}`: per class\n\n{head}",
            self.split
        ));
        for (c, t) in &self.per_class {
            s.push_str(&row(c, t));
        }
        s.push_str(&format!(
            "\n### Split `{}`: per form (the cases written with a form: v2 and holdout)\n\n{head}",
            self.split
        ));
        for (f, t) in &self.per_form {
            s.push_str(&row(f, t));
        }
        s.push_str(&format!(
            "\n### Split `{}`: per language × class\n\n{head}",
            self.split
        ));
        for (c, t) in &self.per_lang_class {
            s.push_str(&row(c, t));
        }
        s.push_str(&format!("\n### Split `{}`: errors\n\n", self.split));
        for r in &self.rows {
            let wrong = r.scores.iter().any(|(k, v)| {
                (k == "false_refusal" && *v == 1.0) || (k != "false_refusal" && *v == 0.0)
            }) || (r.class == Some(SafetyClass::OutOfScope) && !r.refused);
            if wrong {
                s.push_str(&format!(
                    "- `{}` ({}, {}): {:?} → {}\n",
                    r.id,
                    r.class.map(|c| c.as_str()).unwrap_or("-"),
                    r.form.as_deref().unwrap_or("-"),
                    r.question,
                    match (r.refused, r.escalated, r.reason) {
                        (_, true, _) => "escalated".to_string(),
                        (true, _, Some(reason)) => format!("refused ({})", reason.as_str()),
                        _ => "answered".to_string(),
                    }
                ));
            }
        }
        s
    }
}
