//! What the hidden-state reading experiments (`probe_sentences`, `probe_blocks`) share: their
//! command line (`--split`, `--framing`, `--out`, `--category`), the bundled KB and calibration
//! items, the 1.5B judge model, and a resumable JSON-lines output (items already written are
//! skipped). Not part of the product.
use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use cardinal_dataset::calibration::{load_calibration_dir, Category, LoadedItem, Split};
use cardinal_judge::checks::CheckFraming;
use cardinal_kb::KnowledgeBase;
use cardinal_llm_local::LocalModel;

pub type Error = Box<dyn std::error::Error>;

/// The value after `name` on the command line.
pub fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// One experiment run: what to read, where to write, and everything loaded.
pub struct Run {
    pub framing: CheckFraming,
    pub kb: KnowledgeBase,
    pub model: LocalModel,
    pub sink: File,
    /// The items of the split (and category) not yet in the output file.
    pub todo: Vec<LoadedItem>,
}

impl Run {
    /// Parse the shared flags, load the KB, the calibration items and the model, and open the
    /// output for appending.
    pub fn start(args: &[String]) -> Result<Run, Error> {
        let split = match arg(args, "--split").as_deref() {
            Some("dev") => Split::Dev,
            Some("test") => Split::Test,
            _ => return Err("--split dev|test".into()),
        };
        let framing = match arg(args, "--framing").as_deref() {
            Some("full") => CheckFraming::FullCard,
            Some("header") => CheckFraming::HeaderOnly,
            _ => return Err("--framing full|header".into()),
        };
        let out: PathBuf = arg(args, "--out").ok_or("--out FILE")?.into();
        let category: Option<Category> = match arg(args, "--category") {
            None => None,
            Some(c) => Some(
                serde_json::from_value(serde_json::Value::String(c.clone()))
                    .map_err(|_| format!("--category: unknown category {c:?}"))?,
            ),
        };
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let kb = KnowledgeBase::load(&root.join("data/kb"))?;
        let (items, diags) = load_calibration_dir(&root.join("data/calibration"))?;
        if !diags.is_empty() {
            return Err(format!("calibration corpus problems:\n{diags}").into());
        }
        let done: HashSet<String> = std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v.get("item_id")?.as_str().map(String::from))
            .collect();
        let (gguf, sha256) =
            cardinal_harness::models::local_gguf("qwen2.5-coder-1.5b", &cardinal_harness::Silent)?;
        let model = LocalModel::load(
            &gguf,
            cardinal_llm_local::LocalOptions {
                sha256: Some(sha256),
                context_size: 4096,
                ..Default::default()
            },
        )?;
        let sink = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out)?;
        let todo = items
            .into_iter()
            .filter(|li| li.item.split == split && !done.contains(&li.item.id))
            .filter(|li| category.is_none_or(|c| li.item.category == c))
            .filter(|li| li.item.cited.iter().any(|id| kb.get(id).is_some()))
            .collect();
        Ok(Run {
            framing,
            kb,
            model,
            sink,
            todo,
        })
    }

    /// Append one item's reading as a JSON line and flush it, so a run cut short keeps every
    /// item it finished (and resumes after them).
    pub fn write_row(&mut self, row: &serde_json::Value) -> Result<(), Error> {
        use std::io::Write;
        writeln!(self.sink, "{row}")?;
        self.sink.flush()?;
        Ok(())
    }

    /// The framing's name in the output.
    pub fn framing_name(&self) -> &'static str {
        if self.framing == CheckFraming::FullCard {
            "full_card"
        } else {
            "header_only"
        }
    }
}

/// The answer cut after each sentence, so each piece but the first starts with the whitespace
/// before its sentence (where the tokenizer splits anyway); the pieces join to `span`.
#[allow(dead_code)] // probe_blocks reads the answer whole
pub fn pieces(span: &str) -> Vec<String> {
    let mut ends: Vec<usize> = cardinal_kb::text::sentences(span)
        .iter()
        .map(|s| s.as_ptr() as usize - span.as_ptr() as usize + s.len())
        .filter(|&e| e > 0 && e <= span.len())
        .collect();
    ends.dedup();
    if ends.last() != Some(&span.len()) {
        ends.push(span.len());
    }
    let mut out = Vec::new();
    let mut from = 0;
    for e in ends {
        if e > from && span.is_char_boundary(e) {
            out.push(span[from..e].to_string());
            from = e;
        }
    }
    out
}
