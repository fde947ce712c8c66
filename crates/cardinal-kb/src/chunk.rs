//! Parent-document chunking: a card splits into child chunks; every chunk keeps its parent id.

use crate::card::Card;

/// Which part of the card a chunk comes from. A chunk never spans both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Section {
    Header,
    Tail,
}

/// A child chunk of a card. `start..end` is a byte span of the card's full text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// `<card-id>#<n>`, n from 0.
    pub id: String,
    /// The parent card's id.
    pub parent_id: Option<String>,
    pub section: Section,
    pub start: usize,
    pub end: usize,
    pub text: String,
}

impl Chunk {
    /// Card identity: the parent id when present, else the chunk id.
    pub fn card_id(&self) -> &str {
        card_identity(self.parent_id.as_deref(), &self.id)
    }
}

/// Card identity everywhere in Cardinal: parent id when present, else chunk id.
pub fn card_identity<'a>(parent_id: Option<&'a str>, chunk_id: &'a str) -> &'a str {
    match parent_id {
        Some(p) if !p.is_empty() => p,
        _ => chunk_id,
    }
}

/// How cards are split into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkerConfig {
    /// Units (paragraphs and bullet items) are packed into a chunk while it stays under this many
    /// bytes; a single longer unit becomes a chunk of its own.
    pub max_chars: usize,
}

impl Default for ChunkerConfig {
    fn default() -> Self {
        ChunkerConfig { max_chars: 400 }
    }
}

/// Split a card into chunks. The chunks' spans are contiguous and cover the whole full text,
/// so concatenating the chunk texts gives back the card's full text.
pub fn chunk_card(card: &Card, config: &ChunkerConfig) -> Vec<Chunk> {
    let text = card.full_text();
    let tail_start = card.tail_start();
    let mut spans: Vec<(usize, usize, Section)> = Vec::new();
    for (lo, hi, section) in [
        (0, tail_start, Section::Header),
        (tail_start, text.len(), Section::Tail),
    ] {
        if lo >= hi {
            continue;
        }
        let units = unit_starts(&text[lo..hi]);
        let mut chunk_start = lo;
        for w in units.windows(2) {
            let unit_end = lo + w[1];
            let unit_start = lo + w[0];
            if unit_start > chunk_start && unit_end - chunk_start > config.max_chars {
                spans.push((chunk_start, unit_start, section));
                chunk_start = unit_start;
            }
        }
        spans.push((chunk_start, hi, section));
    }
    spans
        .into_iter()
        .enumerate()
        .map(|(n, (start, end, section))| Chunk {
            id: format!("{}#{n}", card.id),
            parent_id: Some(card.id.clone()),
            section,
            start,
            end,
            text: text[start..end].to_string(),
        })
        .collect()
}

/// Byte offsets where units start (paragraphs and bullet items), plus the end offset.
/// The first unit always starts at 0.
fn unit_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    let mut pos = 0;
    let mut prev_blank = false;
    for line in text.split_inclusive('\n') {
        let is_blank = line.trim().is_empty();
        let is_item = line.starts_with("- ") || line.starts_with("* ");
        if pos > 0 && !is_blank && (prev_blank || is_item) && starts.last() != Some(&pos) {
            starts.push(pos);
        }
        prev_blank = is_blank;
        pos += line.len();
    }
    starts.push(text.len());
    starts.dedup();
    starts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::parse_card;
    use proptest::prelude::*;
    use std::collections::HashSet;
    use std::path::Path;

    fn card_with(claims: &[String], rules: &[String]) -> Card {
        let mut text = String::from(
            "+++\nid = \"t.en\"\nlang = \"en\"\ntitle = \"T\"\ntopic = \"t\"\nsynthetic = true\n+++\n\nIntro.\n\n",
        );
        for c in claims {
            text.push_str(&format!("- {c}\n"));
        }
        text.push_str("\n## Rules\n\n");
        for r in rules {
            text.push_str(&format!("- {r}\n"));
        }
        parse_card(Path::new("t.md"), &text).unwrap()
    }

    #[test]
    fn identity_prefers_parent() {
        assert_eq!(card_identity(Some("a.en"), "a.en#3"), "a.en");
        assert_eq!(card_identity(None, "loose-chunk"), "loose-chunk");
        assert_eq!(card_identity(Some(""), "loose-chunk"), "loose-chunk");
    }

    #[test]
    fn small_card_is_one_chunk_per_section() {
        let c = card_with(
            &["a".into(), "b".into(), "c".into()],
            &["x".into(), "y".into()],
        );
        let chunks = chunk_card(&c, &ChunkerConfig::default());
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].section, Section::Header);
        assert_eq!(chunks[1].section, Section::Tail);
        assert!(chunks[1].text.starts_with("## Rules"));
        assert_eq!(chunks[0].id, "t.en#0");
        assert_eq!(chunks[1].card_id(), "t.en");
    }

    #[test]
    fn tight_limit_splits_at_bullets() {
        let claims: Vec<String> = (0..5).map(|i| format!("claim number {i} here")).collect();
        let c = card_with(&claims, &["x".into(), "y".into()]);
        let chunks = chunk_card(&c, &ChunkerConfig { max_chars: 30 });
        let header: Vec<_> = chunks
            .iter()
            .filter(|c| c.section == Section::Header)
            .collect();
        assert!(header.len() >= 5, "{header:#?}");
        for ch in &header[1..] {
            assert!(ch.text.starts_with("- "), "{:?}", ch.text);
        }
    }

    proptest! {
        #[test]
        fn chunks_cover_card_and_ids_are_unique(
            claims in prop::collection::vec("[a-z ]{1,80}", 1..12),
            rules in prop::collection::vec("[a-z ]{1,80}", 1..6),
            max_chars in 1usize..600,
        ) {
            let claims: Vec<String> = claims.into_iter().map(|c| format!("c{c}")).collect();
            let rules: Vec<String> = rules.into_iter().map(|r| format!("r{r}")).collect();
            let card = card_with(&claims, &rules);
            let chunks = chunk_card(&card, &ChunkerConfig { max_chars });
            let joined: String = chunks.iter().map(|c| c.text.as_str()).collect();
            prop_assert_eq!(joined.as_str(), card.full_text());
            let mut pos = 0;
            for ch in &chunks {
                prop_assert_eq!(ch.start, pos);
                prop_assert!(ch.end > ch.start);
                prop_assert_eq!(&card.full_text()[ch.start..ch.end], ch.text.as_str());
                prop_assert_eq!(ch.card_id(), "t.en");
                pos = ch.end;
            }
            let ids: HashSet<_> = chunks.iter().map(|c| c.id.clone()).collect();
            prop_assert_eq!(ids.len(), chunks.len());
            prop_assert!(chunks.iter().any(|c| c.section == Section::Tail));
        }
    }
}
