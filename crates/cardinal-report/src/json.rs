//! Reading the input files, and a generic view of any JSON value for the templates (the run
//! manifest, judge checks, statistics a newer writer added that this crate does not know yet).

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::error::{ReportError, Result};

/// Reads `path` to a string; `Ok(None)` when the file does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ReportError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Reads and parses a required JSON file.
pub(crate) fn read_required<T: DeserializeOwned>(path: &Path, what: &'static str) -> Result<T> {
    let text = read_optional(path)?.ok_or_else(|| ReportError::Missing {
        path: path.to_path_buf(),
        what,
    })?;
    parse(path, &text)
}

/// Parses JSON text read from `path`.
pub(crate) fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|source| ReportError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// A number for people: integers as integers, others with at most `decimals` decimals and no
/// trailing zeros.
pub(crate) fn fmt_num(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x.fract() == 0.0 && x.abs() < 1e15 {
        return format!("{}", x as i64);
    }
    let s = format!("{x:.decimals$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// Strings longer than this, or with a line break, are shown as a preformatted block.
const LONG_TEXT: usize = 160;

/// A JSON value shaped for the templates' recursive `node` macro.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Node {
    /// `null`.
    Null,
    /// A short scalar.
    Text {
        /// The text shown.
        text: String,
        /// Whether it is a number or boolean (right-aligned, monospace).
        num: bool,
    },
    /// A long or multi-line string.
    Long {
        /// The text shown.
        text: String,
    },
    /// An object: key, value.
    Map {
        /// Entries in the object's key order.
        entries: Vec<Entry>,
    },
    /// An array of objects: one row per element, the union of their keys as columns.
    Table {
        /// Column names, in order of first appearance.
        columns: Vec<String>,
        /// One cell per column (`Null` where the element lacks the key).
        rows: Vec<Vec<Node>>,
    },
    /// Any other array.
    List {
        /// The elements.
        items: Vec<Node>,
    },
}

/// One entry of a [`Node::Map`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The value.
    pub node: Node,
}

impl Node {
    /// The view of `value`.
    pub fn of(value: &Value) -> Node {
        match value {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Text {
                text: b.to_string(),
                num: true,
            },
            Value::Number(n) => Node::Text {
                text: n.as_f64().map_or_else(|| n.to_string(), |x| fmt_num(x, 4)),
                num: true,
            },
            Value::String(s) if s.len() > LONG_TEXT || s.contains('\n') => {
                Node::Long { text: s.clone() }
            }
            Value::String(s) => Node::Text {
                text: s.clone(),
                num: false,
            },
            Value::Object(map) => Node::Map {
                entries: map
                    .iter()
                    .map(|(k, v)| Entry {
                        key: k.clone(),
                        node: Node::of(v),
                    })
                    .collect(),
            },
            Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object) => {
                let mut columns: Vec<String> = Vec::new();
                let mut seen = BTreeSet::new();
                for item in items {
                    if let Value::Object(m) = item {
                        for k in m.keys() {
                            if seen.insert(k.clone()) {
                                columns.push(k.clone());
                            }
                        }
                    }
                }
                let rows = items
                    .iter()
                    .map(|item| {
                        columns
                            .iter()
                            .map(|c| item.get(c).map_or(Node::Null, Node::of))
                            .collect()
                    })
                    .collect();
                Node::Table { columns, rows }
            }
            Value::Array(items) => Node::List {
                items: items.iter().map(Node::of).collect(),
            },
        }
    }

    /// The view of an object's entries except `skip`; `None` when nothing is left.
    pub fn of_object_except(value: &Value, skip: &[&str]) -> Option<Node> {
        let map = value.as_object()?;
        let entries: Vec<Entry> = map
            .iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .map(|(k, v)| Entry {
                key: k.clone(),
                node: Node::of(v),
            })
            .collect();
        (!entries.is_empty()).then_some(Node::Map { entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_are_short() {
        assert_eq!(fmt_num(1.0, 3), "1");
        assert_eq!(fmt_num(0.5, 3), "0.5");
        assert_eq!(fmt_num(0.123456, 3), "0.123");
        assert_eq!(fmt_num(-0.0001, 3), "0");
        assert_eq!(fmt_num(12.0, 3), "12");
    }

    #[test]
    fn arrays_of_objects_become_tables() {
        let n = Node::of(&json!([{"a": 1, "b": "x"}, {"b": "y", "c": true}]));
        let Node::Table { columns, rows } = n else {
            panic!("not a table: {n:?}")
        };
        assert_eq!(columns, ["a", "b", "c"]);
        assert_eq!(rows[1][0], Node::Null);
        assert_eq!(
            rows[1][2],
            Node::Text {
                text: "true".into(),
                num: true
            }
        );
    }

    #[test]
    fn long_strings_are_blocks() {
        assert!(matches!(Node::of(&json!("a\nb")), Node::Long { .. }));
        assert!(matches!(Node::of(&json!([1, "x"])), Node::List { .. }));
        assert_eq!(
            Node::of_object_except(&json!({"a": 1, "raw": 2}), &["a", "raw"]),
            None
        );
    }
}
