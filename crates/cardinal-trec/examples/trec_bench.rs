//! Times this crate against `trec_eval` on a generated 10,000-query x 1,000-document run
//! (12 measure values, `-q`), paired and interleaved, and prints the table of
//! [`cardinal_trec::bench::BenchReport::render`].
//!
//! ```sh
//! cargo run --release -p cardinal-trec --example trec_bench [QUERIES] [DOCS_PER_QUERY] [RUNS]
//! ```
//!
//! `TREC_EVAL=/path/to/trec_eval` picks the binary to compare with (default: `trec_eval` on
//! `PATH`; `TREC_EVAL=none` times this crate only). `TREC_BENCH_DIR` sets where the files are
//! generated (default: `$TMPDIR/cardinal-trec-bench`, reused by later runs).

use std::path::PathBuf;
use std::process::ExitCode;

use cardinal_trec::bench::{self, BenchConfig, TrecEvalBinary};

fn main() -> ExitCode {
    let mut config = BenchConfig::default();
    let mut args = std::env::args().skip(1);
    let mut next = |default: usize| args.next().and_then(|a| a.parse().ok()).unwrap_or(default);
    config.queries = next(config.queries);
    config.docs_per_query = next(config.docs_per_query);
    config.runs = next(config.runs);
    if let Ok(dir) = std::env::var("TREC_BENCH_DIR") {
        config.dir = PathBuf::from(dir);
    }
    config.trec_eval = match std::env::var("TREC_EVAL") {
        Ok(v) if v == "none" => TrecEvalBinary::None,
        Ok(v) => TrecEvalBinary::Path(PathBuf::from(v)),
        Err(_) => TrecEvalBinary::Auto,
    };
    match bench::run(&config) {
        Ok(report) => {
            print!("{}", report.render());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("trec_bench: {e}");
            ExitCode::from(2)
        }
    }
}
