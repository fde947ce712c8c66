//! A minimal stand-in for `trec_eval [-q] [-c] -m SPEC... QRELS RUN` on this crate, for
//! comparing outputs by hand until `cardinal trec-eval` exists:
//!
//! ```sh
//! cargo run -q -p cardinal-trec --example trec_eval -- -q -m ndcg_cut.10 qrels.txt run.txt
//! ```

use std::process::ExitCode;

use cardinal_trec::{evaluate, parse_measure_args, parse_qrels, parse_run};

fn main() -> ExitCode {
    let (mut per_query, mut complete) = (false, false);
    let (mut specs, mut files) = (Vec::new(), Vec::new());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-q" => per_query = true,
            "-c" => complete = true,
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
        Ok(evaluate(&qrels, &run, &measures, complete)?.render(per_query))
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
    eprintln!("usage: trec_eval [-q] [-c] -m MEASURE[.K,...]... QRELS RUN");
    ExitCode::from(2)
}
