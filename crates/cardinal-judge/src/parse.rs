//! Strict parsing of the judge's reply.
//!
//! Accepted, after trimming surrounding whitespace:
//! - exactly one JSON object, or
//! - exactly one fenced block whose opening line is ` ```json ` (tag case-insensitive) or a bare
//!   ` ``` `, containing exactly one JSON object, with nothing before or after the fence.
//!
//! The object has exactly two keys, each once: `score` and `rationale`.
//! - `score` is a JSON integer in `1..=5`. A number written with a fraction or an exponent is
//!   rejected **even when integral** (`5.0`, `5e0`): the rubric asks for an integer, and a model
//!   that drifts from the contract is retried rather than guessed at. Strings (`"4"`) are rejected.
//! - `rationale` is a non-empty string (after trimming). Its length is not limited here.
//!
//! Anything else (prose around the object, two objects, extra or duplicate keys, an empty reply)
//! is a typed [`ParseError`]; the judge retries on it and never turns it into a score.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A judge score, guaranteed to be in `1..=5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub struct Score(u8);

impl Score {
    pub const MIN: u8 = 1;
    pub const MAX: u8 = 5;

    /// `Some` when `value` is in `1..=5`.
    pub fn new(value: u8) -> Option<Score> {
        (Self::MIN..=Self::MAX)
            .contains(&value)
            .then_some(Score(value))
    }

    pub fn get(self) -> u8 {
        self.0
    }

    /// The score as a metric value.
    pub fn as_f64(self) -> f64 {
        f64::from(self.0)
    }
}

impl TryFrom<u8> for Score {
    type Error = String;
    fn try_from(v: u8) -> Result<Self, Self::Error> {
        Score::new(v).ok_or_else(|| format!("judge score {v} is outside 1..=5"))
    }
}

impl From<Score> for u8 {
    fn from(s: Score) -> u8 {
        s.0
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A parsed verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgeVerdict {
    pub score: Score,
    /// Trimmed.
    pub rationale: String,
}

/// Why a judge reply was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("the reply is empty")]
    Empty,
    /// No JSON object anywhere in the reply.
    #[error("the reply contains no JSON object")]
    NoJson,
    /// Text before or after the object (or outside the fenced block).
    #[error("the reply has text outside the JSON object")]
    ProseAroundJson,
    /// A second JSON value follows the first.
    #[error("the reply has more than one JSON value")]
    MultipleValues,
    /// A code fence that is not one well-formed ` ```json ` block.
    #[error("the reply has a malformed code fence (expected one ```json block)")]
    MalformedFence,
    /// The object is not valid JSON.
    #[error("invalid JSON: {0}")]
    InvalidJson(String),
    /// Valid JSON, but not an object.
    #[error("the reply is a JSON {0}, not an object")]
    NotAnObject(&'static str),
    #[error("missing field `{0}`")]
    MissingField(&'static str),
    #[error("unexpected field `{0}` (only `score` and `rationale` are allowed)")]
    UnknownField(String),
    #[error("field `{0}` appears more than once")]
    DuplicateField(String),
    /// `score` is a JSON string, boolean, null, array or object.
    #[error("`score` must be a JSON integer, found a {0}")]
    ScoreNotANumber(&'static str),
    /// `score` is a number with a fraction or an exponent (`4.5`, `5.0`, `4e0`).
    #[error("`score` must be an integer, found {0}")]
    ScoreNotInteger(String),
    #[error("`score` must be in 1..=5, found {0}")]
    ScoreOutOfRange(String),
    #[error("`rationale` must be a string, found a {0}")]
    RationaleNotAString(&'static str),
    #[error("`rationale` is empty")]
    EmptyRationale,
}

/// Parse a judge reply strictly (see the module documentation for what is accepted).
pub fn parse_judge_output(raw: &str) -> Result<JudgeVerdict, ParseError> {
    let text = raw.trim();
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    let json = if text.starts_with("```") {
        unfence(text)?
    } else if text.starts_with('{') {
        text
    } else if let Ok(v) = serde_json::from_str::<Value>(text) {
        return Err(ParseError::NotAnObject(kind(&v)));
    } else if text.contains('{') {
        return Err(ParseError::ProseAroundJson);
    } else {
        return Err(ParseError::NoJson);
    };
    if json.is_empty() {
        return Err(ParseError::Empty);
    }

    // Exactly one JSON value, then nothing.
    let mut stream = serde_json::Deserializer::from_str(json).into_iter::<Value>();
    let value = match stream.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(ParseError::InvalidJson(e.to_string())),
        None => return Err(ParseError::Empty),
    };
    let rest = json[stream.byte_offset()..].trim();
    if !rest.is_empty() {
        return Err(
            if rest.starts_with('{') || rest.starts_with('[') || rest.starts_with('"') {
                ParseError::MultipleValues
            } else {
                ParseError::ProseAroundJson
            },
        );
    }
    if !value.is_object() {
        return Err(ParseError::NotAnObject(kind(&value)));
    }

    // Re-read the object keeping every entry: `Value` silently keeps the last of duplicate keys.
    let Entries(entries) =
        serde_json::from_str(json).map_err(|e| ParseError::InvalidJson(e.to_string()))?;
    let mut score = None;
    let mut rationale = None;
    for (key, v) in entries {
        let slot = match key.as_str() {
            "score" => &mut score,
            "rationale" => &mut rationale,
            _ => return Err(ParseError::UnknownField(key)),
        };
        if slot.replace(v).is_some() {
            return Err(ParseError::DuplicateField(key));
        }
    }
    let score = parse_score(score.ok_or(ParseError::MissingField("score"))?)?;
    let rationale = match rationale.ok_or(ParseError::MissingField("rationale"))? {
        Value::String(s) => s.trim().to_string(),
        other => return Err(ParseError::RationaleNotAString(kind(&other))),
    };
    if rationale.is_empty() {
        return Err(ParseError::EmptyRationale);
    }
    Ok(JudgeVerdict { score, rationale })
}

fn unfence(text: &str) -> Result<&str, ParseError> {
    let rest = text.strip_prefix("```").ok_or(ParseError::MalformedFence)?;
    let (info, body) = rest.split_once('\n').ok_or(ParseError::MalformedFence)?;
    let info = info.trim();
    if !(info.is_empty() || info.eq_ignore_ascii_case("json")) {
        return Err(ParseError::MalformedFence);
    }
    let Some(close) = body.find("```") else {
        return Err(ParseError::MalformedFence);
    };
    // The closing fence must end the reply (the reply is trimmed, so only it may follow).
    if body[close + 3..].trim().is_empty() {
        Ok(body[..close].trim())
    } else {
        Err(ParseError::ProseAroundJson)
    }
}

fn parse_score(v: Value) -> Result<Score, ParseError> {
    let Value::Number(n) = v else {
        return Err(ParseError::ScoreNotANumber(kind(&v)));
    };
    if let Some(u) = n.as_u64() {
        u8::try_from(u)
            .ok()
            .and_then(Score::new)
            .ok_or_else(|| ParseError::ScoreOutOfRange(n.to_string()))
    } else if n.is_i64() {
        Err(ParseError::ScoreOutOfRange(n.to_string()))
    } else {
        Err(ParseError::ScoreNotInteger(n.to_string()))
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A JSON object's entries in order, duplicates kept.
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    out.push((k, v));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ParseError as E;

    fn ok(raw: &str) -> JudgeVerdict {
        match parse_judge_output(raw) {
            Ok(v) => v,
            Err(e) => panic!("{raw:?} was rejected: {e}"),
        }
    }

    fn err(raw: &str) -> ParseError {
        match parse_judge_output(raw) {
            Ok(v) => panic!("{raw:?} was accepted: {v:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn accepts_a_plain_object() {
        let v = ok(r#"{"score": 4, "rationale": "Supported by the card."}"#);
        assert_eq!(v.score.get(), 4);
        assert_eq!(v.rationale, "Supported by the card.");
    }

    #[test]
    fn accepts_surrounding_whitespace_and_either_key_order() {
        let v = ok("\n\n  {\"rationale\": \"  ok  \",\n \"score\": 1}  \n");
        assert_eq!(v.score.get(), 1);
        assert_eq!(v.rationale, "ok");
    }

    #[test]
    fn accepts_every_score_on_the_scale() {
        for s in 1..=5 {
            let v = ok(&format!(r#"{{"score": {s}, "rationale": "r"}}"#));
            assert_eq!(v.score.get(), s);
        }
    }

    #[test]
    fn accepts_one_json_fenced_block() {
        for raw in [
            "```json\n{\"score\": 5, \"rationale\": \"Fine.\"}\n```",
            "  ```JSON\n{\"score\": 5, \"rationale\": \"Fine.\"}\n```\n",
            "```\n{\"score\": 5, \"rationale\": \"Fine.\"}\n```",
        ] {
            assert_eq!(ok(raw).score.get(), 5, "{raw:?}");
        }
    }

    #[test]
    fn rejects_empty() {
        assert_eq!(err(""), E::Empty);
        assert_eq!(err("  \n\t "), E::Empty);
        assert_eq!(err("```json\n\n```"), E::Empty);
    }

    #[test]
    fn rejects_prose_around_json() {
        let obj = r#"{"score": 4, "rationale": "r"}"#;
        assert_eq!(
            err(&format!("Here is my verdict: {obj}")),
            E::ProseAroundJson
        );
        assert_eq!(
            err(&format!("{obj}\nI hope this helps.")),
            E::ProseAroundJson
        );
        assert_eq!(
            err(&format!("Verdict:\n```json\n{obj}\n```")),
            E::ProseAroundJson
        );
        assert_eq!(
            err(&format!("```json\n{obj}\n```\nThat is all.")),
            E::ProseAroundJson
        );
        assert_eq!(err("The answer is fine, score 5."), E::NoJson);
    }

    #[test]
    fn rejects_two_objects() {
        let obj = r#"{"score": 4, "rationale": "r"}"#;
        assert_eq!(err(&format!("{obj}\n{obj}")), E::MultipleValues);
        assert_eq!(err(&format!("{obj}{obj}")), E::MultipleValues);
        assert_eq!(
            err(&format!("```json\n{obj}\n```\n```json\n{obj}\n```")),
            E::ProseAroundJson
        );
    }

    #[test]
    fn rejects_malformed_fences() {
        let obj = r#"{"score": 4, "rationale": "r"}"#;
        assert_eq!(err(&format!("```json {obj} ```")), E::MalformedFence);
        assert_eq!(err(&format!("```python\n{obj}\n```")), E::MalformedFence);
        assert_eq!(err(&format!("```json\n{obj}\n")), E::MalformedFence);
    }

    #[test]
    fn rejects_out_of_range_scores() {
        for s in ["0", "6", "-1", "255", "256", "100000000000000000000"] {
            let e = err(&format!(r#"{{"score": {s}, "rationale": "r"}}"#));
            match (s, &e) {
                // Too large for u64/i64: serde_json reads it as a float.
                ("100000000000000000000", E::ScoreNotInteger(_)) => {}
                (_, E::ScoreOutOfRange(v)) => assert_eq!(v, s),
                _ => panic!("{s}: {e:?}"),
            }
        }
    }

    #[test]
    fn rejects_non_integer_scores_even_integral_floats() {
        assert_eq!(
            err(r#"{"score": 4.5, "rationale": "r"}"#),
            E::ScoreNotInteger("4.5".into())
        );
        assert_eq!(
            err(r#"{"score": 5.0, "rationale": "r"}"#),
            E::ScoreNotInteger("5.0".into())
        );
        assert!(matches!(
            err(r#"{"score": 4e0, "rationale": "r"}"#),
            E::ScoreNotInteger(_)
        ));
    }

    #[test]
    fn rejects_scores_of_the_wrong_type() {
        assert_eq!(
            err(r#"{"score": "4", "rationale": "r"}"#),
            E::ScoreNotANumber("string")
        );
        assert_eq!(
            err(r#"{"score": null, "rationale": "r"}"#),
            E::ScoreNotANumber("null")
        );
        assert_eq!(
            err(r#"{"score": [4], "rationale": "r"}"#),
            E::ScoreNotANumber("array")
        );
        assert_eq!(
            err(r#"{"score": true, "rationale": "r"}"#),
            E::ScoreNotANumber("boolean")
        );
    }

    #[test]
    fn rejects_missing_fields() {
        assert_eq!(err(r#"{"score": 4}"#), E::MissingField("rationale"));
        assert_eq!(err(r#"{"rationale": "r"}"#), E::MissingField("score"));
        assert_eq!(err("{}"), E::MissingField("score"));
    }

    #[test]
    fn rejects_bad_rationales() {
        assert_eq!(
            err(r#"{"score": 4, "rationale": "   "}"#),
            E::EmptyRationale
        );
        assert_eq!(
            err(r#"{"score": 4, "rationale": 3}"#),
            E::RationaleNotAString("number")
        );
        assert_eq!(
            err(r#"{"score": 4, "rationale": null}"#),
            E::RationaleNotAString("null")
        );
    }

    #[test]
    fn rejects_extra_and_duplicate_fields() {
        assert_eq!(
            err(r#"{"score": 4, "rationale": "r", "confidence": 0.9}"#),
            E::UnknownField("confidence".into())
        );
        assert_eq!(
            err(r#"{"score": 1, "score": 5, "rationale": "r"}"#),
            E::DuplicateField("score".into())
        );
    }

    #[test]
    fn rejects_invalid_json_and_non_objects() {
        assert!(matches!(
            err(r#"{"score": 4, "rationale": "r""#),
            E::InvalidJson(_)
        ));
        assert!(matches!(
            err(r#"{score: 4, rationale: "r"}"#),
            E::InvalidJson(_)
        ));
        assert!(matches!(
            err("{'score': 4, 'rationale': 'r'}"),
            E::InvalidJson(_)
        ));
        assert_eq!(err("4"), E::NotAnObject("number"));
        assert_eq!(err(r#""4""#), E::NotAnObject("string"));
        assert_eq!(
            err(r#"[{"score": 4, "rationale": "r"}]"#),
            E::NotAnObject("array")
        );
        assert_eq!(err("```json\n[4]\n```"), E::NotAnObject("array"));
    }

    #[test]
    fn score_type_guards_its_range() {
        assert!(Score::new(0).is_none());
        assert!(Score::new(6).is_none());
        assert_eq!(Score::new(3).map(Score::get), Some(3));
        assert_eq!(serde_json::to_string(&Score::new(2)).unwrap(), "2");
        assert!(serde_json::from_str::<Score>("6").is_err());
        assert_eq!(serde_json::from_str::<Score>("5").unwrap().get(), 5);
    }
}
