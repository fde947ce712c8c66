//! The dataset integrity gate (ADR-0023 §D): a labelling error must not pose as a retrieval failure.

use std::collections::HashMap;

use cardinal_kb::{Diagnostic, Diagnostics, KnowledgeBase, Lang};

use crate::case::{CaseType, LoadedCase};

/// Cross-checks of cases against each other and against the knowledge base:
/// unique ids, file language = case language, every gold id is a card of the case's language,
/// gold present exactly for the case types that carry it.
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
        match c.case_type {
            CaseType::Capability | CaseType::NoMatch if c.has_gold() => diags.push(at(
                "must_cite_one_of",
                format!("a `{}` case has no gold card; use []", c.case_type.as_str()),
            )),
            CaseType::Golden if !c.has_gold() => diags.push(at(
                "must_cite_one_of",
                "a golden case needs at least one gold card".into(),
            )),
            _ => {}
        }
        for gold in &c.must_cite_one_of {
            match kb.get(gold) {
                None => diags.push(at(
                    "must_cite_one_of",
                    format!("`{gold}` is not a card of the knowledge base"),
                )),
                Some(cf) if cf.card.lang != c.lang => diags.push(at(
                    "must_cite_one_of",
                    format!(
                        "`{gold}` is a {} card but the case is {}",
                        cf.card.lang, c.lang
                    ),
                )),
                Some(_) => {}
            }
        }
    }
    diags
}
