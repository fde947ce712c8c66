//! The embedded default store: a directory with `store.json` (metadata and chunk list) and
//! `vectors.f32` (row-major little-endian f32), searched by exact cosine. Exact search is right
//! at this KB's size (hundreds of chunks); each write replaces both files atomically.
//!
//! **Integrity.** `store.json` records a sha256 over the rows' metadata and the vector bytes.
//! Opening verifies the file sizes, the checksum, that every value is finite and that every
//! row is a unit vector, and refuses a damaged store with [`RetrievalError::Corrupt`] (rows
//! permuted, zeroed or NaN vectors, a truncated file). [`EmbeddedStore::open_or_reset`] is the
//! repair path `cardinal ingest` takes: it starts an empty store in place of a damaged one.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use cardinal_kb::Lang;
use serde::{Deserialize, Serialize};

use super::{DenseHit, StoredChunk, VectorStore};
use crate::error::{Result, RetrievalError};
use crate::IndexedChunk;

/// Version 2 added the checksum; a version-1 store is rebuilt by `cardinal ingest`.
const FORMAT_VERSION: u32 = 2;

/// How far from 1 a stored row's norm may be (rows are unit-normalised when written).
const NORM_TOLERANCE: f32 = 1e-3;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Meta {
    version: u32,
    embedder_id: Option<String>,
    dim: usize,
    rows: Vec<Row>,
    /// sha256 of the rows' metadata and the vector bytes (see [`checksum`]).
    #[serde(default)]
    checksum: String,
}

/// sha256 over dim, embedder id, every row's fields and the little-endian vector bytes.
fn checksum(meta: &Meta, vector_bytes: &[u8]) -> String {
    let mut h = cardinal_digest::Digest::new()
        .part(meta.dim.to_le_bytes())
        .part(meta.embedder_id.as_deref().unwrap_or(""));
    for r in &meta.rows {
        h.push(&r.chunk_id);
        h.push(&r.card_id);
        h.push(r.lang.tag());
        h.push(&r.topic);
        h.push(&r.card_hash);
        h.push(&r.text);
    }
    h.push(vector_bytes);
    h.hex()
}

fn vector_bytes(vectors: &[f32]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(vectors.len() * 4);
    for v in vectors {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    bytes
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Row {
    chunk_id: String,
    card_id: String,
    lang: Lang,
    topic: String,
    card_hash: String,
    text: String,
}

/// Persistent, exact-cosine vector store in a local directory.
pub struct EmbeddedStore {
    dir: PathBuf,
    meta: Meta,
    /// Unit-normalised vectors, `rows.len() * dim`.
    vectors: Vec<f32>,
}

impl EmbeddedStore {
    /// Open (or create empty) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Self> {
        let meta_path = dir.join("store.json");
        if !meta_path.exists() {
            return Ok(EmbeddedStore {
                dir: dir.to_path_buf(),
                meta: Meta {
                    version: FORMAT_VERSION,
                    embedder_id: None,
                    dim: 0,
                    rows: Vec::new(),
                    checksum: String::new(),
                },
                vectors: Vec::new(),
            });
        }
        let corrupt = |message: String| RetrievalError::Corrupt {
            path: dir.to_path_buf(),
            message,
        };
        let text = fs::read_to_string(&meta_path).map_err(|source| RetrievalError::Io {
            path: meta_path.clone(),
            source,
        })?;
        let meta: Meta =
            serde_json::from_str(&text).map_err(|e| corrupt(format!("store.json: {e}")))?;
        if meta.version != FORMAT_VERSION {
            return Err(corrupt(format!(
                "format version {} (this build reads {FORMAT_VERSION}); `cardinal ingest` rebuilds it",
                meta.version
            )));
        }
        let vec_path = dir.join("vectors.f32");
        let bytes = fs::read(&vec_path).map_err(|source| RetrievalError::Io {
            path: vec_path.clone(),
            source,
        })?;
        if bytes.len() != meta.rows.len() * meta.dim * 4 {
            return Err(corrupt(format!(
                "vectors.f32 has {} bytes, expected {} rows × {} dims × 4",
                bytes.len(),
                meta.rows.len(),
                meta.dim
            )));
        }
        if checksum(&meta, &bytes) != meta.checksum {
            return Err(corrupt(
                "the checksum of store.json and vectors.f32 does not match what was written \
                 (rows reordered, edited or from another write); `cardinal ingest` rebuilds it"
                    .into(),
            ));
        }
        let vectors: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if meta.dim > 0 {
            for (i, row) in vectors.chunks_exact(meta.dim).enumerate() {
                let chunk = &meta.rows[i].chunk_id;
                if row.iter().any(|x| !x.is_finite()) {
                    return Err(corrupt(format!(
                        "row {i} ({chunk}) has a non-finite value; `cardinal ingest` rebuilds it"
                    )));
                }
                let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                if (norm - 1.0).abs() > NORM_TOLERANCE {
                    return Err(corrupt(format!(
                        "row {i} ({chunk}) has norm {norm} (stored rows are unit vectors); `cardinal ingest` rebuilds it"
                    )));
                }
            }
        }
        Ok(EmbeddedStore {
            dir: dir.to_path_buf(),
            meta,
            vectors,
        })
    }

    /// Open the store in `dir`; when it is damaged ([`RetrievalError::Corrupt`]), start an
    /// empty one in its place (written on the next change) and say why. I/O errors stay errors.
    pub fn open_or_reset(dir: &Path) -> Result<(Self, Option<String>)> {
        match Self::open(dir) {
            Ok(s) => Ok((s, None)),
            Err(RetrievalError::Corrupt { message, .. }) => {
                let mut fresh = EmbeddedStore {
                    dir: dir.to_path_buf(),
                    meta: Meta {
                        version: FORMAT_VERSION,
                        embedder_id: None,
                        dim: 0,
                        rows: Vec::new(),
                        checksum: String::new(),
                    },
                    vectors: Vec::new(),
                };
                fresh.clear()?;
                Ok((fresh, Some(message)))
            }
            Err(e) => Err(e),
        }
    }

    fn save(&self) -> Result<()> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| RetrievalError::Io { path, source }
        };
        fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let vec_tmp = self.dir.join("vectors.f32.tmp");
        let meta_tmp = self.dir.join("store.json.tmp");
        let bytes = vector_bytes(&self.vectors);
        let mut meta = self.meta.clone();
        meta.version = FORMAT_VERSION;
        meta.checksum = checksum(&meta, &bytes);
        fs::write(&vec_tmp, bytes).map_err(io(&vec_tmp))?;
        let json = serde_json::to_vec(&meta)
            .map_err(|e| RetrievalError::Internal(format!("serialising store metadata: {e}")))?;
        fs::write(&meta_tmp, json).map_err(io(&meta_tmp))?;
        let vec_path = self.dir.join("vectors.f32");
        let meta_path = self.dir.join("store.json");
        fs::rename(&vec_tmp, &vec_path).map_err(io(&vec_path))?;
        fs::rename(&meta_tmp, &meta_path).map_err(io(&meta_path))?;
        Ok(())
    }

    /// Stored chunk texts by chunk id (for re-ranking).
    pub fn texts(&self) -> BTreeMap<String, String> {
        self.meta
            .rows
            .iter()
            .map(|r| (r.chunk_id.clone(), r.text.clone()))
            .collect()
    }
}

fn normalise(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n == 0.0 {
        v.to_vec()
    } else {
        v.iter().map(|x| x / n).collect()
    }
}

impl VectorStore for EmbeddedStore {
    fn describe(&self) -> String {
        format!("embedded store at {}", self.dir.display())
    }

    fn embedder_id(&self) -> Result<Option<String>> {
        Ok(self.meta.embedder_id.clone())
    }

    fn card_hashes(&self) -> Result<BTreeMap<String, String>> {
        Ok(self
            .meta
            .rows
            .iter()
            .map(|r| (r.card_id.clone(), r.card_hash.clone()))
            .collect())
    }

    fn apply(&mut self, embedder_id: &str, remove: &[String], add: Vec<StoredChunk>) -> Result<()> {
        let dim = add.first().map(|s| s.vector.len()).unwrap_or(self.meta.dim);
        if let Some(bad) = add.iter().find(|s| s.vector.len() != dim) {
            return Err(RetrievalError::Store(format!(
                "chunk {} has {} dims, expected {dim}",
                bad.chunk.chunk_id,
                bad.vector.len()
            )));
        }
        if !self.meta.rows.is_empty() && dim != self.meta.dim {
            return Err(RetrievalError::Store(format!(
                "store holds {}-dim vectors; cannot add {dim}-dim ones (clear it first)",
                self.meta.dim
            )));
        }
        let old_dim = self.meta.dim;
        let mut rows = Vec::with_capacity(self.meta.rows.len() + add.len());
        let mut vectors = Vec::with_capacity(self.vectors.len() + add.len() * dim);
        for (i, r) in self.meta.rows.iter().enumerate() {
            if remove.contains(&r.card_id) {
                continue;
            }
            rows.push(r.clone());
            vectors.extend_from_slice(&self.vectors[i * old_dim..(i + 1) * old_dim]);
        }
        for s in add {
            vectors.extend(normalise(&s.vector));
            let IndexedChunk {
                chunk_id,
                card_id,
                lang,
                topic,
                text,
            } = s.chunk;
            rows.push(Row {
                chunk_id,
                card_id,
                lang,
                topic,
                card_hash: s.card_hash,
                text,
            });
        }
        self.meta.rows = rows;
        self.meta.dim = dim;
        self.meta.embedder_id = Some(embedder_id.to_string());
        self.vectors = vectors;
        self.save()
    }

    fn clear(&mut self) -> Result<()> {
        self.meta.rows.clear();
        self.meta.embedder_id = None;
        self.vectors.clear();
        self.save()
    }

    fn query(&self, vector: &[f32], lang: Lang, n: usize) -> Result<Vec<DenseHit>> {
        let dim = self.meta.dim;
        if self.meta.rows.is_empty() {
            return Ok(Vec::new());
        }
        if vector.len() != dim {
            return Err(RetrievalError::Store(format!(
                "query has {} dims, store has {dim}",
                vector.len()
            )));
        }
        let q = normalise(vector);
        let mut scored: Vec<(f32, usize)> = self
            .meta
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.lang == lang)
            .map(|(i, _)| {
                let row = &self.vectors[i * dim..(i + 1) * dim];
                (row.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>(), i)
            })
            .collect();
        // Similarity descending, then chunk id ascending for a deterministic order on ties.
        scored.sort_by(|a, b| {
            b.0.total_cmp(&a.0).then_with(|| {
                self.meta.rows[a.1]
                    .chunk_id
                    .cmp(&self.meta.rows[b.1].chunk_id)
            })
        });
        Ok(scored
            .into_iter()
            .take(n)
            .map(|(s, i)| DenseHit {
                chunk_id: self.meta.rows[i].chunk_id.clone(),
                card_id: self.meta.rows[i].card_id.clone(),
                similarity: s,
            })
            .collect())
    }

    fn len(&self) -> Result<usize> {
        Ok(self.meta.rows.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sc(card: &str, n: usize, lang: Lang, v: Vec<f32>) -> StoredChunk {
        StoredChunk {
            chunk: IndexedChunk {
                chunk_id: format!("{card}#{n}"),
                card_id: card.into(),
                lang,
                topic: "t".into(),
                text: format!("text of {card}"),
            },
            card_hash: format!("h-{card}"),
            vector: v,
        }
    }

    #[test]
    fn persists_queries_and_replaces_cards() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        let mut s = EmbeddedStore::open(&dir).unwrap();
        assert!(s.is_empty().unwrap());
        s.apply(
            "emb-1",
            &[],
            vec![
                sc("a.en", 0, Lang::En, vec![1.0, 0.0]),
                sc("b.en", 0, Lang::En, vec![0.6, 0.8]),
                sc("c.es-419", 0, Lang::Es419, vec![1.0, 0.0]),
            ],
        )
        .unwrap();
        let s2 = EmbeddedStore::open(&dir).unwrap();
        assert_eq!(s2.len().unwrap(), 3);
        assert_eq!(s2.embedder_id().unwrap().as_deref(), Some("emb-1"));
        let hits = s2.query(&[2.0, 0.0], Lang::En, 10).unwrap();
        assert_eq!(hits.len(), 2, "only English chunks");
        assert_eq!(hits[0].card_id, "a.en");
        assert!((hits[0].similarity - 1.0).abs() < 1e-6);
        assert!((hits[1].similarity - 0.6).abs() < 1e-6);
        let mut s3 = s2;
        s3.apply(
            "emb-1",
            &["a.en".to_string()],
            vec![sc("a.en", 0, Lang::En, vec![0.0, 1.0])],
        )
        .unwrap();
        let hits = EmbeddedStore::open(&dir)
            .unwrap()
            .query(&[0.0, 1.0], Lang::En, 1)
            .unwrap();
        assert_eq!(hits[0].card_id, "a.en");
        assert_eq!(EmbeddedStore::open(&dir).unwrap().len().unwrap(), 3);
    }

    #[test]
    fn corrupt_store_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let mut s = EmbeddedStore::open(&dir).unwrap();
        s.apply("e", &[], vec![sc("a.en", 0, Lang::En, vec![1.0, 0.0])])
            .unwrap();
        fs::write(dir.join("vectors.f32"), [0u8; 5]).unwrap();
        assert!(matches!(
            EmbeddedStore::open(&dir),
            Err(RetrievalError::Corrupt { .. })
        ));
        fs::write(dir.join("store.json"), "{not json").unwrap();
        assert!(matches!(
            EmbeddedStore::open(&dir),
            Err(RetrievalError::Corrupt { .. })
        ));
    }

    /// A store of three English rows, with its directory.
    fn three_rows() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        let mut s = EmbeddedStore::open(&dir).unwrap();
        s.apply(
            "e",
            &[],
            vec![
                sc("a.en", 0, Lang::En, vec![1.0, 0.0]),
                sc("b.en", 0, Lang::En, vec![0.6, 0.8]),
                sc("c.en", 0, Lang::En, vec![0.0, 1.0]),
            ],
        )
        .unwrap();
        (tmp, dir)
    }

    fn rewrite_vectors(dir: &Path, f: impl Fn(&mut Vec<f32>)) {
        let bytes = fs::read(dir.join("vectors.f32")).unwrap();
        let mut v: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        f(&mut v);
        fs::write(dir.join("vectors.f32"), vector_bytes(&v)).unwrap();
    }

    fn corrupt_message(dir: &Path) -> String {
        match EmbeddedStore::open(dir) {
            Err(RetrievalError::Corrupt { message, .. }) => message,
            Err(e) => panic!("not a Corrupt error: {e}"),
            Ok(_) => panic!("a damaged store opened"),
        }
    }

    #[test]
    fn permuted_rows_of_the_same_size_are_refused() {
        let (_t, dir) = three_rows();
        rewrite_vectors(&dir, |v| v.swap(0, 4));
        rewrite_vectors(&dir, |v| v.swap(1, 5));
        assert!(corrupt_message(&dir).contains("checksum"));
    }

    #[test]
    fn zeroed_and_nan_vectors_are_refused_even_with_a_matching_checksum() {
        for (what, value) in [("zero", 0.0f32), ("nan", f32::NAN)] {
            let (_t, dir) = three_rows();
            rewrite_vectors(&dir, |v| v.iter_mut().for_each(|x| *x = value));
            // Re-stamp the checksum, as a buggy writer would: the values are still checked.
            let text = fs::read_to_string(dir.join("store.json")).unwrap();
            let mut meta: Meta = serde_json::from_str(&text).unwrap();
            meta.checksum = checksum(&meta, &fs::read(dir.join("vectors.f32")).unwrap());
            fs::write(dir.join("store.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
            let m = corrupt_message(&dir);
            let expected = if what == "zero" { "norm" } else { "non-finite" };
            assert!(m.contains(expected), "{what}: {m}");
        }
    }

    #[test]
    fn an_old_format_store_is_refused_and_open_or_reset_repairs() {
        let (_t, dir) = three_rows();
        let text = fs::read_to_string(dir.join("store.json")).unwrap();
        let mut meta: Meta = serde_json::from_str(&text).unwrap();
        meta.version = 1;
        fs::write(dir.join("store.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
        assert!(corrupt_message(&dir).contains("format version 1"));
        let (s, why) = EmbeddedStore::open_or_reset(&dir).unwrap();
        assert!(why.unwrap().contains("format version 1"));
        assert!(s.is_empty().unwrap());
        // The reset was written: the directory opens cleanly now.
        assert!(EmbeddedStore::open(&dir).unwrap().is_empty().unwrap());
        // A sound store is left alone.
        let (_t2, dir2) = three_rows();
        let (s2, why2) = EmbeddedStore::open_or_reset(&dir2).unwrap();
        assert!(why2.is_none());
        assert_eq!(s2.len().unwrap(), 3);
    }

    #[test]
    fn dimension_mismatch_is_rejected() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = EmbeddedStore::open(tmp.path()).unwrap();
        s.apply("e", &[], vec![sc("a.en", 0, Lang::En, vec![1.0, 0.0])])
            .unwrap();
        assert!(s.query(&[1.0, 0.0, 0.0], Lang::En, 1).is_err());
        assert!(s
            .apply("e", &[], vec![sc("b.en", 0, Lang::En, vec![1.0])])
            .is_err());
    }
}
