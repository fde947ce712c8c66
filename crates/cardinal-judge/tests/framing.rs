//! The framings of the three dimensions (ADR-0029: faithfulness reads the rules, groundedness
//! does not), on hand-written cards and on the bundled knowledge base.

use std::path::{Path, PathBuf};

use cardinal_judge::{
    build_prompt, build_prompt_framed, rubric, Dimension, Framing, JudgeInput, NotApplicable,
};
use cardinal_kb::{parse_card, Card, KnowledgeBase, Lang};
use cardinal_llm::{Message, Role};

const MISSED_DOSE: &str = "+++\nid = \"missed-dose.en\"\nlang = \"en\"\ntitle = \"Missed dose\"\ntopic = \"missed-dose\"\nsynthetic = true\n+++\n\n- If you miss a dose, take it when you remember unless the next dose is within 4 hours.\n- Keep a written schedule to avoid missing doses.\n- Call the care team at 555-0142 if you miss two doses in a row.\n\n## Rules\n\n- Never advise taking a double dose to make up for a missed one.\n- Never advise stopping a medicine.\n";

const FEVER_ES: &str = "+++\nid = \"fever.es-419\"\nlang = \"es-419\"\ntitle = \"Fiebre\"\ntopic = \"fever\"\nsynthetic = true\n+++\n\n- Una fiebre es una temperatura de 38 °C o más.\n- Beba líquidos y descanse.\n- Llame al 555-0142 si la fiebre dura más de 3 días.\n\n## Reglas\n\n- No diagnostique la causa de la fiebre.\n- Nunca aconseje duplicar una dosis de antitérmico.\n";

const STORAGE: &str = "+++\nid = \"storage.en\"\nlang = \"en\"\ntitle = \"Storing medicines\"\ntopic = \"storage\"\nsynthetic = true\n+++\n\n- Store medicines at room temperature away from sunlight.\n- Keep medicines out of reach of children.\n- Some medicines must be kept in the refrigerator; the label says so.\n\n## Rules\n\n- Do not tell the patient a spoiled medicine is safe to use.\n- Do not recommend a brand.\n";

fn card(text: &str) -> Card {
    match parse_card(Path::new("test.md"), text) {
        Ok(c) => c,
        Err(e) => panic!("test card does not parse: {e}"),
    }
}

fn prompt(d: Dimension, input: &JudgeInput<'_>) -> Vec<Message> {
    match build_prompt(d, input) {
        Ok(m) => m,
        Err(e) => panic!("{d}: not applicable: {e}"),
    }
}

fn text(messages: &[Message]) -> String {
    messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whitespace collapsed: claims and rules spanning several lines are joined by the parser.
fn norm(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn user(messages: &[Message]) -> &str {
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1].role, Role::User);
    &messages[1].content
}

#[test]
fn system_message_is_the_committed_rubric() {
    let c = card(MISSED_DOSE);
    let input = JudgeInput::resolve("q", "a", Lang::En, &["missed-dose.en"], &[&c], |_| Some(&c));
    for d in Dimension::ALL {
        let m = prompt(d, &input);
        assert_eq!(m[0].role, Role::System);
        assert_eq!(m[0].content, rubric::rubric(d));
    }
}

#[test]
fn faithfulness_prompt_contains_the_cited_cards_rules() {
    let c = card(MISSED_DOSE);
    let input = JudgeInput::resolve(
        "I forgot my pill yesterday, what now?",
        "Take two pills today to catch up.",
        Lang::En,
        &["missed-dose.en"],
        &[&c],
        |id| (id == "missed-dose.en").then_some(&c),
    );
    let m = prompt(Dimension::Faithfulness, &input);
    let u = user(&m);
    assert!(u.contains("<card id=\"missed-dose.en\">"));
    assert!(u.contains("## Rules"));
    assert!(u.contains("Never advise taking a double dose to make up for a missed one."));
    for rule in c.rules() {
        assert!(u.contains(rule.as_str()), "{rule}");
    }
    for claim in c.claims() {
        assert!(u.contains(claim.as_str()), "{claim}");
    }
    assert!(u.contains(c.full_text()));
    assert!(u.contains("Take two pills today to catch up."));
    assert!(u.contains("I forgot my pill yesterday, what now?"));
}

#[test]
fn groundedness_prompt_contains_no_rules() {
    let c = card(MISSED_DOSE);
    let input = JudgeInput::resolve("q", "a", Lang::En, &["missed-dose.en"], &[&c], |_| Some(&c));
    let m = prompt(Dimension::Groundedness, &input);
    let all = text(&m);
    assert!(!all.contains("## Rules"));
    assert!(!all.contains("Rules"));
    for rule in c.rules() {
        assert!(!all.contains(rule.as_str()), "rule leaked: {rule}");
    }
    assert!(!all.contains("double dose"));
    for claim in c.claims() {
        assert!(all.contains(claim.as_str()), "{claim}");
    }
    assert!(user(&m).contains(c.header()));
}

#[test]
fn rules_heading_of_each_language_follows_the_card() {
    let c = card(FEVER_ES);
    let input = JudgeInput::resolve(
        "¿Qué hago con la fiebre?",
        "Tome el doble de la dosis.",
        Lang::Es419,
        &["fever.es-419"],
        &[&c],
        |_| Some(&c),
    );
    let f = prompt(Dimension::Faithfulness, &input);
    assert!(user(&f).contains("## Reglas"));
    assert!(user(&f).contains("Nunca aconseje duplicar una dosis de antitérmico."));
    let g = prompt(Dimension::Groundedness, &input);
    assert!(!text(&g).contains("## Reglas"));
    assert!(!text(&g).contains("Nunca aconseje duplicar"));
    assert!(!text(&g).contains("No diagnostique"));
}

#[test]
fn the_judge_is_told_the_answer_language() {
    let c = card(MISSED_DOSE);
    for (lang, line) in [
        (Lang::En, "Answer language: en (English)."),
        (
            Lang::Es419,
            "Answer language: es-419 (Latin-American Spanish).",
        ),
        (Lang::PtBr, "Answer language: pt-BR (Brazilian Portuguese)."),
    ] {
        let input = JudgeInput::resolve("q", "a", lang, &["missed-dose.en"], &[&c], |_| Some(&c));
        for d in Dimension::ALL {
            let m = prompt(d, &input);
            assert!(user(&m).starts_with(line), "{d} {lang}");
            assert!(user(&m).contains("regardless of language"));
        }
    }
}

#[test]
fn hallucination_uses_all_retrieved_cards_headers_only() {
    let dose = card(MISSED_DOSE);
    let storage = card(STORAGE);
    let fever = card(FEVER_ES);
    let cards = [&dose, &storage, &fever];
    let lookup = |id: &str| cards.iter().copied().find(|c| c.id == id);
    // Cites only one retrieved card, plus a real card that was not retrieved.
    let input = JudgeInput::resolve(
        "q",
        "a",
        Lang::En,
        &["missed-dose.en", "fever.es-419"],
        &[&dose, &storage, &dose],
        lookup,
    );
    assert_eq!(
        input.retrieved.len(),
        2,
        "duplicates keep the first occurrence"
    );
    let m = prompt(Dimension::Hallucination, &input);
    let u = user(&m);
    assert!(u.contains("<card id=\"missed-dose.en\">"));
    assert!(u.contains("<card id=\"storage.en\">"));
    assert!(u.contains(dose.header()) && u.contains(storage.header()));
    assert_eq!(u.matches("<card id=").count(), 2);
    assert!(!u.contains("fever.es-419"), "cited but not retrieved");
    assert!(
        u.find("missed-dose.en") < u.find("storage.en"),
        "rank order"
    );
    let all = text(&m);
    assert!(!all.contains("## Rules"));
    for rule in dose.rules().iter().chain(storage.rules()) {
        assert!(!all.contains(rule.as_str()), "{rule}");
    }
    // Groundedness and faithfulness frame the cited cards instead.
    let g = prompt(Dimension::Groundedness, &input);
    assert!(user(&g).contains("fever.es-419") && !user(&g).contains("storage.en"));
}

#[test]
fn hallucination_with_nothing_retrieved_says_so() {
    let input = JudgeInput::resolve::<&str>("q", "a", Lang::En, &[], &[], |_| None);
    let m = prompt(Dimension::Hallucination, &input);
    assert!(user(&m).contains("(no card was retrieved)"));
    assert!(!user(&m).contains("<card"));
}

#[test]
fn unknown_cited_ids_are_skipped_and_recorded() {
    let c = card(MISSED_DOSE);
    let lookup = |id: &str| (id == "missed-dose.en").then_some(&c);
    let input = JudgeInput::resolve(
        "q",
        "a",
        Lang::En,
        &[
            "made-up.en",
            "missed-dose.en",
            "made-up.en",
            "missed-dose.en",
        ],
        &[&c],
        lookup,
    );
    assert_eq!(input.unknown_cited, ["made-up.en"]);
    assert_eq!(input.cited.len(), 1);
    for d in [Dimension::Groundedness, Dimension::Faithfulness] {
        let u = text(&prompt(d, &input));
        assert!(!u.contains("made-up.en"), "{d}");
        assert_eq!(u.matches("<card id=\"missed-dose.en\">").count(), 1, "{d}");
    }
}

#[test]
fn no_real_cited_card_is_not_applicable() {
    let c = card(MISSED_DOSE);
    for cited in [vec![], vec!["made-up.en", "other.en"]] {
        let input = JudgeInput::resolve("q", "a", Lang::En, &cited, &[&c], |_| None);
        assert_eq!(input.unknown_cited.len(), cited.len());
        for d in [Dimension::Groundedness, Dimension::Faithfulness] {
            assert_eq!(build_prompt(d, &input), Err(NotApplicable::NoCitedCards));
        }
        assert!(build_prompt(Dimension::Hallucination, &input).is_ok());
    }
}

#[test]
fn prompts_are_deterministic() {
    let c = card(MISSED_DOSE);
    let input = JudgeInput::resolve("q", "a", Lang::En, &["missed-dose.en"], &[&c], |_| Some(&c));
    for d in Dimension::ALL {
        assert_eq!(build_prompt(d, &input), build_prompt(d, &input));
    }
}

fn kb_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/kb")
}

/// On every card of the bundled KB: faithfulness shows every rule and the language's rules
/// heading; groundedness and hallucination show every claim and no rule.
#[test]
fn bundled_kb_framings() {
    let kb = match KnowledgeBase::load(&kb_dir()) {
        Ok(kb) => kb,
        Err(e) => panic!("bundled KB does not load: {e}"),
    };
    assert!(!kb.is_empty());
    for f in &kb.cards {
        let c = &f.card;
        let input = JudgeInput::resolve("q", "a", c.lang, &[c.id.as_str()], &[c], |id| {
            kb.get(id).map(|f| &f.card)
        });
        let heading = c.lang.rules_heading();
        let faith = norm(user(&prompt(Dimension::Faithfulness, &input)));
        assert!(faith.contains(heading), "{}", c.id);
        for rule in c.rules() {
            assert!(faith.contains(rule.as_str()), "{}: {rule}", c.id);
        }
        for d in [Dimension::Groundedness, Dimension::Hallucination] {
            let all = norm(&text(&prompt(d, &input)));
            assert!(!all.contains(heading), "{d} {}", c.id);
            for rule in c.rules() {
                assert!(!all.contains(rule.as_str()), "{d} {}: {rule}", c.id);
            }
            for claim in c.claims() {
                assert!(all.contains(claim.as_str()), "{d} {}: {claim}", c.id);
            }
        }
    }
}

#[test]
fn header_only_control_hides_the_rules_but_keeps_the_faithfulness_rubric() {
    let c = card(MISSED_DOSE);
    let input = JudgeInput::resolve(
        "I forgot my pill, what now?",
        "Take two pills today to catch up [missed-dose.en].",
        Lang::En,
        &["missed-dose.en"],
        &[&c],
        |id| (id == "missed-dose.en").then_some(&c),
    );
    let full = build_prompt_framed(Dimension::Faithfulness, &input, Framing::Standard).unwrap();
    let control =
        build_prompt_framed(Dimension::Faithfulness, &input, Framing::HeaderOnlyControl).unwrap();
    assert_eq!(full, build_prompt(Dimension::Faithfulness, &input).unwrap());
    assert_eq!(full[0], control[0], "same rubric");
    assert!(user(&full).contains("## Rules"));
    assert!(!user(&control).contains("## Rules"));
    assert!(!user(&control).contains("Never advise taking a double dose"));
    assert!(user(&control).contains("Keep a written schedule"));
    assert!(user(&control).contains("Score the FAITHFULNESS"));
}
