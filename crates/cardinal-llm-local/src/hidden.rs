//! Hidden states of the in-process model: the output of one transformer block, read while
//! llama.cpp evaluates a prompt.
//!
//! `llama-cpp-2` does not expose llama.cpp's evaluation callback (`cb_eval`), so this module
//! creates its own context on the loaded model through `llama-cpp-sys-2`. The callback asks the
//! graph scheduler for one node — the block's output, named `l_out-<layer>` by llama.cpp's
//! graph builders — copies it when it has been computed, and stops the evaluation of that
//! micro-batch there: the blocks after it (and the logits) are not needed, which makes a
//! reading of block `L` of `N` cost about `L/N` of a full prompt pass. The context is only
//! ever used for this; its KV cache above the block is never read.
//!
//! When everything before the averaged tokens fits in one chunk (the policy's reading of a
//! message: a one-line system prompt, then the message), that prefix is evaluated as a chunk of
//! its own and its KV cache is kept, so the next reading of the same block with the same prefix
//! evaluates only the message. The micro-batches are the same either way, so a reading is
//! bit-identical to one from an empty cache. Longer prefixes (the judge's cards) are read in
//! chunks from the start, without reuse.

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

use cardinal_llm::{LlmError, Result};
use llama_cpp_2::model::LlamaModel;
use llama_cpp_sys_2 as sys;

/// What the callback collects: the rows (one per token, `n_embd` wide) of each wanted node.
struct Collector {
    /// The wanted nodes' names in graph order, e.g. `l_out-10`, `l_out-14`; the last one ends
    /// the micro-batch.
    names: Vec<Vec<u8>>,
    n_embd: usize,
    /// One buffer per wanted node.
    rows: Vec<Vec<f32>>,
    error: Option<String>,
}

/// The evaluation callback. With `ask`, it says whether the node is wanted; without, the node
/// has been computed: copy it, and after the last wanted node return false (stop this
/// micro-batch's graph there).
///
/// # Safety
/// `t` is a live tensor of the graph being computed and `user` the `Collector` registered with
/// the context, not otherwise borrowed while `llama_decode` runs (the only caller).
unsafe extern "C" fn observe(t: *mut sys::ggml_tensor, ask: bool, user: *mut c_void) -> bool {
    let (Some(t), Some(c)) = (t.as_ref(), (user as *mut Collector).as_mut()) else {
        return !ask;
    };
    let name = CStr::from_ptr(t.name.as_ptr()).to_bytes();
    let wanted = c.names.iter().position(|n| n.as_slice() == name);
    if ask {
        return wanted.is_some();
    }
    let Some(k) = wanted else {
        return true;
    };
    let (ne0, ne1) = (t.ne[0], t.ne[1]);
    if t.type_ != sys::GGML_TYPE_F32 || t.ne[2] != 1 || t.ne[3] != 1 || ne0 as usize != c.n_embd {
        c.error = Some(format!(
            "block output {} has type {} and shape {:?}, expected f32 [{}, n_tokens]",
            String::from_utf8_lossy(name),
            t.type_,
            t.ne,
            c.n_embd
        ));
        return false;
    }
    let n = (ne0 * ne1) as usize;
    let bytes = n * std::mem::size_of::<f32>();
    if sys::ggml_nbytes(t) != bytes {
        c.error = Some("block output is not contiguous".into());
        return false;
    }
    let Some(rows) = c.rows.get_mut(k) else {
        c.error = Some("no buffer for a wanted block".into());
        return false;
    };
    let start = rows.len();
    rows.resize(start + n, 0.0);
    sys::ggml_backend_tensor_get(t, rows[start..].as_mut_ptr() as *mut c_void, 0, bytes);
    k + 1 < c.names.len()
}

/// A context dedicated to reading block outputs.
pub(crate) struct HiddenContext {
    ctx: NonNull<sys::llama_context>,
    /// Owned (from `Box::into_raw`); freed in `Drop` after the context.
    collector: NonNull<Collector>,
    n_embd: usize,
    n_layer: usize,
    n_ctx: usize,
    chunk: usize,
    /// The prefix whose blocks `0..=block` are in the KV cache, as (highest block read,
    /// tokens): the last reading's own chunk of prefix, when it had one. Which lower blocks
    /// that reading collected does not matter: their KV entries are there either way.
    cached: Option<(usize, Vec<i32>)>,
}

// SAFETY: the context and collector are only used through `&mut self` (behind the model's
// mutex); llama.cpp contexts are not tied to a thread.
unsafe impl Send for HiddenContext {}

impl Drop for HiddenContext {
    fn drop(&mut self) {
        // SAFETY: both pointers were created in `new` and are freed once, context first (it
        // holds the collector's address).
        unsafe {
            sys::llama_free(self.ctx.as_ptr());
            drop(Box::from_raw(self.collector.as_ptr()));
        }
    }
}

// `LlamaModel` is `#[repr(transparent)]` over a non-null `llama_model` pointer; `raw_model`
// reads it. This assertion and the width check in `new` guard that reading.
const _: () =
    assert!(std::mem::size_of::<LlamaModel>() == std::mem::size_of::<*mut sys::llama_model>());

fn raw_model(model: &LlamaModel) -> *mut sys::llama_model {
    // SAFETY: see the assertion above: the wrapper is the pointer itself.
    unsafe { *(model as *const LlamaModel as *const *mut sys::llama_model) }
}

impl HiddenContext {
    /// A context of `n_ctx` tokens on `model`, evaluating prompts in chunks of `chunk` tokens.
    pub(crate) fn new(
        model: &LlamaModel,
        n_ctx: u32,
        chunk: u32,
        threads: usize,
    ) -> Result<HiddenContext> {
        let raw = raw_model(model);
        let n_embd = usize::try_from(model.n_embd()).unwrap_or(0);
        // SAFETY: `raw` is the loaded model (checked against the safe wrapper's width).
        let (raw_embd, n_layer) =
            unsafe { (sys::llama_model_n_embd(raw), sys::llama_model_n_layer(raw)) };
        if n_embd == 0 || raw_embd as usize != n_embd {
            return Err(LlmError::Local(
                "cannot reach the model's llama.cpp handle to read hidden states".into(),
            ));
        }
        let collector = NonNull::from(Box::leak(Box::new(Collector {
            names: Vec::new(),
            n_embd,
            rows: Vec::new(),
            error: None,
        })));
        let threads = i32::try_from(threads).unwrap_or(i32::MAX);
        // SAFETY: plain C defaults, then fields set; the callback's user data lives until
        // after the context is freed (see `Drop`).
        let ctx = unsafe {
            let mut p = sys::llama_context_default_params();
            p.n_ctx = n_ctx;
            p.n_batch = chunk;
            p.n_ubatch = chunk;
            p.n_seq_max = 1;
            p.n_threads = threads;
            p.n_threads_batch = threads;
            p.cb_eval = Some(observe);
            p.cb_eval_user_data = collector.as_ptr() as *mut c_void;
            sys::llama_init_from_model(raw, p)
        };
        let Some(ctx) = NonNull::new(ctx) else {
            // SAFETY: created above, not shared.
            drop(unsafe { Box::from_raw(collector.as_ptr()) });
            return Err(LlmError::Local(format!(
                "llama.cpp could not create a {n_ctx}-token context for hidden states"
            )));
        };
        Ok(HiddenContext {
            ctx,
            collector,
            n_embd,
            n_layer: usize::try_from(n_layer).unwrap_or(0),
            n_ctx: n_ctx as usize,
            chunk: chunk.max(1) as usize,
            cached: None,
        })
    }

    /// The output of block `layer` for every token of `tokens` (as evaluated from an empty cache),
    /// averaged over the tokens from index `from` on.
    pub(crate) fn mean_from(
        &mut self,
        tokens: &[i32],
        from: usize,
        layer: usize,
    ) -> Result<Vec<f32>> {
        let mut means = self.means_over(tokens, &[(from, tokens.len())], layer)?;
        means
            .pop()
            .ok_or_else(|| LlmError::Local("no token to average over".into()))
    }

    /// The output of block `layer` for every token of `tokens` (as evaluated from an empty cache),
    /// averaged over each of `ranges` (half-open token index ranges, each non-empty).
    pub(crate) fn means_over(
        &mut self,
        tokens: &[i32],
        ranges: &[(usize, usize)],
        layer: usize,
    ) -> Result<Vec<Vec<f32>>> {
        let mut by_layer = self.means_over_layers(tokens, ranges, &[layer])?;
        by_layer
            .pop()
            .ok_or_else(|| LlmError::Local("no block was read".into()))
    }

    /// Like [`Self::means_over`] for several blocks read in the same pass (strictly increasing,
    /// non-empty): one list of range means per block, in the order given. The pass stops after
    /// the highest block, so it costs what reading that block alone costs.
    pub(crate) fn means_over_layers(
        &mut self,
        tokens: &[i32],
        ranges: &[(usize, usize)],
        layers: &[usize],
    ) -> Result<Vec<Vec<Vec<f32>>>> {
        if layers.is_empty() || layers.windows(2).any(|w| w[0] >= w[1]) {
            return Err(LlmError::Config(format!(
                "blocks to read must be given in increasing order, without repeats: {layers:?}"
            )));
        }
        let layer = layers[layers.len() - 1];
        // llama.cpp's graph keeps only the output tokens' rows in the last block: its output
        // is not a per-token state.
        if layer + 1 >= self.n_layer {
            return Err(LlmError::Config(format!(
                "block {layer} cannot be read: the model has {} blocks, and the last one (block {}) keeps only the output token's state; read block 0-{}",
                self.n_layer,
                self.n_layer.saturating_sub(1),
                self.n_layer.saturating_sub(2)
            )));
        }
        if ranges.is_empty() || ranges.iter().any(|&(a, b)| a >= b || b > tokens.len()) {
            return Err(LlmError::Local("no token to average over".into()));
        }
        if tokens.len() > self.n_ctx {
            return Err(LlmError::Local(format!(
                "the prompt is {} tokens but the context holds {}",
                tokens.len(),
                self.n_ctx
            )));
        }
        // A prefix that fits in one chunk (everything before the first averaged token) is
        // evaluated as a chunk of its own, and its KV cache is kept: the next reading of the
        // same block with the same prefix starts after it. Both ways the micro-batches are the
        // same, so the result is the same to the bit whatever was read before.
        let first = ranges.iter().map(|&(a, _)| a).min().unwrap_or(0);
        let split = first > 0 && first <= self.chunk;
        let reuse = if split
            && self
                .cached
                .as_ref()
                .is_some_and(|(block, prefix)| *block == layer && prefix[..] == tokens[..first])
        {
            first
        } else {
            0
        };
        {
            // SAFETY: no decode is running; this is the only reference.
            let c = unsafe { self.collector.as_mut() };
            c.names = layers
                .iter()
                .map(|l| format!("l_out-{l}").into_bytes())
                .collect();
            c.rows = layers
                .iter()
                .map(|_| Vec::with_capacity((tokens.len() - reuse) * self.n_embd))
                .collect();
            c.error = None;
        }
        // Whatever happens below, the cache is only trusted again once a reading succeeds.
        self.cached = None;
        // SAFETY: the context is alive; clearing its memory, or removing the positions from
        // `reuse` on of its only sequence, is always valid.
        let reuse = unsafe {
            let mem = sys::llama_get_memory(self.ctx.as_ptr());
            if reuse > 0
                && sys::llama_memory_seq_rm(mem, 0, reuse as i32, -1)
                && sys::llama_memory_seq_pos_max(mem, 0) + 1 == reuse as i32
            {
                reuse
            } else {
                sys::llama_memory_clear(mem, true);
                0
            }
        };
        let head: &[i32] = if split && reuse == 0 {
            &tokens[..first]
        } else {
            &[]
        };
        let start = if split { first } else { 0 };
        let parts = std::iter::once(head)
            .filter(|h| !h.is_empty())
            .chain(tokens[start..].chunks(self.chunk));
        let mut done = 0usize;
        for part in parts {
            let mut owned: Vec<sys::llama_token> = part.to_vec();
            // SAFETY: the batch borrows `owned`, which outlives the decode call; the callback's
            // collector is not borrowed during it.
            let rc = unsafe {
                let batch = sys::llama_batch_get_one(owned.as_mut_ptr(), owned.len() as i32);
                sys::llama_decode(self.ctx.as_ptr(), batch)
            };
            // SAFETY: the decode has returned; this is the only reference.
            let c = unsafe { self.collector.as_mut() };
            if let Some(e) = c.error.take() {
                return Err(LlmError::Local(e));
            }
            if rc != 0 {
                return Err(LlmError::Local(format!(
                    "llama.cpp failed reading hidden states (llama_decode returned {rc})"
                )));
            }
            done += part.len();
            for (l, rows) in layers.iter().zip(&c.rows) {
                if rows.len() != done * self.n_embd {
                    return Err(LlmError::Local(format!(
                        "llama.cpp produced no output for block {l} (read {} of {} values)",
                        rows.len(),
                        done * self.n_embd
                    )));
                }
            }
        }
        if split {
            self.cached = Some((layer, tokens[..first].to_vec()));
        }
        // SAFETY: no decode is running.
        let c = unsafe { self.collector.as_ref() };
        let w = self.n_embd;
        Ok(c.rows
            .iter()
            .map(|rows| {
                ranges
                    .iter()
                    .map(|&(a, b)| mean_rows(&rows[(a - reuse) * w..(b - reuse) * w], w))
                    .collect()
            })
            .collect())
    }
}

/// The mean of consecutive `width`-wide rows (f64 sums).
fn mean_rows(rows: &[f32], width: usize) -> Vec<f32> {
    let n = rows.len() / width.max(1);
    let mut sum = vec![0f64; width];
    for row in rows.chunks_exact(width) {
        for (s, &x) in sum.iter_mut().zip(row) {
            *s += x as f64;
        }
    }
    sum.into_iter()
        .map(|s| (s / n.max(1) as f64) as f32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::mean_rows;

    #[test]
    fn mean_rows_averages_each_column() {
        let rows = [1.0, 10.0, 3.0, 20.0, 5.0, 60.0];
        assert_eq!(mean_rows(&rows, 2), vec![3.0, 30.0]);
    }
}
