//! Cards of the Cardinal knowledge base.
//!
//! A card is one unit of knowledge in one language: TOML front matter, a **header** of factual
//! claims and a **tail** of behavioural rules. This crate parses cards, loads a knowledge base
//! directory, splits cards into child chunks for parent-document retrieval and enforces the
//! synthetic-only invariant ([`lint`]).

pub mod card;
pub mod chunk;
pub mod diag;
pub mod error;
pub mod kb;
pub mod lang;
pub mod lint;
pub mod text;

pub use card::{parse_card, Card};
pub use chunk::{card_identity, chunk_card, Chunk, ChunkerConfig, Section};
pub use diag::{read_data_file, Diagnostic, Diagnostics};
pub use error::{KbError, Result};
pub use kb::KnowledgeBase;
pub use lang::Lang;
