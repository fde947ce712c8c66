//! `cardinal models pull|list|verify`.

use anyhow::Result;
use cardinal_models::{pull::installed, registry::REGISTRY, PullOptions};

use crate::Outcome;

/// Models pulled by `cardinal models pull` without names: what the main job needs.
pub const DEFAULT_MODELS: [&str; 3] = ["e5-small", "qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"];

pub fn progress(line: &str) {
    eprintln!("{line}");
}

pub fn pull(names: &[String]) -> Result<Outcome> {
    let names: Vec<String> = if names.is_empty() {
        DEFAULT_MODELS.iter().map(|s| s.to_string()).collect()
    } else {
        names.to_vec()
    };
    let opts = PullOptions::from_env(&progress);
    // Resolve every name first so a typo fails before any download.
    let specs = names
        .iter()
        .map(|n| cardinal_models::spec(n))
        .collect::<Result<Vec<_>, _>>()?;
    for spec in specs {
        let inst = cardinal_models::pull(spec, &opts)?;
        println!("{}\t{}", spec.name, inst.dir.display());
    }
    Ok(Outcome::Pass)
}

pub fn list() -> Result<Outcome> {
    let root = cardinal_models::model_root();
    println!("model root: {}", root.display());
    for spec in REGISTRY {
        let status = match installed(spec, &root)? {
            Some(_) => "installed",
            None => "not installed",
        };
        let size: u64 = spec.sources.iter().map(|s| s.size).sum();
        println!(
            "  {:<20} {:<9} {:>7.1} MB  {:<14} {}  [{}]",
            spec.name,
            format!("{:?}", spec.kind).to_lowercase(),
            size as f64 / 1e6,
            status,
            spec.upstream,
            spec.licence
        );
    }
    Ok(Outcome::Pass)
}

pub fn verify(names: &[String]) -> Result<Outcome> {
    let root = cardinal_models::model_root();
    let mut failed = false;
    for spec in REGISTRY {
        if !names.is_empty() && !names.iter().any(|n| n == spec.name) {
            continue;
        }
        match installed(spec, &root)? {
            None if names.is_empty() => continue,
            None => {
                eprintln!("{}: not installed", spec.name);
                failed = true;
            }
            Some(inst) => match inst.verify() {
                Ok(()) => println!(
                    "{}: ok ({} file(s) match their sha256)",
                    spec.name,
                    inst.manifest.files.len()
                ),
                Err(e) => {
                    eprintln!("{}: {e}", spec.name);
                    failed = true;
                }
            },
        }
    }
    Ok(if failed {
        Outcome::InputError
    } else {
        Outcome::Pass
    })
}
