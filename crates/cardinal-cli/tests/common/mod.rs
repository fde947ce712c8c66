//! Helpers shared by the CLI integration tests. Each test binary uses a subset of them.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

/// The bundled data directory (`data/` at the repository root).
pub fn bundled_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data")
}

/// Exit status, stdout and stderr of a finished command, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Copy the directory tree `from` to `to` (created when missing).
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Put a ready embedded store of the bundled KB (real embedder) at `dest`, so a test does not
/// pay for ingesting the KB again. The store is built once per build of the binary and KB
/// contents (by `cardinal ingest`, under a file lock so parallel tests build it once) in
/// `CARGO_TARGET_TMPDIR`, then copied. A test whose KB differs still works: its first command
/// re-embeds only the cards that changed.
pub fn prebuilt_store(dest: &Path) {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_cardinal"));
    let meta = fs::metadata(&bin).unwrap();
    let mut key = format!(
        "{}|{:?}",
        meta.len(),
        meta.modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
    );
    let mut files = Vec::new();
    collect_files(&bundled_data().join("kb"), &mut files);
    files.sort();
    for f in &files {
        key.push_str(&f.display().to_string());
        key.push_str(&format!("{:x}", fs::read(f).unwrap().len()));
        key.push_str(&cardinal_digest::sha256_hex(fs::read(f).unwrap()));
    }
    let digest = cardinal_digest::sha256_hex(key);
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cardinal-test-stores");
    fs::create_dir_all(&root).unwrap();
    let ready = root.join(&digest[..16]);
    if !ready.join("store.json").is_file() {
        let lock = fs::File::create(root.join("build.lock")).unwrap();
        lock.lock().unwrap();
        if !ready.join("store.json").is_file() {
            let building = root.join(format!("{}.building", &digest[..16]));
            let _ = fs::remove_dir_all(&building);
            let o = std::process::Command::new(&bin)
                .arg("--data")
                .arg(bundled_data())
                .arg("--store-path")
                .arg(&building)
                .arg("ingest")
                .output()
                .unwrap();
            assert!(o.status.success(), "building the test store: {}", text(&o));
            fs::rename(&building, &ready).unwrap();
        }
        lock.unlock().unwrap();
    }
    copy_dir(&ready, dest);
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            collect_files(&entry.path(), out);
        } else {
            out.push(entry.path());
        }
    }
}
