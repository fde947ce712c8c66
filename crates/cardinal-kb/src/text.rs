//! Text helpers shared by the evaluators and the judge: sentence splitting that keeps citation
//! markers with their sentence, and citation-marker counting.

/// The text without its citation markers (`[card-id]`, nested brackets included).
pub fn without_citations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Sentences of an answer: split after `.`, `!`, `?` (or `…`) followed by whitespace, unless
/// what follows is a citation marker (`[`), which belongs to the sentence before.
pub fn sentences(answer: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = answer.char_indices().collect();
    for (k, &(i, c)) in chars.iter().enumerate() {
        // A citation marker right after a sentence's end closes that sentence.
        if c == ']' && chars.get(k + 1).is_some_and(|x| x.1.is_whitespace()) {
            let after = chars[k + 1..]
                .iter()
                .find(|x| !x.1.is_whitespace())
                .map(|x| x.1);
            let open = answer[start..i].rfind('[').map(|o| start + o);
            let ends_sentence = open.is_some_and(|o| {
                answer[start..o]
                    .trim_end()
                    .ends_with(['.', '!', '?', '…', ']'])
            });
            if after.is_some() && after != Some('[') && ends_sentence {
                let end = i + c.len_utf8();
                let s = answer[start..end].trim();
                if !s.is_empty() {
                    out.push(s);
                }
                start = end;
                continue;
            }
        }
        if matches!(c, '.' | '!' | '?' | '…') {
            let next = chars.get(k + 1).map(|x| x.1);
            if next.is_some_and(char::is_whitespace) {
                let after = chars[k + 1..]
                    .iter()
                    .find(|x| !x.1.is_whitespace())
                    .map(|x| x.1);
                if after == Some('[') {
                    continue;
                }
                let end = i + c.len_utf8();
                let s = answer[start..end].trim();
                if !s.is_empty() {
                    out.push(s);
                }
                start = end;
            }
        }
    }
    let s = answer[start..].trim();
    if !s.is_empty() {
        out.push(s);
    }
    out
}

/// `[card-id]` markers in a text (a bracketed token with a dot and only id characters).
pub fn citation_markers(text: &str) -> usize {
    let mut n = 0;
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else { break };
        let inner = after[..close].trim();
        if inner.contains('.')
            && !inner.is_empty()
            && inner
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        {
            n += 1;
        }
        rest = &after[close + 1..];
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_keep_citations_with_their_sentence() {
        let s = sentences(
            "Take it now. [missed-dose.en] Then wait! ¿Y luego? Call 555-0142 [a.en]. Ok",
        );
        assert_eq!(
            s,
            vec![
                "Take it now. [missed-dose.en]",
                "Then wait!",
                "¿Y luego?",
                "Call 555-0142 [a.en].",
                "Ok"
            ]
        );
        assert_eq!(citation_markers("a [x.en] b [not an id] [y.pt-BR]"), 2);
    }
}
