//! The run directory: an exclusive lock, the manifest, crash-safe records and the reports.
//!
//! ```text
//! <run-dir>/
//!   .lock           advisory lock held while a process works here (holds its pid)
//!   manifest.json   every number-changing setting (see `manifest`)
//!   records.jsonl   one record per finished item, appended and flushed one at a time
//!   report.json     the aggregate with the manifest and the run's status
//!   report.md       the same for people (and report.html when rendered)
//! ```
//!
//! **Records are crash-safe.** Each record is one `write` of its JSON line *and* its newline.
//! A crash can only leave a torn tail (a last line without its newline): on load, a torn tail
//! that parses is kept and completed with its newline; one that does not is cut off and its
//! item is run again. A damaged line in the middle, or two records of one item, is an error
//! naming the line (nothing is silently dropped).
//!
//! **One process at a time.** Opening takes an advisory lock on `.lock` (released by the OS
//! when the process ends, however it ends). A second process is refused with the holder's pid;
//! a lock file left by a process that died is noticed and said.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{HarnessError, Result};
use crate::observer::Observer;

/// An open, locked run directory.
pub struct RunDir {
    path: PathBuf,
    lock: File,
}

/// Records loaded from a run directory.
#[derive(Debug)]
pub struct Loaded<R> {
    pub records: Vec<R>,
    /// A torn last line was cut off (its item runs again).
    pub dropped_torn_tail: bool,
}

impl RunDir {
    /// Create (if needed) and lock the directory.
    pub fn open(path: &Path, obs: &dyn Observer) -> Result<RunDir> {
        fs::create_dir_all(path).map_err(HarnessError::io("creating the run directory", path))?;
        let lock_path = path.join(".lock");
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(HarnessError::io("opening the lock", &lock_path))?;
        let previous = fs::read_to_string(&lock_path).unwrap_or_default();
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                let holder = previous.trim();
                return Err(HarnessError::Locked {
                    run_dir: path.to_path_buf(),
                    holder: if holder.is_empty() {
                        String::new()
                    } else {
                        format!(" (pid {holder})")
                    },
                });
            }
            Err(fs::TryLockError::Error(e)) => {
                return Err(HarnessError::io("locking", &lock_path)(e));
            }
        }
        let pid = previous.trim();
        if !pid.is_empty() && pid != std::process::id().to_string() {
            obs.note(&format!(
                "note: {} was last used by pid {pid}, which ended without releasing it (crash or kill); its finished records are kept",
                path.display()
            ));
        }
        let mut lock = lock;
        lock.set_len(0)
            .and_then(|_| {
                use std::io::Seek;
                lock.seek(std::io::SeekFrom::Start(0))?;
                write!(lock, "{}", std::process::id())?;
                lock.flush()
            })
            .map_err(HarnessError::io("writing the lock", &lock_path))?;
        Ok(RunDir {
            path: path.to_path_buf(),
            lock,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn records_path(&self) -> PathBuf {
        self.path.join("records.jsonl")
    }

    pub fn manifest_path(&self) -> PathBuf {
        self.path.join("manifest.json")
    }

    /// Remove the records, the manifest and every report (for `--fresh`), before any work.
    pub fn clear(&self) -> Result<()> {
        for name in [
            "records.jsonl",
            "manifest.json",
            "report.json",
            "report.md",
            "report.html",
        ] {
            let p = self.path.join(name);
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(HarnessError::io("removing", p)(e)),
            }
        }
        Ok(())
    }

    /// Remove the reports only (a run that is about to change the records must not leave a
    /// report that no longer describes them).
    pub fn remove_reports(&self) -> Result<()> {
        for name in ["report.json", "report.md", "report.html"] {
            let p = self.path.join(name);
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(HarnessError::io("removing", p)(e)),
            }
        }
        Ok(())
    }

    /// Read a JSON file of the run directory, if present.
    pub fn read_json<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>> {
        let p = self.path.join(name);
        match fs::read_to_string(&p) {
            Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
                HarnessError::Input(format!(
                    "{}:{}: not a valid {name}: {e} (use --fresh to start over)",
                    p.display(),
                    e.line()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(HarnessError::io("reading", p)(e)),
        }
    }

    /// Write a file of the run directory atomically (temporary file, then rename).
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> Result<()> {
        write_atomic(&self.path.join(name), bytes)
    }

    /// Load the records; see the module documentation for torn tails.
    pub fn load_records<R: DeserializeOwned>(
        &self,
        id_of: impl Fn(&R) -> String,
    ) -> Result<Loaded<R>> {
        load_records(&self.records_path(), id_of)
    }

    /// Append one record as one write of its line and newline, then flush.
    pub fn append<R: Serialize>(&self, record: &R) -> Result<()> {
        let path = self.records_path();
        let mut line = serde_json::to_string(record)
            .map_err(|e| HarnessError::Input(format!("a record cannot be serialised: {e}")))?;
        line.push('\n');
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(HarnessError::io("opening", &path))?;
        f.write_all(line.as_bytes())
            .and_then(|_| f.flush())
            .map_err(HarnessError::io("writing a record to", &path))
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = self.lock.set_len(0);
        let _ = self.lock.unlock();
    }
}

/// Load records from `path` (absent file = none). See the module documentation.
pub fn load_records<R: DeserializeOwned>(
    path: &Path,
    id_of: impl Fn(&R) -> String,
) -> Result<Loaded<R>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Loaded {
                records: Vec::new(),
                dropped_torn_tail: false,
            })
        }
        Err(e) => return Err(HarnessError::io("reading", path)(e)),
    };
    let complete_len = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None => 0,
    };
    let (body, tail) = bytes.split_at(complete_len);
    let mut records = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let text = std::str::from_utf8(body).map_err(|e| {
        HarnessError::Input(format!(
            "{}: not UTF-8 at byte {} (use --fresh to start over)",
            path.display(),
            e.valid_up_to()
        ))
    })?;
    let mut line_no = 0usize;
    let mut push = |r: R, line_no: usize| -> Result<()> {
        let id = id_of(&r);
        if let Some(first) = seen.insert(id.clone(), line_no) {
            return Err(HarnessError::Input(format!(
                "{}:{line_no}: a second record of `{id}` (the first is on line {first}); \
                 the run directory was written by two processes at once — use --fresh",
                path.display()
            )));
        }
        records.push(r);
        Ok(())
    };
    for line in text.split_terminator('\n') {
        line_no += 1;
        if line.trim().is_empty() {
            continue;
        }
        let r: R = serde_json::from_str(line).map_err(|e| {
            HarnessError::Input(format!(
                "{}:{line_no}: not a record ({e}); the file is damaged — use --fresh to start over",
                path.display()
            ))
        })?;
        push(r, line_no)?;
    }
    let mut dropped_torn_tail = false;
    if !tail.is_empty() {
        line_no += 1;
        let parsed = std::str::from_utf8(tail)
            .ok()
            .and_then(|t| serde_json::from_str::<R>(t).ok());
        match parsed {
            Some(r) => {
                // The record was written, only its newline is missing: complete it.
                push(r, line_no)?;
                let mut f = OpenOptions::new()
                    .append(true)
                    .open(path)
                    .map_err(HarnessError::io("opening", path))?;
                f.write_all(b"\n")
                    .map_err(HarnessError::io("repairing", path))?;
            }
            None => {
                let f = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(HarnessError::io("opening", path))?;
                f.set_len(complete_len as u64)
                    .map_err(HarnessError::io("cutting the torn tail of", path))?;
                dropped_torn_tail = true;
            }
        }
    }
    Ok(Loaded {
        records,
        dropped_torn_tail,
    })
}

/// Write `bytes` to `path` through a temporary file in the same directory and a rename, so a
/// reader never sees half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!(
        "{}.tmp-{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
        std::process::id()
    ));
    fs::write(&tmp, bytes).map_err(HarnessError::io("writing", &tmp))?;
    fs::rename(&tmp, path).map_err(HarnessError::io("renaming into", path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observer::{Collect, Silent};
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct R {
        id: String,
        v: u32,
    }

    fn r(id: &str, v: u32) -> R {
        R { id: id.into(), v }
    }

    #[test]
    fn append_and_load_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let rd = RunDir::open(d.path(), &Silent).unwrap();
        rd.append(&r("a", 1)).unwrap();
        rd.append(&r("b", 2)).unwrap();
        let l = rd.load_records(|x: &R| x.id.clone()).unwrap();
        assert_eq!(l.records, vec![r("a", 1), r("b", 2)]);
        assert!(!l.dropped_torn_tail);
    }

    #[test]
    fn a_crash_between_record_and_newline_loses_nothing() {
        let d = tempfile::tempdir().unwrap();
        let rd = RunDir::open(d.path(), &Silent).unwrap();
        rd.append(&r("a", 1)).unwrap();
        // The crash point: the record was written, its newline was not.
        let mut f = OpenOptions::new()
            .append(true)
            .open(rd.records_path())
            .unwrap();
        write!(f, "{}", serde_json::to_string(&r("b", 2)).unwrap()).unwrap();
        drop(f);
        let l = rd.load_records(|x: &R| x.id.clone()).unwrap();
        assert_eq!(l.records, vec![r("a", 1), r("b", 2)]);
        // The next record starts on its own line.
        rd.append(&r("c", 3)).unwrap();
        let l = rd.load_records(|x: &R| x.id.clone()).unwrap();
        assert_eq!(l.records, vec![r("a", 1), r("b", 2), r("c", 3)]);
    }

    #[test]
    fn a_torn_tail_is_cut_and_only_its_item_is_lost() {
        let d = tempfile::tempdir().unwrap();
        let rd = RunDir::open(d.path(), &Silent).unwrap();
        rd.append(&r("a", 1)).unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(rd.records_path())
            .unwrap();
        write!(f, "{{\"id\":\"b\",\"v\"").unwrap();
        drop(f);
        let l = rd.load_records(|x: &R| x.id.clone()).unwrap();
        assert_eq!(l.records, vec![r("a", 1)]);
        assert!(l.dropped_torn_tail);
        rd.append(&r("b", 2)).unwrap();
        let l = rd.load_records(|x: &R| x.id.clone()).unwrap();
        assert_eq!(l.records, vec![r("a", 1), r("b", 2)]);
    }

    #[test]
    fn damaged_middle_lines_and_duplicates_are_errors_with_the_line() {
        let d = tempfile::tempdir().unwrap();
        let rd = RunDir::open(d.path(), &Silent).unwrap();
        fs::write(
            rd.records_path(),
            "{\"id\":\"a\",\"v\":1}\nxx\n{\"id\":\"b\",\"v\":1}\n",
        )
        .unwrap();
        let e = rd.load_records(|x: &R| x.id.clone()).unwrap_err();
        assert!(
            e.to_string().contains("records.jsonl:2: not a record"),
            "{e}"
        );
        fs::write(
            rd.records_path(),
            "{\"id\":\"a\",\"v\":1}\n{\"id\":\"a\",\"v\":1}\n",
        )
        .unwrap();
        let e = rd.load_records(|x: &R| x.id.clone()).unwrap_err();
        assert!(
            e.to_string()
                .contains("records.jsonl:2: a second record of `a`"),
            "{e}"
        );
    }

    #[test]
    fn a_second_opener_is_refused_while_the_first_holds_the_lock() {
        let d = tempfile::tempdir().unwrap();
        let first = RunDir::open(d.path(), &Silent).unwrap();
        // flock locks belong to the open file description: a second open in the same process
        // contends like another process would.
        let e = RunDir::open(d.path(), &Silent).err().unwrap();
        assert!(matches!(e, HarnessError::Locked { .. }), "{e}");
        assert!(
            e.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        drop(first);
        assert!(RunDir::open(d.path(), &Silent).is_ok());
    }

    #[test]
    fn a_lock_file_left_by_a_dead_process_is_noticed() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join(".lock"), "999999").unwrap();
        let obs = Collect::default();
        let _rd = RunDir::open(d.path(), &obs).unwrap();
        assert!(
            obs.lines()
                .iter()
                .any(|l| l.contains("pid 999999") && l.contains("ended without releasing")),
            "{:?}",
            obs.lines()
        );
    }
}
