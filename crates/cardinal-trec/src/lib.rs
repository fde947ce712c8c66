//! A re-implementation of the part of NIST's `trec_eval` that Cardinal uses:
//! `trec_eval [-q] [-c] -m ndcg_cut.K -m recall.K -m success.K QRELS RUN`, with byte-identical
//! output to trec_eval 10.0 by default, and to trec_eval 9.0.x with
//! [`EvalOptions::trec_eval_9`] (the CLI's `--trec-eval-9`).
//!
//! ```text
//! let qrels = parse_qrels("qrels.txt")?;
//! let run = parse_run("run.txt")?;
//! let measures = parse_measure_args(&["ndcg_cut.5,10", "recall.10", "success.1"])?;
//! print!("{}", evaluate(&qrels, &run, &measures, false)?.render(true));
//! // or, for trec_eval 9.0.x's behaviour:
//! let options = EvalOptions { complete: false, trec_eval_9: true };
//! print!("{}", evaluate_with(&qrels, &run, &measures, &options)?.render(true));
//! ```
//!
//! trec_eval's conventions, as this crate implements them (checked against trec_eval 10.0
//! built from source and the trec_eval 9.0.4 binary, see `tests/fixtures/README.md`):
//!
//! - **Input.** Qrels lines are exactly `qid iter docid rel` (integer rel; a blank line or a
//!   fifth column is an error, as in trec_eval). Run lines are `qid iter docid rank score tag`
//!   with any further columns ignored and blank lines skipped; the rank column is ignored.
//!   Fields are separated by C `isspace` characters. A docid twice in one query's run or
//!   qrels is an error (reported at the first line that repeats an earlier one). Errors carry
//!   `file:line`.
//! - **Ranking.** Score descending, ties broken by docid descending (byte-wise `strcmp`).
//! - **Relevance.** rel >= 1 is relevant; nDCG's gain is the rel value itself; negative rels
//!   (unjudged) and documents missing from the qrels are non-relevant with no gain.
//! - **Queries.** Ordered by qid, byte-wise; run queries without qrels are ignored. trec_eval
//!   10.0 (default) evaluates the qrels queries: one missing from the run is an error without
//!   `complete` (10.0 exits 4) and with it (`-c`) scores 0, gets `-q` lines and counts. 9.0.x
//!   evaluates the queries in both files and skips the rest (no query in common: trec_eval
//!   exits 7). `all` averages over the evaluated queries, or with `complete` divides the same
//!   sum by the number of qrels queries. See [`EvalOptions`].
//! - **Measures.** Printed in trec_eval's table order: `recall_*`, then `ndcg_cut_*`, then
//!   `success_*`, each by cut-off ascending, regardless of `-m` order; nothing else
//!   (no `num_q`, no `runid`) is printed. For each measure the first `-m name.params` wins.
//! - **Output.** `printf("%-22s\t%s\t%6.4f\n", measure, qid_or_all, value)`, per-query lines
//!   (`-q`) before the `all` lines.
//!
//! Speed: the parsers keep each file's bytes (memory-mapped) and refer to ids by offsets into
//! them; a run is parsed by one thread per core over ranges of lines, checked for duplicate
//! documents with a hash index per query, and each query is scored from the ranks of its
//! relevant documents only (no full sort). [`mod@bench`] times this against a `trec_eval` binary.

pub mod bench;
mod error;
mod eval;
mod input;
mod measure;
mod number;
#[cfg(test)]
mod props;
mod store;
mod write;

pub use error::{Result, TrecError};
pub use eval::{evaluate, evaluate_with, EvalOptions, Evaluation, QueryScores};
pub use input::{
    parse_qrels, parse_qrels_bytes, parse_run, parse_run_bytes, Qrels, QrelsQuery, RankedDoc, Run,
    RunQuery,
};
pub use measure::{parse_measure, parse_measure_args, Measure};
pub use write::{write_qrels, write_qrels_to, write_run, write_run_to};
