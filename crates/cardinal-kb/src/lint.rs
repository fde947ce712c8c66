//! The synthetic-only invariant: nothing in a card may look like real personal data.
//!
//! - e-mail addresses and URLs only on reserved example domains (RFC 2606 / RFC 6761):
//!   `example.com`, `example.org`, `example.net` and names under `.example`, `.test`, `.invalid`;
//! - phone numbers only in the fictional pattern `555-01DD` (optionally `(555) 555-01DD`), plus
//!   the emergency short numbers, which are too short to look like a phone number;
//! - no number shaped like a national id that passes its checksum or range rules: US SSN,
//!   Brazilian CPF, Mexican CURP;
//! - `synthetic = true` on every card.

use std::path::Path;
use std::sync::OnceLock;

use regex::Regex;

use crate::diag::{line_of, Diagnostic, Diagnostics};
use crate::kb::KnowledgeBase;
use crate::KbError;

/// Lint every card file of a knowledge base (reads the files again to point at exact lines).
pub fn lint_kb(kb: &KnowledgeBase) -> Result<Diagnostics, KbError> {
    let mut diags = Diagnostics::default();
    for cf in &kb.cards {
        // Encoding problems were reported when the KB was loaded.
        let (text, _) = crate::diag::read_data_file(&cf.path).map_err(|source| KbError::Io {
            path: cf.path.clone(),
            source,
        })?;
        diags.extend(lint_text(&cf.path, &text));
        if cf.card.synthetic != Some(true) {
            let (line, msg) = match cf.card.synthetic {
                None => (
                    cf.card.lines.front_matter,
                    "missing; every card must say `synthetic = true`",
                ),
                Some(_) => (
                    cf.card.lines.synthetic,
                    "must be `true`: only synthetic cards are allowed",
                ),
            };
            diags.push(Diagnostic::new(&cf.path, line, "synthetic", msg));
        }
    }
    Ok(diags.sorted())
}

struct Patterns {
    email: Regex,
    url: Regex,
    phone: Regex,
    fictional_phone: Regex,
    date: Regex,
    ssn: Regex,
    cpf: Regex,
    curp: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let re = |s: &str| match Regex::new(s) {
            Ok(r) => r,
            // The patterns are constants of this file; a typo is a programming error.
            Err(e) => panic!("invalid built-in pattern {s}: {e}"),
        };
        Patterns {
            email: re(r"[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)"),
            url: re(r"(?i)\b(?:https?://|www\.)([A-Za-z0-9.-]+)"),
            phone: re(r"(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{1,5}(?:[ .-]\d{1,5})*"),
            fictional_phone: re(r"^(?:\(555\) ?)?555-01\d\d$"),
            date: re(r"^\d{1,4}[./-]\d{1,2}[./-]\d{1,4}$"),
            ssn: re(r"\b(\d{3})-(\d{2})-(\d{4})\b"),
            cpf: re(r"\b(\d{3})\.?(\d{3})\.?(\d{3})-?(\d{2})\b"),
            curp: re(r"\b[A-Z][AEIOUX][A-Z]{2}\d{6}[HM][A-Z]{5}[0-9A-Z]\d\b"),
        }
    })
}

/// Lint one file's text. Pure; used by [`lint_kb`] and by tests.
pub fn lint_text(path: &Path, text: &str) -> Diagnostics {
    let p = patterns();
    let mut diags = Diagnostics::default();
    let mut push = |offset: usize, field: &str, msg: String| {
        diags.push(Diagnostic::new(path, line_of(text, offset), field, msg));
    };
    for c in p.email.captures_iter(text) {
        let (Some(m), Some(domain)) = (c.get(0), c.get(1)) else {
            continue;
        };
        if !is_reserved_domain(domain.as_str()) {
            push(
                m.start(),
                "email",
                format!(
                    "`{}` is not on a reserved example domain (use e.g. care@redbird.example)",
                    m.as_str()
                ),
            );
        }
    }
    for c in p.url.captures_iter(text) {
        let (Some(m), Some(host)) = (c.get(0), c.get(1)) else {
            continue;
        };
        let host = host.as_str().trim_end_matches('.');
        if !is_reserved_domain(host) {
            push(
                m.start(),
                "url",
                format!("host `{host}` is not a reserved example domain (use e.g. portal.redbird.example)"),
            );
        }
    }
    for m in p.ssn.captures_iter(text) {
        let (Some(all), Some(a), Some(g), Some(s)) = (m.get(0), m.get(1), m.get(2), m.get(3))
        else {
            continue;
        };
        if is_plausible_ssn(a.as_str(), g.as_str(), s.as_str()) {
            push(
                all.start(),
                "national id",
                format!(
                    "`{}` is shaped like a valid US Social Security number",
                    all.as_str()
                ),
            );
        }
    }
    for m in p.cpf.find_iter(text) {
        let digits: Vec<u32> = m.as_str().chars().filter_map(|c| c.to_digit(10)).collect();
        if is_valid_cpf(&digits) {
            push(
                m.start(),
                "national id",
                format!("`{}` passes the Brazilian CPF checksum", m.as_str()),
            );
        }
    }
    for m in p.curp.find_iter(text) {
        if is_valid_curp(m.as_str()) {
            push(
                m.start(),
                "national id",
                format!("`{}` passes the Mexican CURP check digit", m.as_str()),
            );
        }
    }
    for m in p.phone.find_iter(text) {
        let s = m.as_str().trim();
        let digits = s.chars().filter(char::is_ascii_digit).count();
        // Shapes of national ids are judged by their own checks above.
        let id_shaped = p.ssn.is_match(s) || p.cpf.find(s).is_some_and(|c| c.len() == s.len());
        if digits < 7 || p.date.is_match(s) || id_shaped {
            continue;
        }
        if !p.fictional_phone.is_match(s) {
            push(
                m.start(),
                "phone",
                format!("`{s}` is not a fictional number (use 555-01DD, e.g. 555-0142)"),
            );
        }
    }
    diags
}

/// RFC 2606 / 6761 reserved names.
pub fn is_reserved_domain(host: &str) -> bool {
    let h = host.to_ascii_lowercase();
    let h = h.trim_end_matches('.');
    ["example.com", "example.org", "example.net"]
        .iter()
        .any(|d| h == *d || h.ends_with(&format!(".{d}")))
        || ["example", "test", "invalid"]
            .iter()
            .any(|tld| h == *tld || h.ends_with(&format!(".{tld}")))
}

/// US SSN rules: area not 000, 666 or 9xx; group not 00; serial not 0000.
fn is_plausible_ssn(area: &str, group: &str, serial: &str) -> bool {
    area != "000" && area != "666" && !area.starts_with('9') && group != "00" && serial != "0000"
}

/// Brazilian CPF: 11 digits, two mod-11 check digits, not all digits equal.
pub fn is_valid_cpf(d: &[u32]) -> bool {
    if d.len() != 11 || d.iter().all(|&x| x == d[0]) {
        return false;
    }
    let check = |n: usize| -> u32 {
        let sum: u32 = (0..n).map(|i| d[i] * (n as u32 + 1 - i as u32)).sum();
        let r = (sum * 10) % 11;
        if r == 10 {
            0
        } else {
            r
        }
    };
    check(9) == d[9] && check(10) == d[10]
}

/// Mexican CURP check digit (position 18) over the first 17 characters.
pub fn is_valid_curp(s: &str) -> bool {
    const ALPHABET: &str = "0123456789ABCDEFGHIJKLMNÑOPQRSTUVWXYZ";
    let chars: Vec<char> = s.chars().collect();
    if chars.len() != 18 {
        return false;
    }
    let mut sum = 0u32;
    for (i, c) in chars[..17].iter().enumerate() {
        let Some(v) = ALPHABET.chars().position(|a| a == *c) else {
            return false;
        };
        sum += v as u32 * (18 - i as u32);
    }
    let digit = (10 - sum % 10) % 10;
    chars[17].to_digit(10) == Some(digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lint(s: &str) -> Vec<(usize, String)> {
        lint_text(Path::new("c.md"), s)
            .0
            .into_iter()
            .map(|d| (d.line, d.field))
            .collect()
    }

    #[test]
    fn fictional_contacts_pass() {
        assert!(lint("Call 555-0142 or (555) 555-0199, write care@redbird.example, visit https://portal.redbird.example/refills.").is_empty());
        assert!(lint("Emergencies: 911 or SAMU 192. Dates 03/12/2026 and 2026-12-03. 2–8 °C. 1.500 mg. 120/80 mmHg.").is_empty());
    }

    #[test]
    fn real_looking_contacts_fail() {
        assert_eq!(
            lint("line1\nmail doctor@gmail.com"),
            vec![(2, "email".into())]
        );
        assert_eq!(
            lint("see https://www.hospital.org/page"),
            vec![(1, "url".into())]
        );
        assert_eq!(lint("call (212) 555-2368"), vec![(1, "phone".into())]);
        assert_eq!(lint("ligue +55 11 98765-4321"), vec![(1, "phone".into())]);
        assert_eq!(lint("www.clinic.com"), vec![(1, "url".into())]);
    }

    #[test]
    fn national_ids() {
        assert_eq!(lint("SSN 123-45-6789"), vec![(1, "national id".into())]);
        // Invalid SSN area (000): cannot be a real number.
        assert_eq!(lint("SSN 000-12-3456"), vec![]);
        assert_eq!(lint("CPF 529.982.247-25"), vec![(1, "national id".into())]);
        assert_eq!(lint("CPF 529.982.247-26"), vec![]);
        assert_eq!(lint("CPF 111.111.111-11"), vec![]);
        assert!(is_valid_curp("GODE561231HDFRRN00"));
        assert_eq!(
            lint("CURP GODE561231HDFRRN00"),
            vec![(1, "national id".into())]
        );
        assert_eq!(lint("CURP GODE561231HDFRRN01"), vec![]);
    }

    #[test]
    fn reserved_domains() {
        for ok in [
            "example.com",
            "a.example.org",
            "redbird.example",
            "x.test",
            "foo.invalid",
        ] {
            assert!(is_reserved_domain(ok), "{ok}");
        }
        for bad in [
            "example.co",
            "notexample.com",
            "gmail.com",
            "example.com.br",
        ] {
            assert!(!is_reserved_domain(bad), "{bad}");
        }
    }
}
