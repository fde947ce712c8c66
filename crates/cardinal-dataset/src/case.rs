//! One evaluation case and the JSONL loader.

use std::path::{Path, PathBuf};

use cardinal_kb::{Diagnostic, Diagnostics, Lang};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{DatasetError, Result};

/// What kind of case this is. Scoring is decided by label presence, not by type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseType {
    Golden,
    Adversarial,
    Capability,
    NoMatch,
}

impl CaseType {
    pub const ALL: [CaseType; 4] = [
        CaseType::Golden,
        CaseType::Adversarial,
        CaseType::Capability,
        CaseType::NoMatch,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CaseType::Golden => "golden",
            CaseType::Adversarial => "adversarial",
            CaseType::Capability => "capability",
            CaseType::NoMatch => "no_match",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        CaseType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// The behaviour the case expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    Answer,
    Refuse,
}

/// An evaluation case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Case {
    pub id: String,
    pub lang: Lang,
    #[serde(rename = "type")]
    pub case_type: CaseType,
    pub question: String,
    /// Disjunctive gold: citing any one of these satisfies the citation contract.
    pub must_cite_one_of: Vec<String>,
    pub expect: Expect,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

impl Case {
    /// True when the case carries gold labels (and is therefore scored for retrieval).
    pub fn has_gold(&self) -> bool {
        !self.must_cite_one_of.is_empty()
    }
}

/// A case and where it was read.
#[derive(Debug, Clone)]
pub struct LoadedCase {
    pub path: PathBuf,
    pub line: usize,
    pub case: Case,
}

const FIELDS: [&str; 7] = [
    "id",
    "lang",
    "type",
    "question",
    "must_cite_one_of",
    "expect",
    "notes",
];

/// Parse a JSONL file. Valid cases are returned with the problems of the invalid lines.
pub fn load_case_file(path: &Path) -> Result<(Vec<LoadedCase>, Diagnostics)> {
    let text = std::fs::read_to_string(path).map_err(|source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(parse_cases(path, &text))
}

/// Every `*.jsonl` file of a directory (not recursive), sorted by name.
pub fn load_case_dir(dir: &Path) -> Result<(Vec<LoadedCase>, Diagnostics)> {
    if !dir.is_dir() {
        return Err(DatasetError::MissingDir(dir.to_path_buf()));
    }
    let io = |source| DatasetError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let p = entry.map_err(io)?.path();
        if p.is_file() && p.extension().and_then(|e| e.to_str()) == Some("jsonl") {
            files.push(p);
        }
    }
    files.sort();
    let mut cases = Vec::new();
    let mut diags = Diagnostics::default();
    for f in files {
        let (c, d) = load_case_file(&f)?;
        cases.extend(c);
        diags.extend(d);
    }
    Ok((cases, diags))
}

/// Parse JSONL text; pure, so it is testable without files.
pub fn parse_cases(path: &Path, text: &str) -> (Vec<LoadedCase>, Diagnostics) {
    let mut cases = Vec::new();
    let mut diags = Diagnostics::default();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(e) => {
                diags.push(Diagnostic::new(
                    path,
                    line,
                    "json",
                    format!("not valid JSON: {e}"),
                ));
                continue;
            }
        };
        let Value::Object(obj) = value else {
            diags.push(Diagnostic::new(
                path,
                line,
                "json",
                "each line must be a JSON object",
            ));
            continue;
        };
        let before = diags.len();
        let case = case_from_object(&obj, &mut |field, msg| {
            diags.push(Diagnostic::new(path, line, field, msg));
        });
        if let (Some(case), true) = (case, diags.len() == before) {
            cases.push(LoadedCase {
                path: path.to_path_buf(),
                line,
                case,
            });
        }
    }
    (cases, diags)
}

fn case_from_object(
    obj: &Map<String, Value>,
    report: &mut dyn FnMut(&str, String),
) -> Option<Case> {
    for key in obj.keys() {
        if !FIELDS.contains(&key.as_str()) {
            report(
                key,
                format!("unknown field (expected one of: {})", FIELDS.join(", ")),
            );
        }
    }
    let string = |name: &str, report: &mut dyn FnMut(&str, String)| -> Option<String> {
        match obj.get(name) {
            None => {
                report(name, "missing".into());
                None
            }
            Some(Value::String(s)) if s.trim().is_empty() => {
                report(name, "must not be empty".into());
                None
            }
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                report(name, format!("must be a string, found {}", kind(other)));
                None
            }
        }
    };
    let id = string("id", report);
    let lang = string("lang", report).and_then(|s| match s.parse::<Lang>() {
        Ok(l) => Some(l),
        Err(e) => {
            report("lang", e.to_string());
            None
        }
    });
    let case_type = string("type", report).and_then(|s| match CaseType::parse(&s) {
        Some(t) => Some(t),
        None => {
            report(
                "type",
                format!("unknown case type `{s}` (expected golden, adversarial, capability or no_match)"),
            );
            None
        }
    });
    let question = string("question", report);
    let expect = string("expect", report).and_then(|s| match s.as_str() {
        "answer" => Some(Expect::Answer),
        "refuse" => Some(Expect::Refuse),
        _ => {
            report("expect", format!("`{s}` is neither `answer` nor `refuse`"));
            None
        }
    });
    let gold = match obj.get("must_cite_one_of") {
        None => {
            report("must_cite_one_of", "missing (use [] for no gold)".into());
            None
        }
        Some(Value::Array(items)) => {
            let mut ids = Vec::new();
            let mut ok = true;
            for (j, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) if !s.trim().is_empty() => {
                        if ids.contains(s) {
                            report("must_cite_one_of", format!("`{s}` is listed twice"));
                            ok = false;
                        }
                        ids.push(s.clone());
                    }
                    other => {
                        report(
                            "must_cite_one_of",
                            format!(
                                "item {j} must be a non-empty card id string, found {}",
                                kind(other)
                            ),
                        );
                        ok = false;
                    }
                }
            }
            ok.then_some(ids)
        }
        Some(other) => {
            report(
                "must_cite_one_of",
                format!("must be a list of card ids, found {}", kind(other)),
            );
            None
        }
    };
    let notes = match obj.get("notes") {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(s)) => Some(Some(s.clone())),
        Some(other) => {
            report("notes", format!("must be a string, found {}", kind(other)));
            None
        }
    };
    Some(Case {
        id: id?,
        lang: lang?,
        case_type: case_type?,
        question: question?,
        must_cite_one_of: gold?,
        expect: expect?,
        notes: notes?,
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{"id":"en-a-01","lang":"en","type":"golden","question":"q?","must_cite_one_of":["a.en"],"expect":"answer"}"#;

    fn parse(text: &str) -> (Vec<LoadedCase>, Vec<String>) {
        let (c, d) = parse_cases(Path::new("cases/en.jsonl"), text);
        (c, d.iter().map(|d| d.to_string()).collect())
    }

    #[test]
    fn parses_a_valid_line() {
        let (c, d) = parse(&format!("{OK}\n\n"));
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].line, 1);
        assert_eq!(c[0].case.case_type, CaseType::Golden);
        assert!(c[0].case.has_gold());
    }

    #[test]
    fn every_problem_of_every_line_is_reported() {
        let bad1 = OK
            .replace("\"golden\"", "\"goldn\"")
            .replace("\"answer\"", "\"maybe\"");
        let bad2 = OK.replace("[\"a.en\"]", "\"a.en\"");
        let text = format!("{OK}\n{bad1}\n{{not json\n{bad2}\n");
        let (c, d) = parse(&text);
        assert_eq!(c.len(), 1);
        assert_eq!(d.len(), 4, "{d:#?}");
        assert!(
            d[0].starts_with("cases/en.jsonl:2: type: unknown case type `goldn`"),
            "{}",
            d[0]
        );
        assert!(d[1].starts_with("cases/en.jsonl:2: expect:"), "{}", d[1]);
        assert!(
            d[2].starts_with("cases/en.jsonl:3: json: not valid JSON"),
            "{}",
            d[2]
        );
        assert_eq!(
            d[3],
            "cases/en.jsonl:4: must_cite_one_of: must be a list of card ids, found a string"
        );
    }

    #[test]
    fn missing_and_unknown_fields() {
        let text = OK.replace(",\"expect\":\"answer\"", ",\"expected\":\"answer\"");
        let (_, d) = parse(&text);
        assert!(
            d.iter().any(|m| m.contains(": expected: unknown field")),
            "{d:?}"
        );
        assert!(d.iter().any(|m| m.contains(": expect: missing")), "{d:?}");
    }

    #[test]
    fn duplicate_gold_is_reported() {
        let (_, d) = parse(&OK.replace("[\"a.en\"]", "[\"a.en\",\"a.en\"]"));
        assert_eq!(
            d,
            vec!["cases/en.jsonl:1: must_cite_one_of: `a.en` is listed twice"]
        );
    }
}
