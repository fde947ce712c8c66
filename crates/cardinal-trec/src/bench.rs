//! Benchmark: this crate against an external `trec_eval` on a large generated qrels + run.
//!
//! For the CLI (`cardinal bench trec`) and the example `trec_bench`:
//!
//! ```text
//! pub fn cardinal_trec::bench::run(config: &BenchConfig) -> cardinal_trec::Result<BenchReport>
//! pub fn cardinal_trec::bench::BenchReport::render(&self) -> String
//! ```
//!
//! [`run`] generates the deterministic set into [`BenchConfig::dir`] (or reuses it when the
//! files there were generated with the same parameters; see [`generate`]), then times
//! [`BenchConfig::runs`] paired, interleaved runs: ours in this process (parse qrels, parse
//! run, evaluate, render, free) and, when a `trec_eval` binary is given or on `PATH`, the same
//! files with `trec_eval [-q] -m … QRELS RUN` as a child process; the order within each pair
//! alternates. It reports medians, peak RSS (ours: `VmHWM` of this process, reset before each
//! run through `/proc/self/clear_refs`; trec_eval's: the child's `ru_maxrss` from `wait4`),
//! and whether both outputs are byte-identical. Everything measured is Linux-specific where it
//! reads `/proc`; elsewhere the RSS columns are empty.
//!
//! The default set is 10,000 queries x 1,000 documents (10 M run lines, about 430 MB) with
//! 100 judgements per query, scored on 12 measures ([`DEFAULT_MEASURES`]) with `-q`.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Result, TrecError};
use crate::{evaluate, parse_measure_args, parse_qrels, parse_run};

/// The measures of the benchmark: 12 values (`ndcg_cut` x 5, `recall` x 4, `success` x 3).
pub const DEFAULT_MEASURES: [&str; 3] = [
    "ndcg_cut.1,5,10,20,100",
    "recall.5,10,100,1000",
    "success.1,5,10",
];

/// Which `trec_eval` to compare with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrecEvalBinary {
    /// `trec_eval` on `PATH`, if there is one.
    Auto,
    /// This binary.
    Path(PathBuf),
    /// Only time this crate.
    None,
}

/// What to generate and how to time it.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Where the qrels and run are generated (kept, and reused by later runs with the same
    /// parameters).
    pub dir: PathBuf,
    /// Queries in the qrels and in the run.
    pub queries: usize,
    /// Retrieved documents per query.
    pub docs_per_query: usize,
    /// Judged documents per query (about half of them retrieved).
    pub judged_per_query: usize,
    /// Paired runs (the medians are over these).
    pub runs: usize,
    /// The `trec_eval` to compare with.
    pub trec_eval: TrecEvalBinary,
    /// `-m` arguments.
    pub measures: Vec<String>,
    /// `-q`: print per-query lines (both sides).
    pub per_query: bool,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            dir: std::env::temp_dir().join("cardinal-trec-bench"),
            queries: 10_000,
            docs_per_query: 1_000,
            judged_per_query: 100,
            runs: 5,
            trec_eval: TrecEvalBinary::Auto,
            measures: DEFAULT_MEASURES.iter().map(|s| s.to_string()).collect(),
            per_query: true,
        }
    }
}

/// The generated files.
#[derive(Debug, Clone)]
pub struct BenchFiles {
    /// The qrels file.
    pub qrels: PathBuf,
    /// The run file.
    pub run: PathBuf,
    /// Lines of the run.
    pub run_lines: usize,
    /// Size of the run in bytes.
    pub run_bytes: u64,
    /// Whether they were generated now (false: reused).
    pub generated: bool,
}

/// Wall times of one of our runs, by phase.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    /// `parse_qrels`.
    pub qrels: Duration,
    /// `parse_run`.
    pub run: Duration,
    /// `evaluate`.
    pub evaluate: Duration,
    /// `render` (the text trec_eval would print).
    pub render: Duration,
    /// Freeing (unmapping) everything.
    pub drop: Duration,
}

impl Phases {
    /// The whole run.
    pub fn total(&self) -> Duration {
        self.qrels + self.run + self.evaluate + self.render + self.drop
    }
}

/// The external trec_eval's side of the report.
#[derive(Debug, Clone)]
pub struct ExternalReport {
    /// The binary.
    pub path: PathBuf,
    /// What `trec_eval -v` printed (e.g. `trec_eval version 10.0`).
    pub version: String,
    /// Wall time of each run (spawn to exit).
    pub times: Vec<Duration>,
    /// Largest peak RSS over the runs, bytes.
    pub peak_rss: Option<u64>,
    /// Whether its output was byte-identical to ours.
    pub identical: bool,
}

/// The result of [`run`].
#[derive(Debug, Clone)]
pub struct BenchReport {
    /// The files scored.
    pub files: BenchFiles,
    /// Queries and documents per query.
    pub queries: usize,
    /// Retrieved documents per query.
    pub docs_per_query: usize,
    /// `-m` arguments.
    pub measures: Vec<String>,
    /// Number of measure values per query.
    pub num_values: usize,
    /// `-q` was given.
    pub per_query: bool,
    /// Threads this crate used.
    pub threads: usize,
    /// Our runs.
    pub ours: Vec<Phases>,
    /// Our largest peak RSS over the runs, bytes.
    pub ours_peak_rss: Option<u64>,
    /// Whether [`BenchReport::ours_peak_rss`] was measured per run (`/proc/self/clear_refs`
    /// worked) rather than over the whole process.
    pub ours_rss_per_run: bool,
    /// trec_eval's runs, when it was found.
    pub trec_eval: Option<ExternalReport>,
}

/// The median (the upper one for an even count); zero for none.
pub fn median(times: &[Duration]) -> Duration {
    let mut t = times.to_vec();
    t.sort_unstable();
    t.get(t.len() / 2).copied().unwrap_or_default()
}

impl BenchReport {
    /// Median of our total times.
    pub fn ours_median(&self) -> Duration {
        median(&self.ours.iter().map(Phases::total).collect::<Vec<_>>())
    }

    /// Median of trec_eval's times.
    pub fn trec_eval_median(&self) -> Option<Duration> {
        self.trec_eval.as_ref().map(|t| median(&t.times))
    }

    /// trec_eval's median time over ours (how many times faster this crate is).
    pub fn speedup(&self) -> Option<f64> {
        let ours = self.ours_median().as_secs_f64();
        self.trec_eval_median()
            .filter(|_| ours > 0.0)
            .map(|t| t.as_secs_f64() / ours)
    }

    /// The median over the pairs of trec_eval's time over ours in the same pair (steadier than
    /// the ratio of medians on a machine shared with other work).
    pub fn paired_speedup(&self) -> Option<f64> {
        let theirs = &self.trec_eval.as_ref()?.times;
        let mut ratios: Vec<f64> = self
            .ours
            .iter()
            .zip(theirs)
            .map(|(o, t)| t.as_secs_f64() / o.total().as_secs_f64().max(1e-9))
            .collect();
        ratios.sort_by(f64::total_cmp);
        ratios.get(ratios.len() / 2).copied()
    }

    /// A plain-text table: times (median, min, max), peak RSS, ratios, and our phases.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mb =
            |b: Option<u64>| b.map_or("-".to_string(), |b| format!("{:.0} MB", b as f64 / 1e6));
        let secs = |d: Duration| format!("{:.3} s", d.as_secs_f64());
        let _ = writeln!(
            out,
            "trec-eval bench: {} queries x {} docs ({} run lines, {:.0} MB), {} measure values, {}{} paired interleaved runs{}",
            self.queries,
            self.docs_per_query,
            self.files.run_lines,
            self.files.run_bytes as f64 / 1e6,
            self.num_values,
            if self.per_query { "-q, " } else { "" },
            self.ours.len(),
            if self.files.generated { "" } else { " (files reused)" },
        );
        let _ = writeln!(out, "  -m {}", self.measures.join(" -m "));
        let _ = writeln!(
            out,
            "{:<28} {:>10} {:>10} {:>10} {:>10}",
            "", "median", "min", "max", "peak RSS"
        );
        let totals: Vec<Duration> = self.ours.iter().map(Phases::total).collect();
        let row = |out: &mut String, name: &str, times: &[Duration], rss: Option<u64>| {
            let _ = writeln!(
                out,
                "{:<28} {:>10} {:>10} {:>10} {:>10}",
                name,
                secs(median(times)),
                secs(times.iter().min().copied().unwrap_or_default()),
                secs(times.iter().max().copied().unwrap_or_default()),
                mb(rss),
            );
        };
        row(
            &mut out,
            &format!("cardinal-trec ({} threads)", self.threads),
            &totals,
            self.ours_peak_rss,
        );
        match &self.trec_eval {
            Some(t) => {
                row(&mut out, &t.version, &t.times, t.peak_rss);
                if let Some(s) = self.speedup() {
                    let _ = write!(out, "ratio: cardinal-trec is {s:.1}x faster");
                    if let Some(p) = self.paired_speedup() {
                        let _ = write!(out, " ({p:.1}x: median of the per-pair ratios)");
                    }
                    if let (Some(a), Some(b)) = (self.ours_peak_rss, t.peak_rss) {
                        let _ = write!(out, ", peak RSS {:.2}x trec_eval's", a as f64 / b as f64);
                    }
                    out.push('\n');
                }
                let _ = writeln!(
                    out,
                    "output: {} ({})",
                    if t.identical {
                        "byte-identical"
                    } else {
                        "DIFFERS"
                    },
                    t.path.display()
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "trec_eval: not found (give its path, or put it on PATH)"
                );
            }
        }
        let m =
            |f: fn(&Phases) -> Duration| secs(median(&self.ours.iter().map(f).collect::<Vec<_>>()));
        let _ = writeln!(
            out,
            "cardinal-trec phases (medians): parse qrels {}, parse run {}, evaluate {}, render {}, free {}",
            m(|p| p.qrels),
            m(|p| p.run),
            m(|p| p.evaluate),
            m(|p| p.render),
            m(|p| p.drop),
        );
        if self.ours_peak_rss.is_some() && !self.ours_rss_per_run {
            let _ = writeln!(
                out,
                "(our peak RSS is the whole process's: /proc/self/clear_refs was not writable)"
            );
        }
        out
    }
}

/// splitmix64: a tiny deterministic generator.
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
        self.next() % n.max(1)
    }
}

/// Size of the simulated collection (MS MARCO passage's); docids are numbers below it.
const COLLECTION: u64 = 8_841_823;

/// The docid of query `q`'s j-th candidate: distinct for distinct j below `COLLECTION` (the
/// step is a prime that does not divide it), shared across queries as in a real collection.
fn docid(q: usize, j: usize) -> u64 {
    (q as u64 * 7_919 + j as u64 * 104_729) % COLLECTION
}

const GENERATOR_VERSION: u32 = 1;

/// Writes `bench.qrels` and `bench.run` into `dir` (created if needed), unless files made with
/// the same parameters are there (a `bench.stamp` records them). Deterministic: the same
/// parameters give the same bytes. The run has `docs_per_query` lines per query in random
/// score order (scores with up to 3 decimals, so some tie); the qrels judge
/// `judged_per_query` documents per query (graded 0–3, about half of them retrieved).
pub fn generate(
    dir: &Path,
    queries: usize,
    docs_per_query: usize,
    judged_per_query: usize,
) -> Result<BenchFiles> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TrecError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let qrels = dir.join("bench.qrels");
    let run = dir.join("bench.run");
    let stamp_path = dir.join("bench.stamp");
    let docs_per_query = docs_per_query.clamp(1, COLLECTION as usize / 2);
    let judged = judged_per_query.clamp(1, docs_per_query * 2);
    let stamp = format!("v{GENERATOR_VERSION} {queries} {docs_per_query} {judged}\n");
    let run_lines = queries * docs_per_query;
    let reusable = std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp)
        && qrels.is_file()
        && run.is_file();
    if !reusable {
        let _ = std::fs::remove_file(&stamp_path);
        // Qrels: `judged` distinct candidates of 0..2*docs per query; those below `docs` are
        // retrieved.
        let file = File::create(&qrels).map_err(io(&qrels))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut rng = Rng(20_260_602);
        let mut picked = Vec::new();
        let mut seen = vec![false; docs_per_query * 2];
        for q in 0..queries {
            picked.clear();
            seen.iter_mut().for_each(|s| *s = false);
            while picked.len() < judged {
                let j = rng.below((docs_per_query * 2) as u64) as usize;
                if let Some(s) = seen.get_mut(j).filter(|s| !**s) {
                    *s = true;
                    picked.push(j);
                }
            }
            picked.sort_unstable();
            for &j in &picked {
                let rel = [0, 0, 0, 1, 1, 2, 3][rng.below(7) as usize];
                writeln!(out, "q{q} 0 {} {rel}", docid(q, j)).map_err(io(&qrels))?;
            }
        }
        out.flush().map_err(io(&qrels))?;
        // Run: ranks in file order, scores random (trec_eval ranks by score).
        let file = File::create(&run).map_err(io(&run))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        for q in 0..queries {
            let mut rng = Rng(q as u64);
            for j in 0..docs_per_query {
                let score = rng.below(100_000) as f64 / 1000.0;
                writeln!(
                    out,
                    "q{q} Q0 {} {} {score} cardinal-bench",
                    docid(q, j),
                    j + 1
                )
                .map_err(io(&run))?;
            }
        }
        out.flush().map_err(io(&run))?;
        std::fs::write(&stamp_path, &stamp).map_err(io(&stamp_path))?;
    }
    let run_bytes = std::fs::metadata(&run).map_err(io(&run))?.len();
    Ok(BenchFiles {
        qrels,
        run,
        run_lines,
        run_bytes,
        generated: !reusable,
    })
}

/// Finds `trec_eval` on `PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Our peak RSS since the last reset, bytes (`VmHWM` of `/proc/self/status`).
fn peak_rss_self() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets `VmHWM` to the current RSS (Linux >= 4.0).
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// One run of ours; returns its phases and output.
fn run_ours(files: &BenchFiles, measures: &[String], per_query: bool) -> Result<(Phases, String)> {
    let measures = parse_measure_args(measures)?;
    let t0 = Instant::now();
    let qrels = parse_qrels(&files.qrels)?;
    let t1 = Instant::now();
    let run = parse_run(&files.run)?;
    let t2 = Instant::now();
    let evaluation = evaluate(&qrels, &run, &measures, false)?;
    let t3 = Instant::now();
    let out = evaluation.render(per_query);
    let t4 = Instant::now();
    drop((qrels, run, evaluation));
    let t5 = Instant::now();
    Ok((
        Phases {
            qrels: t1 - t0,
            run: t2 - t1,
            evaluate: t3 - t2,
            render: t4 - t3,
            drop: t5 - t4,
        },
        out,
    ))
}

/// One run of trec_eval: wall time, stdout, peak RSS.
fn run_external(cmd: &mut Command, bin: &Path) -> Result<(Duration, Vec<u8>, Option<u64>)> {
    let io = |source| TrecError::Io {
        path: bin.to_path_buf(),
        source,
    };
    let t = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(io)?;
    let mut stdout = Vec::new();
    if let Some(mut pipe) = child.stdout.take() {
        pipe.read_to_end(&mut stdout).map_err(io)?;
    }
    let (ok, rss) = wait_with_rss(&mut child).map_err(io)?;
    let elapsed = t.elapsed();
    if !ok {
        return Err(io(std::io::Error::other(
            "trec_eval failed on the bench files",
        )));
    }
    Ok((elapsed, stdout, rss))
}

/// Waits for `child`; returns whether it exited 0 and its peak RSS in bytes.
#[cfg(target_os = "linux")]
fn wait_with_rss(child: &mut std::process::Child) -> std::io::Result<(bool, Option<u64>)> {
    let pid = libc::pid_t::try_from(child.id()).map_err(std::io::Error::other)?;
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is a plain C struct for which all-zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own unwaited child; `status` and `usage` are valid for writes.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    // ru_maxrss is in kilobytes on Linux.
    let rss = u64::try_from(usage.ru_maxrss).ok().map(|kb| kb * 1024);
    Ok((ok, rss))
}

#[cfg(not(target_os = "linux"))]
fn wait_with_rss(child: &mut std::process::Child) -> std::io::Result<(bool, Option<u64>)> {
    Ok((child.wait()?.success(), None))
}

/// Generates (or reuses) the set and times this crate and, when found, `trec_eval` on it:
/// see the module documentation.
pub fn run(config: &BenchConfig) -> Result<BenchReport> {
    let files = generate(
        &config.dir,
        config.queries,
        config.docs_per_query,
        config.judged_per_query,
    )?;
    let num_values = parse_measure_args(&config.measures)?.len();
    let bin = match &config.trec_eval {
        TrecEvalBinary::Auto => find_on_path("trec_eval"),
        TrecEvalBinary::Path(p) => Some(p.clone()),
        TrecEvalBinary::None => None,
    };
    let mut external = match &bin {
        Some(bin) => {
            let v = Command::new(bin)
                .arg("-v")
                .stdin(Stdio::null())
                .output()
                .map_err(|source| TrecError::Io {
                    path: bin.clone(),
                    source,
                })?;
            // trec_eval prints its version on stderr.
            let text = [v.stdout, v.stderr].concat();
            let version = String::from_utf8_lossy(&text)
                .lines()
                .find(|l| l.contains("version"))
                .unwrap_or_default()
                .trim()
                .to_string();
            Some(ExternalReport {
                path: bin.clone(),
                version: if version.is_empty() {
                    "trec_eval".to_string()
                } else {
                    version
                },
                times: Vec::new(),
                peak_rss: None,
                identical: true,
            })
        }
        None => None,
    };
    let mut ours = Vec::new();
    let mut our_output: Option<String> = None;
    let mut their_output: Option<Vec<u8>> = None;
    let mut ours_rss: Option<u64> = None;
    let mut per_run = true;
    let runs = config.runs.max(1);
    for i in 0..runs {
        for side in [i % 2, 1 - i % 2] {
            if side == 0 {
                let reset = reset_peak_rss();
                per_run &= reset;
                let (phases, out) = run_ours(&files, &config.measures, config.per_query)?;
                ours.push(phases);
                ours_rss = ours_rss.max(peak_rss_self());
                if our_output.is_none() {
                    our_output = Some(out);
                }
            } else if let (Some(ext), Some(bin)) = (external.as_mut(), bin.as_ref()) {
                let mut cmd = Command::new(bin);
                if config.per_query {
                    cmd.arg("-q");
                }
                for m in &config.measures {
                    cmd.arg("-m").arg(m);
                }
                cmd.arg(&files.qrels).arg(&files.run);
                let (time, stdout, rss) = run_external(&mut cmd, bin)?;
                ext.times.push(time);
                ext.peak_rss = ext.peak_rss.max(rss);
                if their_output.is_none() {
                    their_output = Some(stdout);
                }
            }
        }
    }
    if let Some(ext) = external.as_mut() {
        ext.identical = match (&our_output, &their_output) {
            (Some(a), Some(b)) => a.as_bytes() == b.as_slice(),
            _ => false,
        };
    }
    Ok(BenchReport {
        files,
        queries: config.queries,
        docs_per_query: config.docs_per_query,
        measures: config.measures.clone(),
        num_values,
        per_query: config.per_query,
        threads: crate::input::threads_for(usize::MAX),
        ours,
        ours_peak_rss: ours_rss,
        ours_rss_per_run: per_run,
        trec_eval: external,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_bench_runs_and_renders() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = BenchConfig {
            dir: dir.path().to_path_buf(),
            queries: 20,
            docs_per_query: 50,
            judged_per_query: 10,
            runs: 2,
            trec_eval: TrecEvalBinary::None,
            ..BenchConfig::default()
        };
        let report = run(&config).expect("bench runs");
        assert_eq!(report.ours.len(), 2);
        assert_eq!(report.num_values, 12);
        assert_eq!(report.files.run_lines, 1000);
        assert!(report.files.generated);
        let text = report.render();
        assert!(text.contains("cardinal-trec"), "{text}");
        assert!(text.contains("trec_eval: not found"), "{text}");
        // Same parameters: the files are reused, byte for byte.
        let before = std::fs::read(&report.files.run).expect("run");
        let again = run(&config).expect("bench runs");
        assert!(!again.files.generated);
        assert_eq!(std::fs::read(&again.files.run).expect("run"), before);
        // A fake trec_eval that prints our output: identical.
        #[cfg(unix)]
        {
            let out = dir.path().join("expected.txt");
            let (_, text) = run_ours(&report.files, &config.measures, true).expect("ours");
            std::fs::write(&out, text).expect("write");
            let fake = dir.path().join("trec_eval");
            std::fs::write(
                &fake,
                format!(
                    "#!/bin/sh\n[ \"$1\" = -v ] && {{ echo 'trec_eval version fake'; exit 0; }}\ncat '{}'\n",
                    out.display()
                ),
            )
            .expect("write");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            let config = BenchConfig {
                trec_eval: TrecEvalBinary::Path(fake),
                ..config
            };
            let report = run(&config).expect("bench runs");
            let ext = report.trec_eval.as_ref().expect("external");
            assert_eq!(ext.times.len(), 2);
            assert!(ext.identical);
            assert_eq!(ext.version, "trec_eval version fake");
            assert!(report.speedup().is_some());
            assert!(report.paired_speedup().is_some());
            assert!(report.render().contains("byte-identical"));
        }
    }

    #[test]
    fn docids_are_distinct_within_a_query() {
        let mut ids: Vec<u64> = (0..2000).map(|j| docid(17, j)).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 2000);
        assert_eq!(median(&[]), Duration::ZERO);
        assert_eq!(
            median(&[
                Duration::from_secs(3),
                Duration::from_secs(1),
                Duration::from_secs(2)
            ]),
            Duration::from_secs(2)
        );
    }
}
