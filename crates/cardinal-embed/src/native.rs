//! A native forward pass of the BERT encoder (multilingual-e5-small's architecture), written for
//! throughput on a few CPU cores.
//!
//! What makes it faster than the general tensor path:
//! - **Packed batches, no padding.** The texts of a batch are laid end to end as one
//!   `[tokens, hidden]` matrix; every linear layer is one large matrix product over all tokens
//!   of the batch, and attention runs per text over its own rows only. No padded position is
//!   computed and no attention mask is needed.
//! - **Fused and in place.** Query, key and value are one `[3·hidden, hidden]` product; bias,
//!   GELU, residual and LayerNorm are applied in place on the product's output, without
//!   intermediate tensors.
//! - **The token embedding table stays memory-mapped**; only the rows of the batch's tokens are
//!   read (the table is 384 MB of the model's 470 MB).
//!
//! The arithmetic is the model's own (exact-erf GELU via a 1.5e-7-accurate approximation,
//! LayerNorm with the configured epsilon), so vectors match the reference forward pass to
//! cosine ≥ 0.9999 (tested against the numpy reference and against the candle path).

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;
use rayon::prelude::*;
use safetensors::{Dtype, SafeTensors};

use crate::error::{EmbedError, Result};
use crate::matmul::Weight;

/// The shape of a BERT encoder, from `config.json`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BertShape {
    pub hidden: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub layers: usize,
    pub max_positions: usize,
    pub layer_norm_eps: f32,
}

impl BertShape {
    pub(crate) fn from_config(path: &Path, cfg: &serde_json::Value) -> Result<BertShape> {
        let get = |key: &str| -> Result<usize> {
            cfg.get(key)
                .and_then(|v| v.as_u64())
                .map(|v| v as usize)
                .ok_or_else(|| EmbedError::Read {
                    path: path.to_path_buf(),
                    message: format!("config: `{key}` is missing or not a whole number"),
                })
        };
        let act = cfg
            .get("hidden_act")
            .and_then(|v| v.as_str())
            .unwrap_or("gelu");
        if act != "gelu" {
            return Err(EmbedError::Read {
                path: path.to_path_buf(),
                message: format!("config: hidden_act `{act}` (the native encoder runs `gelu`)"),
            });
        }
        let shape = BertShape {
            hidden: get("hidden_size")?,
            heads: get("num_attention_heads")?,
            intermediate: get("intermediate_size")?,
            layers: get("num_hidden_layers")?,
            max_positions: get("max_position_embeddings")?,
            layer_norm_eps: cfg
                .get("layer_norm_eps")
                .and_then(|v| v.as_f64())
                .unwrap_or(1e-12) as f32,
        };
        if shape.heads == 0 || !shape.hidden.is_multiple_of(shape.heads) {
            return Err(EmbedError::Read {
                path: path.to_path_buf(),
                message: format!(
                    "config: hidden_size {} is not a multiple of num_attention_heads {}",
                    shape.hidden, shape.heads
                ),
            });
        }
        Ok(shape)
    }
}

struct Layer {
    qkv_w: Weight, // [hidden, 3·hidden]: transposed, like every weight below
    qkv_b: Vec<f32>,
    out_w: Weight,
    out_b: Vec<f32>,
    ln1_g: Vec<f32>,
    ln1_b: Vec<f32>,
    up_w: Weight, // [hidden, intermediate]
    up_b: Vec<f32>,
    down_w: Weight, // [intermediate, hidden]
    down_b: Vec<f32>,
    ln2_g: Vec<f32>,
    ln2_b: Vec<f32>,
}

/// The encoder's weights, ready to run.
pub struct NativeBert {
    shape: BertShape,
    mmap: Mmap,
    /// Byte offset (in `mmap`) and row count of the word-embedding table.
    word_offset: usize,
    vocab: usize,
    position: Vec<f32>,
    token_type0: Vec<f32>,
    emb_ln_g: Vec<f32>,
    emb_ln_b: Vec<f32>,
    layers: Vec<Layer>,
}

/// Threads the native engine runs its matrix products and attention on (rayon's global pool:
/// `RAYON_NUM_THREADS`, else one per CPU).
pub fn threads() -> usize {
    rayon::current_num_threads()
}

/// GFLOP/s of the engine's matrix product on a `[rows, k] · [k, n]` problem, median of `reps`
/// runs: the ceiling the encoder's speed is read against in `cardinal bench embed`.
pub fn matmul_gflops(rows: usize, k: usize, n: usize, reps: usize) -> f64 {
    let x: Vec<f32> = (0..rows * k)
        .map(|i| ((i % 97) as f32 - 48.0) / 97.0)
        .collect();
    let w: Vec<f32> = (0..k * n)
        .map(|i| ((i % 89) as f32 - 44.0) / 89.0)
        .collect();
    let w = Weight::new(w, k, n);
    let b = vec![0f32; n];
    let mut out = vec![0f32; rows * n];
    let mut secs: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let t = std::time::Instant::now();
            linear(&x, rows, k, &w, &b, &mut out);
            t.elapsed().as_secs_f64()
        })
        .collect();
    secs.sort_by(f64::total_cmp);
    2.0 * (rows * k * n) as f64 / secs[secs.len() / 2] / 1e9
}

pub(crate) fn weights_error(path: &Path, message: String) -> EmbedError {
    EmbedError::Read {
        path: path.to_path_buf(),
        message,
    }
}

/// Memory-map a weights file.
pub(crate) fn map_weights(path: &Path) -> Result<Mmap> {
    let file = File::open(path).map_err(|e| weights_error(path, e.to_string()))?;
    // SAFETY: read-only map of a file written once, atomically, by `cardinal models pull`.
    unsafe { Mmap::map(&file) }.map_err(|e| weights_error(path, e.to_string()))
}

/// One f32 tensor of `st` (read from `path`) with the expected shape, copied out.
pub(crate) fn f32_tensor(
    st: &SafeTensors<'_>,
    path: &Path,
    name: &str,
    dims: &[usize],
) -> Result<Vec<f32>> {
    let t = st
        .tensor(name)
        .map_err(|e| weights_error(path, format!("tensor {name}: {e}")))?;
    if t.dtype() != Dtype::F32 || t.shape() != dims {
        return Err(weights_error(
            path,
            format!(
                "tensor {name}: {:?} {:?}, expected F32 {dims:?}",
                t.dtype(),
                t.shape()
            ),
        ));
    }
    Ok(t.data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// Token ids of every text (special tokens added, truncated to `max`), tokenised on every
/// thread (the tokenizer is read-only).
pub(crate) fn token_ids_of(
    tokenizer: &tokenizers::Tokenizer,
    texts: &[String],
    max: usize,
) -> Result<Vec<Vec<u32>>> {
    texts
        .par_iter()
        .map(|t| {
            let enc = tokenizer
                .encode(t.as_str(), true)
                .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
            let mut v = enc.get_ids().to_vec();
            v.truncate(max);
            Ok(v)
        })
        .collect()
}

/// Run `embed` over consecutive packed batches of at most [`crate::NATIVE_BATCH_TOKENS`]
/// tokens (a longer sequence is a batch of its own); vectors come back in input order.
pub(crate) fn in_packed_batches(
    ids: &[Vec<u32>],
    embed: impl Fn(&[&[u32]]) -> Result<Vec<Vec<f32>>>,
) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(ids.len());
    let mut batch: Vec<&[u32]> = Vec::new();
    let mut tokens = 0;
    for seq in ids {
        if !batch.is_empty() && tokens + seq.len() > crate::NATIVE_BATCH_TOKENS {
            out.extend(embed(&batch)?);
            batch.clear();
            tokens = 0;
        }
        tokens += seq.len();
        batch.push(seq);
    }
    if !batch.is_empty() {
        out.extend(embed(&batch)?);
    }
    Ok(out)
}

impl NativeBert {
    /// Load from a safetensors file (f32 tensors, with or without a `bert.` prefix).
    pub fn load(weights: &Path, shape: BertShape) -> Result<NativeBert> {
        let mmap = map_weights(weights)?;
        let st = SafeTensors::deserialize(&mmap)
            .map_err(|e| weights_error(weights, format!("safetensors: {e}")))?;
        let prefix = if st.names().iter().any(|n| n.starts_with("bert.")) {
            "bert."
        } else {
            ""
        };
        let h = shape.hidden;
        let tensor = |name: &str, dims: &[usize]| -> Result<Vec<f32>> {
            f32_tensor(&st, weights, &format!("{prefix}{name}"), dims)
        };
        let word_name = format!("{prefix}embeddings.word_embeddings.weight");
        let word = st
            .tensor(&word_name)
            .map_err(|e| weights_error(weights, format!("tensor {word_name}: {e}")))?;
        if word.dtype() != Dtype::F32 || word.shape().len() != 2 || word.shape()[1] != h {
            return Err(weights_error(
                weights,
                format!("tensor {word_name}: {:?} {:?}", word.dtype(), word.shape()),
            ));
        }
        let vocab = word.shape()[0];
        let word_offset = word.data().as_ptr() as usize - mmap.as_ptr() as usize;
        let position = tensor(
            "embeddings.position_embeddings.weight",
            &[shape.max_positions, h],
        )?;
        let token_type = tensor("embeddings.token_type_embeddings.weight", &[2, h])
            .or_else(|_| tensor("embeddings.token_type_embeddings.weight", &[1, h]))?;
        let token_type0 = token_type[..h].to_vec();
        let emb_ln_g = tensor("embeddings.LayerNorm.weight", &[h])?;
        let emb_ln_b = tensor("embeddings.LayerNorm.bias", &[h])?;
        let mut layers = Vec::with_capacity(shape.layers);
        let inter = shape.intermediate;
        // Weights are stored transposed, [in, out] row-major: the matrix products then read a
        // plain row-major right-hand side.
        let t = transposed;
        for l in 0..shape.layers {
            let p = format!("encoder.layer.{l}.");
            let w = |n: &str, dims: &[usize]| tensor(&format!("{p}{n}"), dims);
            let mut qkv_w = w("attention.self.query.weight", &[h, h])?;
            qkv_w.extend(w("attention.self.key.weight", &[h, h])?);
            qkv_w.extend(w("attention.self.value.weight", &[h, h])?);
            let mut qkv_b = w("attention.self.query.bias", &[h])?;
            qkv_b.extend(w("attention.self.key.bias", &[h])?);
            qkv_b.extend(w("attention.self.value.bias", &[h])?);
            layers.push(Layer {
                qkv_w: t(qkv_w, 3 * h, h),
                qkv_b,
                out_w: t(w("attention.output.dense.weight", &[h, h])?, h, h),
                out_b: w("attention.output.dense.bias", &[h])?,
                ln1_g: w("attention.output.LayerNorm.weight", &[h])?,
                ln1_b: w("attention.output.LayerNorm.bias", &[h])?,
                up_w: t(w("intermediate.dense.weight", &[inter, h])?, inter, h),
                up_b: w("intermediate.dense.bias", &[inter])?,
                down_w: t(w("output.dense.weight", &[h, inter])?, h, inter),
                down_b: w("output.dense.bias", &[h])?,
                ln2_g: w("output.LayerNorm.weight", &[h])?,
                ln2_b: w("output.LayerNorm.bias", &[h])?,
            });
        }
        drop(st);
        Ok(NativeBert {
            shape,
            mmap,
            word_offset,
            vocab,
            position,
            token_type0,
            emb_ln_g,
            emb_ln_b,
            layers,
        })
    }

    pub fn shape(&self) -> BertShape {
        self.shape
    }

    fn word_row(&self, id: u32, out: &mut [f32]) -> Result<()> {
        let id = id as usize;
        if id >= self.vocab {
            return Err(EmbedError::Tokenizer(format!(
                "token id {id} is outside the vocabulary ({} rows)",
                self.vocab
            )));
        }
        let h = self.shape.hidden;
        let start = self.word_offset + id * h * 4;
        let bytes = &self.mmap[start..start + h * 4];
        for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        Ok(())
    }

    /// Mean-pooled, L2-normalised vectors of token-id sequences (each already truncated to the
    /// model's positions), all run as one packed batch.
    pub fn embed_packed(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>> {
        let h = self.shape.hidden;
        let total: usize = seqs.iter().map(|s| s.len()).sum();
        if total == 0 {
            return Ok(seqs.iter().map(|_| vec![0.0; h]).collect());
        }
        let mut spans = Vec::with_capacity(seqs.len());
        let mut x = vec![0f32; total * h];
        let mut row = 0;
        for s in seqs {
            if s.len() > self.shape.max_positions {
                return Err(EmbedError::Tokenizer(format!(
                    "{} tokens, more than the model's {} positions",
                    s.len(),
                    self.shape.max_positions
                )));
            }
            spans.push((row, s.len()));
            for (p, &id) in s.iter().enumerate() {
                let out = &mut x[(row + p) * h..(row + p + 1) * h];
                self.word_row(id, out)?;
                let pos = &self.position[p * h..(p + 1) * h];
                for ((o, a), b) in out.iter_mut().zip(pos).zip(&self.token_type0) {
                    *o += a + b;
                }
            }
            row += s.len();
        }
        let eps = self.shape.layer_norm_eps;
        residual_layer_norm(&mut x, &[], h, &self.emb_ln_g, &self.emb_ln_b, eps);

        let inter = self.shape.intermediate;
        let mut qkv = vec![0f32; total * 3 * h];
        let mut ctx = vec![0f32; total * h];
        let mut tmp = vec![0f32; total * h];
        let mut up = vec![0f32; total * inter];
        for layer in &self.layers {
            linear(&x, total, h, &layer.qkv_w, &layer.qkv_b, &mut qkv);
            let heads = self.shape.heads;
            let scale = 1.0 / ((h / heads) as f32).sqrt();
            attention(&qkv, &spans, h, heads, scale, &mut ctx);
            linear(&ctx, total, h, &layer.out_w, &layer.out_b, &mut tmp);
            residual_layer_norm(&mut x, &tmp, h, &layer.ln1_g, &layer.ln1_b, eps);
            linear(&x, total, h, &layer.up_w, &layer.up_b, &mut up);
            gelu_in_place(&mut up);
            linear(&up, total, inter, &layer.down_w, &layer.down_b, &mut tmp);
            residual_layer_norm(&mut x, &tmp, h, &layer.ln2_g, &layer.ln2_b, eps);
        }
        Ok(spans
            .iter()
            .map(|&(start, len)| {
                let mut v = vec![0f32; h];
                for r in start..start + len {
                    for (a, b) in v.iter_mut().zip(&x[r * h..(r + 1) * h]) {
                        *a += b;
                    }
                }
                let n = len.max(1) as f32;
                v.iter_mut().for_each(|a| *a /= n);
                let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
                v.iter_mut().for_each(|a| *a /= norm);
                v
            })
            .collect())
    }
}

/// Self-attention of every text over its own rows, one (text, head) pair per task. `qkv` rows
/// are `[q | k | v]`, each `hq = heads · d` wide (keys and values repeated per head when the
/// model shares them across heads).
pub(crate) fn attention(
    qkv: &[f32],
    spans: &[(usize, usize)],
    hq: usize,
    heads: usize,
    scale: f32,
    ctx: &mut [f32],
) {
    let d = hq / heads;
    // Each task writes the context of one head of one text: rows of the text, columns of
    // the head. Results are gathered per task and then scattered, so no two tasks alias.
    let tasks: Vec<(usize, usize, usize)> = spans
        .iter()
        .flat_map(|&(start, len)| (0..heads).map(move |hd| (start, len, hd)))
        .collect();
    let outputs: Vec<Vec<f32>> = tasks
        .par_iter()
        .map(|&(start, len, hd)| attend_one(qkv, hq, d, scale, start, len, hd))
        .collect();
    for (&(start, len, hd), out) in tasks.iter().zip(outputs) {
        for i in 0..len {
            let dst = (start + i) * hq + hd * d;
            ctx[dst..dst + d].copy_from_slice(&out[i * d..(i + 1) * d]);
        }
    }
}

/// A PyTorch-layout `[n, k]` weight as the `[k, n]` right-hand side the products read.
pub(crate) fn transposed(w: Vec<f32>, n: usize, k: usize) -> Weight {
    let mut out = vec![0f32; n * k];
    for r in 0..n {
        for c in 0..k {
            out[c * n + r] = w[r * k + c];
        }
    }
    Weight::new(out, k, n)
}

/// Defines `$name` as a call of the `#[inline(always)]` function `$body`, compiled a second
/// time with AVX2 and FMA enabled and chosen at run time when the CPU has them. The crate is
/// built for the x86-64 baseline (SSE2), so without this the loops below are not vectorised
/// past 4 lanes (the matrix products dispatch on their own, in `crate::matmul`).
macro_rules! with_avx2 {
    ($(#[$meta:meta])* fn $name:ident = $body:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)?) => {
        $(#[$meta])*
        fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                unsafe fn fast($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU has AVX2 and FMA, checked just above.
                    return unsafe { fast($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}
pub(crate) use with_avx2;

with_avx2! {
    /// One head of one text: softmax(Q Kᵀ · scale) V over the text's rows.
    fn attend_one = attend_one_body(
        qkv: &[f32], h: usize, d: usize, scale: f32, start: usize, len: usize, hd: usize
    ) -> Vec<f32>
}

#[inline(always)]
fn attend_one_body(
    qkv: &[f32],
    h: usize,
    d: usize,
    scale: f32,
    start: usize,
    len: usize,
    hd: usize,
) -> Vec<f32> {
    // Q pre-scaled; K transposed (d rows of `len`), so the scores of a query row are `d` axpys
    // over contiguous memory, which vectorise without horizontal sums.
    let mut q = vec![0f32; len * d];
    let mut kt = vec![0f32; d * len];
    let mut v = vec![0f32; len * d];
    for i in 0..len {
        let base = (start + i) * 3 * h + hd * d;
        for (dst, src) in q[i * d..(i + 1) * d].iter_mut().zip(&qkv[base..base + d]) {
            *dst = src * scale;
        }
        for c in 0..d {
            kt[c * len + i] = qkv[base + h + c];
        }
        v[i * d..(i + 1) * d].copy_from_slice(&qkv[base + 2 * h..base + 2 * h + d]);
    }
    let mut out = vec![0f32; len * d];
    let mut scores = vec![0f32; len];
    for i in 0..len {
        scores.fill(0.0);
        for c in 0..d {
            let qc = q[i * d + c];
            for (s, k) in scores.iter_mut().zip(&kt[c * len..(c + 1) * len]) {
                *s += qc * k;
            }
        }
        let max = lanes_max(&scores);
        for s in scores.iter_mut() {
            *s = fast_exp(*s - max);
        }
        let inv = 1.0 / lanes_sum(&scores);
        let oi = &mut out[i * d..(i + 1) * d];
        for (j, &p) in scores.iter().enumerate() {
            let p = p * inv;
            for (o, vv) in oi.iter_mut().zip(&v[j * d..(j + 1) * d]) {
                *o += p * vv;
            }
        }
    }
    out
}

/// Maximum with eight independent lanes (a strict sequential reduction does not vectorise).
#[inline(always)]
fn lanes_max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let whole = x.len() / 8 * 8;
    for c in x[..whole].chunks_exact(8) {
        for i in 0..8 {
            acc[i] = acc[i].max(c[i]);
        }
    }
    x[whole..]
        .iter()
        .chain(&acc)
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

/// Sum with eight independent lanes.
#[inline(always)]
pub(crate) fn lanes_sum(x: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let whole = x.len() / 8 * 8;
    for c in x[..whole].chunks_exact(8) {
        for i in 0..8 {
            acc[i] += c[i];
        }
    }
    acc.iter().sum::<f32>() + x[whole..].iter().sum::<f32>()
}

/// `out[rows, n] = x[rows, k] · w + b` (`w` is `[k, n]`, the transpose of PyTorch's `[n, k]`).
pub(crate) fn linear(x: &[f32], rows: usize, k: usize, w: &Weight, b: &[f32], out: &mut [f32]) {
    let n = w.n();
    debug_assert_eq!(x.len(), rows * k);
    let out = &mut out[..rows * n];
    for r in out.chunks_exact_mut(n) {
        r.copy_from_slice(b);
    }
    // Rows are split across the threads here, each block one single-threaded product (gemm's
    // own threading decides by cache-size heuristics and, in some processes, ran on one thread).
    let threads = rayon::current_num_threads().max(1);
    let block = rows.div_ceil(threads).max(64);
    if threads > 1 && rows > block {
        out.par_chunks_mut(block * n)
            .zip(x.par_chunks(block * k))
            .for_each(|(o, xb)| w.product_acc(xb, o.len() / n, o));
    } else {
        w.product_acc(x, rows, out);
    }
}

/// `x = LayerNorm(x + residual)` row by row (no residual when `residual` is empty), the rows
/// split across threads.
fn residual_layer_norm(x: &mut [f32], residual: &[f32], h: usize, g: &[f32], b: &[f32], eps: f32) {
    let rows = x.len() / h;
    let block = rows.div_ceil(rayon::current_num_threads().max(1)).max(32) * h;
    if residual.is_empty() {
        x.par_chunks_mut(block)
            .for_each(|xc| layer_norm_rows(xc, &[], h, g, b, eps));
    } else {
        x.par_chunks_mut(block)
            .zip(residual.par_chunks(block))
            .for_each(|(xc, rc)| layer_norm_rows(xc, rc, h, g, b, eps));
    }
}

with_avx2! {
    fn layer_norm_rows = layer_norm_rows_body(
        x: &mut [f32], residual: &[f32], h: usize, g: &[f32], b: &[f32], eps: f32
    )
}

#[inline(always)]
fn layer_norm_rows_body(x: &mut [f32], residual: &[f32], h: usize, g: &[f32], b: &[f32], eps: f32) {
    if !residual.is_empty() {
        for (a, r) in x.iter_mut().zip(residual) {
            *a += r;
        }
    }
    let mut dev = vec![0f32; h];
    for row in x.chunks_exact_mut(h) {
        let mean = lanes_sum(row) / h as f32;
        for (d, v) in dev.iter_mut().zip(row.iter()) {
            *d = (v - mean) * (v - mean);
        }
        let var = lanes_sum(&dev) / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, gg), bb) in row.iter_mut().zip(g).zip(b) {
            *v = (*v - mean) * inv * gg + bb;
        }
    }
}

/// e^x to ~2 ulp for x in [-87, 88] (clamped outside): 2^(x·log2 e) split into an integer
/// power set in the exponent bits and a degree-7 polynomial for the fraction. Unlike libm's
/// `expf` it inlines, so the loops that call it vectorise.
#[inline(always)]
pub(crate) fn fast_exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    // Cody–Waite: ln 2 in two parts, so x - n·ln2 loses no bits; |f| <= ln2 / 2.
    let f = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let p = 1.0
        + f * (1.0
            + f * (0.5
                + f * (1.0 / 6.0
                    + f * (1.0 / 24.0
                        + f * (1.0 / 120.0 + f * (1.0 / 720.0 + f * (1.0 / 5040.0)))))));
    // 2^n from the exponent bits; n + 127 is in [1, 254]. Adding 2^23 puts that integer in the
    // low mantissa bits, so no float-to-int conversion (which would not vectorise) is needed.
    let biased = (n + (127.0 + 8_388_608.0)).to_bits() & 0x7f_ffff;
    p * f32::from_bits(biased << 23)
}

/// erf by Abramowitz & Stegun 7.1.26 (absolute error ≤ 1.5e-7, plus f32 rounding).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let signed = x;
    let x = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let y = 1.0
        - (((((1.061_405_4 * t - 1.453_152_1) * t) + 1.421_413_7) * t - 0.284_496_74) * t
            + 0.254_829_6)
            * t
            * fast_exp(-x * x);
    y.copysign(signed)
}

fn gelu_in_place(x: &mut [f32]) {
    let threads = rayon::current_num_threads().max(1);
    let chunk = x.len().div_ceil(threads).max(4096);
    x.par_chunks_mut(chunk).for_each(gelu_chunk);
}

with_avx2! {
    fn gelu_chunk = gelu_chunk_body(c: &mut [f32])
}

#[inline(always)]
fn gelu_chunk_body(c: &mut [f32]) {
    const INV_SQRT2: f32 = std::f32::consts::FRAC_1_SQRT_2;
    for v in c {
        *v = 0.5 * *v * (1.0 + erf(*v * INV_SQRT2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_exp_is_accurate() {
        let mut x = -87.0f32;
        while x < 88.0 {
            let (got, want) = (fast_exp(x), (x as f64).exp());
            let rel = ((got as f64 - want) / want).abs();
            assert!(rel < 5e-7, "exp({x}) = {got}, want {want}");
            x += 0.0137;
        }
    }

    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [
            (0.0f32, 0.0f32),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-1.0, -0.842_700_8),
            (2.0, 0.995_322_3),
            (-3.0, -0.999_977_9),
        ] {
            assert!((erf(x) - want).abs() < 5e-7, "erf({x}) = {}", erf(x));
        }
    }

    #[test]
    fn linear_matches_a_naive_product() {
        let (rows, k, n) = (5, 7, 3);
        let x: Vec<f32> = (0..rows * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let w: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.11).cos()).collect();
        let b = vec![0.5, -1.0, 2.0];
        let mut out = vec![0f32; rows * n];
        // w is [n, k]; linear takes its transpose.
        let mut wt = vec![0f32; k * n];
        for r in 0..n {
            for c in 0..k {
                wt[c * n + r] = w[r * k + c];
            }
        }
        linear(&x, rows, k, &Weight::new(wt, k, n), &b, &mut out);
        for r in 0..rows {
            for c in 0..n {
                let want: f32 = b[c] + (0..k).map(|i| x[r * k + i] * w[c * k + i]).sum::<f32>();
                assert!((out[r * n + c] - want).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn layer_norm_gives_zero_mean_unit_variance() {
        let mut x = vec![1.0, 2.0, 3.0, 4.0, 10.0, 10.0, 10.0, 14.0];
        residual_layer_norm(&mut x, &[], 4, &[1.0; 4], &[0.0; 4], 1e-12);
        for row in x.chunks(4) {
            let mean: f32 = row.iter().sum::<f32>() / 4.0;
            let var: f32 = row.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 4.0;
            assert!(mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-4);
        }
    }
}
