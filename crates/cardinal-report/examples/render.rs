//! Renders a report: `cargo run -p cardinal-report --example render -- sweep RUN_DIR [CARDS_JSON]`
//! or `... -- calibration DIR [LABELS_DIR]`; writes DIR/report.html and prints its path.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("sweep") if args.len() >= 2 => {
            let cards: BTreeMap<String, String> = match args.get(2) {
                Some(p) => match std::fs::read_to_string(p)
                    .map_err(|e| e.to_string())
                    .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
                {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("{p}: {e}");
                        return ExitCode::from(2);
                    }
                },
                None => BTreeMap::new(),
            };
            cardinal_report::write_sweep(
                &args[1],
                &cardinal_report::SweepOptions {
                    card_texts: cards,
                    ..Default::default()
                },
            )
        }
        Some("calibration") if args.len() >= 2 => cardinal_report::write_calibration(
            &args[1],
            &cardinal_report::CalibrationOptions {
                labels_dir: args.get(2).map(PathBuf::from),
                title: None,
            },
        ),
        _ => {
            eprintln!(
                "usage: render sweep RUN_DIR [CARDS_JSON] | render calibration DIR [LABELS_DIR]"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(path) => {
            println!("{}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
