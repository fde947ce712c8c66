//! Experiment (issue 14, docs/calibration.md "probe-v1 read sentence by sentence"): probe-v1's
//! reading (block 14 of the 1.5B judge) averaged over each sentence of the answer instead of
//! the whole answer, written as JSON lines for `scripts/experiments/probe_sentences.py`.
//!
//! ```text
//! cargo run -p cardinal-harness --example probe_sentences -- \
//!     --split dev --framing full --out .cardinal/exp/sentences-dev-full.jsonl
//! ```
//!
//! `--category rule_violation` reads only that category's items (the header-only control).
//!
//! Resumable: items already in the output file are skipped. Not part of the product.
mod common;

fn main() -> Result<(), common::Error> {
    let args: Vec<String> = std::env::args().collect();
    let mut run = common::Run::start(&args)?;
    let todo = std::mem::take(&mut run.todo);
    let t0 = std::time::Instant::now();
    for (k, li) in todo.iter().enumerate() {
        let it = &li.item;
        let input = cardinal_harness::calibration::item_input(&run.kb, it);
        let plan = cardinal_judge::probe::plan(&input, run.framing);
        let parts = common::pieces(&plan.span);
        let states =
            run.model
                .span_piece_states(&plan.messages, &parts, cardinal_judge::probe::LAYER)?;
        let row = serde_json::json!({
            "item_id": it.id,
            "framing": run.framing_name(),
            "pieces": parts.iter().zip(&states).map(|(p, (n, mean))| serde_json::json!({
                "text": p, "tokens": n, "mean": mean,
            })).collect::<Vec<_>>(),
        });
        run.write_row(&row)?;
        eprintln!(
            "{}/{} {} ({} sentences) {:.0} s",
            k + 1,
            todo.len(),
            it.id,
            parts.len(),
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::common::pieces;

    #[test]
    fn pieces_join_to_the_answer_and_start_with_the_space() {
        let a = "Call 555-0177 now [x.en]. Keep the bottle. Then rest.";
        let p = pieces(a);
        assert_eq!(p.concat(), a);
        assert_eq!(p.len(), 3);
        assert!(p[1].starts_with(' '));
    }
}
