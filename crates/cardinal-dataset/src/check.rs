//! The dataset integrity gate (ADR-0023 §D): a labelling error must not pose as a retrieval failure.

use std::collections::HashMap;

use cardinal_kb::{Diagnostic, Diagnostics, KnowledgeBase, Lang};

use crate::case::{CaseType, Expect, Form, LoadedCase, SafetyClass};

/// Cross-checks of cases against each other and against the knowledge base:
/// unique ids, file language = case language, every gold id is a card of the case's language,
/// gold present exactly for the case types that carry it; the safety labels agree with each
/// other (class ↔ expect, `answer_gold` only on two-intent cases and only with cards of the
/// case's language).
pub fn check(kb: &KnowledgeBase, cases: &[LoadedCase]) -> Diagnostics {
    let mut diags = Diagnostics::default();
    let mut seen: HashMap<&str, &LoadedCase> = HashMap::new();
    for lc in cases {
        let c = &lc.case;
        let at = |field: &str, msg: String| Diagnostic::new(&lc.path, lc.line, field, msg);
        if let Some(first) = seen.get(c.id.as_str()) {
            diags.push(at(
                "id",
                format!(
                    "duplicate case id `{}` (first at {}:{})",
                    c.id,
                    first.path.display(),
                    first.line
                ),
            ));
        } else {
            seen.insert(&c.id, lc);
        }
        let stem = lc.path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        match stem.parse::<Lang>() {
            Ok(file_lang) if file_lang != c.lang => diags.push(at(
                "lang",
                format!("case is `{}` but sits in the `{file_lang}` file", c.lang),
            )),
            Ok(_) => {}
            Err(_) => diags.push(at(
                "lang",
                format!("case files are named <lang>.jsonl; `{stem}` is not a language"),
            )),
        }
        // A benign near-miss (safety cases v2) is a capability case that a card answers: it
        // carries that card as gold.
        let benign_with_gold = c.case_type == CaseType::Capability
            && c.class == Some(SafetyClass::Benign)
            && c.form.is_some();
        match c.case_type {
            CaseType::Capability | CaseType::NoMatch if c.has_gold() && !benign_with_gold => diags
                .push(at(
                    "must_cite_one_of",
                    format!("a `{}` case has no gold card; use []", c.case_type.as_str()),
                )),
            CaseType::Golden if !c.has_gold() => diags.push(at(
                "must_cite_one_of",
                "a golden case needs at least one gold card".into(),
            )),
            _ => {}
        }
        for (field, ids) in [
            ("must_cite_one_of", &c.must_cite_one_of),
            ("answer_gold", &c.answer_gold),
        ] {
            for gold in ids {
                match kb.get(gold) {
                    None => diags.push(at(
                        field,
                        format!("`{gold}` is not a card of the knowledge base"),
                    )),
                    Some(cf) if cf.card.lang != c.lang => diags.push(at(
                        field,
                        format!(
                            "`{gold}` is a {} card but the case is {}",
                            cf.card.lang, c.lang
                        ),
                    )),
                    Some(_) => {}
                }
            }
        }
        if let Some(class) = c.class {
            if class.expect() != c.expect {
                diags.push(at(
                    "expect",
                    format!(
                        "a `{class}` case expects `{}`, not `{}`",
                        class.expect().as_str(),
                        c.expect.as_str()
                    ),
                ));
            }
            let type_ok = match class {
                SafetyClass::OutOfScope => c.case_type == CaseType::NoMatch,
                SafetyClass::Benign => {
                    matches!(c.case_type, CaseType::Golden | CaseType::Capability)
                }
                _ => c.case_type == CaseType::Adversarial,
            };
            if !type_ok {
                diags.push(at(
                    "class",
                    format!(
                        "class `{class}` does not fit case type `{}`",
                        c.case_type.as_str()
                    ),
                ));
            }
        } else if c.expect == Expect::Escalate && c.case_type != CaseType::Adversarial {
            diags.push(at(
                "expect",
                format!("a `{}` case cannot expect `escalate`", c.case_type.as_str()),
            ));
        }
        if !c.answer_gold.is_empty() && c.form.is_some_and(|f| f != Form::TwoIntents) {
            diags.push(at(
                "answer_gold",
                "only two_intents cases have an answer_gold".into(),
            ));
        }
        if c.form == Some(Form::TwoIntents) && c.answer_gold.is_empty() {
            diags.push(at(
                "answer_gold",
                "a two_intents case lists the card(s) answering its legitimate half".into(),
            ));
        }
    }
    diags
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn kb() -> KnowledgeBase {
        KnowledgeBase::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/kb"))
            .expect("bundled KB")
    }

    fn check_text(text: &str) -> Vec<String> {
        let (cases, d) = crate::case::parse_cases(Path::new("cases/en.jsonl"), text);
        assert!(d.is_empty(), "{d}");
        check(&kb(), &cases).iter().map(|d| d.to_string()).collect()
    }

    #[test]
    fn safety_labels_must_agree() {
        let ok = r#"{"id":"a","lang":"en","type":"adversarial","question":"q","must_cite_one_of":["double-dose.en"],"expect":"refuse","class":"double_dose","form":"two_intents","split":"test","answer_gold":["refills.en"]}"#;
        assert!(check_text(ok).is_empty(), "{:?}", check_text(ok));
        let bad = [
            ok.replace("\"refuse\"", "\"escalate\""),
            ok.replace("refills.en", "refills.pt-BR"),
            ok.replace("refills.en", "nope.en"),
            ok.replace("two_intents", "direct"),
            ok.replace(",\"answer_gold\":[\"refills.en\"]", ""),
            ok.replace("\"double_dose\"", "\"benign\""),
        ]
        .join("\n");
        assert_eq!(
            check_text(&bad.replace("\"id\":\"a\"", "\"id\":\"x\"")[..])
                .iter()
                .filter(|d| !d.contains("duplicate"))
                .cloned()
                .collect::<Vec<_>>(),
            vec![
                "cases/en.jsonl:1: expect: a `double_dose` case expects `refuse`, not `escalate`",
                "cases/en.jsonl:2: answer_gold: `refills.pt-BR` is a pt-BR card but the case is en",
                "cases/en.jsonl:3: answer_gold: `nope.en` is not a card of the knowledge base",
                "cases/en.jsonl:4: answer_gold: only two_intents cases have an answer_gold",
                "cases/en.jsonl:5: answer_gold: a two_intents case lists the card(s) answering its legitimate half",
                "cases/en.jsonl:6: expect: a `benign` case expects `answer`, not `refuse`",
                "cases/en.jsonl:6: class: class `benign` does not fit case type `adversarial`",
            ]
        );
    }
}
