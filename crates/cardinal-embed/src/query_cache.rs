//! [`QueryCache`]: query vectors kept by text, in memory and optionally in a file, so a sweep
//! embeds its questions once, in one batch, and a re-run with nothing changed does not run the
//! model at all.
//!
//! The file is named after a digest of the embedder's [`Embedder::id`] (model, prefixes, limit,
//! engine), so vectors of another embedder are never read. It is append-only; each record is
//! `u32 text length | text (UTF-8) | u32 dimension | dimension × f32`, little-endian. A record
//! cut by a crash is dropped (and the file truncated to the last whole record) on open; a file
//! that does not parse is set aside as `*.corrupt` and the cache starts empty.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{EmbedError, Result};
use crate::Embedder;

/// An [`Embedder`] whose query vectors are cached; passages go straight to the inner embedder.
pub struct QueryCache {
    inner: Arc<dyn Embedder>,
    state: Mutex<State>,
}

struct State {
    vectors: HashMap<String, Vec<f32>>,
    file: Option<(PathBuf, File)>,
    hits: usize,
    misses: usize,
}

/// What the cache did so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueryCacheStats {
    /// Vectors held (loaded from the file plus embedded in this process).
    pub entries: usize,
    pub hits: usize,
    pub misses: usize,
}

fn io_error(path: &Path, e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Parse whole records from `bytes`; returns them and the length of the whole-record prefix,
/// or `None` when a record is malformed (not merely cut short).
/// Whole records of a cache file: (text, vector) pairs.
type Records = Vec<(String, Vec<f32>)>;

fn parse_records(bytes: &[u8], dim: usize) -> Option<(Records, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    let u32_at = |p: usize| -> Option<usize> {
        bytes
            .get(p..p + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    while let Some(len) = u32_at(pos) {
        let text_end = pos + 4 + len;
        let Some(text) = bytes.get(pos + 4..text_end) else {
            break;
        };
        let Some(d) = u32_at(text_end) else { break };
        if d != dim {
            return None;
        }
        let vec_start = text_end + 4;
        let Some(raw) = bytes.get(vec_start..vec_start + 4 * d) else {
            break;
        };
        let text = std::str::from_utf8(text).ok()?.to_string();
        let v = raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        out.push((text, v));
        pos = vec_start + 4 * d;
    }
    Some((out, pos))
}

fn encode_record(text: &str, v: &[f32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + text.len() + 4 * v.len());
    b.extend_from_slice(&(text.len() as u32).to_le_bytes());
    b.extend_from_slice(text.as_bytes());
    b.extend_from_slice(&(v.len() as u32).to_le_bytes());
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

impl QueryCache {
    /// In memory only.
    pub fn in_memory(inner: Arc<dyn Embedder>) -> QueryCache {
        QueryCache {
            inner,
            state: Mutex::new(State {
                vectors: HashMap::new(),
                file: None,
                hits: 0,
                misses: 0,
            }),
        }
    }

    /// Backed by a file in `dir` (created if missing), named after `file_key` — a digest of
    /// the inner embedder's id, made by the caller.
    pub fn open(inner: Arc<dyn Embedder>, dir: &Path, file_key: &str) -> Result<QueryCache> {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        let path = dir.join(format!("query-vectors-{file_key}.bin"));
        let dim = inner.dim();
        let mut vectors = HashMap::new();
        if path.exists() {
            let bytes = std::fs::read(&path).map_err(|e| io_error(&path, e))?;
            match parse_records(&bytes, dim) {
                Some((records, whole)) => {
                    vectors.extend(records);
                    if whole < bytes.len() {
                        let f = OpenOptions::new()
                            .write(true)
                            .open(&path)
                            .map_err(|e| io_error(&path, e))?;
                        f.set_len(whole as u64).map_err(|e| io_error(&path, e))?;
                    }
                }
                None => {
                    let aside = path.with_extension("bin.corrupt");
                    std::fs::rename(&path, &aside).map_err(|e| io_error(&path, e))?;
                }
            }
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io_error(&path, e))?;
        Ok(QueryCache {
            inner,
            state: Mutex::new(State {
                vectors,
                file: Some((path, file)),
                hits: 0,
                misses: 0,
            }),
        })
    }

    /// [`QueryCache::open`] with the file named after the first 16 hex digits of the sha256 of
    /// the inner embedder's [`Embedder::id`]: every user of a cache directory (a sweep, a test)
    /// names the file of one embedder the same way, so they share its vectors.
    pub fn open_in(inner: Arc<dyn Embedder>, dir: &Path) -> Result<QueryCache> {
        let digest = cardinal_digest::sha256_hex(inner.id());
        QueryCache::open(inner, dir, &digest[..16])
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a map that is still consistent (entries are
        // inserted whole), so a poisoned lock is taken over.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Embed every query not yet cached, in one batch. Returns how many were embedded.
    pub fn prefetch(&self, queries: &[&str]) -> Result<usize> {
        let missing: Vec<&str> = {
            let st = self.lock();
            let mut seen = std::collections::HashSet::new();
            queries
                .iter()
                .copied()
                .filter(|q| !st.vectors.contains_key(*q) && seen.insert(*q))
                .collect()
        };
        if missing.is_empty() {
            return Ok(0);
        }
        let vectors = self.inner.embed_queries(&missing)?;
        self.insert(&missing, vectors)?;
        Ok(missing.len())
    }

    fn insert(&self, texts: &[&str], vectors: Vec<Vec<f32>>) -> Result<()> {
        let mut st = self.lock();
        let mut bytes = Vec::new();
        for (t, v) in texts.iter().zip(vectors) {
            if st.file.is_some() {
                bytes.extend(encode_record(t, &v));
            }
            st.vectors.insert((*t).to_string(), v);
        }
        if let Some((path, f)) = st.file.as_mut() {
            f.write_all(&bytes).map_err(|e| io_error(path, e))?;
        }
        Ok(())
    }

    pub fn stats(&self) -> QueryCacheStats {
        let st = self.lock();
        QueryCacheStats {
            entries: st.vectors.len(),
            hits: st.hits,
            misses: st.misses,
        }
    }
}

impl Embedder for QueryCache {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut out: Vec<Option<Vec<f32>>> = Vec::with_capacity(texts.len());
        let mut missing = Vec::new();
        {
            let mut st = self.lock();
            for t in texts {
                match st.vectors.get(*t) {
                    Some(v) => {
                        out.push(Some(v.clone()));
                        st.hits += 1;
                    }
                    None => {
                        out.push(None);
                        missing.push(*t);
                        st.misses += 1;
                    }
                }
            }
        }
        if !missing.is_empty() {
            let vectors = self.inner.embed_queries(&missing)?;
            self.insert(&missing, vectors)?;
            let st = self.lock();
            for (slot, t) in out.iter_mut().zip(texts) {
                if slot.is_none() {
                    *slot = st.vectors.get(*t).cloned();
                }
            }
        }
        out.into_iter()
            .zip(texts)
            .map(|(v, t)| {
                v.ok_or_else(|| {
                    EmbedError::Tokenizer(format!("the embedder returned no vector for {t:?}"))
                })
            })
            .collect()
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.inner.embed_passages(texts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Vectors from the text's bytes; counts the queries it embeds.
    struct Counting(AtomicUsize);

    impl Embedder for Counting {
        fn id(&self) -> String {
            "counting".into()
        }
        fn dim(&self) -> usize {
            3
        }
        fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts
                .iter()
                .map(|t| vec![t.len() as f32, t.bytes().map(f32::from).sum(), 1.0])
                .collect())
        }
        fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            self.embed_queries(texts)
        }
    }

    fn tempdir(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("cardinal-query-cache-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_reopened_cache_answers_without_the_model() {
        let dir = tempdir("reopen");
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let qs = ["¿dosis doble?", "stop reminders", "¿dosis doble?"];
        let first = QueryCache::open(inner.clone(), &dir, "k").unwrap();
        assert_eq!(first.prefetch(&qs).unwrap(), 2, "duplicates embedded once");
        let want = first.embed_queries(&qs).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 2);
        drop(first);
        let again = QueryCache::open(inner.clone(), &dir, "k").unwrap();
        assert_eq!(again.embed_queries(&qs).unwrap(), want);
        assert_eq!(
            inner.0.load(Ordering::SeqCst),
            2,
            "no model call after reopening"
        );
        assert_eq!(again.stats().hits, 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Another embedder, same vectors: only its id differs.
    struct Renamed(Counting);

    impl Embedder for Renamed {
        fn id(&self) -> String {
            "renamed".into()
        }
        fn dim(&self) -> usize {
            self.0.dim()
        }
        fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            self.0.embed_queries(texts)
        }
        fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            self.0.embed_passages(texts)
        }
    }

    #[test]
    fn caches_opened_in_one_directory_share_one_embedders_vectors_only() {
        let dir = tempdir("open-in");
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let sweep = QueryCache::open_in(inner.clone(), &dir).unwrap();
        sweep.prefetch(&["fiebre", "febre"]).unwrap();
        drop(sweep);
        // A second user of the directory (a test after CI's sweep) asks the model nothing.
        let test = QueryCache::open_in(inner.clone(), &dir).unwrap();
        test.embed_queries(&["febre", "fiebre"]).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 2);
        assert_eq!(test.stats().hits, 2);
        // Another embedder's cache in the same directory starts empty.
        let other = Arc::new(Renamed(Counting(AtomicUsize::new(0))));
        let theirs = QueryCache::open_in(other.clone(), &dir).unwrap();
        assert_eq!(theirs.stats().entries, 0);
        theirs.embed_queries(&["fiebre"]).unwrap();
        assert_eq!(other.0 .0.load(Ordering::SeqCst), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_torn_record_is_dropped_and_the_file_stays_appendable() {
        let dir = tempdir("torn");
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let c = QueryCache::open(inner.clone(), &dir, "k").unwrap();
        c.prefetch(&["one", "two"]).unwrap();
        drop(c);
        let path = dir.join("query-vectors-k.bin");
        let len = std::fs::metadata(&path).unwrap().len();
        for cut in [len - 1, len - 7, len - 13] {
            let bytes = std::fs::read(&path).unwrap();
            std::fs::write(&path, &bytes[..cut as usize]).unwrap();
            let c = QueryCache::open(inner.clone(), &dir, "k").unwrap();
            assert_eq!(c.stats().entries, 1, "cut at {cut}");
            c.prefetch(&["two"]).unwrap();
            drop(c);
            let c = QueryCache::open(inner.clone(), &dir, "k").unwrap();
            assert_eq!(c.stats().entries, 2);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_of_another_dimension_is_set_aside() {
        let dir = tempdir("dim");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("query-vectors-k.bin");
        std::fs::write(&path, encode_record("x", &[1.0, 2.0])).unwrap();
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let c = QueryCache::open(inner, &dir, "k").unwrap();
        assert_eq!(c.stats().entries, 0);
        assert!(dir.join("query-vectors-k.bin.corrupt").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
