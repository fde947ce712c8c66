//! Profile target for the native engine: embeds a fixed set of texts of mixed length a few
//! times and prints tokens/s. `cargo run -p cardinal-embed --example native_profile [reps] [texts-file]`.

use std::time::Instant;

use cardinal_embed::{BertEmbedder, EmbedderOptions};
use cardinal_models::PullOptions;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let reps: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(3);
    println!(
        "matmul 2048x384x1536: {:.1} GFLOP/s on {} threads",
        cardinal_embed::native::matmul_gflops(2048, 384, 1536, 9),
        cardinal_embed::native::threads()
    );
    let progress = |l: &str| eprintln!("{l}");
    let inst = cardinal_models::ensure("e5-small", &PullOptions::from_env(&progress))?;
    let model = BertEmbedder::load(&inst.dir, EmbedderOptions::default())?;
    let sentence = "Keep unopened insulin in the refrigerator and never freeze it; \
                    ask the pharmacy before travelling with it.";
    // Texts: one per line of the file named by the second argument, else generated.
    let texts: Vec<String> = match std::env::args().nth(2) {
        Some(path) => std::fs::read_to_string(path)?
            .lines()
            .map(str::to_string)
            .collect(),
        None => (0..200)
            .map(|i| vec![sentence; 1 + i % 6].join(" "))
            .collect(),
    };
    let tokens: usize = texts
        .iter()
        .map(|t| model.token_ids(t).map(|v| v.len()))
        .sum::<Result<usize, _>>()?;
    for _ in 0..reps {
        let t = Instant::now();
        model.embed_raw(&texts)?;
        let s = t.elapsed().as_secs_f64();
        println!(
            "{tokens} tokens in {s:.2} s = {:.0} tokens/s",
            tokens as f64 / s
        );
    }
    Ok(())
}
