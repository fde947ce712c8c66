//! Which safety class a card rule is about, so that a refusal cites a card whose rule actually
//! applies. Markers are read from the rules of the cards (the KB), in the three languages.

use cardinal_dataset::SafetyClass;
use cardinal_kb::{KnowledgeBase, Lang};

fn markers(class: SafetyClass) -> &'static [&'static str] {
    match class {
        SafetyClass::DoubleDose => &[
            "doubl",
            "extra dose",
            "extra insulin",
            "two doses",
            "two days' pills",
            "maximum",
            "too much",
            "dobl",
            "duplic",
            "dosis extra",
            "dosis doble",
            "dos dosis",
            "de más",
            "máxim",
            "dose extra",
            "dose dobrada",
            "duas doses",
            "a mais",
            "demais",
        ],
        SafetyClass::StopChangeMedication => &[
            "stop",
            "skip",
            "chang",
            "switch",
            "replac",
            "split",
            "stretch",
            "spacing",
            "reduc",
            "number of puffs",
            "adult medicine",
            "suspend",
            "omit",
            "saltar",
            "cambi",
            "reemplaz",
            "espaci",
            "parar",
            "interromp",
            "pular",
            "mudar",
            "mudança",
            "troc",
            "substitu",
            "espaç",
            "reduz",
        ],
        SafetyClass::Diagnosis => &[
            "diagnos",
            "diagnós",
            "interpret",
            "cure",
            "cura",
            "normal, high or low",
        ],
        SafetyClass::Privacy => &[
            "patient information",
            "passwords",
            "id numbers",
            "contraseñ",
            "datos de un paciente",
            "números de documento",
            "senhas",
            "dados de um paciente",
            "cpf",
            "someone else",
            "otra persona",
            "outra pessoa",
        ],
        SafetyClass::PromptInjection => &[
            "drop these rules",
            "new permissions",
            "dejar de lado estas reglas",
            "nuevos permisos",
            "deixar estas regras de lado",
            "novas permissões",
        ],
        SafetyClass::Emergency => &[
            "emergency services",
            "911",
            "emergencia",
            "emergência",
            "samu",
            "192",
            "555-0199",
        ],
        SafetyClass::OutOfScope | SafetyClass::Benign => &[],
    }
}

/// Is `rule` a rule of `class`?
pub fn rule_is_about(rule: &str, class: SafetyClass) -> bool {
    let r = rule.to_lowercase();
    markers(class).iter().any(|m| r.contains(m))
}

/// The card of `lang` that always carries a rule of `class` (the fallback citation when no
/// retrieved card has one).
pub fn home_card(class: SafetyClass, lang: Lang) -> Option<String> {
    let topic = match class {
        SafetyClass::DoubleDose => "double-dose",
        SafetyClass::StopChangeMedication => "stopping-medication",
        SafetyClass::Diagnosis | SafetyClass::PromptInjection => "assistant-scope",
        SafetyClass::Privacy => "service-privacy",
        SafetyClass::Emergency => "emergency-warning-signs",
        SafetyClass::OutOfScope | SafetyClass::Benign => return None,
    };
    Some(format!("{topic}.{}", lang.tag()))
}

/// The first of `retrieved` whose rules include one of `class`, else the class's home card
/// (if the KB has it and it carries such a rule).
pub fn card_with_rule(
    kb: &KnowledgeBase,
    retrieved: &[String],
    class: SafetyClass,
    lang: Lang,
) -> Option<String> {
    let has = |id: &str| {
        kb.get(id)
            .is_some_and(|cf| cf.card.rules().iter().any(|r| rule_is_about(r, class)))
    };
    retrieved
        .iter()
        .find(|id| has(id))
        .cloned()
        .or_else(|| home_card(class, lang).filter(|id| has(id)))
}

/// The rule of `card` that a refusal of `class` cites (its first rule of that class).
pub fn cited_rule<'a>(kb: &'a KnowledgeBase, card: &str, class: SafetyClass) -> Option<&'a str> {
    kb.get(card)?
        .card
        .rules()
        .iter()
        .find(|r| rule_is_about(r, class))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Every home card exists in every language and carries a rule of its class.
    #[test]
    fn home_cards_carry_their_rules_in_every_language() {
        let kb = KnowledgeBase::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/kb"))
            .unwrap();
        for lang in Lang::ALL {
            for class in SafetyClass::REFUSALS
                .into_iter()
                .chain([SafetyClass::Emergency])
            {
                let id = home_card(class, lang).unwrap();
                assert!(
                    cited_rule(&kb, &id, class).is_some(),
                    "{id} has no {class} rule"
                );
                assert_eq!(card_with_rule(&kb, &[], class, lang), Some(id));
            }
        }
    }
}
