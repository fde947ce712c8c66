//! BERT / XLM-RoBERTa sentence embedder.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::{bert, xlm_roberta};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::error::{EmbedError, Result};
use crate::native::{BertShape, NativeBert};
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
    /// Sentences per forward pass (the candle engine; the native engine packs batches by
    /// tokens, see [`NATIVE_BATCH_TOKENS`]).
    pub batch_size: usize,
    /// Which forward pass runs a BERT model (XLM-RoBERTa models always run on candle).
    pub engine: Engine,
}

/// The forward pass of a BERT-architecture embedder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// [`crate::native::NativeBert`]: packed batches without padding, fused layers (default).
    #[default]
    Native,
    /// candle-transformers' BERT (padded batches); kept as the reference the native engine is
    /// tested and benchmarked against.
    Candle,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Native => "native",
            Engine::Candle => "candle",
        }
    }
}

/// Tokens per packed forward pass of the native engine: large enough that each matrix product
/// keeps both cores busy, small enough that activations stay in a few MB.
pub const NATIVE_BATCH_TOKENS: usize = 2048;

impl EmbedderOptions {
    /// The identity of an embedder named `name` run with these options (model, prefixes,
    /// length): what stores, fitted policies and query caches are keyed by.
    pub fn id_of(&self, name: &str) -> String {
        format!(
            "{name}|q={:?}|p={:?}|max={}",
            self.query_prefix, self.passage_prefix, self.max_tokens
        )
    }
}

impl Default for EmbedderOptions {
    fn default() -> Self {
        EmbedderOptions {
            query_prefix: String::new(),
            passage_prefix: String::new(),
            max_tokens: 512,
            batch_size: 16,
            engine: Engine::Native,
        }
    }
}

enum Arch {
    Native(NativeBert),
    Candle(CandleModel),
}

/// The architectures candle runs (padded batches).
enum CandleModel {
    Bert(bert::BertModel),
    XlmRoberta(xlm_roberta::XLMRobertaModel),
}

/// The model's files and config, as checked when opened.
struct Source {
    config_path: PathBuf,
    weights: PathBuf,
    tok_path: PathBuf,
    cfg: serde_json::Value,
    model_type: String,
    /// The encoder's shape when the native engine runs it (checked when opened).
    native: Option<BertShape>,
}

/// What the first embedding call loads.
struct Loaded {
    arch: Arch,
    tokenizer: Tokenizer,
    /// The same tokenizer without padding (the native engine packs texts unpadded).
    unpadded: Tokenizer,
}

/// A BERT-family embedder loaded from a Hugging Face directory.
pub struct BertEmbedder {
    loaded: OnceLock<std::result::Result<Loaded, String>>,
    source: Source,
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
    /// Open a model directory: the files are checked and the config read now; the weights and
    /// the tokenizer are loaded on the first call that needs them, so a run whose query
    /// vectors are all cached never loads the model.
    pub fn load(dir: &Path, options: EmbedderOptions) -> Result<Self> {
        let (config_path, weights, tok_path) = model_files(dir)?;
        let (cfg, model_type) = read_config(&config_path)?;
        if !matches!(model_type.as_str(), "bert" | "xlm-roberta" | "roberta") {
            return Err(EmbedError::Unsupported {
                path: config_path,
                model_type,
            });
        }
        let native = if model_type == "bert" && options.engine == Engine::Native {
            Some(BertShape::from_config(&config_path, &cfg)?)
        } else {
            None
        };
        let dim = cfg.get("hidden_size").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("embedder")
            .to_string();
        Ok(BertEmbedder {
            loaded: OnceLock::new(),
            source: Source {
                config_path,
                weights,
                tok_path,
                cfg,
                model_type,
                native,
            },
            dim,
            options,
            name,
            device: Device::Cpu,
        })
    }

    fn load_now(&self) -> Result<Loaded> {
        let src = &self.source;
        let cfg = src.cfg.clone();
        let pad_id = cfg
            .get("pad_token_id")
            .and_then(|v| v.as_u64())
            .unwrap_or(0) as u32;
        let arch = match (src.native, src.model_type.as_str()) {
            (Some(shape), _) => Arch::Native(NativeBert::load(&src.weights, shape)?),
            (None, "bert") => {
                let vb = var_builder(&src.weights, &self.device)?;
                let c: bert::Config = parse_config(&src.config_path, cfg)?;
                Arch::Candle(CandleModel::Bert(bert::BertModel::load(vb, &c)?))
            }
            _ => {
                let vb = var_builder(&src.weights, &self.device)?;
                let c: xlm_roberta::Config = parse_config(&src.config_path, cfg)?;
                let vb = if vb.contains_tensor("roberta.embeddings.word_embeddings.weight") {
                    vb.pp("roberta")
                } else {
                    vb
                };
                Arch::Candle(CandleModel::XlmRoberta(xlm_roberta::XLMRobertaModel::new(
                    &c, vb,
                )?))
            }
        };
        let tokenizer = load_tokenizer(&src.tok_path, self.options.max_tokens, pad_id)?;
        let mut unpadded = tokenizer.clone();
        unpadded.with_padding(None);
        Ok(Loaded {
            arch,
            tokenizer,
            unpadded,
        })
    }

    /// The weights and tokenizer, loaded on first use (a load error is returned to every
    /// caller, not retried).
    fn loaded(&self) -> Result<&Loaded> {
        match self
            .loaded
            .get_or_init(|| self.load_now().map_err(|e| e.to_string()))
        {
            Ok(l) => Ok(l),
            Err(message) => Err(EmbedError::Load(message.clone())),
        }
    }

    /// Whether the weights have been loaded yet (a fully cached run never loads them).
    pub fn is_loaded(&self) -> bool {
        self.loaded.get().is_some()
    }

    /// Token ids of a text as the model sees it (prefix not added).
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .loaded()?
            .tokenizer
            .encode(text, true)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Embed texts as they are (no prefix), in batches of similar length.
    pub fn embed_raw(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let loaded = self.loaded()?;
        let model = match &loaded.arch {
            Arch::Native(model) => return self.embed_native(model, &loaded.unpadded, texts),
            Arch::Candle(model) => model,
        };
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for batch in order.chunks(self.options.batch_size.max(1)) {
            let inputs: Vec<&str> = batch.iter().map(|&i| texts[i].as_str()).collect();
            let vectors = self.forward_batch(model, &loaded.tokenizer, &inputs)?;
            for (&i, v) in batch.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// The options it was loaded with.
    pub fn options(&self) -> &EmbedderOptions {
        &self.options
    }

    /// Which forward pass this embedder runs.
    pub fn engine(&self) -> Engine {
        if self.source.native.is_some() {
            Engine::Native
        } else {
            Engine::Candle
        }
    }

    /// The native engine: tokenise every text (truncated, unpadded), then run packed batches of
    /// up to [`NATIVE_BATCH_TOKENS`] tokens.
    fn embed_native(
        &self,
        model: &NativeBert,
        unpadded: &Tokenizer,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>> {
        let max = self.options.max_tokens.min(model.shape().max_positions);
        let ids = crate::native::token_ids_of(unpadded, texts, max)?;
        crate::native::in_packed_batches(&ids, |seqs| model.embed_packed(seqs))
    }

    fn forward_batch(
        &self,
        model: &CandleModel,
        tokenizer: &Tokenizer,
        texts: &[&str],
    ) -> Result<Vec<Vec<f32>>> {
        let encodings = tokenizer
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
        let hidden = match model {
            CandleModel::Bert(m) => m.forward(&ids, &types, Some(&mask))?,
            CandleModel::XlmRoberta(m) => m.forward(&ids, &mask, &types, None, None, None)?,
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
    /// The engine is not part of the id: both engines give the same vectors (cosine ≥ 0.9999,
    /// tested), so stores, fitted policies and query caches stay valid across them.
    fn id(&self) -> String {
        self.options.id_of(&self.name)
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
