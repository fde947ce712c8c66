//! Deterministic support evidence for the checks scorer: how much of each answer sentence's
//! wording and how many of its numbers the cited cards' headers (or the question) contain.
//!
//! This is the groundedness construct read off the surface — a sentence whose content words
//! and numbers all occur in a cited header is very likely a paraphrase of it; a sentence with
//! words or numbers found nowhere in the headers adds something. It is language-agnostic
//! (lower case, accents folded, words compared by their first five letters so plurals and
//! verb endings of en/es/pt meet) and never reads the labels. It is one input of the fitted
//! aggregation of `checks-v2`, reported beside the model's own checks and alone (as a
//! baseline), so a report shows what the model adds to it.

use cardinal_kb::text::without_citations;
use serde::{Deserialize, Serialize};

/// Words shorter than this are treated as function words and ignored.
const MIN_WORD: usize = 4;
/// Words are compared by this many leading letters (a crude stem shared by en/es/pt).
const STEM: usize = 5;

/// The evidence of one answer against its cited headers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Mean over sentences with content words of the share of their content words found in
    /// the cited headers or the question (1 = every word occurs there).
    pub coverage_mean: f64,
    /// The least-covered sentence's share.
    pub coverage_min: f64,
    /// Numbers (digit runs) in the answer that no cited header and not the question contains.
    pub new_numbers: usize,
}

/// Fold a character to lower case without accent (Latin letters of en/es/pt).
fn fold(c: char) -> char {
    let c = c.to_lowercase().next().unwrap_or(c);
    match c {
        'á' | 'à' | 'â' | 'ã' | 'ä' => 'a',
        'é' | 'è' | 'ê' | 'ë' => 'e',
        'í' | 'ì' | 'î' | 'ï' => 'i',
        'ó' | 'ò' | 'ô' | 'õ' | 'ö' => 'o',
        'ú' | 'ù' | 'û' | 'ü' => 'u',
        'ç' => 'c',
        'ñ' => 'n',
        other => other,
    }
}

/// Folded alphanumeric runs of `text`.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in without_citations(text).chars() {
        let f = fold(c);
        if f.is_alphanumeric() {
            cur.push(f);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn stem(w: &str) -> String {
    w.chars().take(STEM).collect()
}

fn is_number(w: &str) -> bool {
    w.chars().all(|c| c.is_ascii_digit())
}

/// The evidence of `sentences` (the answer split as the checks split it) against the text of
/// the cited headers and the question.
pub fn evidence(sentences: &[String], headers: &str, question: &str) -> Evidence {
    let mut known = std::collections::HashSet::new();
    let mut numbers = std::collections::HashSet::new();
    for w in words(headers).into_iter().chain(words(question)) {
        if is_number(&w) {
            numbers.insert(w.clone());
        }
        if w.chars().count() >= MIN_WORD {
            known.insert(stem(&w));
        }
    }
    let mut shares = Vec::new();
    let mut new_numbers = 0;
    for s in sentences {
        let ws = words(s);
        new_numbers += ws
            .iter()
            .filter(|w| is_number(w) && !numbers.contains(*w))
            .count();
        let content: Vec<&String> = ws
            .iter()
            .filter(|w| w.chars().count() >= MIN_WORD && !is_number(w))
            .collect();
        if !content.is_empty() {
            let hit = content.iter().filter(|w| known.contains(&stem(w))).count();
            shares.push(hit as f64 / content.len() as f64);
        }
    }
    let (mean, min) = if shares.is_empty() {
        (1.0, 1.0)
    } else {
        (
            shares.iter().sum::<f64>() / shares.len() as f64,
            shares.iter().copied().fold(1.0, f64::min),
        )
    };
    Evidence {
        coverage_mean: mean,
        coverage_min: min,
        new_numbers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_paraphrase_of_the_header_is_covered_and_an_addition_is_not() {
        let header = "Call the poison help line at 555-0177 right away. Keep the bottle at hand.";
        let e = evidence(
            &s(&["Call the poison help line at 555-0177 [overdose.en]."]),
            header,
            "",
        );
        assert_eq!(e.coverage_min, 1.0);
        assert_eq!(e.new_numbers, 0);
        let e = evidence(
            &s(&[
                "Keep the bottle at hand.",
                "Activated charcoal from a pharmacy absorbs it within 30 minutes.",
            ]),
            header,
            "",
        );
        assert!(e.coverage_min < 0.2, "{e:?}");
        assert!(e.coverage_mean > 0.4 && e.coverage_mean < 0.7, "{e:?}");
        assert_eq!(e.new_numbers, 1);
    }

    #[test]
    fn accents_plurals_and_citations_do_not_count_against_a_sentence() {
        let header = "Llame a la línea de intoxicaciones; guarde los envases.";
        let e = evidence(
            &s(&["Llame a la linea de intoxicación y guardá el envase [sobredosis.es-419]."]),
            header,
            "",
        );
        assert_eq!(e.coverage_min, 1.0, "{e:?}");
    }

    #[test]
    fn words_of_the_question_are_not_additions_and_no_claim_is_full_coverage() {
        let e = evidence(
            &s(&["Your grandson's inhaler is empty."]),
            "",
            "What should I do when my grandson's inhaler is empty?",
        );
        assert!(e.coverage_min > 0.6, "{e:?}");
        let e = evidence(&[], "anything", "");
        assert_eq!(
            (e.coverage_mean, e.coverage_min, e.new_numbers),
            (1.0, 1.0, 0)
        );
    }
}
