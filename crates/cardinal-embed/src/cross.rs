//! Cross-encoder re-ranker: a Hugging Face sequence-classification model (BERT with pooler and
//! classifier, or XLM-RoBERTa) that scores a (query, passage) pair jointly.
//!
//! The score is the first logit when the model has one label (MS MARCO style), else the logit
//! of label 1 ("relevant").

use std::path::Path;

use candle_core::{Device, Module, Tensor};
use candle_nn::{linear, Linear};
use candle_transformers::models::{bert, xlm_roberta};
use tokenizers::{EncodeInput, Tokenizer};

use crate::bert::{load_tokenizer, model_files, parse_config, read_config, var_builder};
use crate::error::{EmbedError, Result};

enum Head {
    Bert {
        model: bert::BertModel,
        pooler: Linear,
        classifier: Linear,
    },
    XlmRoberta(xlm_roberta::XLMRobertaForSequenceClassification),
}

/// A local cross-encoder.
pub struct CrossEncoder {
    head: Head,
    tokenizer: Tokenizer,
    label: usize,
    name: String,
    device: Device,
}

impl CrossEncoder {
    /// Load from a model directory (`config.json`, `model.safetensors`, `tokenizer.json`).
    pub fn load(dir: &Path) -> Result<Self> {
        let (config_path, weights, tok_path) = model_files(dir)?;
        let device = Device::Cpu;
        let (cfg, model_type) = read_config(&config_path)?;
        let num_labels = cfg
            .get("id2label")
            .and_then(|m| m.as_object())
            .map(|m| m.len())
            .or_else(|| {
                cfg.get("num_labels")
                    .and_then(|v| v.as_u64())
                    .map(|v| v as usize)
            })
            .unwrap_or(1)
            .max(1);
        let hidden = cfg.get("hidden_size").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
        let pad_id = cfg
            .get("pad_token_id")
            .and_then(|v| v.as_u64())
            .unwrap_or(0) as u32;
        let vb = var_builder(&weights, &device)?;
        let head = match model_type.as_str() {
            "bert" => {
                let c: bert::Config = parse_config(&config_path, cfg)?;
                let model = bert::BertModel::load(vb.clone(), &c)?;
                let pooler = linear(hidden, hidden, vb.pp("bert.pooler.dense"))?;
                let classifier = linear(hidden, num_labels, vb.pp("classifier"))?;
                Head::Bert {
                    model,
                    pooler,
                    classifier,
                }
            }
            "xlm-roberta" | "roberta" => {
                let c: xlm_roberta::Config = parse_config(&config_path, cfg)?;
                Head::XlmRoberta(xlm_roberta::XLMRobertaForSequenceClassification::new(
                    num_labels, &c, vb,
                )?)
            }
            other => {
                return Err(EmbedError::Unsupported {
                    path: config_path,
                    model_type: other.to_string(),
                })
            }
        };
        Ok(CrossEncoder {
            head,
            tokenizer: load_tokenizer(&tok_path, 512, pad_id)?,
            label: if num_labels == 1 { 0 } else { 1 },
            name: dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("cross-encoder")
                .to_string(),
            device,
        })
    }

    pub fn id(&self) -> String {
        format!("cross-encoder:{}", self.name)
    }

    /// Relevance score of each passage for the query; higher is more relevant.
    pub fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>> {
        if passages.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<EncodeInput> = passages
            .iter()
            .map(|p| (query.to_string(), p.to_string()).into())
            .collect();
        let enc = self
            .tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let n = enc.len();
        let len = enc.first().map(|e| e.get_ids().len()).unwrap_or(0);
        let (mut ids, mut mask, mut types) = (Vec::new(), Vec::new(), Vec::new());
        for e in &enc {
            ids.extend_from_slice(e.get_ids());
            mask.extend_from_slice(e.get_attention_mask());
            types.extend_from_slice(e.get_type_ids());
        }
        let ids = Tensor::from_vec(ids, (n, len), &self.device)?;
        let mask = Tensor::from_vec(mask, (n, len), &self.device)?;
        let types = Tensor::from_vec(types, (n, len), &self.device)?;
        let logits = match &self.head {
            Head::Bert {
                model,
                pooler,
                classifier,
            } => {
                let hidden = model.forward(&ids, &types, Some(&mask))?;
                let cls = hidden.narrow(1, 0, 1)?.squeeze(1)?;
                let pooled = pooler.forward(&cls)?.tanh()?;
                classifier.forward(&pooled)?
            }
            Head::XlmRoberta(m) => m.forward(&ids, &mask, &types)?,
        };
        let logits = logits.to_vec2::<f32>()?;
        Ok(logits
            .into_iter()
            .map(|row| row.get(self.label).copied().unwrap_or(f32::NAN))
            .collect())
    }
}
