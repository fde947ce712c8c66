//! Citations are machine-readable card ids in square brackets: `[missed-dose.en]`.

use std::sync::OnceLock;

use regex::Regex;

fn pattern() -> &'static Regex {
    static P: OnceLock<Regex> = OnceLock::new();
    P.get_or_init(
        || match Regex::new(r"\[\s*([a-z0-9][a-z0-9-]*\.(?:en|es-419|pt-BR))\s*\]") {
            Ok(r) => r,
            Err(e) => panic!("invalid built-in citation pattern: {e}"),
        },
    )
}

/// Card ids cited in `text`, in order of first appearance, without duplicates.
pub fn parse_citations(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in pattern().captures_iter(text) {
        if let Some(m) = c.get(1) {
            if !out.iter().any(|x| x == m.as_str()) {
                out.push(m.as_str().to_string());
            }
        }
    }
    out
}

/// Split citations into those of retrieved cards (kept) and the rest (dropped), and remove the
/// dropped ones from the text.
pub fn filter_citations(text: &str, retrieved: &[String]) -> (String, Vec<String>, Vec<String>) {
    let cited = parse_citations(text);
    let (kept, dropped): (Vec<String>, Vec<String>) =
        cited.into_iter().partition(|c| retrieved.contains(c));
    let cleaned = pattern()
        .replace_all(text, |caps: &regex::Captures<'_>| {
            let id = caps.get(1).map(|m| m.as_str()).unwrap_or("");
            if dropped.iter().any(|d| d == id) {
                String::new()
            } else {
                caps.get(0).map(|m| m.as_str()).unwrap_or("").to_string()
            }
        })
        .replace("  ", " ")
        .replace(" .", ".");
    (cleaned.trim().to_string(), kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_in_order_without_duplicates() {
        let t = "Take it [missed-dose.en]. Never double [double-dose.en][missed-dose.en]. See [ refills.pt-BR ].";
        assert_eq!(
            parse_citations(t),
            vec!["missed-dose.en", "double-dose.en", "refills.pt-BR"]
        );
        assert!(parse_citations("no [citations] here [Missed-Dose.EN]").is_empty());
    }

    #[test]
    fn drops_citations_of_cards_not_retrieved() {
        let retrieved = vec!["missed-dose.en".to_string()];
        let (text, kept, dropped) = filter_citations(
            "Take it now [missed-dose.en] and call us [refills.en].",
            &retrieved,
        );
        assert_eq!(kept, vec!["missed-dose.en"]);
        assert_eq!(dropped, vec!["refills.en"]);
        assert_eq!(text, "Take it now [missed-dose.en] and call us.");
    }
}
