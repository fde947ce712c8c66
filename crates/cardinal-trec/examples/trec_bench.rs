//! Times parse + evaluate on a generated 10,000-query x 1,000-document run.
//!
//! ```sh
//! cargo run --release -p cardinal-trec --example trec_bench [QUERIES] [DOCS_PER_QUERY]
//! ```
//!
//! With `TREC_EVAL=/path/to/trec_eval` set, it also runs the real trec_eval on the same files,
//! times it, and checks the two `-q` outputs are byte-identical.

use std::process::{Command, ExitCode};
use std::time::Instant;

use cardinal_trec::{
    evaluate, parse_measure_args, parse_qrels, parse_run, write_qrels, write_run, Result,
};

/// splitmix64: a tiny deterministic generator (no dependency for a benchmark).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const MEASURES: [&str; 3] = ["ndcg_cut.5,10,100", "recall.10,100,1000", "success.1,10"];

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("trec_bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let queries: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let docs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let dir = tempfile::tempdir().map_err(|source| cardinal_trec::TrecError::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let qrels_path = dir.path().join("bench.qrels");
    let run_path = dir.path().join("bench.run");

    // Qrels: 100 judgements per query (graded 0..=3), about half of them on retrieved docs.
    let t = Instant::now();
    let mut rng = Rng(20_260_602);
    let mut qrels_rows = Vec::with_capacity(queries * 100);
    for q in 0..queries {
        let mut judged = std::collections::HashSet::new();
        while judged.len() < 100 {
            judged.insert(rng.below((docs as u64) * 2));
        }
        let mut judged: Vec<u64> = judged.into_iter().collect();
        judged.sort_unstable();
        for j in judged {
            let rel = [0, 0, 0, 1, 1, 2, 3][rng.below(7) as usize];
            qrels_rows.push((format!("q{q}"), format!("doc{q}-{j}"), rel));
        }
    }
    write_qrels(&qrels_path, qrels_rows)?;
    // Run: `docs` documents per query, scores with two decimals (plenty of ties).
    let run_rows = (0..queries).flat_map(|q| {
        let mut rng = Rng(q as u64);
        (0..docs).map(move |j| {
            let score = rng.below(10_000) as f64 / 100.0;
            (
                format!("q{q}"),
                format!("doc{q}-{j}"),
                j + 1,
                score,
                "bench",
            )
        })
    });
    write_run(&run_path, run_rows)?;
    let size = std::fs::metadata(&run_path).map(|m| m.len()).unwrap_or(0);
    println!(
        "generated {queries} queries x {docs} docs ({:.0} MB run) in {:.2?}",
        size as f64 / 1e6,
        t.elapsed()
    );

    let measures = parse_measure_args(&MEASURES)?;
    let t0 = Instant::now();
    let qrels = parse_qrels(&qrels_path)?;
    let t1 = Instant::now();
    let run = parse_run(&run_path)?;
    let t2 = Instant::now();
    let evaluation = evaluate(&qrels, &run, &measures, false)?;
    let t3 = Instant::now();
    let out = evaluation.render(true);
    let t4 = Instant::now();
    println!("parse qrels   {:>8.2?}", t1 - t0);
    println!("parse run     {:>8.2?}", t2 - t1);
    println!("evaluate      {:>8.2?}", t3 - t2);
    println!("render -q     {:>8.2?}", t4 - t3);
    println!("total         {:>8.2?}", t4 - t0);
    for (m, v) in evaluation.measures().iter().zip(evaluation.averages()) {
        println!("  {m:<16} all {v:.4}");
    }

    if let Ok(bin) = std::env::var("TREC_EVAL") {
        let mut cmd = Command::new(&bin);
        cmd.arg("-q");
        for m in MEASURES {
            cmd.arg("-m").arg(m);
        }
        cmd.arg(&qrels_path).arg(&run_path);
        let t = Instant::now();
        let output = cmd
            .output()
            .map_err(|source| cardinal_trec::TrecError::Io {
                path: bin.clone().into(),
                source,
            })?;
        println!("real trec_eval -q: {:.2?}", t.elapsed());
        if output.stdout == out.as_bytes() {
            println!("trec_eval -q output: byte-identical ({} bytes)", out.len());
        } else {
            println!("trec_eval -q output: DIFFERS");
            return Err(cardinal_trec::TrecError::NoQueries);
        }
    }
    Ok(())
}
