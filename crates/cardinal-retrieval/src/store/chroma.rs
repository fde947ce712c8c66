//! The Chroma server backend (HTTP API v2): a collection in cosine space, ids = chunk ids,
//! metadata = card id, lang, topic and card hash, embeddings supplied by Cardinal.

use std::collections::BTreeMap;
use std::time::Duration;

use cardinal_kb::Lang;
use serde_json::{json, Value};
use ureq::Agent;

use super::{DenseHit, StoredChunk, VectorStore};
use crate::error::{Result, RetrievalError};

/// A collection on a Chroma server.
pub struct ChromaStore {
    agent: Agent,
    base: String,
    collection: String,
    id: String,
}

const PAGE: usize = 500;

impl ChromaStore {
    /// Connect to `url` (e.g. `http://127.0.0.1:8000`) and get or create `collection`.
    pub fn connect(url: &str, tenant: &str, database: &str, collection: &str) -> Result<Self> {
        let agent: Agent = Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .http_status_as_error(false)
            .build()
            .into();
        let base = format!(
            "{}/api/v2/tenants/{tenant}/databases/{database}",
            url.trim_end_matches('/')
        );
        let mut store = ChromaStore {
            agent,
            base,
            collection: collection.to_string(),
            id: String::new(),
        };
        store.id = store.get_or_create()?;
        Ok(store)
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let url = format!("{}{path}", self.base);
        let err = |m: String| RetrievalError::Store(format!("chroma {method} {url}: {m}"));
        let resp = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("DELETE", _) => self.agent.delete(&url).call(),
            (_, Some(b)) => self.agent.post(&url).send_json(&b),
            (_, None) => self.agent.post(&url).send_empty(),
        };
        let mut resp = resp.map_err(|e| err(e.to_string()))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| err(format!("reading body: {e}")))?;
        if !(200..300).contains(&status) {
            return Err(err(format!(
                "HTTP {status}: {}",
                text.chars().take(300).collect::<String>()
            )));
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| err(format!("invalid JSON: {e}")))
    }

    fn get_or_create(&self) -> Result<String> {
        let meta = json!({ "hnsw:space": "cosine" });
        let v = self.call(
            "POST",
            "/collections",
            Some(json!({ "name": self.collection, "metadata": meta, "get_or_create": true })),
        )?;
        v.get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| RetrievalError::Store(format!("chroma: no collection id in {v}")))
    }

    fn collection_path(&self, op: &str) -> String {
        format!("/collections/{}/{op}", self.id)
    }

    /// Every stored row's id and metadata, paged.
    fn all_metadata(&self) -> Result<Vec<(String, Value)>> {
        let mut out = Vec::new();
        let mut offset = 0;
        loop {
            let v = self.call(
                "POST",
                &self.collection_path("get"),
                Some(json!({ "include": ["metadatas"], "limit": PAGE, "offset": offset })),
            )?;
            let ids = v
                .get("ids")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let metas = v
                .get("metadatas")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let n = ids.len();
            for (id, m) in ids.into_iter().zip(metas) {
                if let Some(id) = id.as_str() {
                    out.push((id.to_string(), m));
                }
            }
            if n < PAGE {
                return Ok(out);
            }
            offset += n;
        }
    }
}

impl VectorStore for ChromaStore {
    fn describe(&self) -> String {
        format!("chroma collection `{}` at {}", self.collection, self.base)
    }

    fn embedder_id(&self) -> Result<Option<String>> {
        // Every row records the embedder that made its vector.
        let v = self.call(
            "POST",
            &self.collection_path("get"),
            Some(json!({ "include": ["metadatas"], "limit": 1 })),
        )?;
        Ok(v.pointer("/metadatas/0/embedder")
            .and_then(Value::as_str)
            .map(str::to_string))
    }

    fn card_hashes(&self) -> Result<BTreeMap<String, String>> {
        Ok(self
            .all_metadata()?
            .into_iter()
            .filter_map(|(_, m)| {
                Some((
                    m.get("card_id")?.as_str()?.to_string(),
                    m.get("card_hash")?.as_str()?.to_string(),
                ))
            })
            .collect())
    }

    fn apply(&mut self, embedder_id: &str, remove: &[String], add: Vec<StoredChunk>) -> Result<()> {
        for part in remove.chunks(PAGE) {
            self.call(
                "POST",
                &self.collection_path("delete"),
                Some(json!({ "where": { "card_id": { "$in": part } } })),
            )?;
        }
        for part in add.chunks(PAGE) {
            let ids: Vec<&str> = part.iter().map(|s| s.chunk.chunk_id.as_str()).collect();
            let embeddings: Vec<&Vec<f32>> = part.iter().map(|s| &s.vector).collect();
            let documents: Vec<&str> = part.iter().map(|s| s.chunk.text.as_str()).collect();
            let metadatas: Vec<Value> = part
                .iter()
                .map(|s| {
                    json!({
                        "card_id": s.chunk.card_id,
                        "lang": s.chunk.lang.tag(),
                        "topic": s.chunk.topic,
                        "card_hash": s.card_hash,
                        "embedder": embedder_id,
                    })
                })
                .collect();
            self.call(
                "POST",
                &self.collection_path("upsert"),
                Some(json!({ "ids": ids, "embeddings": embeddings, "documents": documents, "metadatas": metadatas })),
            )?;
        }
        Ok(())
    }

    fn clear(&mut self) -> Result<()> {
        self.call("DELETE", &format!("/collections/{}", self.collection), None)?;
        self.id = self.get_or_create()?;
        Ok(())
    }

    fn query(&self, vector: &[f32], lang: Lang, n: usize) -> Result<Vec<DenseHit>> {
        let v = self.call(
            "POST",
            &self.collection_path("query"),
            Some(json!({
                "query_embeddings": [vector],
                "n_results": n,
                "where": { "lang": lang.tag() },
                "include": ["metadatas", "distances"],
            })),
        )?;
        let first = |k: &str| {
            v.get(k)
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let (ids, metas, dists) = (first("ids"), first("metadatas"), first("distances"));
        let mut hits = Vec::with_capacity(ids.len());
        for ((id, m), d) in ids.iter().zip(&metas).zip(&dists) {
            let (Some(id), Some(card), Some(d)) = (
                id.as_str(),
                m.get("card_id").and_then(Value::as_str),
                d.as_f64(),
            ) else {
                return Err(RetrievalError::Store(format!(
                    "chroma: malformed query result row {id}"
                )));
            };
            hits.push(DenseHit {
                chunk_id: id.to_string(),
                card_id: card.to_string(),
                similarity: (1.0 - d) as f32,
            });
        }
        hits.sort_by(|a, b| {
            b.similarity
                .total_cmp(&a.similarity)
                .then_with(|| a.chunk_id.cmp(&b.chunk_id))
        });
        Ok(hits)
    }

    fn len(&self) -> Result<usize> {
        let v = self.call("GET", &self.collection_path("count"), None)?;
        v.as_u64()
            .map(|n| n as usize)
            .ok_or_else(|| RetrievalError::Store(format!("chroma: count is not a number: {v}")))
    }
}
