//! A content-addressed on-disk response cache in front of any [`ChatModel`].
//!
//! The key is the sha256 of a canonical JSON serialisation of the model identity
//! ([`ChatModel::id`], which names backend and model), the parameters (temperature, max tokens,
//! seed, stop) and the messages. Each entry is one JSON file `DIR/<first 2 hex>/<64 hex>.json`
//! holding the request it answers and the [`Completion`]; it is written to a temporary file in
//! the same directory and renamed into place, so readers never see half an entry.
//!
//! A hit is verified (format, key, model, parameters and messages must equal the request), so a
//! corrupt or foreign file is a miss: the model is called and the file overwritten, and
//! [`CacheStats::corrupt`] counts it. Failed model calls are not cached. A failure to write an
//! entry does not fail the call (the answer is already there); [`CacheStats::write_errors`]
//! counts it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::{ChatModel, Completion, GenParams, LlmError, Message, Result};

/// Version of the key material and entry layout; bump to invalidate every entry.
pub const CACHE_FORMAT: u32 = 1;

/// How the cache is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheMode {
    /// Serve hits, store answers to misses (the default).
    #[default]
    ReadWrite,
    /// Serve hits, never write (e.g. a shared read-only cache in CI).
    ReadOnly,
    /// Never read, always call the model and store the answer (refresh the cache).
    Refresh,
    /// Bypass the cache entirely (`--no-cache`): no reads, no writes, no directory.
    Off,
}

impl CacheMode {
    /// `ReadWrite`, or `Off` when `no_cache` is set (the CLI's `--no-cache`).
    pub fn from_no_cache(no_cache: bool) -> Self {
        if no_cache {
            CacheMode::Off
        } else {
            CacheMode::ReadWrite
        }
    }

    fn reads(self) -> bool {
        matches!(self, CacheMode::ReadWrite | CacheMode::ReadOnly)
    }

    fn writes(self) -> bool {
        matches!(self, CacheMode::ReadWrite | CacheMode::Refresh)
    }
}

/// Counters of one [`CachedModel`] since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Calls answered from disk.
    pub hits: u64,
    /// Lookups that found no usable entry (corrupt entries included).
    pub misses: u64,
    /// Entries that existed but could not be used (unparseable or not matching the request).
    pub corrupt: u64,
    /// Calls passed to the inner model (misses, `Refresh` and `Off` calls), failed ones included.
    pub model_calls: u64,
    /// Entries written.
    pub writes: u64,
    /// Entries that could not be written.
    pub write_errors: u64,
}

/// A [`ChatModel`] answering from an on-disk cache first. `Send + Sync`; share it (e.g. in an
/// `Arc<dyn ChatModel>`) between the agent and the judge. Its [`ChatModel::id`] is the inner
/// model's, so wrapping does not change reports or keys.
pub struct CachedModel<M: ChatModel> {
    inner: M,
    dir: PathBuf,
    mode: CacheMode,
    hits: AtomicU64,
    misses: AtomicU64,
    corrupt: AtomicU64,
    model_calls: AtomicU64,
    writes: AtomicU64,
    write_errors: AtomicU64,
}

impl<M: ChatModel> CachedModel<M> {
    /// Wrap `inner`; creates `dir` unless `mode` is [`CacheMode::Off`].
    pub fn new(inner: M, dir: impl Into<PathBuf>, mode: CacheMode) -> Result<Self> {
        let dir = dir.into();
        if mode != CacheMode::Off {
            std::fs::create_dir_all(&dir).map_err(|e| LlmError::Cache {
                path: dir.display().to_string(),
                message: format!("cannot create the cache directory: {e}"),
            })?;
        }
        Ok(CachedModel {
            inner,
            dir,
            mode,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            corrupt: AtomicU64::new(0),
            model_calls: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
        })
    }

    pub fn inner(&self) -> &M {
        &self.inner
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn mode(&self) -> CacheMode {
        self.mode
    }

    /// The counters so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            corrupt: self.corrupt.load(Ordering::Relaxed),
            model_calls: self.model_calls.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            write_errors: self.write_errors.load(Ordering::Relaxed),
        }
    }

    /// The cache key (64 hex digits) of this request for the inner model.
    pub fn key(&self, messages: &[Message], params: &GenParams) -> Result<String> {
        cache_key(&self.inner.id(), messages, params)
    }

    /// Where the entry of this request lives (whether or not it exists).
    pub fn entry_path(&self, messages: &[Message], params: &GenParams) -> Result<PathBuf> {
        Ok(self.path_of(&self.key(messages, params)?))
    }

    fn path_of(&self, key: &str) -> PathBuf {
        self.dir.join(&key[..2]).join(format!("{key}.json"))
    }

    fn call_inner(&self, messages: &[Message], params: &GenParams) -> Result<Completion> {
        self.model_calls.fetch_add(1, Ordering::Relaxed);
        self.inner.complete(messages, params)
    }

    /// `Ok(Some)` on a valid entry, `Ok(None)` when absent or corrupt, `Err` when the file
    /// exists but cannot be read.
    fn lookup(&self, path: &Path, request: &EntryRequest<'_>) -> Result<Option<Completion>> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(LlmError::Cache {
                    path: path.display().to_string(),
                    message: format!("cannot read the cache entry: {e}"),
                })
            }
        };
        match serde_json::from_slice::<StoredEntry>(&bytes) {
            Ok(stored) if stored.matches(request) => Ok(Some(stored.completion)),
            _ => {
                self.corrupt.fetch_add(1, Ordering::Relaxed);
                Ok(None)
            }
        }
    }

    fn store(&self, path: &Path, request: &EntryRequest<'_>, completion: &Completion) {
        let entry = EntryOut {
            request,
            completion,
        };
        match write_atomically(path, &entry) {
            Ok(()) => self.writes.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.write_errors.fetch_add(1, Ordering::Relaxed),
        };
    }
}

impl<M: ChatModel> ChatModel for CachedModel<M> {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn complete(&self, messages: &[Message], params: &GenParams) -> Result<Completion> {
        if self.mode == CacheMode::Off {
            return self.call_inner(messages, params);
        }
        let model = self.inner.id();
        let request = EntryRequest::new(&model, messages, params)?;
        let key = request.key()?;
        let path = self.path_of(&key);
        if self.mode.reads() {
            if let Some(hit) = self.lookup(&path, &request)? {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(hit);
            }
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
        let completion = self.call_inner(messages, params)?;
        if self.mode.writes() {
            self.store(&path, &request, &completion);
        }
        Ok(completion)
    }
}

/// The cache key (sha256, 64 lower-case hex digits) of a request to the model `model_id`.
pub fn cache_key(model_id: &str, messages: &[Message], params: &GenParams) -> Result<String> {
    EntryRequest::new(model_id, messages, params)?.key()
}

/// Parameters in canonical form: `-0.0` is `0.0`, field order fixed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CanonParams {
    temperature: f32,
    max_tokens: u32,
    seed: u64,
    stop: Vec<String>,
}

/// What a cache entry answers; also the key material (serialised in this field order).
#[derive(Serialize)]
struct EntryRequest<'a> {
    format: u32,
    model: &'a str,
    params: CanonParams,
    messages: &'a [Message],
}

impl<'a> EntryRequest<'a> {
    fn new(model: &'a str, messages: &'a [Message], params: &GenParams) -> Result<Self> {
        if !params.temperature.is_finite() {
            return Err(LlmError::Config(format!(
                "temperature must be finite, got {}",
                params.temperature
            )));
        }
        // `+ 0.0` turns -0.0 into 0.0 and leaves every other value alone.
        let temperature = params.temperature + 0.0;
        Ok(EntryRequest {
            format: CACHE_FORMAT,
            model,
            params: CanonParams {
                temperature,
                max_tokens: params.max_tokens,
                seed: params.seed,
                stop: params.stop.clone(),
            },
            messages,
        })
    }

    fn key(&self) -> Result<String> {
        let material = serde_json::to_vec(self)
            .map_err(|e| LlmError::Config(format!("cannot serialise a cache key: {e}")))?;
        Ok(cardinal_digest::sha256_hex(&material))
    }
}

#[derive(Serialize)]
struct EntryOut<'a> {
    request: &'a EntryRequest<'a>,
    completion: &'a Completion,
}

#[derive(Deserialize)]
struct StoredRequest {
    format: u32,
    model: String,
    params: CanonParams,
    messages: Vec<Message>,
}

#[derive(Deserialize)]
struct StoredEntry {
    request: StoredRequest,
    completion: Completion,
}

impl StoredEntry {
    fn matches(&self, request: &EntryRequest<'_>) -> bool {
        let r = &self.request;
        r.format == request.format
            && r.model == request.model
            && r.params == request.params
            && r.messages == request.messages
    }
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn write_atomically(path: &Path, entry: &EntryOut<'_>) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("cache entry path has no parent"))?;
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| std::io::Error::other("cache entry path has no file name"))?;
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        let bytes = serde_json::to_vec_pretty(entry).map_err(std::io::Error::other)?;
        file.write_all(&bytes)?;
        file.write_all(b"\n")?;
        file.flush()?;
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
