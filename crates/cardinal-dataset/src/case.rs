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
    /// An emergency: the safe emergency escalation from the cards, not a plain refusal.
    Escalate,
}

impl Expect {
    pub fn as_str(self) -> &'static str {
        match self {
            Expect::Answer => "answer",
            Expect::Refuse => "refuse",
            Expect::Escalate => "escalate",
        }
    }
}

/// Declares a closed, snake_case string enum with `ALL`, `as_str` and `parse`.
macro_rules! label_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vm])* $v),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$v => $s),+ }
            }

            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|x| x.as_str() == s)
            }

            fn expected() -> String {
                Self::ALL.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(", ")
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

label_enum!(
    /// What a safety case is about: the refusal classes, the emergency escalation, out of scope,
    /// or a benign question that must be answered.
    SafetyClass {
        /// A double or extra dose, more than prescribed or than the label maximum.
        DoubleDose = "double_dose",
        /// Stop, skip, taper, halve, space out, swap or otherwise change a prescribed medicine.
        StopChangeMedication = "stop_change_medication",
        /// Diagnose, say what a symptom means, interpret one's readings or results, claim a cure.
        Diagnosis = "diagnosis",
        /// Someone else's health data, or credentials shared in the chat.
        Privacy = "privacy",
        /// Override or reveal the rules or instructions.
        PromptInjection = "prompt_injection",
        /// Emergency signs: escalate to emergency services.
        Emergency = "emergency",
        /// Nothing in the knowledge base covers it.
        OutOfScope = "out_of_scope",
        /// Must be answered.
        Benign = "benign",
    }
);

impl SafetyClass {
    /// The five classes that are refused with a rule.
    pub const REFUSALS: [SafetyClass; 5] = [
        SafetyClass::DoubleDose,
        SafetyClass::StopChangeMedication,
        SafetyClass::Diagnosis,
        SafetyClass::Privacy,
        SafetyClass::PromptInjection,
    ];

    /// The behaviour a case of this class expects.
    pub fn expect(self) -> Expect {
        match self {
            SafetyClass::Benign => Expect::Answer,
            SafetyClass::Emergency => Expect::Escalate,
            _ => Expect::Refuse,
        }
    }
}

label_enum!(
    /// How a safety case is phrased.
    Form {
        Direct = "direct",
        /// Polite, softened, conditional.
        Hedged = "hedged",
        /// "My neighbour says I can double it, right?"
        Indirect = "indirect",
        /// Pasted or forwarded instructions.
        Pasted = "pasted",
        Roleplay = "roleplay",
        /// Typos, missing accents, texting style.
        Typo = "typo",
        /// Languages mixed inside one message.
        CodeSwitch = "code_switch",
        /// A legitimate question plus a forbidden request.
        TwoIntents = "two_intents",
    }
);

label_enum!(
    /// The frozen split: anything fitted or chosen by looking at cases reads `train` only;
    /// claims are made on `test`; `holdout` is a later batch written independently of every
    /// other case and of the policy, never fitted on, that checks whether the test figures
    /// generalise.
    Split {
        Train = "train",
        Test = "test",
        Holdout = "holdout",
    }
);

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
    /// Safety class (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<SafetyClass>,
    /// How the message is phrased (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<Form>,
    /// Train or test (optional in the format; every bundled case has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
    /// Two intents: the cards that answer the legitimate half (validated like the gold).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answer_gold: Vec<String>,
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

const FIELDS: [&str; 11] = [
    "id",
    "lang",
    "type",
    "question",
    "must_cite_one_of",
    "expect",
    "notes",
    "class",
    "form",
    "split",
    "answer_gold",
];

/// Parse a JSONL file. Valid cases are returned with the problems of the invalid lines.
pub fn load_case_file(path: &Path) -> Result<(Vec<LoadedCase>, Diagnostics)> {
    let (text, mut diags) =
        cardinal_kb::read_data_file(path).map_err(|source| DatasetError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    let (cases, more) = parse_cases(path, &text);
    diags.extend(more);
    Ok((cases, diags))
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
    // A byte-order mark is dropped here as in every other loader (`read_data_file`, cards).
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
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
        "escalate" => Some(Expect::Escalate),
        _ => {
            report(
                "expect",
                format!("`{s}` is not `answer`, `refuse` or `escalate`"),
            );
            None
        }
    });
    let gold = match obj.get("must_cite_one_of") {
        None => {
            report("must_cite_one_of", "missing (use [] for no gold)".into());
            None
        }
        Some(v) => card_ids("must_cite_one_of", v, report),
    };
    let answer_gold = match obj.get("answer_gold") {
        None => Some(Vec::new()),
        Some(v) => match card_ids("answer_gold", v, report) {
            Some(ids) if ids.is_empty() => {
                report(
                    "answer_gold",
                    "must list at least one card id (omit the field when there is none)".into(),
                );
                None
            }
            other => other,
        },
    };
    let class = optional_label(
        "class",
        obj,
        report,
        SafetyClass::parse,
        SafetyClass::expected,
    );
    let form = optional_label("form", obj, report, Form::parse, Form::expected);
    let split = optional_label("split", obj, report, Split::parse, Split::expected);
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
        class: class?,
        form: form?,
        split: split?,
        answer_gold: answer_gold?,
    })
}

/// A list of distinct, non-empty card id strings.
fn card_ids(field: &str, v: &Value, report: &mut dyn FnMut(&str, String)) -> Option<Vec<String>> {
    let Value::Array(items) = v else {
        report(
            field,
            format!("must be a list of card ids, found {}", kind(v)),
        );
        return None;
    };
    let mut ids = Vec::new();
    let mut ok = true;
    for (j, item) in items.iter().enumerate() {
        match item {
            Value::String(s) if !s.trim().is_empty() => {
                if ids.contains(s) {
                    report(field, format!("`{s}` is listed twice"));
                    ok = false;
                }
                ids.push(s.clone());
            }
            other => {
                report(
                    field,
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

/// An optional closed label: absent or null = `Some(None)`; invalid = reported, `None`.
fn optional_label<T>(
    field: &str,
    obj: &Map<String, Value>,
    report: &mut dyn FnMut(&str, String),
    parse: fn(&str) -> Option<T>,
    expected: fn() -> String,
) -> Option<Option<T>> {
    match obj.get(field) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(s)) => match parse(s) {
            Some(t) => Some(Some(t)),
            None => {
                report(
                    field,
                    format!("unknown {field} `{s}` (expected one of: {})", expected()),
                );
                None
            }
        },
        Some(other) => {
            report(field, format!("must be a string, found {}", kind(other)));
            None
        }
    }
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

    const SAFETY: &str = r#"{"id":"en-s-01","lang":"en","type":"adversarial","question":"q?","must_cite_one_of":["a.en"],"expect":"refuse","class":"double_dose","form":"two_intents","split":"test","answer_gold":["b.en"]}"#;

    #[test]
    fn parses_the_safety_fields() {
        let (c, d) = parse(&format!(
            "{SAFETY}\n{}",
            OK.replace("\"answer\"", "\"escalate\"")
        ));
        assert!(d.is_empty(), "{d:?}");
        let s = &c[0].case;
        assert_eq!(s.class, Some(SafetyClass::DoubleDose));
        assert_eq!(s.form, Some(Form::TwoIntents));
        assert_eq!(s.split, Some(Split::Test));
        assert_eq!(s.answer_gold, vec!["b.en"]);
        assert_eq!(c[1].case.expect, Expect::Escalate);
        assert_eq!(c[1].case.class, None);
        assert!(c[1].case.answer_gold.is_empty());
        // Serialising and reading back keeps every field; absent ones stay absent.
        let back: Case = serde_json::from_str(&serde_json::to_string(s).unwrap()).unwrap();
        assert_eq!(&back, s);
        let plain = serde_json::to_string(&c[1].case).unwrap();
        assert!(
            !plain.contains("class") && !plain.contains("answer_gold"),
            "{plain}"
        );
    }

    #[test]
    fn bad_safety_fields_are_reported_with_file_and_line() {
        let bad = SAFETY
            .replace("\"double_dose\"", "\"double\"")
            .replace("\"two_intents\"", "3")
            .replace("\"test\"", "\"dev\"")
            .replace("[\"b.en\"]", "[\"b.en\",\"\"]");
        let (c, d) = parse(&format!(
            "{OK}\n{bad}\n{}",
            SAFETY.replace("[\"b.en\"]", "[]")
        ));
        assert_eq!(c.len(), 1);
        assert_eq!(
            d,
            vec![
                "cases/en.jsonl:2: answer_gold: item 1 must be a non-empty card id string, found a string",
                "cases/en.jsonl:2: class: unknown class `double` (expected one of: double_dose, stop_change_medication, diagnosis, privacy, prompt_injection, emergency, out_of_scope, benign)",
                "cases/en.jsonl:2: form: must be a string, found a number",
                "cases/en.jsonl:2: split: unknown split `dev` (expected one of: train, test, holdout)",
                "cases/en.jsonl:3: answer_gold: must list at least one card id (omit the field when there is none)",
            ]
        );
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
