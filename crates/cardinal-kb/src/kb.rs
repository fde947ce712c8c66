//! A knowledge base: every card under `<dir>/<lang>/*.md`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::card::{parse_card, Card};
use crate::chunk::{chunk_card, Chunk, ChunkerConfig};
use crate::diag::{Diagnostic, Diagnostics};
use crate::error::{KbError, Result};
use crate::lang::Lang;

/// Minimum claims per card in the bundled KB (the parser alone only requires one).
pub const MIN_CLAIMS: usize = 3;
/// Minimum rules per card in the bundled KB (the parser alone only requires one).
pub const MIN_RULES: usize = 2;

/// A card and the file it came from.
#[derive(Debug, Clone)]
pub struct CardFile {
    pub path: PathBuf,
    pub card: Card,
}

/// The loaded knowledge base, cards sorted by path.
#[derive(Debug, Clone, Default)]
pub struct KnowledgeBase {
    pub dir: PathBuf,
    pub cards: Vec<CardFile>,
    by_id: HashMap<String, usize>,
}

impl KnowledgeBase {
    /// Load every card; fails with all problems listed if any card does not parse.
    pub fn load(dir: &Path) -> Result<Self> {
        let (kb, diags) = Self::load_lenient(dir)?;
        if diags.is_empty() {
            Ok(kb)
        } else {
            Err(KbError::Invalid(diags.sorted()))
        }
    }

    /// Load the cards that parse and return the problems of those that do not.
    /// Only I/O errors are fatal.
    pub fn load_lenient(dir: &Path) -> Result<(Self, Diagnostics)> {
        if !dir.is_dir() {
            return Err(KbError::MissingDir(dir.to_path_buf()));
        }
        let mut diags = Diagnostics::default();
        let mut cards = Vec::new();
        for entry in read_dir_sorted(dir)? {
            let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !entry.is_dir() {
                if name.ends_with(".md") && name != "README.md" {
                    diags.push(Diagnostic::new(
                        &entry,
                        0,
                        "path",
                        "cards live in a language folder: <kb>/<lang>/<topic>.md",
                    ));
                }
                continue;
            }
            let dir_lang = match name.parse::<Lang>() {
                Ok(l) => l,
                Err(e) => {
                    diags.push(Diagnostic::new(&entry, 0, "path", e.to_string()));
                    continue;
                }
            };
            for path in read_dir_sorted(&entry)? {
                if path.extension().and_then(|e| e.to_str()) != Some("md") {
                    continue;
                }
                let (text, bad) =
                    crate::diag::read_data_file(&path).map_err(|source| KbError::Io {
                        path: path.clone(),
                        source,
                    })?;
                diags.extend(bad);
                match parse_card(&path, &text) {
                    Ok(card) => {
                        file_checks(&path, &card, dir_lang, &mut diags);
                        cards.push(CardFile { path, card });
                    }
                    Err(d) => diags.extend(d),
                }
            }
        }
        let mut by_id = HashMap::new();
        for (i, cf) in cards.iter().enumerate() {
            if let Some(&first) = by_id.get(&cf.card.id) {
                let first: &CardFile = &cards[first];
                diags.push(Diagnostic::new(
                    &cf.path,
                    cf.card.lines.id,
                    "id",
                    format!(
                        "duplicate card id `{}` (first defined in {})",
                        cf.card.id,
                        first.path.display()
                    ),
                ));
            } else {
                by_id.insert(cf.card.id.clone(), i);
            }
        }
        let kb = KnowledgeBase {
            dir: dir.to_path_buf(),
            cards,
            by_id,
        };
        diags.extend(kb.topic_coverage());
        Ok((kb, diags))
    }

    /// Look a card up by id.
    pub fn get(&self, id: &str) -> Option<&CardFile> {
        self.by_id.get(id).map(|&i| &self.cards[i])
    }

    pub fn len(&self) -> usize {
        self.cards.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cards.is_empty()
    }

    /// Topic slug → languages that have a card for it.
    pub fn topics(&self) -> BTreeMap<&str, BTreeSet<Lang>> {
        let mut m: BTreeMap<&str, BTreeSet<Lang>> = BTreeMap::new();
        for cf in &self.cards {
            m.entry(cf.card.topic.as_str())
                .or_default()
                .insert(cf.card.lang);
        }
        m
    }

    /// All chunks of all cards, in card order.
    pub fn chunks(&self, config: &ChunkerConfig) -> Vec<Chunk> {
        self.cards
            .iter()
            .flat_map(|cf| chunk_card(&cf.card, config))
            .collect()
    }

    /// Every topic must exist in all three languages.
    fn topic_coverage(&self) -> Diagnostics {
        let mut diags = Diagnostics::default();
        let mut first_file: BTreeMap<&str, &CardFile> = BTreeMap::new();
        for cf in &self.cards {
            first_file.entry(cf.card.topic.as_str()).or_insert(cf);
        }
        for (topic, langs) in self.topics() {
            let missing: Vec<&str> = Lang::ALL
                .into_iter()
                .filter(|l| !langs.contains(l))
                .map(Lang::tag)
                .collect();
            if !missing.is_empty() {
                if let Some(cf) = first_file.get(topic) {
                    diags.push(Diagnostic::new(
                        &cf.path,
                        cf.card.lines.topic,
                        "topic",
                        format!("topic `{topic}` has no card in {}", missing.join(", ")),
                    ));
                }
            }
        }
        diags
    }
}

fn file_checks(path: &Path, card: &Card, dir_lang: Lang, diags: &mut Diagnostics) {
    if card.lang != dir_lang {
        diags.push(Diagnostic::new(
            path,
            card.lines.lang,
            "lang",
            format!(
                "card is `{}` but sits in the `{dir_lang}` folder",
                card.lang
            ),
        ));
    }
    let expected_id = format!("{}.{}", card.topic, card.lang);
    if card.id != expected_id {
        diags.push(Diagnostic::new(
            path,
            card.lines.id,
            "id",
            format!("`{}` should be `{expected_id}` (<topic>.<lang>)", card.id),
        ));
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if stem != card.topic {
        diags.push(Diagnostic::new(
            path,
            card.lines.topic,
            "topic",
            format!(
                "topic `{}` does not match the file name `{stem}.md`",
                card.topic
            ),
        ));
    }
    if card.claims().len() < MIN_CLAIMS {
        diags.push(Diagnostic::new(
            path,
            card.lines.body,
            "claims",
            format!(
                "{} claim(s); a card needs at least {MIN_CLAIMS}",
                card.claims().len()
            ),
        ));
    }
    if card.rules().len() < MIN_RULES {
        diags.push(Diagnostic::new(
            path,
            card.lines.rules_heading,
            "rules",
            format!(
                "{} rule(s); a card needs at least {MIN_RULES}",
                card.rules().len()
            ),
        ));
    }
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |source| KbError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        out.push(entry.map_err(io)?.path());
    }
    out.sort();
    Ok(out)
}
