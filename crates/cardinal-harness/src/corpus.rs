//! The calibration corpus check (a CI gate, run by `cardinal data check` and shown by
//! `cardinal calibrate --balance`): the corpus is only worth calibrating against if its labels
//! cannot be predicted from the surface of the answer, every score is used, the split is
//! stratified and frozen, and rule-violation items contradict no header fact.
//!
//! Per language (en, es-419, pt-BR) and gated dimension, on the reference labels
//! ([`CalibrationItem::reference`]):
//! - at least [`MIN_ITEMS`] items; every topic of the KB cited; at most 20 % translated;
//! - every score 1–5 used by ≥ 10 % of the items, every bin (1–2, 3, 4–5) ≥ 20 %;
//! - shortcut baselines fitted on **dev** and scored on **test**: no one-feature surface rule
//!   beats the majority bin by more than [`MAX_SHORTCUT_MARGIN`];
//! - the split: every stratum (category × faithfulness bin) has dev and test within one item
//!   of each other, counting the items of the balanced split (corpus v2); the items of the
//!   dev-only extension (ids starting [`DEV_EXTENSION_PREFIX`]) must be `dev` and are not
//!   counted there — they add training labels without changing the frozen test split;
//! - ≥ 30 % of the items carry an independent second label; every bin disagreement between
//!   the labellers is adjudicated (score and note);
//! - rule_violation items: a `header_check` note, and every number in the answer appears in a
//!   cited card's header, in the question (the user's own data echoed back), or in the note.

use std::collections::{BTreeMap, BTreeSet};

use cardinal_dataset::calibration::{CalibrationItem, Category, LoadedItem, Split};
use cardinal_eval::calibration::{agreement, Agreement, Pair, GATED_DIMENSIONS};
use cardinal_eval::shortcut::{shortcuts, Shortcuts};
use cardinal_eval::Bin;
use cardinal_kb::{KnowledgeBase, Lang};
use serde::{Deserialize, Serialize};

/// Items per language, at least.
pub const MIN_ITEMS: usize = 120;
/// Largest allowed margin of a surface rule over the majority bin (test split).
pub const MAX_SHORTCUT_MARGIN: f64 = 0.10;
/// Share of items each score must reach, per language and dimension.
pub const MIN_SCORE_SHARE: f64 = 0.10;
/// Share of items each bin must reach.
pub const MIN_BIN_SHARE: f64 = 0.20;
/// Share of items with a second label, at least.
pub const MIN_SECOND_LABEL_SHARE: f64 = 0.30;
/// Share of translated items, at most.
pub const MAX_TRANSLATED_SHARE: f64 = 0.20;
/// Id prefix of the dev-only extension (2026-12-07): new labelled items written after the
/// split was frozen, all in `dev`, so that fits read more labels while the test split stays
/// the one every reported variant was scored on.
pub const DEV_EXTENSION_PREFIX: &str = "cal3-";

/// Figures of one language.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LangBalance {
    pub lang: String,
    pub items: usize,
    pub dev: usize,
    pub test: usize,
    pub second_labelled: usize,
    pub adjudicated: usize,
    pub translated: usize,
    pub topics_cited: usize,
    /// dimension → score (1..=5) → count.
    pub scores: BTreeMap<String, [usize; 5]>,
    /// dimension → shortcut baselines (fitted on dev, scored on test).
    pub shortcuts: BTreeMap<String, Shortcuts>,
    /// dimension → inter-annotator agreement (first vs second labeller, before adjudication).
    pub inter_annotator: BTreeMap<String, Agreement>,
    /// category → count.
    pub categories: BTreeMap<String, usize>,
}

/// The whole check.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CorpusReport {
    pub languages: Vec<LangBalance>,
    /// dimension → inter-annotator agreement over all languages.
    pub inter_annotator: BTreeMap<String, Agreement>,
    /// Every problem, with the item or language it concerns.
    pub problems: Vec<String>,
}

fn bin(s: u8) -> Option<Bin> {
    Bin::of(s)
}

fn cat_name(c: Category) -> String {
    serde_json::to_value(c)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Numbers (runs of digits, with inner `.`/`,`/`:`/`-`) in a text, citation markers removed.
pub fn numbers(text: &str) -> Vec<String> {
    let clean = cardinal_kb::text::without_citations(text);
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = clean.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let inner = matches!(c, '.' | ',' | ':' | '-')
            && !cur.is_empty()
            && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if c.is_ascii_digit() || inner {
            cur.push(c);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Check the corpus. `items` are every item of every language.
pub fn check(kb: &KnowledgeBase, items: &[LoadedItem]) -> CorpusReport {
    let mut problems = Vec::new();
    let mut languages = Vec::new();
    let mut all_pairs: BTreeMap<String, Vec<Pair>> = BTreeMap::new();
    for lang in Lang::ALL {
        let its: Vec<&CalibrationItem> = items
            .iter()
            .map(|li| &li.item)
            .filter(|it| it.lang == lang)
            .collect();
        let tag = lang.tag();
        let n = its.len();
        if n < MIN_ITEMS {
            problems.push(format!("{tag}: {n} items, at least {MIN_ITEMS} needed"));
        }
        if n == 0 {
            continue;
        }
        // Topics.
        let cited_topics: BTreeSet<&str> = its
            .iter()
            .flat_map(|it| it.cited.iter())
            .filter_map(|id| kb.get(id).map(|cf| cf.card.topic.as_str()))
            .collect();
        let kb_topics: BTreeSet<&str> = kb
            .cards
            .iter()
            .filter(|cf| cf.card.lang == lang)
            .map(|cf| cf.card.topic.as_str())
            .collect();
        let missing: Vec<&&str> = kb_topics.difference(&cited_topics).collect();
        if !missing.is_empty() {
            problems.push(format!(
                "{tag}: topics no item cites: {}",
                missing
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let translated = its.iter().filter(|it| it.translated_from.is_some()).count();
        if translated as f64 > MAX_TRANSLATED_SHARE * n as f64 {
            problems.push(format!(
                "{tag}: {translated} of {n} items are translated (at most 20 %)"
            ));
        }
        // Score and bin spread.
        let mut scores = BTreeMap::new();
        for dim in GATED_DIMENSIONS {
            let mut h = [0usize; 5];
            for it in &its {
                if let Some(s) = it.reference(dim).filter(|s| (1..=5).contains(s)) {
                    h[(s - 1) as usize] += 1;
                }
            }
            for (i, c) in h.iter().enumerate() {
                if (*c as f64) < MIN_SCORE_SHARE * n as f64 {
                    problems.push(format!(
                        "{tag}/{dim}: score {} used by {c} of {n} items (at least 10 %)",
                        i + 1
                    ));
                }
            }
            for (name, c) in [("1–2", h[0] + h[1]), ("3", h[2]), ("4–5", h[3] + h[4])] {
                if (c as f64) < MIN_BIN_SHARE * n as f64 {
                    problems.push(format!(
                        "{tag}/{dim}: bin {name} holds {c} of {n} items (at least 20 %)"
                    ));
                }
            }
            scores.insert(dim.to_string(), h);
        }
        // Shortcut baselines: fitted on dev, scored on test.
        let mut sc = BTreeMap::new();
        for dim in GATED_DIMENSIONS {
            let pick = |split: Split| -> Vec<(&str, Bin)> {
                its.iter()
                    .filter(|it| it.split == split)
                    .filter_map(|it| Some((it.answer.as_str(), bin(it.reference(dim)?)?)))
                    .collect()
            };
            let s = shortcuts(&pick(Split::Dev), &pick(Split::Test));
            if let (Some(m), Some((feature, (_, a)))) = (
                s.majority_agreement,
                s.rules.iter().max_by(|x, y| x.1 .1.total_cmp(&y.1 .1)),
            ) {
                if a - m > MAX_SHORTCUT_MARGIN + 1e-12 {
                    problems.push(format!(
                        "{tag}/{dim}: the surface rule on `{feature}` (fitted on dev) reaches {a:.3} on test vs the majority bin's {m:.3} (+{:.3} > {MAX_SHORTCUT_MARGIN})",
                        a - m
                    ));
                }
            }
            sc.insert(dim.to_string(), s);
        }
        // Split stratification (the balanced split), and the dev-only extension.
        for it in its
            .iter()
            .filter(|it| it.id.starts_with(DEV_EXTENSION_PREFIX) && it.split != Split::Dev)
        {
            problems.push(format!(
                "{}: items of the dev-only extension ({DEV_EXTENSION_PREFIX}*) must be in the dev split",
                it.id
            ));
        }
        let mut strata: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
        for it in its
            .iter()
            .filter(|it| !it.id.starts_with(DEV_EXTENSION_PREFIX))
        {
            let b = it
                .reference("faithfulness")
                .and_then(bin)
                .map(|b| format!("{b:?}"))
                .unwrap_or_default();
            let e = strata.entry((cat_name(it.category), b)).or_default();
            match it.split {
                Split::Dev => e.0 += 1,
                Split::Test => e.1 += 1,
            }
        }
        for ((c, b), (d, t)) in &strata {
            if d.abs_diff(*t) > 1 {
                problems.push(format!(
                    "{tag}: stratum {c}/{b} has {d} dev and {t} test items (must differ by at most 1)"
                ));
            }
        }
        let dev = its.iter().filter(|it| it.split == Split::Dev).count();
        // Second labels and adjudication.
        let second: Vec<&&CalibrationItem> =
            its.iter().filter(|it| it.second_labels.is_some()).collect();
        if (second.len() as f64) < MIN_SECOND_LABEL_SHARE * n as f64 {
            problems.push(format!(
                "{tag}: {} of {n} items carry a second label (at least 30 %)",
                second.len()
            ));
        }
        let mut iaa = BTreeMap::new();
        for dim in GATED_DIMENSIONS {
            let mut pairs = Vec::new();
            for it in &second {
                let (Some(a), Some(b)) = (
                    it.labels.score(dim),
                    it.second_labels.as_ref().and_then(|s| s.score(dim)),
                ) else {
                    continue;
                };
                pairs.push(Pair {
                    item_id: it.id.clone(),
                    human: a,
                    judge: b,
                });
                if bin(a) != bin(b) && it.adjudicated.as_ref().and_then(|x| x.get(dim)).is_none() {
                    problems.push(format!(
                        "{}: the labellers' {dim} bins differ ({a} vs {b}) and no adjudication is recorded",
                        it.id
                    ));
                }
            }
            all_pairs
                .entry(dim.to_string())
                .or_default()
                .extend(pairs.iter().cloned());
            iaa.insert(
                dim.to_string(),
                agreement(&pairs, &format!("iaa/{dim}/{tag}")),
            );
        }
        // Rule violations: numbers must come from the cited headers.
        for it in its
            .iter()
            .filter(|it| it.category == Category::RuleViolation)
        {
            let headers: String = it
                .cited
                .iter()
                .filter_map(|id| kb.get(id).map(|cf| cf.card.header().to_string()))
                .collect::<Vec<_>>()
                .join("\n");
            let note = it.header_check.as_deref().unwrap_or("");
            for num in numbers(&it.answer) {
                // A number the user wrote (echoed back) states no card fact either way.
                if !headers.contains(&num) && !note.contains(&num) && !it.question.contains(&num) {
                    problems.push(format!(
                        "{}: rule_violation answer carries `{num}`, which no cited header states, the question does not contain and header_check does not explain",
                        it.id
                    ));
                }
            }
        }
        let mut categories = BTreeMap::new();
        for it in &its {
            *categories.entry(cat_name(it.category)).or_default() += 1;
        }
        languages.push(LangBalance {
            lang: tag.to_string(),
            items: n,
            dev,
            test: n - dev,
            second_labelled: second.len(),
            adjudicated: its.iter().filter(|it| it.adjudicated.is_some()).count(),
            translated,
            topics_cited: cited_topics.len(),
            scores,
            shortcuts: sc,
            inter_annotator: iaa,
            categories,
        });
    }
    let inter_annotator = all_pairs
        .iter()
        .map(|(d, p)| (d.clone(), agreement(p, &format!("iaa/{d}/all"))))
        .collect();
    CorpusReport {
        languages,
        inter_annotator,
        problems,
    }
}

/// The corpus report as a text table (for `cardinal calibrate --balance`).
pub fn render(r: &CorpusReport) -> String {
    let mut s = String::new();
    let f = |x: Option<f64>| x.map(|v| format!("{v:.3}")).unwrap_or_else(|| "n/a".into());
    for l in &r.languages {
        s.push_str(&format!(
            "{}: {} items (dev {}, test {}), second-labelled {}, adjudicated {}, translated {}, topics {}\n",
            l.lang, l.items, l.dev, l.test, l.second_labelled, l.adjudicated, l.translated, l.topics_cited
        ));
        s.push_str(&format!(
            "  categories: {}\n",
            l.categories
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        for dim in GATED_DIMENSIONS {
            if let Some(h) = l.scores.get(dim) {
                s.push_str(&format!(
                    "  {dim:<13} scores 1..5: {:?}  bins L/M/H: {}/{}/{}\n",
                    h,
                    h[0] + h[1],
                    h[2],
                    h[3] + h[4]
                ));
            }
            if let Some(sc) = l.shortcuts.get(dim) {
                s.push_str(&format!(
                    "  {:<13} shortcut baselines on test (fitted on dev, n {} / {}): majority bin {:?} {}",
                    "", sc.n_fit, sc.n_score, sc.majority_bin, f(sc.majority_agreement)
                ));
                for (feat, (_, a)) in &sc.rules {
                    s.push_str(&format!(", {feat} {a:.3}"));
                }
                s.push('\n');
            }
            if let Some(a) = l.inter_annotator.get(dim) {
                s.push_str(&format!(
                    "  {:<13} inter-annotator (n {}): binned agreement {}, quadratic κ {}\n",
                    "",
                    a.n,
                    f(a.agreement),
                    f(a.kappa_quadratic)
                ));
            }
        }
    }
    for (d, a) in &r.inter_annotator {
        s.push_str(&format!(
            "all languages, {d}: inter-annotator binned agreement {} (n {}), quadratic κ {}\n",
            f(a.agreement),
            a.n,
            f(a.kappa_quadratic)
        ));
    }
    if r.problems.is_empty() {
        s.push_str("corpus check: ok\n");
    } else {
        s.push_str(&format!("corpus check: {} problem(s)\n", r.problems.len()));
        for p in &r.problems {
            s.push_str(&format!("  - {p}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_skip_citation_markers() {
        assert_eq!(
            numbers("Call 555-0142 within 2 days, at 3:30 [lab-results.en]. 38,5 °C."),
            vec!["555-0142", "2", "3:30", "38,5"]
        );
    }

    /// The bundled corpus passes; an item of the dev-only extension does not count in the
    /// split's balance, while the same item under a v2 id does, and an extension item outside
    /// dev is a problem.
    #[test]
    fn the_dev_only_extension_is_outside_the_split_balance_and_must_be_dev() {
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
        let kb = KnowledgeBase::load(&data.join("kb")).unwrap();
        let (items, diags) =
            cardinal_dataset::calibration::load_calibration_dir(&data.join("calibration")).unwrap();
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(check(&kb, &items).problems, Vec::<String>::new());
        let balanced = |p: &str| p.contains("stratum");
        // Three more dev items of one stratum, under v2 ids: the balance breaks (it was within
        // one item).
        let Some(base) = items
            .iter()
            .find(|li| li.item.lang == Lang::En && !li.item.id.starts_with(DEV_EXTENSION_PREFIX))
        else {
            panic!("no en item");
        };
        let extra = |id: &str, split: Split| {
            let mut li = base.clone();
            li.item.id = id.to_string();
            li.item.split = split;
            li
        };
        let mut more = items.clone();
        for id in ["cal2-en-900", "cal2-en-901", "cal2-en-902"] {
            more.push(extra(id, Split::Dev));
        }
        assert!(check(&kb, &more).problems.iter().any(|p| balanced(p)));
        // The same three as extension items: no balance problem.
        let mut ext = items.clone();
        for id in ["cal3-en-900", "cal3-en-901", "cal3-en-902"] {
            ext.push(extra(id, Split::Dev));
        }
        assert!(!check(&kb, &ext).problems.iter().any(|p| balanced(p)));
        // An extension item in test is refused.
        ext.push(extra("cal3-en-903", Split::Test));
        assert!(check(&kb, &ext)
            .problems
            .iter()
            .any(|p| p.starts_with("cal3-en-903") && p.contains("dev split")));
    }
}
