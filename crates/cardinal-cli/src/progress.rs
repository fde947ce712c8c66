//! A small progress line on stderr: redrawn in place on a terminal, a line per 10 % otherwise.

use std::io::{IsTerminal, Write};
use std::time::Instant;

pub struct Progress {
    label: String,
    start: Instant,
    tty: bool,
    last_decile: usize,
}

impl Progress {
    pub fn new(label: impl Into<String>) -> Self {
        Progress {
            label: label.into(),
            start: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            last_decile: 0,
        }
    }

    /// Report `done` of `total`, with rate and ETA.
    pub fn update(&mut self, done: usize, total: usize) {
        if total == 0 {
            return;
        }
        let secs = self.start.elapsed().as_secs_f64();
        let rate = if secs > 0.0 { done as f64 / secs } else { 0.0 };
        let eta = if rate > 0.0 {
            (total - done.min(total)) as f64 / rate
        } else {
            0.0
        };
        let line = format!(
            "{}: {done}/{total} ({:.0}%) {rate:.1}/s, elapsed {}, ETA {}",
            self.label,
            100.0 * done as f64 / total as f64,
            fmt_secs(secs),
            fmt_secs(eta)
        );
        let decile = done * 10 / total;
        let mut err = std::io::stderr();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            if done >= total {
                let _ = writeln!(err);
            }
        } else if decile > self.last_decile || done >= total {
            let _ = writeln!(err, "{line}");
        }
        self.last_decile = decile;
        let _ = err.flush();
    }
}

pub fn fmt_secs(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// The run library's observer on stderr: notes as lines, one progress line per phase.
pub struct CliObserver {
    bars: std::sync::Mutex<std::collections::BTreeMap<String, Progress>>,
}

impl CliObserver {
    pub fn new() -> Self {
        CliObserver {
            bars: std::sync::Mutex::new(std::collections::BTreeMap::new()),
        }
    }
}

impl cardinal_harness::Observer for CliObserver {
    fn note(&self, line: &str) {
        eprintln!("{line}");
    }

    fn progress(&self, phase: &str, done: usize, total: usize) {
        if let Ok(mut bars) = self.bars.lock() {
            bars.entry(phase.to_string())
                .or_insert_with(|| Progress::new(phase))
                .update(done, total);
        }
    }
}
