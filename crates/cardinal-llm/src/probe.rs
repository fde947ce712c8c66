//! Yes/No probes: a model's answer to a narrow check read from the probabilities of its first
//! answer token, not from sampled text — no generation, nothing to parse.
//!
//! A [`YesNoModel`] takes a conversation whose last message is a user message (the shared part:
//! instructions, cards, question, answer) and a list of checks; each check's text is appended
//! to that last message and the assistant turn opens; the model's next-token distribution gives
//! P("Yes") and P("No"). Backends that can evaluate the shared part once and each check as a
//! short suffix (llama.cpp: parallel sequences over a copy of the prefix's KV cache) do so.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{LlmError, Message, Result};

/// The answer to one check.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct YesNo {
    /// P(Yes) / (P(Yes) + P(No)) of the first answer token.
    pub p_yes: f64,
    /// P(Yes) + P(No) under the whole next-token distribution: how much the model wanted to
    /// answer Yes or No at all. `None` when the backend returned only a one-token reply.
    pub mass: Option<f64>,
}

/// A model answering yes/no checks by probability.
pub trait YesNoModel: Send + Sync {
    /// Identity (model and weights), as [`crate::ChatModel::id`].
    fn id(&self) -> String;

    /// One [`YesNo`] per check, in order. Fails as a whole (never a made-up probability).
    fn yes_no(&self, messages: &[Message], checks: &[String]) -> Result<Vec<YesNo>>;

    /// The mean log-probability per token of each piece of an assistant reply to `messages`:
    /// the pieces are read one after another as the reply's text (piece `i` is scored given
    /// the prompt and pieces `0..i`; pieces after the first are joined with one space). Fails
    /// as a whole; a backend that cannot score given text says so (a configuration error).
    fn reply_logprobs(&self, messages: &[Message], pieces: &[String]) -> Result<Vec<f64>> {
        let _ = (messages, pieces);
        Err(crate::LlmError::Config(format!(
            "{} cannot score the tokens of a given reply",
            self.id()
        )))
    }

    /// The model's hidden state after transformer block `layer` (0-based), averaged over the
    /// tokens of `span`, which must end the last message's content: the prompt is read up to
    /// the end of `span` (what follows cannot change these states: attention is causal) and
    /// nothing is generated. One vector of the model's embedding width. Fails as a whole; a
    /// backend without access to its hidden states (an HTTP endpoint) says so (a
    /// configuration error).
    fn span_states(&self, messages: &[Message], span: &str, layer: usize) -> Result<Vec<f32>> {
        let _ = (messages, span, layer);
        Err(crate::LlmError::Config(format!(
            "{} does not expose its hidden states (the probe judge needs an in-process model)",
            self.id()
        )))
    }
}

/// The spellings of Yes and No whose first-token probabilities count.
pub const YES_FORMS: [&str; 4] = ["Yes", " Yes", "yes", "YES"];
pub const NO_FORMS: [&str; 4] = ["No", " No", "no", "NO"];

/// P(Yes)/(P(Yes)+P(No)) and the Yes+No mass from log-probabilities of the candidate tokens
/// (`yes`, `no`) and the log-normaliser of the whole distribution (`log_z`).
pub fn from_logprobs(yes: &[f64], no: &[f64], log_z: f64) -> Option<YesNo> {
    let lse = |v: &[f64]| -> Option<f64> {
        let m = v
            .iter()
            .copied()
            .filter(|x| x.is_finite())
            .fold(f64::NEG_INFINITY, f64::max);
        if !m.is_finite() {
            return None;
        }
        Some(m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln())
    };
    let (y, n) = (lse(yes), lse(no));
    let (ly, ln) = match (y, n) {
        (None, None) => return None,
        (Some(a), None) => (a, f64::NEG_INFINITY),
        (None, Some(b)) => (f64::NEG_INFINITY, b),
        (Some(a), Some(b)) => (a, b),
    };
    let m = ly.max(ln);
    let (ey, en) = ((ly - m).exp(), (ln - m).exp());
    let p_yes = ey / (ey + en);
    let mass = ((m - log_z).exp() * (ey + en)).min(1.0);
    (p_yes.is_finite() && mass.is_finite()).then_some(YesNo {
        p_yes,
        mass: Some(mass),
    })
}

/// A disk cache in front of a [`YesNoModel`]: one entry per (model, conversation, check), so a
/// re-run of a sweep or a calibration asks the model nothing it was asked before. A damaged
/// entry is ignored and recomputed, never returned.
pub struct CachedYesNo<M: YesNoModel> {
    inner: M,
    dir: PathBuf,
    enabled: bool,
    hits: std::sync::atomic::AtomicU64,
    calls: std::sync::atomic::AtomicU64,
}

#[derive(Serialize)]
struct Key<'a> {
    kind: &'static str,
    model: String,
    messages: &'a [Message],
    check: &'a str,
}

impl<M: YesNoModel> CachedYesNo<M> {
    /// `enabled = false` bypasses the cache (reads and writes).
    pub fn new(inner: M, dir: impl Into<PathBuf>, enabled: bool) -> Result<Self> {
        let dir = dir.into();
        if enabled {
            std::fs::create_dir_all(&dir).map_err(|e| LlmError::Cache {
                path: dir.display().to_string(),
                message: e.to_string(),
            })?;
        }
        Ok(CachedYesNo {
            inner,
            dir,
            enabled,
            hits: Default::default(),
            calls: Default::default(),
        })
    }

    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// (cache hits, checks sent to the model).
    pub fn stats(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.hits.load(Relaxed), self.calls.load(Relaxed))
    }

    fn path(&self, messages: &[Message], check: &str) -> Result<PathBuf> {
        self.entry_path("yes_no/v1", "yesno", messages, check)
    }

    /// Where the entry of `kind` for this prompt and check lives (`<h[..2]>/<h>.<ext>.json`).
    fn entry_path(
        &self,
        kind: &'static str,
        ext: &str,
        messages: &[Message],
        check: &str,
    ) -> Result<PathBuf> {
        let key = serde_json::to_vec(&Key {
            kind,
            model: self.inner.id(),
            messages,
            check,
        })
        .map_err(|e| LlmError::Config(format!("cannot serialise a cache key: {e}")))?;
        let h = cardinal_digest::sha256_hex(&key);
        Ok(self.dir.join(&h[..2]).join(format!("{h}.{ext}.json")))
    }

    /// Write one entry atomically (temporary file, then rename).
    fn write_entry<T: Serialize>(p: &Path, v: &T) -> Result<()> {
        if let Some(parent) = p.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let tmp = p.with_extension(format!("tmp-{}", std::process::id()));
        let written = serde_json::to_vec(v)
            .ok()
            .and_then(|b| std::fs::write(&tmp, b).ok())
            .and_then(|_| std::fs::rename(&tmp, p).ok());
        written.ok_or_else(|| LlmError::Cache {
            path: p.display().to_string(),
            message: "cannot write a cache entry".into(),
        })
    }

    fn read(path: &Path) -> Option<YesNo> {
        let text = std::fs::read_to_string(path).ok()?;
        let v: YesNo = serde_json::from_str(&text).ok()?;
        ((0.0..=1.0).contains(&v.p_yes)).then_some(v)
    }
}

impl<M: YesNoModel> YesNoModel for CachedYesNo<M> {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn yes_no(&self, messages: &[Message], checks: &[String]) -> Result<Vec<YesNo>> {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.enabled {
            self.calls.fetch_add(checks.len() as u64, Relaxed);
            return self.inner.yes_no(messages, checks);
        }
        let paths: Vec<PathBuf> = checks
            .iter()
            .map(|c| self.path(messages, c))
            .collect::<Result<_>>()?;
        let mut out: Vec<Option<YesNo>> = paths.iter().map(|p| Self::read(p)).collect();
        let missing: Vec<usize> = (0..checks.len()).filter(|&i| out[i].is_none()).collect();
        self.hits
            .fetch_add((checks.len() - missing.len()) as u64, Relaxed);
        if !missing.is_empty() {
            let ask: Vec<String> = missing.iter().map(|&i| checks[i].clone()).collect();
            self.calls.fetch_add(ask.len() as u64, Relaxed);
            let got = self.inner.yes_no(messages, &ask)?;
            if got.len() != ask.len() {
                return Err(LlmError::Local(format!(
                    "the model answered {} of {} checks",
                    got.len(),
                    ask.len()
                )));
            }
            for (&i, v) in missing.iter().zip(got) {
                Self::write_entry(&paths[i], &v)?;
                out[i] = Some(v);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    fn reply_logprobs(&self, messages: &[Message], pieces: &[String]) -> Result<Vec<f64>> {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.enabled {
            return self.inner.reply_logprobs(messages, pieces);
        }
        let check = serde_json::to_string(pieces)
            .map_err(|e| LlmError::Config(format!("cannot serialise a cache key: {e}")))?;
        let p = self.entry_path("reply_logprobs/v1", "logprobs", messages, &check)?;
        if let Some(v) = std::fs::read_to_string(&p)
            .ok()
            .and_then(|t| serde_json::from_str::<Vec<f64>>(&t).ok())
            .filter(|v| v.len() == pieces.len() && v.iter().all(|x| x.is_finite()))
        {
            self.hits.fetch_add(1, Relaxed);
            return Ok(v);
        }
        self.calls.fetch_add(1, Relaxed);
        let v = self.inner.reply_logprobs(messages, pieces)?;
        Self::write_entry(&p, &v)?;
        Ok(v)
    }

    fn span_states(&self, messages: &[Message], span: &str, layer: usize) -> Result<Vec<f32>> {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.enabled {
            return self.inner.span_states(messages, span, layer);
        }
        let p = self.entry_path(
            "span_states/v1",
            "states",
            messages,
            &format!("{layer}\n{span}"),
        )?;
        if let Some(v) = std::fs::read_to_string(&p)
            .ok()
            .and_then(|t| serde_json::from_str::<Vec<f32>>(&t).ok())
            .filter(|v| !v.is_empty() && v.iter().all(|x| x.is_finite()))
        {
            self.hits.fetch_add(1, Relaxed);
            return Ok(v);
        }
        self.calls.fetch_add(1, Relaxed);
        let v = self.inner.span_states(messages, span, layer)?;
        Self::write_entry(&p, &v)?;
        Ok(v)
    }
}

impl<T: YesNoModel + ?Sized> YesNoModel for std::sync::Arc<T> {
    fn id(&self) -> String {
        (**self).id()
    }
    fn yes_no(&self, messages: &[Message], checks: &[String]) -> Result<Vec<YesNo>> {
        (**self).yes_no(messages, checks)
    }
    fn reply_logprobs(&self, messages: &[Message], pieces: &[String]) -> Result<Vec<f64>> {
        (**self).reply_logprobs(messages, pieces)
    }
    fn span_states(&self, messages: &[Message], span: &str, layer: usize) -> Result<Vec<f32>> {
        (**self).span_states(messages, span, layer)
    }
}

impl<T: YesNoModel + ?Sized> YesNoModel for Box<T> {
    fn id(&self) -> String {
        (**self).id()
    }
    fn yes_no(&self, messages: &[Message], checks: &[String]) -> Result<Vec<YesNo>> {
        (**self).yes_no(messages, checks)
    }
    fn reply_logprobs(&self, messages: &[Message], pieces: &[String]) -> Result<Vec<f64>> {
        (**self).reply_logprobs(messages, pieces)
    }
    fn span_states(&self, messages: &[Message], span: &str, layer: usize) -> Result<Vec<f32>> {
        (**self).span_states(messages, span, layer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_from_logprobs() {
        // Yes twice as likely as No, together half of the distribution.
        let z = 0.0f64;
        let y = (1.0f64 / 3.0).ln();
        let n = (1.0f64 / 6.0).ln();
        let v = from_logprobs(&[y], &[n], z).unwrap();
        assert!((v.p_yes - 2.0 / 3.0).abs() < 1e-12);
        assert!((v.mass.unwrap() - 0.5).abs() < 1e-12);
        // Several spellings add up.
        let v = from_logprobs(&[y, y], &[n], z).unwrap();
        assert!((v.p_yes - 0.8).abs() < 1e-12);
        // Only one side present.
        assert_eq!(from_logprobs(&[y], &[], z).unwrap().p_yes, 1.0);
        assert!(from_logprobs(&[], &[], z).is_none());
    }

    struct Fixed(std::sync::atomic::AtomicUsize);
    impl YesNoModel for Fixed {
        fn id(&self) -> String {
            "fixed".into()
        }
        fn yes_no(&self, _m: &[Message], checks: &[String]) -> Result<Vec<YesNo>> {
            self.0
                .fetch_add(checks.len(), std::sync::atomic::Ordering::SeqCst);
            Ok(checks
                .iter()
                .map(|c| YesNo {
                    p_yes: c.len() as f64 / 100.0,
                    mass: Some(0.9),
                })
                .collect())
        }
    }

    #[test]
    fn the_cache_answers_what_was_asked_before_and_ignores_damaged_entries() {
        let d = tempfile::tempdir().unwrap();
        let m = CachedYesNo::new(Fixed(Default::default()), d.path(), true).unwrap();
        let msgs = vec![Message::user("case")];
        let checks: Vec<String> = vec!["a".into(), "bb".into()];
        let first = m.yes_no(&msgs, &checks).unwrap();
        assert_eq!(m.inner().0.load(std::sync::atomic::Ordering::SeqCst), 2);
        let again = m.yes_no(&msgs, &["bb".into(), "ccc".into()]).unwrap();
        assert_eq!(again[0], first[1]);
        assert_eq!(
            m.inner().0.load(std::sync::atomic::Ordering::SeqCst),
            3,
            "only ccc asked"
        );
        // Damage the entry of "a": it is recomputed, not returned.
        let p = m.path(&msgs, "a").unwrap();
        std::fs::write(&p, "{not json").unwrap();
        let v = m.yes_no(&msgs, &["a".into()]).unwrap();
        assert_eq!(v[0], first[0]);
        assert_eq!(m.inner().0.load(std::sync::atomic::Ordering::SeqCst), 4);
        // One hit (bb on the second call); the damaged entry is not a hit.
        assert_eq!(m.stats(), (1, 4));
    }
}
