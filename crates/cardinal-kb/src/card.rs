//! One card: TOML front matter between `+++` lines, then the header (claims) and the tail (rules).

use std::path::Path;

use serde::Deserialize;

use crate::diag::{line_of, Diagnostic, Diagnostics};
use crate::lang::Lang;

/// A parsed card. Offsets index into [`Card::full_text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    pub id: String,
    pub lang: Lang,
    pub title: String,
    pub topic: String,
    /// `synthetic = true` in the front matter; `None` when the key is absent.
    pub synthetic: Option<bool>,
    /// The body after the front matter, trimmed: header, then tail.
    full_text: String,
    /// Byte offset in `full_text` where the tail (rules heading) starts.
    tail_start: usize,
    claims: Vec<String>,
    rules: Vec<String>,
    /// 1-based line in the source file where the body starts and where each key sits,
    /// kept so later checks can point at the right line.
    pub lines: CardLines,
}

/// Source line numbers of a card's parts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CardLines {
    pub id: usize,
    pub lang: usize,
    pub topic: usize,
    pub synthetic: usize,
    pub front_matter: usize,
    pub body: usize,
    pub rules_heading: usize,
}

impl Card {
    /// The body as written: header and tail. This is what the faithfulness judge reads.
    pub fn full_text(&self) -> &str {
        &self.full_text
    }

    /// The factual part, before the rules heading. This is what groundedness is judged on.
    pub fn header(&self) -> &str {
        self.full_text[..self.tail_start].trim_end()
    }

    /// The rules section, heading included.
    pub fn tail(&self) -> &str {
        &self.full_text[self.tail_start..]
    }

    /// Byte offset of the tail in [`Card::full_text`].
    pub fn tail_start(&self) -> usize {
        self.tail_start
    }

    /// The header's bullet claims, without the `- ` marker.
    pub fn claims(&self) -> &[String] {
        &self.claims
    }

    /// The tail's bullet rules, without the `- ` marker.
    pub fn rules(&self) -> &[String] {
        &self.rules
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    id: String,
    lang: String,
    title: String,
    topic: String,
    synthetic: Option<bool>,
}

const FENCE: &str = "+++";

/// Parse one card file. All problems found are returned together.
pub fn parse_card(path: &Path, text: &str) -> Result<Card, Diagnostics> {
    let mut diags = Diagnostics::default();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);

    let Some((fm_text, fm_offset, body_offset)) = split_front_matter(text) else {
        diags.push(Diagnostic::new(
            path,
            1,
            "front matter",
            "a card must start with TOML front matter between `+++` lines",
        ));
        return Err(diags);
    };
    let fm_line = line_of(text, fm_offset);

    let fm: FrontMatter = match toml::from_str(fm_text) {
        Ok(fm) => fm,
        Err(e) => {
            let line = e
                .span()
                .map(|s| line_of(text, fm_offset + s.start))
                .unwrap_or(fm_line);
            let field = toml_error_field(e.message());
            diags.push(Diagnostic::new(path, line, field, e.message().trim()));
            return Err(diags);
        }
    };
    let key_line = |key: &str| -> usize {
        fm_text
            .lines()
            .position(|l| l.trim_start().starts_with(key))
            .map(|i| fm_line + i)
            .unwrap_or(fm_line)
    };
    let lines_id = key_line("id");
    let lines_lang = key_line("lang");

    let lang = match fm.lang.parse::<Lang>() {
        Ok(l) => Some(l),
        Err(e) => {
            diags.push(Diagnostic::new(path, lines_lang, "lang", e.to_string()));
            None
        }
    };
    if fm.id.trim().is_empty() {
        diags.push(Diagnostic::new(path, lines_id, "id", "must not be empty"));
    }
    if fm.title.trim().is_empty() {
        diags.push(Diagnostic::new(
            path,
            key_line("title"),
            "title",
            "must not be empty",
        ));
    }
    if !is_slug(&fm.topic) {
        diags.push(Diagnostic::new(
            path,
            key_line("topic"),
            "topic",
            format!(
                "`{}` is not a slug (lower-case letters, digits and `-`)",
                fm.topic
            ),
        ));
    }

    let body_raw = &text[body_offset..];
    let lead = body_raw.len() - body_raw.trim_start().len();
    let body_start = body_offset + lead;
    let full_text = body_raw.trim().to_string();
    let body_line = line_of(text, body_start);

    let Some(lang) = lang else {
        return Err(diags);
    };
    let heading = lang.rules_heading();
    let tail_start = find_heading(&full_text, heading);
    let mut claims = Vec::new();
    let mut rules = Vec::new();
    let mut rules_heading_line = 0;
    match tail_start {
        None => {
            let other = Lang::ALL
                .into_iter()
                .filter(|l| *l != lang)
                .find(|l| find_heading(&full_text, l.rules_heading()).is_some());
            let msg = match other {
                Some(o) => format!(
                    "no `{heading}` section: found `{}`, the heading of {o}, but the card is {lang}",
                    o.rules_heading()
                ),
                None => format!("no `{heading}` section: every card needs behavioural rules"),
            };
            diags.push(Diagnostic::new(path, body_line, "rules", msg));
        }
        Some(ts) => {
            rules_heading_line = line_of(text, body_start + ts);
            claims = bullets(&full_text[..ts]);
            rules = bullets(&full_text[ts + heading.len()..]);
            if claims.is_empty() {
                diags.push(Diagnostic::new(
                    path,
                    body_line,
                    "claims",
                    "the header has no claims (`- ` bullets before the rules heading)",
                ));
            }
            if rules.is_empty() {
                diags.push(Diagnostic::new(
                    path,
                    rules_heading_line,
                    "rules",
                    "the rules section has no rules (`- ` bullets)",
                ));
            }
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    Ok(Card {
        id: fm.id,
        lang,
        title: fm.title,
        topic: fm.topic,
        synthetic: fm.synthetic,
        tail_start: tail_start.unwrap_or(full_text.len()),
        full_text,
        claims,
        rules,
        lines: CardLines {
            id: lines_id,
            lang: lines_lang,
            topic: key_line("topic"),
            synthetic: key_line("synthetic"),
            front_matter: fm_line,
            body: body_line,
            rules_heading: rules_heading_line,
        },
    })
}

/// Returns (front matter text, its byte offset, byte offset of the body).
fn split_front_matter(text: &str) -> Option<(&str, usize, usize)> {
    let first_end = text.find('\n')?;
    if text[..first_end].trim_end() != FENCE {
        return None;
    }
    let fm_start = first_end + 1;
    let mut pos = fm_start;
    for line in text[fm_start..].split_inclusive('\n') {
        if line.trim_end() == FENCE {
            return Some((&text[fm_start..pos], fm_start, pos + line.len()));
        }
        pos += line.len();
    }
    None
}

/// Byte offset of a line that is exactly `heading` (trailing spaces allowed).
fn find_heading(text: &str, heading: &str) -> Option<usize> {
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end() == heading {
            return Some(pos);
        }
        pos += line.len();
    }
    None
}

/// `- ` bullet items; indented continuation lines join the item before them.
fn bullets(text: &str) -> Vec<String> {
    let mut items: Vec<String> = Vec::new();
    let mut open = false;
    for line in text.lines() {
        if let Some(item) = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")) {
            items.push(item.trim().to_string());
            open = true;
        } else if open && line.starts_with(char::is_whitespace) && !line.trim().is_empty() {
            if let Some(last) = items.last_mut() {
                last.push(' ');
                last.push_str(line.trim());
            }
        } else {
            open = false;
        }
    }
    items.retain(|i| !i.is_empty());
    items
}

fn is_slug(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn toml_error_field(msg: &str) -> String {
    for marker in ["missing field `", "unknown field `", "duplicate key `"] {
        if let Some(rest) = msg.split(marker).nth(1) {
            if let Some(name) = rest.split('`').next() {
                return name.to_string();
            }
        }
    }
    "front matter".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "+++\nid = \"missed-dose.en\"\nlang = \"en\"\ntitle = \"Missed dose\"\ntopic = \"missed-dose\"\nsynthetic = true\n+++\n\nIntro line.\n\n- Claim one.\n- Claim two\n  continues here.\n- Claim three.\n\n## Rules\n\n- Never advise a double dose.\n- Do not diagnose.\n";

    fn p(text: &str) -> Result<Card, Diagnostics> {
        parse_card(Path::new("kb/en/x.md"), text)
    }

    #[test]
    fn parses_header_tail_claims_rules() {
        let c = p(GOOD).unwrap();
        assert_eq!(c.id, "missed-dose.en");
        assert_eq!(c.lang, Lang::En);
        assert_eq!(c.synthetic, Some(true));
        assert_eq!(
            c.claims(),
            ["Claim one.", "Claim two continues here.", "Claim three."]
        );
        assert_eq!(
            c.rules(),
            ["Never advise a double dose.", "Do not diagnose."]
        );
        assert!(c.header().starts_with("Intro line."));
        assert!(c.header().ends_with("- Claim three."));
        assert!(!c.header().contains("Rules"));
        assert!(c.tail().starts_with("## Rules"));
        assert!(c.tail().contains("Do not diagnose."));
        assert_eq!(
            c.full_text(),
            format!("{}\n\n{}", c.header(), c.tail()).as_str()
        );
        assert_eq!(c.lines.id, 2);
        assert_eq!(c.lines.body, 9);
        assert_eq!(c.lines.rules_heading, 16);
    }

    #[test]
    fn missing_front_matter() {
        let e = p("# no front matter\n").unwrap_err();
        assert_eq!(e.0[0].line, 1);
        assert_eq!(e.0[0].field, "front matter");
    }

    #[test]
    fn unterminated_front_matter() {
        let e = p("+++\nid = \"a.en\"\n").unwrap_err();
        assert_eq!(e.0[0].field, "front matter");
    }

    #[test]
    fn missing_field_named() {
        let text = GOOD.replace("title = \"Missed dose\"\n", "");
        let e = p(&text).unwrap_err();
        assert_eq!(e.0[0].field, "title", "{e}");
    }

    #[test]
    fn unknown_field_named_with_line() {
        let text = GOOD.replace("synthetic = true\n", "synthetic = true\nauthor = \"x\"\n");
        let e = p(&text).unwrap_err();
        assert_eq!(e.0[0].field, "author", "{e}");
        assert_eq!(e.0[0].line, 7, "{e}");
    }

    #[test]
    fn bad_lang_reported_on_its_line() {
        let e = p(&GOOD.replace("lang = \"en\"", "lang = \"english\"")).unwrap_err();
        assert_eq!(e.0[0].field, "lang");
        assert_eq!(e.0[0].line, 3);
        assert!(e.0[0].message.contains("english"));
    }

    #[test]
    fn no_rules_is_an_error() {
        let text = GOOD.split("## Rules").next().unwrap().to_string();
        let e = p(&text).unwrap_err();
        assert_eq!(e.0[0].field, "rules");
    }

    #[test]
    fn empty_rules_section_is_an_error() {
        let text = format!(
            "{}## Rules\n\nNothing here.\n",
            GOOD.split("## Rules").next().unwrap()
        );
        let e = p(&text).unwrap_err();
        assert_eq!(e.0[0].field, "rules");
        assert_eq!(e.0[0].line, 16);
    }

    #[test]
    fn no_claims_is_an_error() {
        let text = GOOD
            .replace("- Claim one.\n", "")
            .replace("- Claim two\n  continues here.\n", "")
            .replace("- Claim three.\n", "");
        let e = p(&text).unwrap_err();
        assert_eq!(e.0[0].field, "claims");
    }

    #[test]
    fn wrong_language_heading_is_explained() {
        let text = GOOD.replace("## Rules", "## Reglas");
        let e = p(&text).unwrap_err();
        assert!(e.0[0].message.contains("es-419"), "{e}");
    }

    #[test]
    fn several_problems_are_all_reported() {
        let text = GOOD
            .replace("topic = \"missed-dose\"", "topic = \"Missed Dose\"")
            .replace("title = \"Missed dose\"", "title = \" \"");
        let e = p(&text).unwrap_err();
        assert_eq!(e.len(), 2, "{e}");
    }
}
