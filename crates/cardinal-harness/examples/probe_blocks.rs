//! Experiment (issue 14, docs/calibration.md "several blocks and a reviewer's question"):
//! probe-v1's prompt read at several blocks of the 1.5B judge in one pass, averaged over the
//! answer and over each of two fixed reviewer's questions appended after it, written as JSON
//! lines for `scripts/experiments/probe_blocks.py`.
//!
//! ```text
//! cargo run -p cardinal-harness --example probe_blocks -- \
//!     --split dev --framing full --out .cardinal/exp/blocks-dev-full.jsonl
//! ```
//!
//! The questions come after the answer, so the answer's reading is probe-v1's exactly (causal
//! attention).
//!
//! `--rules-after` appends, instead of the questions, a fixed line and then each rule of the
//! cited cards on its own line (`RULE k: text`), and reads blocks 14 and 18: each rule's
//! reading is then taken after the model has read the answer. The header-only framing shows
//! no rule anywhere, so it has no rule piece.
//!
//! `--category rule_violation` reads only that category's items (the header-only control).
//! Resumable: items already in the output file are skipped. Not part of the product.
use cardinal_judge::checks::CheckFraming;

mod common;

/// The blocks read (0-based, of 28), in increasing order.
const BLOCKS: [usize; 4] = [6, 10, 14, 18];

/// Blocks read with `--rules-after`.
const RULE_BLOCKS: [usize; 2] = [14, 18];

/// The line before the rules re-listed after the answer (`--rules-after`).
const RULES_AFTER: &str = "\n\nThe ANSWER, checked against each RULE:";

/// The reviewer's questions appended after the answer: support by the facts (groundedness),
/// then contradiction or a forbidden instruction (faithfulness). Fixed for every item.
const QUESTIONS: [&str; 2] = [
    "\n\nREVIEW 1: Is every statement of this ANSWER supported by the cards' FACTS?",
    "\nREVIEW 2: Does this ANSWER contradict a FACT, or tell the patient to do what a card's RULES forbid?",
];

fn main() -> Result<(), common::Error> {
    let args: Vec<String> = std::env::args().collect();
    let rules_after = args.iter().any(|a| a == "--rules-after");
    let blocks: &[usize] = if rules_after { &RULE_BLOCKS } else { &BLOCKS };
    let mut run = common::Run::start(&args)?;
    let (framing, todo) = (run.framing, std::mem::take(&mut run.todo));
    let t0 = std::time::Instant::now();
    for (k, li) in todo.iter().enumerate() {
        let it = &li.item;
        let input = cardinal_harness::calibration::item_input(&run.kb, it);
        let plan = cardinal_judge::probe::plan(&input, framing);
        let mut pieces = vec![plan.span.clone()];
        if rules_after {
            pieces.push(RULES_AFTER.to_string());
            if framing == CheckFraming::FullCard {
                let rules = input.cited.iter().flat_map(|c| c.rules().iter());
                for (k, r) in rules.enumerate() {
                    pieces.push(format!("\nRULE {}: {}", k + 1, r.trim()));
                }
            }
        } else {
            pieces.extend(QUESTIONS.iter().map(|q| q.to_string()));
        }
        let mut messages = plan.messages.clone();
        let Some(last) = messages.last_mut() else {
            return Err("the probe's plan has no message".into());
        };
        last.content.push_str(&pieces[1..].concat());
        let (counts, by_block) = run
            .model
            .span_piece_layer_states(&messages, &pieces, blocks)?;
        let row = serde_json::json!({
            "item_id": it.id,
            "framing": run.framing_name(),
            "tokens": counts,
            "blocks": blocks,
            "rules_after": rules_after,
            // by_block[b][piece]: the answer, then question 1 and 2, or the line before the
            // rules and one piece per rule (--rules-after).
            "means": by_block,
        });
        run.write_row(&row)?;
        eprintln!(
            "{}/{} {} {:.0} s",
            k + 1,
            todo.len(),
            it.id,
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
