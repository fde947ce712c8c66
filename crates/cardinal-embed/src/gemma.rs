//! EmbeddingGemma-300M: a Gemma 3 encoder with bidirectional attention, mean pooling and two
//! dense projections (768 → 3072 → 768), run natively with the same packed batches and matrix
//! kernel as [`crate::native::NativeBert`].
//!
//! The model directory is what `cardinal models pull embeddinggemma-300m` installs:
//! `config.json`, `model.safetensors` (the transformer), `dense_1.safetensors` and
//! `dense_2.safetensors` (the sentence-transformers `2_Dense` and `3_Dense` modules) and
//! `tokenizer.json`. The arithmetic is the reference's (Hugging Face `Gemma3TextModel` with
//! `use_bidirectional_attention`, sentence-transformers pooling): embeddings scaled by
//! √hidden; per layer RMSNorm (`x · (1 + w)`) before and after attention and the MLP, RMSNorm of
//! each query and key head, rotary positions (base 10 000 on sliding layers, 1 000 000 on full
//! ones), one key/value head shared by the query heads, a tanh-GELU gated MLP; a final RMSNorm,
//! the mean over every token, the two projections, L2 normalisation.
//!
//! Inputs are truncated to the sliding window (512 tokens), so every layer sees the whole text
//! and the window never has to be applied. The model was trained with task prompts
//! ([`CLASSIFICATION_PROMPT`], [`QUERY_PROMPT`], [`DOCUMENT_PROMPT`]); the embedder's options
//! say which one its queries and passages get.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memmap2::Mmap;
use rayon::prelude::*;
use safetensors::{Dtype, SafeTensors};
use tokenizers::Tokenizer;

use crate::error::{EmbedError, Result};
use crate::matmul::Weight;
use crate::native::{
    attention, f32_tensor, fast_exp, in_packed_batches, lanes_sum, linear, map_weights,
    token_ids_of, transposed, weights_error, with_avx2,
};
use crate::{Embedder, EmbedderOptions};

/// The prompt of classification inputs (the model card's `Classification` prompt).
pub const CLASSIFICATION_PROMPT: &str = "task: classification | query: ";
/// The prompt of search queries.
pub const QUERY_PROMPT: &str = "task: search result | query: ";
/// The prompt of documents to be searched.
pub const DOCUMENT_PROMPT: &str = "title: none | text: ";

/// The shape of a Gemma 3 encoder, from `config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmaShape {
    pub hidden: usize,
    pub intermediate: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub rms_eps: f32,
    pub rope_global: f64,
    pub rope_local: f64,
    /// Per layer: full attention (else sliding, with the local rotary base).
    pub full_attention: Vec<bool>,
    /// Longest input: the sliding window (within it, sliding and full attention agree).
    pub max_tokens: usize,
    /// Attention logits are multiplied by this (`query_pre_attn_scalar^-1/2`).
    pub attention_scale: f32,
}

fn config_error(path: &Path, message: impl Into<String>) -> EmbedError {
    EmbedError::Read {
        path: path.to_path_buf(),
        message: format!("config: {}", message.into()),
    }
}

impl GemmaShape {
    pub fn from_config(path: &Path, cfg: &serde_json::Value) -> Result<GemmaShape> {
        let int = |key: &str| -> Result<usize> {
            cfg.get(key)
                .and_then(|v| v.as_u64())
                .map(|v| v as usize)
                .ok_or_else(|| {
                    config_error(path, format!("`{key}` is missing or not a whole number"))
                })
        };
        let num = |key: &str| -> Result<f64> {
            cfg.get(key)
                .and_then(|v| v.as_f64())
                .ok_or_else(|| config_error(path, format!("`{key}` is missing or not a number")))
        };
        let model_type = cfg.get("model_type").and_then(|v| v.as_str()).unwrap_or("");
        if model_type != "gemma3_text" {
            return Err(EmbedError::Unsupported {
                path: path.to_path_buf(),
                model_type: model_type.to_string(),
            });
        }
        if cfg
            .get("use_bidirectional_attention")
            .and_then(|v| v.as_bool())
            != Some(true)
        {
            return Err(config_error(
                path,
                "`use_bidirectional_attention` is not true: this is a decoder, not an encoder",
            ));
        }
        let act = cfg
            .get("hidden_activation")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        if act != "gelu_pytorch_tanh" {
            return Err(config_error(
                path,
                format!("hidden_activation `{act}` (the encoder runs `gelu_pytorch_tanh`)"),
            ));
        }
        for key in [
            "attn_logit_softcapping",
            "final_logit_softcapping",
            "rope_scaling",
        ] {
            if cfg.get(key).is_some_and(|v| !v.is_null()) {
                return Err(config_error(path, format!("`{key}` is set; not supported")));
            }
        }
        let layers = int("num_hidden_layers")?;
        let types = cfg
            .get("layer_types")
            .and_then(|v| v.as_array())
            .ok_or_else(|| config_error(path, "`layer_types` is missing"))?;
        let full_attention: Vec<bool> = types
            .iter()
            .map(|t| match t.as_str() {
                Some("full_attention") => Ok(true),
                Some("sliding_attention") => Ok(false),
                other => Err(config_error(path, format!("layer type {other:?}"))),
            })
            .collect::<Result<_>>()?;
        if full_attention.len() != layers {
            return Err(config_error(
                path,
                format!("{} layer types for {layers} layers", full_attention.len()),
            ));
        }
        let heads = int("num_attention_heads")?;
        let kv_heads = int("num_key_value_heads")?;
        if heads == 0 || kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
            return Err(config_error(
                path,
                format!("{heads} query heads cannot share {kv_heads} key/value heads"),
            ));
        }
        let head_dim = int("head_dim")?;
        if !head_dim.is_multiple_of(2) {
            return Err(config_error(path, "head_dim is odd"));
        }
        Ok(GemmaShape {
            hidden: int("hidden_size")?,
            intermediate: int("intermediate_size")?,
            layers,
            heads,
            kv_heads,
            head_dim,
            rms_eps: num("rms_norm_eps")? as f32,
            rope_global: num("rope_theta")?,
            rope_local: num("rope_local_base_freq")?,
            full_attention,
            max_tokens: int("sliding_window")?.min(int("max_position_embeddings")?),
            attention_scale: (1.0 / num("query_pre_attn_scalar")?.sqrt()) as f32,
        })
    }

    /// Width of the query (and of the repeated key / value) rows: heads × head_dim.
    fn hq(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Width of the fused q|k|v projection: query heads plus two key/value heads' worth.
    fn qkv_width(&self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_dim
    }
}

struct Layer {
    qkv_w: Weight,
    o_w: Weight,
    gate_up_w: Weight,
    down_w: Weight,
    /// RMSNorm gains, stored as `1 + w`.
    input_norm: Vec<f32>,
    post_attention_norm: Vec<f32>,
    pre_feedforward_norm: Vec<f32>,
    post_feedforward_norm: Vec<f32>,
    q_norm: Vec<f32>,
    k_norm: Vec<f32>,
    full: bool,
}

/// Rotary tables of one base: `cos` and `sin` of `position · inv_freq`, `[positions, d / 2]`.
struct Rope {
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Rope {
    fn new(base: f64, head_dim: usize, positions: usize) -> Rope {
        let half = head_dim / 2;
        let inv: Vec<f32> = (0..half)
            .map(|i| (1.0 / base.powf((2 * i) as f64 / head_dim as f64)) as f32)
            .collect();
        let mut cos = Vec::with_capacity(positions * half);
        let mut sin = Vec::with_capacity(positions * half);
        for p in 0..positions {
            for f in &inv {
                let a = p as f32 * f;
                cos.push(a.cos());
                sin.push(a.sin());
            }
        }
        Rope { cos, sin }
    }

    /// Rotate one head in place at position `p` (the "rotate half" convention).
    fn apply(&self, x: &mut [f32], p: usize) {
        let half = x.len() / 2;
        let c = &self.cos[p * half..(p + 1) * half];
        let s = &self.sin[p * half..(p + 1) * half];
        let (a, b) = x.split_at_mut(half);
        for i in 0..half {
            let (x1, x2) = (a[i], b[i]);
            a[i] = x1 * c[i] - x2 * s[i];
            b[i] = x2 * c[i] + x1 * s[i];
        }
    }
}

/// The encoder's weights, ready to run.
pub struct NativeGemma {
    shape: GemmaShape,
    mmap: Mmap,
    embed_offset: usize,
    vocab: usize,
    layers: Vec<Layer>,
    final_norm: Vec<f32>,
    dense: Vec<Weight>,
    rope_local: Rope,
    rope_global: Rope,
    zeros: Vec<f32>,
}

fn gain(w: Vec<f32>) -> Vec<f32> {
    w.into_iter().map(|v| 1.0 + v).collect()
}

impl NativeGemma {
    /// Load the transformer (`weights`) and the two dense projections.
    pub fn load(weights: &Path, dense: [&Path; 2], shape: GemmaShape) -> Result<NativeGemma> {
        let mmap = map_weights(weights)?;
        let st = SafeTensors::deserialize(&mmap)
            .map_err(|e| weights_error(weights, format!("safetensors: {e}")))?;
        let h = shape.hidden;
        let hd = shape.head_dim;
        let inter = shape.intermediate;
        let embed = st
            .tensor("embed_tokens.weight")
            .map_err(|e| weights_error(weights, format!("tensor embed_tokens.weight: {e}")))?;
        if embed.dtype() != Dtype::F32 || embed.shape().len() != 2 || embed.shape()[1] != h {
            return Err(weights_error(
                weights,
                format!(
                    "tensor embed_tokens.weight: {:?} {:?}",
                    embed.dtype(),
                    embed.shape()
                ),
            ));
        }
        let vocab = embed.shape()[0];
        let embed_offset = embed.data().as_ptr() as usize - mmap.as_ptr() as usize;
        let mut layers = Vec::with_capacity(shape.layers);
        for l in 0..shape.layers {
            let p = format!("layers.{l}.");
            let w = |n: &str, dims: &[usize]| f32_tensor(&st, weights, &format!("{p}{n}"), dims);
            let mut qkv = w("self_attn.q_proj.weight", &[shape.hq(), h])?;
            qkv.extend(w("self_attn.k_proj.weight", &[shape.kv_heads * hd, h])?);
            qkv.extend(w("self_attn.v_proj.weight", &[shape.kv_heads * hd, h])?);
            let mut gate_up = w("mlp.gate_proj.weight", &[inter, h])?;
            gate_up.extend(w("mlp.up_proj.weight", &[inter, h])?);
            layers.push(Layer {
                qkv_w: transposed(qkv, shape.qkv_width(), h),
                o_w: transposed(
                    w("self_attn.o_proj.weight", &[h, shape.hq()])?,
                    h,
                    shape.hq(),
                ),
                gate_up_w: transposed(gate_up, 2 * inter, h),
                down_w: transposed(w("mlp.down_proj.weight", &[h, inter])?, h, inter),
                input_norm: gain(w("input_layernorm.weight", &[h])?),
                post_attention_norm: gain(w("post_attention_layernorm.weight", &[h])?),
                pre_feedforward_norm: gain(w("pre_feedforward_layernorm.weight", &[h])?),
                post_feedforward_norm: gain(w("post_feedforward_layernorm.weight", &[h])?),
                q_norm: gain(w("self_attn.q_norm.weight", &[hd])?),
                k_norm: gain(w("self_attn.k_norm.weight", &[hd])?),
                full: shape.full_attention[l],
            });
        }
        let final_norm = gain(f32_tensor(&st, weights, "norm.weight", &[h])?);
        drop(st);
        let mut projections = Vec::with_capacity(2);
        let mut width = h;
        for path in dense {
            let m = map_weights(path)?;
            let st = SafeTensors::deserialize(&m)
                .map_err(|e| weights_error(path, format!("safetensors: {e}")))?;
            let t = st
                .tensor("linear.weight")
                .map_err(|e| weights_error(path, format!("tensor linear.weight: {e}")))?;
            let dims = t.shape().to_vec();
            if dims.len() != 2 || dims[1] != width {
                return Err(weights_error(
                    path,
                    format!("tensor linear.weight: {dims:?}, expected [_, {width}]"),
                ));
            }
            let w = f32_tensor(&st, path, "linear.weight", &dims)?;
            projections.push(transposed(w, dims[0], width));
            width = dims[0];
        }
        let widest = [shape.qkv_width(), 2 * inter, h, width]
            .into_iter()
            .chain(projections.iter().map(Weight::n))
            .max()
            .unwrap_or(h);
        Ok(NativeGemma {
            rope_local: Rope::new(shape.rope_local, hd, shape.max_tokens),
            rope_global: Rope::new(shape.rope_global, hd, shape.max_tokens),
            shape,
            mmap,
            embed_offset,
            vocab,
            layers,
            final_norm,
            dense: projections,
            zeros: vec![0f32; widest],
        })
    }

    pub fn shape(&self) -> &GemmaShape {
        &self.shape
    }

    /// Dimension of the output vectors.
    pub fn dim(&self) -> usize {
        self.dense
            .last()
            .map(Weight::n)
            .unwrap_or(self.shape.hidden)
    }

    fn embed_row(&self, id: u32, out: &mut [f32]) -> Result<()> {
        let id = id as usize;
        if id >= self.vocab {
            return Err(EmbedError::Tokenizer(format!(
                "token id {id} is outside the vocabulary ({} rows)",
                self.vocab
            )));
        }
        let h = self.shape.hidden;
        let scale = (h as f32).sqrt();
        let start = self.embed_offset + id * h * 4;
        for (o, b) in out
            .iter_mut()
            .zip(self.mmap[start..start + h * 4].chunks_exact(4))
        {
            *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * scale;
        }
        Ok(())
    }

    /// Pooled, projected, L2-normalised vectors of token-id sequences (each at most
    /// [`GemmaShape::max_tokens`] long), run as one packed batch.
    pub fn embed_packed(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>> {
        let s = &self.shape;
        let (h, inter) = (s.hidden, s.intermediate);
        let total: usize = seqs.iter().map(|q| q.len()).sum();
        if total == 0 {
            return Ok(seqs.iter().map(|_| vec![0.0; self.dim()]).collect());
        }
        let mut spans = Vec::with_capacity(seqs.len());
        let mut positions = Vec::with_capacity(total);
        let mut x = vec![0f32; total * h];
        let mut row = 0;
        for q in seqs {
            if q.len() > s.max_tokens {
                return Err(EmbedError::Tokenizer(format!(
                    "{} tokens, more than the encoder's {}",
                    q.len(),
                    s.max_tokens
                )));
            }
            spans.push((row, q.len()));
            for (p, &id) in q.iter().enumerate() {
                self.embed_row(id, &mut x[(row + p) * h..(row + p + 1) * h])?;
                positions.push(p);
            }
            row += q.len();
        }
        let hq = s.hq();
        let width = s.qkv_width();
        let mut xn = vec![0f32; total * h];
        let mut qkv = vec![0f32; total * width];
        let mut qkv_heads = vec![0f32; total * 3 * hq];
        let mut ctx = vec![0f32; total * hq];
        let mut tmp = vec![0f32; total * h];
        let mut gate_up = vec![0f32; total * 2 * inter];
        let mut act = vec![0f32; total * inter];
        for layer in &self.layers {
            rms_rows(&x, &mut xn, h, &layer.input_norm, s.rms_eps);
            linear(&xn, total, h, &layer.qkv_w, &self.zeros[..width], &mut qkv);
            let rope = if layer.full {
                &self.rope_global
            } else {
                &self.rope_local
            };
            qkv_heads
                .par_chunks_mut(3 * hq)
                .zip(qkv.par_chunks(width))
                .zip(positions.par_iter())
                .for_each(|((out, src), &p)| self.heads_of_row(layer, rope, src, p, out));
            attention(&qkv_heads, &spans, hq, s.heads, s.attention_scale, &mut ctx);
            linear(&ctx, total, hq, &layer.o_w, &self.zeros[..h], &mut tmp);
            add_normed_rows(&mut x, &tmp, h, &layer.post_attention_norm, s.rms_eps);
            rms_rows(&x, &mut xn, h, &layer.pre_feedforward_norm, s.rms_eps);
            linear(
                &xn,
                total,
                h,
                &layer.gate_up_w,
                &self.zeros[..2 * inter],
                &mut gate_up,
            );
            act.par_chunks_mut(inter)
                .zip(gate_up.par_chunks(2 * inter))
                .for_each(|(a, gu)| gated_gelu(gu, a));
            linear(
                &act,
                total,
                inter,
                &layer.down_w,
                &self.zeros[..h],
                &mut tmp,
            );
            add_normed_rows(&mut x, &tmp, h, &layer.post_feedforward_norm, s.rms_eps);
        }
        rms_rows(&x, &mut xn, h, &self.final_norm, s.rms_eps);
        let mut pooled = vec![0f32; seqs.len() * h];
        for (out, &(start, len)) in pooled.chunks_exact_mut(h).zip(&spans) {
            for r in start..start + len {
                for (a, b) in out.iter_mut().zip(&xn[r * h..(r + 1) * h]) {
                    *a += b;
                }
            }
            let n = len.max(1) as f32;
            out.iter_mut().for_each(|a| *a /= n);
        }
        let mut cur = pooled;
        let mut k = h;
        for w in &self.dense {
            let mut next = vec![0f32; seqs.len() * w.n()];
            linear(&cur, seqs.len(), k, w, &self.zeros[..w.n()], &mut next);
            k = w.n();
            cur = next;
        }
        Ok(cur
            .chunks_exact(k)
            .map(|v| {
                let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
                v.iter().map(|a| a / norm).collect()
            })
            .collect())
    }

    /// One token's fused projection → normalised, rotated query heads and the shared key and
    /// value heads repeated per query head, laid out `[q | k | v]` for [`attention`].
    fn heads_of_row(&self, layer: &Layer, rope: &Rope, src: &[f32], p: usize, out: &mut [f32]) {
        let s = &self.shape;
        let (hd, hq) = (s.head_dim, s.hq());
        let group = s.heads / s.kv_heads;
        for head in 0..s.heads {
            let q = &mut out[head * hd..(head + 1) * hd];
            rms_one(
                &src[head * hd..(head + 1) * hd],
                q,
                &layer.q_norm,
                s.rms_eps,
            );
            rope.apply(q, p);
        }
        let k_base = hq;
        let v_base = hq + s.kv_heads * hd;
        for kv in 0..s.kv_heads {
            // The key is normalised and rotated once, in the slot of the group's first head,
            // then copied to the others.
            let first = kv * group;
            let k = &mut out[hq + first * hd..hq + (first + 1) * hd];
            rms_one(
                &src[k_base + kv * hd..k_base + (kv + 1) * hd],
                k,
                &layer.k_norm,
                s.rms_eps,
            );
            rope.apply(k, p);
            let v = &src[v_base + kv * hd..v_base + (kv + 1) * hd];
            for head in first..first + group {
                if head != first {
                    out.copy_within(hq + first * hd..hq + (first + 1) * hd, hq + head * hd);
                }
                out[2 * hq + head * hd..2 * hq + (head + 1) * hd].copy_from_slice(v);
            }
        }
    }
}

with_avx2! {
    /// `out = x / rms(x) · g` for one vector (`g` already holds `1 + w`).
    fn rms_one = rms_one_body(x: &[f32], out: &mut [f32], g: &[f32], eps: f32)
}

#[inline(always)]
fn rms_one_body(x: &[f32], out: &mut [f32], g: &[f32], eps: f32) {
    for (o, v) in out.iter_mut().zip(x) {
        *o = v * v;
    }
    let inv = 1.0 / (lanes_sum(out) / x.len() as f32 + eps).sqrt();
    for ((o, v), gg) in out.iter_mut().zip(x).zip(g) {
        *o = v * inv * gg;
    }
}

/// `out = RMSNorm(x)` row by row, the rows split across threads.
fn rms_rows(x: &[f32], out: &mut [f32], h: usize, g: &[f32], eps: f32) {
    out.par_chunks_mut(h)
        .zip(x.par_chunks(h))
        .for_each(|(o, r)| rms_one(r, o, g, eps));
}

/// `x += RMSNorm(y)` row by row (Gemma's post-attention and post-MLP norms).
fn add_normed_rows(x: &mut [f32], y: &[f32], h: usize, g: &[f32], eps: f32) {
    x.par_chunks_mut(h)
        .zip(y.par_chunks(h))
        // One scratch row per worker, not one per row.
        .for_each_init(
            || vec![0f32; h],
            |n, (xr, yr)| {
                rms_one(yr, n, g, eps);
                for (a, b) in xr.iter_mut().zip(n.iter()) {
                    *a += b;
                }
            },
        );
}

with_avx2! {
    /// `out = gelu_tanh(gate) · up` for one row laid out `[gate | up]`.
    fn gated_gelu = gated_gelu_body(gate_up: &[f32], out: &mut [f32])
}

#[inline(always)]
fn gated_gelu_body(gate_up: &[f32], out: &mut [f32]) {
    let n = out.len();
    let (gate, up) = gate_up.split_at(n);
    const C: f32 = 0.797_884_6; // √(2/π)
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        // tanh(t) = 1 - 2 / (e^{2t} + 1), with the inlined exponential.
        let t = C * (g + 0.044_715 * g * g * g);
        let tanh = 1.0 - 2.0 / (fast_exp(2.0 * t) + 1.0);
        *o = 0.5 * g * (1.0 + tanh) * u;
    }
}

/// EmbeddingGemma as an [`Embedder`]: queries and passages get the prompts of its options
/// (by default [`CLASSIFICATION_PROMPT`] for both: the policy's use); the weights load on the
/// first call that needs them.
pub struct GemmaEmbedder {
    dir: PathBuf,
    shape: GemmaShape,
    /// Width of the output vectors: the last projection's rows (read from its header).
    dim: usize,
    options: EmbedderOptions,
    name: String,
    loaded: OnceLock<std::result::Result<(NativeGemma, Tokenizer), String>>,
}

/// The files of an installed EmbeddingGemma directory.
const FILES: [&str; 5] = [
    "config.json",
    "model.safetensors",
    "dense_1.safetensors",
    "dense_2.safetensors",
    "tokenizer.json",
];

impl GemmaEmbedder {
    /// Default options: the classification prompt on both sides, the whole sliding window.
    pub fn default_options() -> EmbedderOptions {
        EmbedderOptions {
            query_prefix: CLASSIFICATION_PROMPT.into(),
            passage_prefix: CLASSIFICATION_PROMPT.into(),
            max_tokens: 512,
            ..EmbedderOptions::default()
        }
    }

    /// Open a model directory: the files are checked and the config read now, the weights on
    /// first use.
    pub fn load(dir: &Path, options: EmbedderOptions) -> Result<GemmaEmbedder> {
        for file in FILES {
            if !dir.join(file).is_file() {
                return Err(EmbedError::MissingFile {
                    dir: dir.to_path_buf(),
                    file,
                });
            }
        }
        let (cfg, _) = crate::bert::read_config(&dir.join("config.json"))?;
        let shape = GemmaShape::from_config(&dir.join("config.json"), &cfg)?;
        // The output width, from the last projection's header (the file is mapped, not read).
        let last = dir.join(FILES[3]);
        let m = map_weights(&last)?;
        let (_, meta) = SafeTensors::read_metadata(&m)
            .map_err(|e| weights_error(&last, format!("safetensors: {e}")))?;
        let dim = meta
            .tensors()
            .get("linear.weight")
            .and_then(|t| t.shape.first().copied())
            .ok_or_else(|| weights_error(&last, "no 2-D tensor linear.weight".into()))?;
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("embeddinggemma")
            .to_string();
        Ok(GemmaEmbedder {
            dir: dir.to_path_buf(),
            dim,
            shape,
            options,
            name,
            loaded: OnceLock::new(),
        })
    }

    fn loaded(&self) -> Result<&(NativeGemma, Tokenizer)> {
        let r = self.loaded.get_or_init(|| {
            let model = NativeGemma::load(
                &self.dir.join(FILES[1]),
                [&self.dir.join(FILES[2]), &self.dir.join(FILES[3])],
                self.shape.clone(),
            )
            .map_err(|e| e.to_string())?;
            let tok = Tokenizer::from_file(self.dir.join(FILES[4]))
                .map_err(|e| format!("{}: {e}", self.dir.join(FILES[4]).display()))?;
            Ok((model, tok))
        });
        r.as_ref().map_err(|e| EmbedError::Load(e.clone()))
    }

    /// Whether the weights have been loaded (a run whose vectors are all cached never loads).
    pub fn is_loaded(&self) -> bool {
        self.loaded.get().is_some()
    }

    /// Token ids of `text` as the encoder sees it (special tokens added, truncated).
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>> {
        let (_, tok) = self.loaded()?;
        let mut ids = token_ids_of(tok, &[text.to_string()], self.max_tokens())?;
        Ok(ids.pop().unwrap_or_default())
    }

    /// Longest input in tokens: the options' limit within the sliding window.
    fn max_tokens(&self) -> usize {
        self.options.max_tokens.min(self.shape.max_tokens)
    }

    pub fn options(&self) -> &EmbedderOptions {
        &self.options
    }

    /// Vectors of `texts` exactly as given (no prompt added), in packed batches.
    pub fn embed_raw(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let (model, tok) = self.loaded()?;
        let ids = token_ids_of(tok, texts, self.max_tokens())?;
        in_packed_batches(&ids, |seqs| model.embed_packed(seqs))
    }

    fn prefixed(&self, prefix: &str, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let t: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        self.embed_raw(&t)
    }
}

impl Embedder for GemmaEmbedder {
    fn id(&self) -> String {
        self.options.id_of(&self.name)
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.prefixed(&self.options.query_prefix, texts)
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.prefixed(&self.options.passage_prefix, texts)
    }
}
