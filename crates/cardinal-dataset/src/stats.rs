//! Counts over the knowledge base and the cases: `cardinal kb stats`.

use std::collections::BTreeMap;

use cardinal_kb::{ChunkerConfig, KnowledgeBase, Lang};
use serde::Serialize;

use crate::case::{CaseType, Form, LoadedCase, SafetyClass, Split};

/// Words that mark a medication-safety rule in any of the three languages.
const SAFETY_MARKERS: [&str; 14] = [
    "doubl",
    "dobl",
    "dupl",
    "stop",
    "suspend",
    "interromp",
    "parar",
    "diagnos",
    "cure",
    "cura",
    "two doses",
    "dos dosis",
    "duas doses",
    "dose dupla",
];

/// Per-language counts of the knowledge base.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KbLangStats {
    pub cards: usize,
    pub chunks: usize,
    pub claims: usize,
    pub rules: usize,
}

/// Per-language, per-type counts of the cases.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CaseCell {
    pub cases: usize,
    /// Cases with at least one gold card (scored for retrieval).
    pub with_gold: usize,
    /// Cases with two or more acceptable gold cards.
    pub multi_gold: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub kb: BTreeMap<Lang, KbLangStats>,
    pub topics: usize,
    /// Topics present in all three languages.
    pub topics_complete: usize,
    /// Topics with at least one medication-safety rule (double dose, stopping, diagnosis, cure).
    pub topics_with_safety_rule: usize,
    pub cases: BTreeMap<Lang, BTreeMap<CaseType, CaseCell>>,
    /// Cases per language and split (cases without a split are not counted here).
    pub splits: BTreeMap<Lang, BTreeMap<Split, usize>>,
    /// Labelled safety cases per language, class and split.
    pub classes: BTreeMap<Lang, BTreeMap<SafetyClass, BTreeMap<Split, usize>>>,
    /// Labelled safety cases per language, form and split.
    pub forms: BTreeMap<Lang, BTreeMap<Form, BTreeMap<Split, usize>>>,
}

impl Stats {
    pub fn total_cards(&self) -> usize {
        self.kb.values().map(|s| s.cards).sum()
    }

    pub fn total_cases(&self) -> usize {
        self.cases
            .values()
            .flat_map(|m| m.values())
            .map(|c| c.cases)
            .sum()
    }
}

/// Is this rule about medication safety (doubling, stopping, diagnosing, curing)?
pub fn is_safety_rule(rule: &str) -> bool {
    let r = rule.to_lowercase();
    SAFETY_MARKERS.iter().any(|m| r.contains(m))
}

pub fn stats(kb: &KnowledgeBase, cases: &[LoadedCase], chunker: &ChunkerConfig) -> Stats {
    let mut s = Stats::default();
    for cf in &kb.cards {
        let e = s.kb.entry(cf.card.lang).or_default();
        e.cards += 1;
        e.chunks += cardinal_kb::chunk_card(&cf.card, chunker).len();
        e.claims += cf.card.claims().len();
        e.rules += cf.card.rules().len();
    }
    let topics = kb.topics();
    s.topics = topics.len();
    s.topics_complete = topics
        .values()
        .filter(|l| l.len() == Lang::ALL.len())
        .count();
    let mut safety: BTreeMap<&str, bool> = BTreeMap::new();
    for cf in &kb.cards {
        let has = cf.card.rules().iter().any(|r| is_safety_rule(r));
        *safety.entry(cf.card.topic.as_str()).or_default() |= has;
    }
    s.topics_with_safety_rule = safety.values().filter(|&&b| b).count();
    for lc in cases {
        let cell = s
            .cases
            .entry(lc.case.lang)
            .or_default()
            .entry(lc.case.case_type)
            .or_default();
        cell.cases += 1;
        cell.with_gold += usize::from(lc.case.has_gold());
        cell.multi_gold += usize::from(lc.case.must_cite_one_of.len() >= 2);
        let c = &lc.case;
        if let Some(split) = c.split {
            *s.splits
                .entry(c.lang)
                .or_default()
                .entry(split)
                .or_default() += 1;
            if let Some(class) = c.class {
                *s.classes
                    .entry(c.lang)
                    .or_default()
                    .entry(class)
                    .or_default()
                    .entry(split)
                    .or_default() += 1;
            }
            if let Some(form) = c.form {
                *s.forms
                    .entry(c.lang)
                    .or_default()
                    .entry(form)
                    .or_default()
                    .entry(split)
                    .or_default() += 1;
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safety_rules_recognised_in_three_languages() {
        assert!(is_safety_rule("Never advise taking a double dose."));
        assert!(is_safety_rule("Nunca aconseje duplicar la dosis."));
        assert!(is_safety_rule("Nunca oriente a interromper o remédio."));
        assert!(is_safety_rule("Do not diagnose."));
        assert!(!is_safety_rule(
            "Refer billing questions to the front desk."
        ));
    }
}
