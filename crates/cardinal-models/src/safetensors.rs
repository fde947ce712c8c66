//! A minimal writer of the safetensors format (f32 tensors only): an 8-byte little-endian header
//! length, a JSON header of `name → {dtype, shape, data_offsets}`, then the raw data.

use std::io::Write;

use crate::Result;

/// One f32 tensor to write.
pub struct TensorF32 {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Write tensors (in the given order) as safetensors to `out`.
pub fn write_f32(out: &mut impl Write, tensors: &[TensorF32], what: &str) -> Result<()> {
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for t in tensors {
        let bytes = t.data.len() * 4;
        header.insert(
            t.name.clone(),
            serde_json::json!({
                "dtype": "F32",
                "shape": t.shape,
                "data_offsets": [offset, offset + bytes],
            }),
        );
        offset += bytes;
    }
    header.insert(
        "__metadata__".into(),
        serde_json::json!({ "format": "pt", "converted_by": "cardinal" }),
    );
    let mut json = serde_json::to_vec(&serde_json::Value::Object(header))
        .map_err(|e| crate::ModelError::E5s1(format!("header: {e}")))?;
    while !json.len().is_multiple_of(8) {
        json.push(b' ');
    }
    let io = |e| crate::error::io_err(what)(e);
    out.write_all(&(json.len() as u64).to_le_bytes())
        .map_err(io)?;
    out.write_all(&json).map_err(io)?;
    for t in tensors {
        let mut buf = Vec::with_capacity(t.data.len() * 4);
        for v in &t.data {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        out.write_all(&buf).map_err(io)?;
    }
    Ok(())
}
