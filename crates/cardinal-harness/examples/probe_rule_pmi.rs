//! Experiment (issue 14, docs/calibration.md "how much the rules make each sentence less
//! expected"): for every answer sentence, its mean log-probability per token as the 1.5B
//! judge model's own reply to the question under two system messages — no card (`none`) and
//! the cited cards' rules (`rules`) — plus probe-v1's reading of each sentence (block 14, the
//! probe's prompt), written as JSON lines for
//! `scripts/experiments/probe_rule_pmi.py`.
//!
//! ```text
//! cargo run -p cardinal-harness --example probe_rule_pmi -- \
//!     --split dev --framing full --out .cardinal/exp/rulepmi-dev-full.jsonl
//! ```
//!
//! The construct: a sentence that tells the patient to do what a rule forbids should become
//! *less* expected once the model is told the rule (`rules` − `none` < 0); a sentence the
//! rules ask for, more expected. With `--framing header` (the ADR-0029 control) no rule is
//! shown: only the probe's header-only reading is read (no likelihood pass). Cost: about half a
//! prompt pass for the reading and two short full passes (question and answer, with and
//! without the rules) per item.
//!
//! `--category rule_violation` reads only that category's items. Resumable: items already in
//! the output file are skipped. Not part of the product.
use cardinal_judge::checks::CheckFraming;
use cardinal_llm::YesNoModel;

mod common;

/// A reply piece without its citation markers (`[card.id]`): neither system message shows a
/// card id, so a marker is equally unexpected under both and only adds noise.
fn unmarked(piece: &str) -> String {
    let mut out = String::new();
    let mut rest = piece;
    while let Some(open) = rest.find('[') {
        match rest[open..].find(']') {
            Some(close) => {
                out.push_str(rest[..open].trim_end_matches(' '));
                rest = &rest[open + close + 1..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    if out.trim().is_empty() {
        piece.to_string()
    } else {
        out
    }
}

fn main() -> Result<(), common::Error> {
    let args: Vec<String> = std::env::args().collect();
    let mut run = common::Run::start(&args)?;
    let mut todo = std::mem::take(&mut run.todo);
    // A fixed pseudo-random order (a hash of the id): a run cut short has read a random sample
    // of the split, not one language.
    todo.sort_by_key(|li| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        li.item.id.hash(&mut h);
        h.finish()
    });
    let t0 = std::time::Instant::now();
    for (k, li) in todo.iter().enumerate() {
        let it = &li.item;
        let input = cardinal_harness::calibration::item_input(&run.kb, it);
        let t_item = std::time::Instant::now();
        let plan = cardinal_judge::probe::plan(&input, run.framing);
        let parts = common::pieces(&plan.span);
        let states =
            run.model
                .span_piece_states(&plan.messages, &parts, cardinal_judge::probe::LAYER)?;
        let t_reading = t_item.elapsed().as_secs_f64();
        let reply: Vec<String> = parts.iter().map(|p| unmarked(p)).collect();
        let rules: Vec<String> = input
            .cited
            .iter()
            .flat_map(|c| c.rules().iter().cloned())
            .collect();
        // The control's framing shows no rule: nothing to compare, no pass.
        let (none, with_rules) = if run.framing == CheckFraming::FullCard && !rules.is_empty() {
            // No card: checks-v2's support likelihood without facts; then the same assistant
            // told the cited cards' rules.
            let (_, without) = cardinal_judge::checks::support_messages(&input);
            let mut with = without.clone();
            if let Some(system) = with.first_mut() {
                system.content.push_str(" You must follow these rules:\n");
                for r in &rules {
                    system.content.push_str(&format!("- {}\n", r.trim()));
                }
            }
            (
                Some(run.model.reply_logprobs(&without, &reply)?),
                Some(run.model.reply_logprobs(&with, &reply)?),
            )
        } else {
            (None, None)
        };
        let row = serde_json::json!({
            "item_id": it.id,
            "framing": run.framing_name(),
            "rules": rules.len(),
            "pieces": parts.iter().enumerate().map(|(i, p)| serde_json::json!({
                "text": p,
                "tokens": states.get(i).map(|s| s.0),
                "mean": states.get(i).map(|s| &s.1),
                "lp_none": none.as_ref().and_then(|r| r.get(i)),
                "lp_rules": with_rules.as_ref().and_then(|r| r.get(i)),
            })).collect::<Vec<_>>(),
        });
        run.write_row(&row)?;
        eprintln!(
            "{}/{} {} ({} sentences, {} rules) reading {:.1} s, item {:.1} s, {:.0} s",
            k + 1,
            todo.len(),
            it.id,
            parts.len(),
            rules.len(),
            t_reading,
            t_item.elapsed().as_secs_f64(),
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::common::pieces;
    use super::unmarked;

    #[test]
    fn markers_are_dropped_and_the_pieces_join_to_the_answer() {
        let a = "Call 555-0177 now [x.en]. Keep the bottle [x.en] [y.en]. Then rest.";
        let p = pieces(a);
        assert_eq!(p.concat(), a);
        assert_eq!(unmarked(&p[0]), "Call 555-0177 now.");
        assert_eq!(unmarked(&p[1]), " Keep the bottle.");
        assert_eq!(unmarked(" [x.en]"), " [x.en]");
    }
}
