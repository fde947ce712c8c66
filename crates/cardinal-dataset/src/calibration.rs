//! The judge-calibration corpus (`data/calibration/<lang>.jsonl`): answers with human labels for
//! the gated dimensions. Validated like the cases: every cited id is a card of the item's
//! language and equals the `[card-id]` citations in the answer, scores are 1–5 with a rationale,
//! a `case_id` names an existing case.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use cardinal_kb::{Diagnostic, Diagnostics, KnowledgeBase, Lang};
use serde::{Deserialize, Serialize};

use crate::case::LoadedCase;
use crate::error::{DatasetError, Result};

/// What an item is an example of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Supported,
    RuleViolation,
    UnsupportedAddition,
    Contradiction,
    Partial,
    Refusal,
}

/// Severity inside a category: what decides the label, so that the label is not the category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// supported: every claim supported.
    None,
    /// supported: a loose but faithful rewording.
    Paraphrase,
    /// unsupported_addition: a harmless courtesy or colour detail.
    Minor,
    /// unsupported_addition: an invented dose, number, timing, service or policy.
    Major,
    /// contradiction of the fact that answers the question.
    Central,
    /// contradiction of a side fact.
    Peripheral,
    /// rule_violation: clearly does what a rule forbids.
    Explicit,
    /// rule_violation: softened, conditional, partial tension with a rule.
    Hedged,
    /// partial: mostly supported, one substantive unsupported claim.
    Mostly,
    /// partial: about half supported.
    Half,
    /// refusal: safe refusal or redirect.
    Clean,
    /// refusal: refuses but adds a wrong or unsupported claim.
    Flawed,
}

/// Where the faulty sentence sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Position {
    None,
    First,
    Middle,
    Last,
}

/// The frozen split of the corpus: fit on dev, claim on test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    Dev,
    Test,
}

impl Split {
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Dev => "dev",
            Split::Test => "test",
        }
    }
}

/// A human label: 1–5 and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Label {
    pub score: u8,
    pub rationale: String,
}

/// Labels of the gated dimensions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Labels {
    pub groundedness: Label,
    pub faithfulness: Label,
}

impl Labels {
    /// The score of a gated dimension by name.
    pub fn score(&self, dimension: &str) -> Option<u8> {
        match dimension {
            "groundedness" => Some(self.groundedness.score),
            "faithfulness" => Some(self.faithfulness.score),
            _ => None,
        }
    }
}

/// The adjudicated score of one dimension where the two labellers disagreed, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Adjudication {
    pub score: u8,
    pub note: String,
}

/// Adjudications per gated dimension.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Adjudications {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groundedness: Option<Adjudication>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faithfulness: Option<Adjudication>,
}

impl Adjudications {
    pub fn get(&self, dimension: &str) -> Option<&Adjudication> {
        match dimension {
            "groundedness" => self.groundedness.as_ref(),
            "faithfulness" => self.faithfulness.as_ref(),
            _ => None,
        }
    }
}

/// One calibration item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationItem {
    pub id: String,
    pub lang: Lang,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_id: Option<String>,
    pub question: String,
    pub answer: String,
    pub cited: Vec<String>,
    pub category: Category,
    pub severity: Severity,
    pub faulty_position: Position,
    pub split: Split,
    /// The first labeller's labels (committed before any judge score).
    pub labels: Labels,
    /// An independent second labeller's labels, written without seeing the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second_labels: Option<Labels>,
    /// Where the two labellers' bins disagreed: the adjudicated score and the note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adjudicated: Option<Adjudications>,
    /// rule_violation items: why no fact of the cited headers is contradicted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_check: Option<String>,
    /// The id of the item (another language) this one was translated from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translated_from: Option<String>,
}

impl CalibrationItem {
    /// The reference score of a gated dimension: the adjudicated score where the labellers
    /// disagreed, else the first label.
    pub fn reference(&self, dimension: &str) -> Option<u8> {
        self.adjudicated
            .as_ref()
            .and_then(|a| a.get(dimension))
            .map(|a| a.score)
            .or_else(|| self.labels.score(dimension))
    }
}

/// An item and where it was read.
#[derive(Debug, Clone)]
pub struct LoadedItem {
    pub path: PathBuf,
    pub line: usize,
    pub item: CalibrationItem,
}

/// Load every `*.jsonl` of the calibration directory (absent directory = no items).
pub fn load_calibration_dir(dir: &Path) -> Result<(Vec<LoadedItem>, Diagnostics)> {
    let mut items = Vec::new();
    let mut diags = Diagnostics::default();
    if !dir.is_dir() {
        return Ok((items, diags));
    }
    let io = |source| DatasetError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io)? {
        let p = e.map_err(io)?.path();
        if p.extension().and_then(|x| x.to_str()) == Some("jsonl") {
            files.push(p);
        }
    }
    files.sort();
    for path in files {
        let (text, bad) =
            cardinal_kb::read_data_file(&path).map_err(|source| DatasetError::Io {
                path: path.clone(),
                source,
            })?;
        diags.extend(bad);
        let (more, d) = parse_calibration(&path, &text);
        items.extend(more);
        diags.extend(d);
    }
    Ok((items, diags))
}

/// Parse the JSONL text of one labels file; pure, so it is testable (and fuzzed) without files.
pub fn parse_calibration(path: &Path, text: &str) -> (Vec<LoadedItem>, Diagnostics) {
    let mut items = Vec::new();
    let mut diags = Diagnostics::default();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<CalibrationItem>(line) {
            Ok(item) => items.push(LoadedItem {
                path: path.to_path_buf(),
                line: i + 1,
                item,
            }),
            Err(e) => diags.push(Diagnostic::new(path, i + 1, "json", e.to_string())),
        }
    }
    (items, diags)
}

/// Cross-checks of the calibration items against the KB and the cases.
pub fn check_calibration(
    kb: &KnowledgeBase,
    cases: &[LoadedCase],
    items: &[LoadedItem],
) -> Diagnostics {
    let mut diags = Diagnostics::default();
    let case_ids: HashSet<&str> = cases.iter().map(|c| c.case.id.as_str()).collect();
    let mut seen: HashMap<&str, &LoadedItem> = HashMap::new();
    for li in items {
        let it = &li.item;
        let at = |field: &str, msg: String| Diagnostic::new(&li.path, li.line, field, msg);
        if let Some(first) = seen.insert(&it.id, li) {
            diags.push(at(
                "id",
                format!(
                    "duplicate item id `{}` (first at line {})",
                    it.id, first.line
                ),
            ));
        }
        let stem = li.path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if stem != it.lang.tag() {
            diags.push(at(
                "lang",
                format!("item is `{}` but sits in `{stem}.jsonl`", it.lang),
            ));
        }
        if let Some(cid) = &it.case_id {
            if !case_ids.contains(cid.as_str()) {
                diags.push(at("case_id", format!("`{cid}` is not a case id")));
            }
        }
        for (field, text) in [("question", &it.question), ("answer", &it.answer)] {
            if text.trim().is_empty() {
                diags.push(at(field, "must not be empty".into()));
            }
        }
        for id in &it.cited {
            match kb.get(id) {
                None => diags.push(at(
                    "cited",
                    format!("`{id}` is not a card of the knowledge base"),
                )),
                Some(cf) if cf.card.lang != it.lang => diags.push(at(
                    "cited",
                    format!(
                        "`{id}` is a {} card but the item is {}",
                        cf.card.lang, it.lang
                    ),
                )),
                Some(_) => {}
            }
        }
        let in_text = crate::citations_in(&it.answer);
        let listed: HashSet<&str> = it.cited.iter().map(String::as_str).collect();
        let written: HashSet<&str> = in_text.iter().map(String::as_str).collect();
        if listed != written {
            diags.push(at(
                "cited",
                format!("lists {:?} but the answer cites {:?}", it.cited, in_text),
            ));
        }
        let mut labels = vec![
            ("labels.groundedness", &it.labels.groundedness),
            ("labels.faithfulness", &it.labels.faithfulness),
        ];
        if let Some(s) = &it.second_labels {
            labels.push(("second_labels.groundedness", &s.groundedness));
            labels.push(("second_labels.faithfulness", &s.faithfulness));
        }
        for (field, l) in labels {
            if !(1..=5).contains(&l.score) {
                diags.push(at(field, format!("score {} is outside 1–5", l.score)));
            }
            if l.rationale.trim().is_empty() {
                diags.push(at(field, "a label needs a one-line rationale".into()));
            }
        }
        if let Some(adj) = &it.adjudicated {
            if it.second_labels.is_none() {
                diags.push(at(
                    "adjudicated",
                    "an adjudication needs two labels to adjudicate between (second_labels)".into(),
                ));
            }
            for dim in ["groundedness", "faithfulness"] {
                if let Some(a) = adj.get(dim) {
                    let field = format!("adjudicated.{dim}");
                    if !(1..=5).contains(&a.score) {
                        diags.push(at(&field, format!("score {} is outside 1–5", a.score)));
                    }
                    if a.note.trim().is_empty() {
                        diags.push(at(&field, "an adjudication needs its note".into()));
                    }
                }
            }
        }
        if it.category == Category::RuleViolation
            && it
                .header_check
                .as_deref()
                .is_none_or(|s| s.trim().is_empty())
        {
            diags.push(at(
                "header_check",
                "a rule_violation item must say why it contradicts no fact of the cited headers"
                    .into(),
            ));
        }
        let severities: &[Severity] = match it.category {
            Category::Supported => &[Severity::None, Severity::Paraphrase],
            Category::UnsupportedAddition => &[Severity::Minor, Severity::Major],
            Category::Contradiction => &[Severity::Central, Severity::Peripheral],
            Category::RuleViolation => &[Severity::Explicit, Severity::Hedged],
            Category::Partial => &[Severity::Mostly, Severity::Half],
            Category::Refusal => &[Severity::Clean, Severity::Flawed],
        };
        if !severities.contains(&it.severity) {
            diags.push(at(
                "severity",
                format!(
                    "{:?} is not a severity of category {:?} (expected one of {:?})",
                    it.severity, it.category, severities
                ),
            ));
        }
    }
    diags
}
