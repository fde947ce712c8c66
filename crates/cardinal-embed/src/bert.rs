//! BERT / XLM-RoBERTa sentence embedder.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::{bert, xlm_roberta};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::error::{EmbedError, Result};
use crate::Embedder;

/// How to run an embedder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedderOptions {
    /// Prepended to queries (E5: `query: `).
    pub query_prefix: String,
    /// Prepended to passages (E5: `passage: `).
    pub passage_prefix: String,
    /// Longest input in tokens; longer inputs are truncated.
    pub max_tokens: usize,
    /// Sentences per forward pass.
    pub batch_size: usize,
}

impl Default for EmbedderOptions {
    fn default() -> Self {
        EmbedderOptions {
            query_prefix: String::new(),
            passage_prefix: String::new(),
            max_tokens: 512,
            batch_size: 16,
        }
    }
}

enum Arch {
    Bert(bert::BertModel),
    XlmRoberta(xlm_roberta::XLMRobertaModel),
}

/// A BERT-family embedder loaded from a Hugging Face directory.
pub struct BertEmbedder {
    arch: Arch,
    tokenizer: Tokenizer,
    dim: usize,
    options: EmbedderOptions,
    name: String,
    device: Device,
}

/// Paths of a model directory's three files, each checked to exist.
pub(crate) fn model_files(dir: &Path) -> Result<(PathBuf, PathBuf, PathBuf)> {
    let need = |file: &'static str| {
        let p = dir.join(file);
        if p.is_file() {
            Ok(p)
        } else {
            Err(EmbedError::MissingFile {
                dir: dir.to_path_buf(),
                file,
            })
        }
    };
    Ok((
        need("config.json")?,
        need("model.safetensors")?,
        need("tokenizer.json")?,
    ))
}

pub(crate) fn read_config(path: &Path) -> Result<(serde_json::Value, String)> {
    let text = std::fs::read_to_string(path).map_err(|e| EmbedError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| EmbedError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let model_type = v
        .get("model_type")
        .and_then(|m| m.as_str())
        .unwrap_or("bert")
        .to_string();
    Ok((v, model_type))
}

pub(crate) fn parse_config<T: serde::de::DeserializeOwned>(
    path: &Path,
    v: serde_json::Value,
) -> Result<T> {
    serde_json::from_value(v).map_err(|e| EmbedError::Read {
        path: path.to_path_buf(),
        message: format!("config: {e}"),
    })
}

pub(crate) fn load_tokenizer(path: &Path, max_tokens: usize, pad_id: u32) -> Result<Tokenizer> {
    let mut tokenizer = Tokenizer::from_file(path).map_err(|e| EmbedError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let pad_token = tokenizer
        .id_to_token(pad_id)
        .unwrap_or_else(|| "[PAD]".to_string());
    tokenizer.with_padding(Some(PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        pad_id,
        pad_token,
        ..Default::default()
    }));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            ..Default::default()
        }))
        .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
    Ok(tokenizer)
}

/// Memory-map a safetensors file as f32 weights.
pub(crate) fn var_builder(weights: &Path, device: &Device) -> Result<VarBuilder<'static>> {
    // SAFETY: the file is opened read-only and not modified while mapped (model directories are
    // written once, atomically, by `cardinal models pull`).
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[weights], DType::F32, device)? };
    Ok(vb)
}

impl BertEmbedder {
    /// Load from a model directory.
    pub fn load(dir: &Path, options: EmbedderOptions) -> Result<Self> {
        let (config_path, weights, tok_path) = model_files(dir)?;
        let device = Device::Cpu;
        let (cfg, model_type) = read_config(&config_path)?;
        let pad_id = cfg
            .get("pad_token_id")
            .and_then(|v| v.as_u64())
            .unwrap_or(0) as u32;
        let dim = cfg.get("hidden_size").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
        let vb = var_builder(&weights, &device)?;
        let arch = match model_type.as_str() {
            "bert" => {
                let c: bert::Config = parse_config(&config_path, cfg)?;
                Arch::Bert(bert::BertModel::load(vb, &c)?)
            }
            "xlm-roberta" | "roberta" => {
                let c: xlm_roberta::Config = parse_config(&config_path, cfg)?;
                let vb = if vb.contains_tensor("roberta.embeddings.word_embeddings.weight") {
                    vb.pp("roberta")
                } else {
                    vb
                };
                Arch::XlmRoberta(xlm_roberta::XLMRobertaModel::new(&c, vb)?)
            }
            other => {
                return Err(EmbedError::Unsupported {
                    path: config_path,
                    model_type: other.to_string(),
                })
            }
        };
        let tokenizer = load_tokenizer(&tok_path, options.max_tokens, pad_id)?;
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("embedder")
            .to_string();
        Ok(BertEmbedder {
            arch,
            tokenizer,
            dim,
            options,
            name,
            device,
        })
    }

    /// Token ids of a text as the model sees it (prefix not added).
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Embed texts as they are (no prefix), in batches of similar length.
    pub fn embed_raw(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for batch in order.chunks(self.options.batch_size.max(1)) {
            let inputs: Vec<&str> = batch.iter().map(|&i| texts[i].as_str()).collect();
            let vectors = self.forward_batch(&inputs)?;
            for (&i, v) in batch.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn forward_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let n = encodings.len();
        let len = encodings.first().map(|e| e.get_ids().len()).unwrap_or(0);
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in &encodings {
            ids.extend_from_slice(e.get_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        let ids = Tensor::from_vec(ids, (n, len), &self.device)?;
        let mask = Tensor::from_vec(mask, (n, len), &self.device)?;
        let types = ids.zeros_like()?;
        let hidden = match &self.arch {
            Arch::Bert(m) => m.forward(&ids, &types, Some(&mask))?,
            Arch::XlmRoberta(m) => m.forward(&ids, &mask, &types, None, None, None)?,
        };
        // Mean pooling over the mask, then L2 normalisation.
        let maskf = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&maskf)?.sum(1)?;
        let counts = maskf.sum(1)?.clamp(1e-9, f64::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        let unit = mean.broadcast_div(&norm)?;
        Ok(unit.to_vec2::<f32>()?)
    }
}

impl Embedder for BertEmbedder {
    fn id(&self) -> String {
        format!(
            "{}|q={:?}|p={:?}|max={}",
            self.name,
            self.options.query_prefix,
            self.options.passage_prefix,
            self.options.max_tokens
        )
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let t: Vec<String> = texts
            .iter()
            .map(|t| format!("{}{t}", self.options.query_prefix))
            .collect();
        self.embed_raw(&t)
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let t: Vec<String> = texts
            .iter()
            .map(|t| format!("{}{t}", self.options.passage_prefix))
            .collect();
        self.embed_raw(&t)
    }
}
