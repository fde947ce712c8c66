//! The run manifest: every setting that can change a number of a run, written to the run
//! directory (`manifest.json`) and into `report.json`.
//!
//! A run directory's records were made under one manifest. Resuming compares the manifest of
//! the new invocation with the recorded one **field by field** and refuses (exit 2, listing the
//! fields) when any differs, so a report never aggregates records made under different models,
//! judges, retrieval settings, cards or cases. `info` holds what does not change numbers (when
//! the run started, the thread count) and is never compared.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::settings::Settings;

/// Version of `manifest.json`.
pub const MANIFEST_SCHEMA_VERSION: u32 = 1;

/// What produced the answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentManifest {
    /// `extractive`, `local`, `local-small` or `openai`.
    pub backend: String,
    /// The model's id (for local models: registry name and the GGUF file's sha256, which pins
    /// the weights and their quantisation; for endpoints: model name and URL). `None` for the
    /// extractive agent.
    pub model_id: Option<String>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub seed: Option<u64>,
    pub context_size: Option<u32>,
    /// The safety policy's id (its fitted parameters' digest), when it has one.
    pub policy: Option<String>,
}

/// What judged them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeManifest {
    pub backend: String,
    pub model_id: String,
    /// Scorer family and version, e.g. `rubric-v1` or `checks-v1`.
    pub scorer: String,
    /// Digest of the scorer's fitted parameters (probability calibration, cut points), if any.
    pub calibration: Option<String>,
}

/// How retrieval ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetrievalManifest {
    pub embedder: String,
    /// `embedded` or `chroma`.
    pub store: String,
    pub top_k: usize,
    pub candidates: usize,
    pub k_rrf: f32,
    pub dense_weight: f32,
    pub lexical_weight: f32,
    pub min_similarity: f32,
    pub rerank_candidates: usize,
    pub chunk_max_chars: usize,
    pub reranker: Option<String>,
}

/// The data the run read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataManifest {
    /// Digest of every card (id and file bytes, sorted by id).
    pub cards_sha256: String,
    pub cards: usize,
    /// Digest of the selected items (cases or calibration items), sorted by id.
    pub items_sha256: String,
    pub items: usize,
}

/// Which items were selected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// `--sample N` (stratified), when given.
    pub sample: Option<usize>,
    pub seed: Option<u64>,
    /// The strata of the sample.
    pub strata: Option<String>,
    /// A split of the data (`dev`, `test`, `train`), when one was selected.
    pub split: Option<String>,
}

/// Not compared: facts about the run that do not change its numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Seconds since the Unix epoch when the run directory was first created.
    pub created_unix: u64,
    pub threads: Option<usize>,
}

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunManifest {
    pub schema_version: u32,
    /// `sweep` or `calibration`.
    pub kind: String,
    pub cardinal_version: String,
    pub agent: Option<AgentManifest>,
    pub judge: Option<JudgeManifest>,
    pub retrieval: Option<RetrievalManifest>,
    pub data: DataManifest,
    pub selection: Selection,
    /// Never compared.
    #[serde(default)]
    pub info: RunInfo,
}

/// One field that differs between two manifests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldDiff {
    /// Dotted path, e.g. `retrieval.top_k`.
    pub field: String,
    pub recorded: String,
    pub now: String,
}

impl RunManifest {
    /// The fields whose values differ (`info` is ignored), in path order.
    pub fn diff(&self, now: &RunManifest) -> Vec<FieldDiff> {
        let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
        flatten("", &comparable(self), &mut a);
        flatten("", &comparable(now), &mut b);
        let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        let all: Vec<FieldDiff> = keys
            .into_iter()
            .filter_map(|k| {
                let (x, y) = (a.get(k), b.get(k));
                (x != y).then(|| FieldDiff {
                    field: k.clone(),
                    recorded: x.cloned().unwrap_or_else(|| "(absent)".into()),
                    now: y.cloned().unwrap_or_else(|| "(absent)".into()),
                })
            })
            .collect();
        // A section present on one side only is one difference, not one per field inside it.
        let whole: Vec<String> = all
            .iter()
            .filter(|f| f.recorded == "null" || f.now == "null")
            .map(|f| format!("{}.", f.field))
            .collect();
        all.into_iter()
            .filter(|f| !whole.iter().any(|w| f.field.starts_with(w.as_str())))
            .collect()
    }
}

/// Render diffs one per line (`  field: recorded → now`).
pub fn render_diffs(d: &[FieldDiff]) -> String {
    d.iter()
        .map(|f| format!("  {}: {} → {}", f.field, f.recorded, f.now))
        .collect::<Vec<_>>()
        .join("\n")
}

fn comparable(m: &RunManifest) -> Value {
    let mut v = serde_json::to_value(m).unwrap_or(Value::Null);
    if let Value::Object(o) = &mut v {
        o.remove("info");
    }
    v
}

fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(o) if !o.is_empty() => {
            for (k, x) in o {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, x, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// The retrieval part of a manifest from the settings and the prepared index's ids.
pub fn retrieval_manifest(
    s: &Settings,
    embedder: &str,
    reranker: Option<&str>,
) -> RetrievalManifest {
    let r = &s.retrieval;
    RetrievalManifest {
        embedder: embedder.to_string(),
        store: s.store.kind().to_string(),
        top_k: r.top_k,
        candidates: r.candidates,
        k_rrf: r.k_rrf,
        dense_weight: r.dense_weight,
        lexical_weight: r.lexical_weight,
        min_similarity: r.min_similarity,
        rerank_candidates: r.rerank_candidates,
        chunk_max_chars: r.chunk_max_chars,
        reranker: reranker.map(str::to_string),
    }
}

/// Digest of the KB: every card's id and file bytes, sorted by id.
pub fn cards_digest(kb: &cardinal_kb::KnowledgeBase) -> (String, usize) {
    let mut cards: Vec<(&str, &std::path::Path)> = kb
        .cards
        .iter()
        .map(|cf| (cf.card.id.as_str(), cf.path.as_path()))
        .collect();
    cards.sort();
    let mut d = cardinal_digest::Digest::new();
    for (id, path) in &cards {
        d.push(id);
        d.push(std::fs::read(path).unwrap_or_default());
    }
    (d.hex(), cards.len())
}

/// Digest of items given as (id, canonical JSON), sorted by id.
pub fn items_digest<'a>(items: impl Iterator<Item = (&'a str, String)>) -> (String, usize) {
    let mut v: Vec<(&str, String)> = items.collect();
    v.sort();
    let mut d = cardinal_digest::Digest::new();
    for (id, json) in &v {
        d.push(id);
        d.push(json);
    }
    (d.hex(), v.len())
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> RunManifest {
        RunManifest {
            schema_version: MANIFEST_SCHEMA_VERSION,
            kind: "sweep".into(),
            cardinal_version: "0.1.0".into(),
            agent: Some(AgentManifest {
                backend: "extractive".into(),
                model_id: None,
                max_tokens: None,
                temperature: None,
                seed: None,
                context_size: None,
                policy: None,
            }),
            judge: None,
            retrieval: Some(RetrievalManifest {
                embedder: "e5".into(),
                store: "embedded".into(),
                top_k: 5,
                candidates: 50,
                k_rrf: 60.0,
                dense_weight: 1.0,
                lexical_weight: 1.0,
                min_similarity: 0.82,
                rerank_candidates: 20,
                chunk_max_chars: 400,
                reranker: None,
            }),
            data: DataManifest {
                cards_sha256: "c".into(),
                cards: 126,
                items_sha256: "i".into(),
                items: 10,
            },
            selection: Selection {
                sample: None,
                seed: None,
                strata: None,
                split: None,
            },
            info: RunInfo::default(),
        }
    }

    #[test]
    fn identical_manifests_do_not_differ_and_info_is_ignored() {
        let a = manifest();
        let mut b = manifest();
        b.info.created_unix = 12345;
        b.info.threads = Some(2);
        assert!(a.diff(&b).is_empty());
    }

    #[test]
    fn every_differing_field_is_listed() {
        let a = manifest();
        let mut b = manifest();
        b.retrieval.as_mut().unwrap().top_k = 3;
        b.judge = Some(JudgeManifest {
            backend: "local".into(),
            model_id: "m".into(),
            scorer: "checks-v1".into(),
            calibration: None,
        });
        let d = a.diff(&b);
        let fields: Vec<&str> = d.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, vec!["judge", "retrieval.top_k"], "{d:?}");
        assert_eq!(d[1].recorded, "5");
        assert_eq!(d[1].now, "3");
        assert!(render_diffs(&d).contains("retrieval.top_k: 5 → 3"));
    }
}
