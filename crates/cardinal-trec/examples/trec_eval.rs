//! A minimal stand-in for `trec_eval [-q] [-c] [--trec-eval-9] -m SPEC... QRELS RUN` on this
//! crate, for comparing outputs by hand (and with `/usr/bin/time -v`):
//!
//! ```sh
//! cargo run -q -p cardinal-trec --example trec_eval -- -q -m ndcg_cut.10 qrels.txt run.txt
//! ```
//!
//! `--trec-eval-9` sets `EvalOptions::trec_eval_9` (trec_eval 9.0.x's handling of qrels
//! queries missing from the run; the default is trec_eval 10.0's).

use std::process::ExitCode;

use cardinal_trec::{evaluate_with, parse_measure_args, parse_qrels, parse_run, EvalOptions};

fn main() -> ExitCode {
    let (mut per_query, mut options) = (false, EvalOptions::default());
    let (mut specs, mut files) = (Vec::new(), Vec::new());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-q" => per_query = true,
            "-c" => options.complete = true,
            "--trec-eval-9" => options.trec_eval_9 = true,
            "-m" => match args.next() {
                Some(spec) => specs.push(spec),
                None => return usage(),
            },
            _ if a.starts_with("-m") => specs.push(a[2..].to_string()),
            _ if a.starts_with('-') => return usage(),
            _ => files.push(a),
        }
    }
    let [qrels, run] = files.as_slice() else {
        return usage();
    };
    let result = parse_measure_args(&specs).and_then(|measures| {
        let qrels = parse_qrels(qrels)?;
        let run = parse_run(run)?;
        Ok(evaluate_with(&qrels, &run, &measures, &options)?.render(per_query))
    });
    match result {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("trec_eval: {e}");
            ExitCode::from(2)
        }
    }
}

fn usage() -> ExitCode {
    eprintln!("usage: trec_eval [-q] [-c] [--trec-eval-9] -m MEASURE[.K,...]... QRELS RUN");
    ExitCode::from(2)
}
