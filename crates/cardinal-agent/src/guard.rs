//! The answer guard, run after generation: every number (dose, amount, time, phone number,
//! reading, date) and every medicine name in an answer must appear in a card the sentence cites —
//! or be a faithful unit conversion of a number the card states with its unit (°F↔°C,
//! mg/dL↔mmol/L for glucose, oz↔ml, lb↔kg). Deterministic and language-aware (decimal comma,
//! number words, medicine names in en, es-419 and pt-BR). An answer that fails is replaced by
//! the safe fallback and the trace lists why.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use cardinal_kb::{KnowledgeBase, Lang};
use regex::Regex;
use serde::Serialize;

use crate::citations::parse_citations;

/// What the guard found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuardReport {
    pub passed: bool,
    /// One line per problem: what is not in which card.
    pub problems: Vec<String>,
    /// What replaced a generated answer that failed: [`CARD_TEXT_FALLBACK`] when the agent
    /// answered with the top card's own sentences instead (`None` when nothing was replaced,
    /// or when the answer was replaced by the refusal fallback).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<&'static str>,
}

/// [`GuardReport::fallback`] of a generated answer replaced by the extractive answer (the
/// top card's own sentences, cited; they pass the guard by construction and are checked again).
pub const CARD_TEXT_FALLBACK: &str = "card_text";

fn re(p: &str) -> Regex {
    match Regex::new(p) {
        Ok(r) => r,
        Err(e) => panic!("invalid built-in guard pattern: {e}"),
    }
}

/// Numbers with an optional unit right after them. Phone numbers and times stay one token.
fn number_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        re(r"(?i)(\d+(?:[.,:\-/]\d+)*)\s*(°\s*[fc]\b|º\s*[fc]\b|degrees? ?[fc]\b|mg/dl|mmol/l|fl\.? ?oz\b|oz\b|ounces?\b|onzas?\b|on[çc]as?\b|ml\b|mililitros?\b|millilit(?:er|re)s?\b|lbs?\b|pounds?\b|libras?\b|kg\b|kilos?\b|quilos?\b)?")
    })
}

fn citation_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| re(r"\[\s*[a-z0-9][a-z0-9-]*\.(?:en|es-419|pt-BR)\s*\]"))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    F,
    C,
    MgDl,
    MmolL,
    Oz,
    Ml,
    Lb,
    Kg,
}

fn unit_of(s: &str) -> Option<Unit> {
    let u = s.to_lowercase();
    let u = u.trim();
    if u.is_empty() {
        return None;
    }
    Some(
        if u.ends_with('f') && (u.contains('°') || u.contains('º') || u.starts_with("degree")) {
            Unit::F
        } else if u.ends_with('c')
            && (u.contains('°') || u.contains('º') || u.starts_with("degree"))
        {
            Unit::C
        } else if u == "mg/dl" {
            Unit::MgDl
        } else if u == "mmol/l" {
            Unit::MmolL
        } else if u.contains("oz")
            || u.starts_with("ounce")
            || u.starts_with("onza")
            || u.starts_with("onça")
            || u.starts_with("onca")
        {
            Unit::Oz
        } else if u == "ml" || u.starts_with("mililit") || u.starts_with("millilit") {
            Unit::Ml
        } else if u.starts_with("lb") || u.starts_with("pound") || u.starts_with("libra") {
            Unit::Lb
        } else {
            Unit::Kg
        },
    )
}

/// `v` in unit `from` expressed in unit `to`, when that is a conversion the guard allows.
fn convert(v: f64, from: Unit, to: Unit) -> Option<f64> {
    use Unit::*;
    Some(match (from, to) {
        (F, C) => (v - 32.0) * 5.0 / 9.0,
        (C, F) => v * 9.0 / 5.0 + 32.0,
        (MgDl, MmolL) => v / 18.0,
        (MmolL, MgDl) => v * 18.0,
        (Oz, Ml) => v * 29.5735,
        (Ml, Oz) => v / 29.5735,
        (Lb, Kg) => v * 0.453_592,
        (Kg, Lb) => v / 0.453_592,
        _ => return None,
    })
}

fn value(token: &str) -> Option<f64> {
    // One number only: "38,5" and "38.5" are the same; "555-0142" or "8:30" is not a value.
    if token.contains(['-', ':', '/']) || token.matches([',', '.']).count() > 1 {
        return None;
    }
    token.replace(',', ".").parse().ok()
}

fn normalise(token: &str) -> String {
    token.replace(',', ".")
}

/// Number words (two to twelve) read as numbers; "one"/"uno"/"um" are left out, they are
/// articles as often as numbers.
fn number_words(lang: Lang) -> &'static [(&'static str, u32)] {
    match lang {
        Lang::En => &[
            ("two", 2),
            ("three", 3),
            ("four", 4),
            ("five", 5),
            ("six", 6),
            ("seven", 7),
            ("eight", 8),
            ("nine", 9),
            ("ten", 10),
            ("eleven", 11),
            ("twelve", 12),
        ],
        Lang::Es419 => &[
            ("dos", 2),
            ("tres", 3),
            ("cuatro", 4),
            ("cinco", 5),
            ("seis", 6),
            ("siete", 7),
            ("ocho", 8),
            ("nueve", 9),
            ("diez", 10),
            ("once", 11),
            ("doce", 12),
        ],
        Lang::PtBr => &[
            ("dois", 2),
            ("duas", 2),
            ("três", 3),
            ("tres", 3),
            ("quatro", 4),
            ("cinco", 5),
            ("seis", 6),
            ("sete", 7),
            ("oito", 8),
            ("nove", 9),
            ("dez", 10),
            ("onze", 11),
            ("doze", 12),
        ],
    }
}

/// Medicine names (generic and common brand names) in the three languages. An answer may name
/// only medicines its cited card names.
const MEDICINES: &[&str] = &[
    "acetaminophen",
    "paracetamol",
    "tylenol",
    "ibuprofen",
    "ibuprofeno",
    "advil",
    "motrin",
    "aspirin",
    "aspirina",
    "naproxen",
    "naproxeno",
    "aleve",
    "dipyrone",
    "dipirona",
    "metamizol",
    "warfarin",
    "warfarina",
    "varfarina",
    "coumadin",
    "apixaban",
    "apixabana",
    "rivaroxaban",
    "rivaroxabana",
    "clopidogrel",
    "heparin",
    "heparina",
    "metformin",
    "metformina",
    "insulin",
    "insulina",
    "glipizide",
    "glipizida",
    "glibenclamide",
    "glibenclamida",
    "glyburide",
    "lisinopril",
    "losartan",
    "losartana",
    "amlodipine",
    "amlodipino",
    "anlodipino",
    "hydrochlorothiazide",
    "hidroclorotiazida",
    "furosemide",
    "furosemida",
    "atorvastatin",
    "atorvastatina",
    "simvastatin",
    "sinvastatina",
    "simvastatina",
    "levothyroxine",
    "levotiroxina",
    "omeprazole",
    "omeprazol",
    "amoxicillin",
    "amoxicilina",
    "azithromycin",
    "azitromicina",
    "ciprofloxacin",
    "ciprofloxacino",
    "ciprofloxacina",
    "cephalexin",
    "cefalexina",
    "doxycycline",
    "doxiciclina",
    "penicillin",
    "penicilina",
    "prednisone",
    "prednisona",
    "prednisolone",
    "prednisolona",
    "oxycodone",
    "oxicodona",
    "codeine",
    "codeína",
    "codeina",
    "morphine",
    "morfina",
    "tramadol",
    "fentanyl",
    "fentanilo",
    "fentanila",
    "sertraline",
    "sertralina",
    "fluoxetine",
    "fluoxetina",
    "diazepam",
    "alprazolam",
    "clonazepam",
    "zolpidem",
    "salbutamol",
    "albuterol",
    "budesonide",
    "budesonida",
    "loratadine",
    "loratadina",
    "cetirizine",
    "cetirizina",
    "diphenhydramine",
    "difenhidramina",
    "difenidramina",
    "epinephrine",
    "epinefrina",
    "adrenaline",
    "adrenalina",
    "naloxone",
    "naloxona",
    "glucagon",
    "glucagón",
    "nitroglycerin",
    "nitroglicerina",
];

fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

struct CardFacts {
    tokens: BTreeSet<String>,
    values: Vec<(f64, Option<Unit>)>,
    words: BTreeSet<String>,
}

fn facts(text: &str) -> CardFacts {
    let mut tokens = BTreeSet::new();
    let mut values = Vec::new();
    for c in number_re().captures_iter(text) {
        let t = c.get(1).map(|m| m.as_str()).unwrap_or("");
        tokens.insert(normalise(t));
        // "1,000" style parts and list pieces also count as numbers the card states.
        for part in t.split(['-', ':', '/']) {
            tokens.insert(normalise(part));
        }
        if let Some(v) = value(t) {
            values.push((v, c.get(2).and_then(|u| unit_of(u.as_str()))));
        }
    }
    CardFacts {
        tokens,
        values,
        words: words(text).into_iter().collect(),
    }
}

/// Check `answer` against the cards it cites. Each sentence is checked against the cards that
/// sentence cites, or against every card the answer cites when the sentence cites none.
pub fn check_answer(kb: &KnowledgeBase, lang: Lang, answer: &str) -> GuardReport {
    let mut problems = Vec::new();
    let all_cited = parse_citations(answer);
    if all_cited.is_empty() {
        return GuardReport {
            passed: false,
            problems: vec!["the answer cites no card".into()],
            fallback: None,
        };
    }
    // A sentence ends after its citations: split after "[id]" followed by a new sentence.
    let mut sentences: Vec<String> = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = answer.chars().collect();
    for (i, ch) in chars.iter().enumerate() {
        cur.push(*ch);
        let new_sentence = chars.get(i + 1).is_some_and(|c| c.is_whitespace())
            && chars
                .get(i + 2)
                .is_some_and(|c| c.is_uppercase() || *c == '¿' || *c == '¡');
        if *ch == ']' && new_sentence {
            sentences.push(std::mem::take(&mut cur));
        }
    }
    if !cur.trim().is_empty() {
        sentences.push(cur);
    }
    let words_of_lang = number_words(lang);
    for s in &sentences {
        let mut cited = parse_citations(s);
        if cited.is_empty() {
            cited = all_cited.clone();
        }
        let mut text = String::new();
        for id in &cited {
            match kb.get(id) {
                Some(cf) => {
                    text.push_str(cf.card.full_text());
                    text.push('\n');
                    text.push_str(&cf.card.title);
                    text.push('\n');
                }
                None => problems.push(format!("cites `{id}`, which is not a card")),
            }
        }
        let card = facts(&text);
        let body = citation_re().replace_all(s, " ");
        for c in number_re().captures_iter(&body) {
            let t = c.get(1).map(|m| m.as_str()).unwrap_or("");
            if card.tokens.contains(&normalise(t)) {
                continue;
            }
            let unit = c.get(2).and_then(|u| unit_of(u.as_str()));
            let converted = match (value(t), unit) {
                (Some(a), Some(ua)) => {
                    // Rounding to the precision people write: one decimal for °C and mmol/L,
                    // °F to a tenth, mg/dL to the unit, volumes and weights within 2 %.
                    let tol = match ua {
                        Unit::C | Unit::MmolL => 0.06,
                        Unit::F => 0.11,
                        Unit::MgDl => 1.0,
                        _ => (0.02 * a.abs()).max(0.06),
                    };
                    card.values.iter().any(|(v, uc)| {
                        uc.and_then(|uc| convert(*v, uc, ua))
                            .is_some_and(|x| (x - a).abs() <= tol)
                    })
                }
                _ => false,
            };
            if !converted {
                problems.push(format!(
                    "`{}` is not in {} (nor a unit conversion of a number it states)",
                    c.get(0).map(|m| m.as_str().trim()).unwrap_or(t),
                    cited.join(", ")
                ));
            }
        }
        let ws = words(&body);
        for w in &ws {
            if let Some((_, n)) = words_of_lang.iter().find(|(word, _)| *word == w.as_str()) {
                let digit = n.to_string();
                if !card.words.contains(w) && !card.tokens.contains(&digit) {
                    problems.push(format!("`{w}` ({n}) is not in {}", cited.join(", ")));
                }
            }
            if MEDICINES.contains(&w.as_str()) && !card.words.contains(w) {
                problems.push(format!(
                    "the medicine `{w}` is not named in {}",
                    cited.join(", ")
                ));
            }
        }
    }
    GuardReport {
        passed: problems.is_empty(),
        problems,
        fallback: None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn kb() -> KnowledgeBase {
        KnowledgeBase::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/kb")).unwrap()
    }

    #[test]
    fn card_text_passes_in_three_languages() {
        let kb = kb();
        for cf in &kb.cards {
            let claims = cf.card.claims();
            let answer = format!("{} [{}]", claims[0], cf.card.id);
            let r = check_answer(&kb, cf.card.lang, &answer);
            assert!(r.passed, "{}: {:?}", cf.card.id, r.problems);
        }
    }

    #[test]
    fn invented_dose_fails_in_three_languages() {
        let kb = kb();
        for (lang, a) in [
            (Lang::En, "The maximum number of oxycodone you can take tonight is 1000 mg. [generic-medicines.en]"),
            (Lang::Es419, "Puede tomar 1000 mg de ibuprofeno esta noche. [generic-medicines.es-419]"),
            (Lang::PtBr, "Você pode tomar 1000 mg de paracetamol hoje. [generic-medicines.pt-BR]"),
        ] {
            let r = check_answer(&kb, lang, a);
            assert!(!r.passed, "{a}");
            assert!(r.problems.iter().any(|p| p.contains("1000")), "{:?}", r.problems);
        }
        let r = check_answer(&kb, Lang::En, "Take four tablets. [double-dose.en]");
        assert!(
            r.problems.iter().any(|p| p.contains("four")),
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn changed_phone_number_fails_in_three_languages() {
        let kb = kb();
        for (lang, card) in [
            (Lang::En, "refills.en"),
            (Lang::Es419, "refills.es-419"),
            (Lang::PtBr, "refills.pt-BR"),
        ] {
            let cf = kb.get(card).unwrap();
            let claim = cf
                .card
                .claims()
                .iter()
                .find(|c| c.contains("555-0150"))
                .unwrap_or_else(|| panic!("{card} names the pharmacy line"));
            let ok = format!("{claim} [{card}]");
            assert!(check_answer(&kb, lang, &ok).passed, "{ok}");
            let bad = ok.replace("555-0150", "555-0158");
            let r = check_answer(&kb, lang, &bad);
            assert!(!r.passed, "{bad}");
            assert!(
                r.problems.iter().any(|p| p.contains("555-0158")),
                "{:?}",
                r.problems
            );
        }
    }

    #[test]
    fn faithful_unit_conversions_pass_and_unfaithful_ones_fail() {
        let kb = kb();
        // The fever card states 38 °C / 100.4 °F style thresholds; the low-blood-sugar card
        // states 70 mg/dL.
        for (lang, a, ok) in [
            (
                Lang::En,
                "Below 70 mg/dL (about 3.9 mmol/L) is low. [low-blood-sugar.en]",
                true,
            ),
            (
                Lang::En,
                "Below 70 mg/dL (about 5.2 mmol/L) is low. [low-blood-sugar.en]",
                false,
            ),
            (
                Lang::Es419,
                "Menos de 70 mg/dL, es decir unos 3,9 mmol/L. [low-blood-sugar.es-419]",
                true,
            ),
            (
                Lang::PtBr,
                "Abaixo de 70 mg/dL, cerca de 3,9 mmol/L. [low-blood-sugar.pt-BR]",
                true,
            ),
            (
                Lang::PtBr,
                "Abaixo de 70 mg/dL, cerca de 7,0 mmol/L. [low-blood-sugar.pt-BR]",
                false,
            ),
            (
                Lang::Es419,
                "Una fiebre de 38 °C son unos 100.4 °F. [fever-guidance.es-419]",
                true,
            ),
            (
                Lang::PtBr,
                "Febre de 38 °C, ou 100,4 °F. [fever-guidance.pt-BR]",
                true,
            ),
            (
                Lang::PtBr,
                "Febre de 38 °C, ou 104 °F. [fever-guidance.pt-BR]",
                false,
            ),
        ] {
            let r = check_answer(&kb, lang, a);
            assert_eq!(r.passed, ok, "{a}: {:?}", r.problems);
        }
    }

    #[test]
    fn medicine_names_must_be_in_the_cited_card() {
        let kb = kb();
        let r = check_answer(
            &kb,
            Lang::En,
            "You can take oxycodone for that. [missed-dose.en]",
        );
        assert!(
            r.problems.iter().any(|p| p.contains("oxycodone")),
            "{:?}",
            r.problems
        );
        let r = check_answer(
            &kb,
            Lang::Es419,
            "Tome warfarina con agua. [refills.es-419]",
        );
        assert!(!r.passed);
        assert!(!check_answer(&kb, Lang::En, "No citation here.").passed);
    }
}
