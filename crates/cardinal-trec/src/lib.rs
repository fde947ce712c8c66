//! A re-implementation of the part of NIST's `trec_eval` (9.0.x) that Cardinal uses:
//! `trec_eval [-q] [-c] -m ndcg_cut.K -m recall.K -m success.K QRELS RUN`, with byte-identical
//! output.
//!
//! ```text
//! let qrels = parse_qrels("qrels.txt")?;
//! let run = parse_run("run.txt")?;
//! let measures = parse_measure_args(&["ndcg_cut.5,10", "recall.10", "success.1"])?;
//! print!("{}", evaluate(&qrels, &run, &measures, false)?.render(true));
//! ```
//!
//! trec_eval's conventions, as this crate implements them (checked against the trec_eval 9.0.4
//! binary, see `tests/fixtures/README.md`):
//!
//! - **Input.** Qrels lines are exactly `qid iter docid rel` (integer rel; a blank line or a
//!   fifth column is an error, as in trec_eval). Run lines are `qid iter docid rank score tag`
//!   with any further columns ignored and blank lines skipped; the rank column is ignored.
//!   Fields are separated by C `isspace` characters. A docid twice in one query's run or
//!   qrels is an error. Errors carry `file:line`.
//! - **Ranking.** Score descending, ties broken by docid descending (byte-wise `strcmp`).
//! - **Relevance.** rel >= 1 is relevant; nDCG's gain is the rel value itself; negative rels
//!   (unjudged) and documents missing from the qrels are non-relevant with no gain.
//! - **Queries.** Evaluated: in the run *and* with at least one qrels line. Ordered by qid,
//!   byte-wise. `all` averages over them, or with `complete` (`-c`) divides the same sum by the
//!   number of qrels queries. No evaluated query at all is an error (trec_eval exits 7).
//! - **Measures.** Printed in trec_eval's table order: `recall_*`, then `ndcg_cut_*`, then
//!   `success_*`, each by cut-off ascending, regardless of `-m` order; nothing else
//!   (no `num_q`, no `runid`) is printed. For each measure the first `-m name.params` wins.
//! - **Output.** `printf("%-22s\t%s\t%6.4f\n", measure, qid_or_all, value)`, per-query lines
//!   (`-q`) before the `all` lines.

mod error;
mod eval;
mod input;
mod measure;
mod write;

pub use error::{Result, TrecError};
pub use eval::{evaluate, Evaluation, QueryScores};
pub use input::{
    parse_qrels, parse_qrels_bytes, parse_run, parse_run_bytes, Qrels, QrelsQuery, RankedDoc, Run,
    RunQuery,
};
pub use measure::{parse_measure, parse_measure_args, Measure};
pub use write::{write_qrels, write_qrels_to, write_run, write_run_to};
