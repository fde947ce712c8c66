//! Local, in-process chat model: a GGUF model run with llama.cpp (through the `llama-cpp-2`
//! crate, built from its vendored sources).
//!
//! * The prompt is built with the chat template stored in the GGUF metadata.
//! * `temperature <= 0` is greedy decoding; otherwise temperature sampling seeded by
//!   [`GenParams::seed`]. Either way a fixed input gives a fixed output.
//! * One generation runs at a time (the llama.cpp contexts sit behind a mutex). A call whose
//!   prompt shares a prefix with a recent call (the agent's and the judge's long system prompts)
//!   reuses the KV cache of that prefix. Up to [`LocalOptions::prefix_slots`] contexts are kept,
//!   each holding the prompt of a recent call, so prompts that alternate (the judge's three
//!   rubrics in a sweep) each find their own prefix. Reuse happens only at whole prompt chunks,
//!   aligned to absolute positions, so every chunk is computed with the same batch shape whether
//!   or not it was cached: reusing the cache never changes the output.
//! * Hidden states ([`cardinal_llm::YesNoModel::span_states`]): one block's output averaged over a
//!   span of the prompt, read through llama.cpp's evaluation callback in a context of its own
//!   (module `hidden`), which stops each micro-batch after that block.
//! * llama.cpp's own logging is silenced unless `CARDINAL_LLAMA_LOG=1`.
//!
//! Message contents are tokenized as plain text: a user who types `<|im_end|>` does not close
//! their turn. Only the template's own markup is parsed for special tokens.

use std::fs::File;
use std::io::Read;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use cardinal_llm::{
    ChatModel, Completion, FinishReason, GenParams, LlmError, Message, Result, Role, Usage,
};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

mod hidden;

/// Environment variable that sets the thread count when [`LocalOptions::threads`] is `None`.
pub const THREADS_ENV: &str = "CARDINAL_THREADS";
/// Environment variable that lets llama.cpp print its own log lines on stderr (`1`).
pub const LOG_ENV: &str = "CARDINAL_LLAMA_LOG";

/// How to load and run a local model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalOptions {
    /// Threads for prompt processing and decoding. `None`: `$CARDINAL_THREADS` if set, else
    /// [`default_threads`].
    pub threads: Option<usize>,
    /// Context window in tokens (prompt + answer).
    pub context_size: u32,
    /// Tokens per prompt-processing chunk (llama.cpp's batch and micro-batch). Also the
    /// granularity of prefix reuse. 128 processes prompts as fast as 256 or 512 on 2 cores and
    /// reuses more of a shared prefix.
    pub batch_size: u32,
    /// Reuse the KV cache of a prompt prefix shared with a recent call.
    pub prefix_cache: bool,
    /// How many KV caches (llama.cpp contexts, created on demand) keep recent prompts for prefix
    /// reuse. Slots are in effect keyed by the first (system) message: a call continues the slot
    /// holding its whole system message, else takes an empty or new slot, else the slot sharing
    /// the longest aligned prefix, else the least recently used one. 4 covers a sweep's agent
    /// prompt plus the judge's three rubrics; each slot costs one context's KV cache (about
    /// 115 MB for the 1.5B model at 4096 tokens). Ignored (one context) when `prefix_cache` is
    /// off.
    pub prefix_slots: usize,
    /// The model file's sha256 when the caller knows it (from a manifest); it goes into
    /// [`ChatModel::id`]. Without it the id carries the file size.
    pub sha256: Option<String>,
    /// Flash attention: `None` lets llama.cpp decide (it enables it on CPU).
    pub flash_attention: Option<bool>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            threads: None,
            context_size: 4096,
            batch_size: 128,
            prefix_cache: true,
            prefix_slots: 4,
            sha256: None,
            flash_attention: None,
        }
    }
}

/// The default thread count: every available core, at most 8 (decoding is memory-bound beyond).
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 8)
}

/// The thread count `options` resolve to (explicit value, else `$CARDINAL_THREADS`, else default).
pub fn resolve_threads(options: &LocalOptions) -> Result<usize> {
    if let Some(n) = options.threads {
        return if n == 0 {
            Err(LlmError::Config("threads must be at least 1".into()))
        } else {
            Ok(n)
        };
    }
    match std::env::var(THREADS_ENV) {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(LlmError::Config(format!(
                "{THREADS_ENV}={v:?} is not a positive integer"
            ))),
        },
        _ => Ok(default_threads()),
    }
}

/// Measurements of one call (for traces and benchmarks).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GenStats {
    /// Prompt tokens after templating.
    pub prompt_tokens: usize,
    /// Of those, tokens whose KV cache was reused from the previous call.
    pub reused_tokens: usize,
    /// Tokens sampled (end-of-generation token excluded).
    pub generated_tokens: usize,
    /// Seconds spent evaluating the non-reused prompt tokens.
    pub prompt_seconds: f64,
    /// Seconds spent sampling and evaluating generated tokens.
    pub decode_seconds: f64,
}

impl GenStats {
    /// Prompt-processing speed over the tokens actually evaluated.
    pub fn prompt_tokens_per_second(&self) -> f64 {
        rate(self.prompt_tokens - self.reused_tokens, self.prompt_seconds)
    }
    /// Decoding speed.
    pub fn decode_tokens_per_second(&self) -> f64 {
        rate(self.generated_tokens, self.decode_seconds)
    }
}

fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

fn local(msg: impl Into<String>) -> LlmError {
    LlmError::Local(msg.into())
}

/// The process-wide llama.cpp backend (it may be initialised only once per process).
fn backend() -> Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let verbose = std::env::var(LOG_ENV).is_ok_and(|v| v == "1" || v == "true");
            if !verbose {
                llama_cpp_2::send_logs_to_tracing(
                    llama_cpp_2::LogOptions::default().with_logs_enabled(false),
                );
            }
            LlamaBackend::init().map_err(|e| format!("cannot initialise llama.cpp: {e}"))
        })
        .as_ref()
        .map_err(|e| local(e.clone()))
}

/// One llama.cpp context and what its KV cache holds between calls.
struct Slot {
    ctx: LlamaContext<'static>,
    /// Tokens whose KV entries are in the cache and were computed as whole, aligned prompt
    /// chunks (so they are bit-identical to a fresh computation).
    cached: Vec<LlamaToken>,
    /// When the slot was last used (a call counter).
    last_used: u64,
}

impl Slot {
    fn forget(&mut self) {
        self.ctx.clear_kv_cache();
        self.cached.clear();
    }
}

/// The contexts kept between calls (at least one).
struct State {
    slots: Vec<Slot>,
    clock: u64,
}

/// Length of the common prefix of a slot's cached tokens and a prompt.
fn common_prefix(cached: &[LlamaToken], prompt: &[LlamaToken]) -> usize {
    cached
        .iter()
        .zip(prompt)
        .take_while(|(a, b)| a == b)
        .count()
}

/// Tokens of a `prompt_len`-token prompt a slot sharing `common` tokens with it can skip: the
/// common prefix cut down to whole chunks, keeping at least the last prompt token to evaluate
/// (its logits start the answer).
fn aligned_reuse(common: usize, prompt_len: usize, chunk: usize) -> usize {
    (common.min(prompt_len.saturating_sub(1)) / chunk) * chunk
}

/// A GGUF chat model run in-process by llama.cpp. See the crate documentation.
pub struct LocalModel {
    /// Declared before `model`, and dropped explicitly first in `Drop`: the context borrows it.
    state: Option<Mutex<State>>,
    /// Owned: leaked from a `Box` in `load`, reclaimed in `Drop` after the context is gone.
    model: &'static LlamaModel,
    template: LlamaChatTemplate,
    id: String,
    context_size: u32,
    batch_size: u32,
    threads: usize,
    prefix_cache: bool,
    prefix_slots: usize,
    /// Checks evaluated in parallel by a probe (sequences beside the prefix's sequence 0).
    probe_seqs: usize,
    /// The parameters every context of this model is created with.
    context_params: LlamaContextParams,
    /// The context that reads block outputs ([`cardinal_llm::YesNoModel::span_states`]),
    /// created on first use. Declared before `model` and dropped first in `Drop`.
    hidden: Mutex<Option<hidden::HiddenContext>>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("id", &self.id)
            .field("context_size", &self.context_size)
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

impl Drop for LocalModel {
    fn drop(&mut self) {
        // The contexts refer to the model: free them first.
        drop(self.state.take());
        if let Ok(mut h) = self.hidden.lock() {
            drop(h.take());
        }
        // SAFETY: `model` came from `Box::leak` in `load`; the only other user of it, the
        // context, was dropped just above, and `LocalModel` hands out no `'static` borrows.
        unsafe {
            drop(Box::from_raw(
                self.model as *const LlamaModel as *mut LlamaModel,
            ))
        };
    }
}

impl LocalModel {
    /// Load a GGUF chat model.
    ///
    /// Errors ([`LlmError::Local`], or [`LlmError::Config`] for bad options): the file is missing,
    /// is not a GGUF file, llama.cpp cannot load it, it carries no chat template, or the context
    /// cannot be allocated.
    pub fn load(path: &Path, options: LocalOptions) -> Result<Self> {
        let threads = resolve_threads(&options)?;
        if options.context_size < 16 {
            return Err(LlmError::Config(format!(
                "context_size {} is too small",
                options.context_size
            )));
        }
        if options.batch_size == 0 {
            return Err(LlmError::Config("batch_size must be at least 1".into()));
        }
        let meta = std::fs::metadata(path)
            .map_err(|e| local(format!("model file {}: {e}", path.display())))?;
        if !meta.is_file() {
            return Err(local(format!(
                "model file {} is not a file",
                path.display()
            )));
        }
        let mut magic = [0u8; 4];
        File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .map_err(|e| local(format!("cannot read model file {}: {e}", path.display())))?;
        if &magic != b"GGUF" {
            return Err(local(format!(
                "{} is not a GGUF file (it starts with {magic:02x?}, not \"GGUF\")",
                path.display()
            )));
        }

        let backend = backend()?;
        let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
            .map_err(|e| {
                local(format!(
                    "llama.cpp could not load {} ({e}); set {LOG_ENV}=1 to see why",
                    path.display()
                ))
            })?;
        let template = model.chat_template(None).map_err(|e| {
            local(format!(
                "{} has no usable chat template in its metadata: {e}",
                path.display()
            ))
        })?;
        let model: &'static LlamaModel = Box::leak(Box::new(model));
        // From here on, a failure must free the model: build `Self` early and let `Drop` do it.
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let id = match &options.sha256 {
            Some(sha) => format!("local:{file_name}:sha256-{}", sha.to_lowercase()),
            None => format!("local:{file_name}:{}", meta.len()),
        };
        let batch_size = options.batch_size.min(options.context_size);
        let n_threads = i32::try_from(threads).unwrap_or(i32::MAX);
        // llama.cpp reserves at most n_batch outputs and needs one per sequence: the probe's
        // parallel sequences (prefix + checks) are capped by the batch size.
        let n_seq = (MAX_PROBE_SEQS as u32 + 1).min(batch_size).max(1);
        let context_params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(options.context_size))
            .with_n_batch(batch_size)
            .with_n_ubatch(batch_size)
            .with_n_seq_max(n_seq)
            .with_kv_unified(true)
            .with_n_threads(n_threads)
            .with_n_threads_batch(n_threads)
            .with_flash_attention_policy(match options.flash_attention {
                None => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_AUTO,
                Some(true) => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_ENABLED,
                Some(false) => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_DISABLED,
            });
        let mut this = LocalModel {
            state: None,
            model,
            template,
            id,
            context_size: options.context_size,
            batch_size,
            threads,
            prefix_cache: options.prefix_cache,
            prefix_slots: if options.prefix_cache {
                options.prefix_slots.max(1)
            } else {
                1
            },
            probe_seqs: (n_seq as usize).saturating_sub(1),
            context_params,
            hidden: Mutex::new(None),
        };
        let first = this.new_slot()?;
        this.context_size = first.ctx.n_ctx();
        this.state = Some(Mutex::new(State {
            slots: vec![first],
            clock: 0,
        }));
        Ok(this)
    }

    /// A fresh context with this model's parameters.
    fn new_slot(&self) -> Result<Slot> {
        let ctx = self
            .model
            .new_context(backend()?, self.context_params.clone())
            .map_err(|e| {
                local(format!(
                    "llama.cpp could not create a {}-token context: {e}",
                    self.context_size
                ))
            })?;
        Ok(Slot {
            ctx,
            cached: Vec::new(),
            last_used: 0,
        })
    }

    /// The slot a prompt runs in. Slots are, in effect, keyed by the first (system) message:
    /// 1. a slot whose cache holds this prompt's whole first message: the one sharing the
    ///    longest prefix (ties: most recently used);
    /// 2. else an empty slot, or a new one while fewer than `prefix_slots` exist — so prompts
    ///    whose system messages differ only after a common opening (the judge's rubrics share a
    ///    preamble) do not keep evicting each other from one slot;
    /// 3. else the slot sharing the longest aligned prefix, or, with none, the least recently
    ///    used.
    fn pick_slot(&self, state: &mut State, prompt: &[LlamaToken], first_end: usize) -> usize {
        let chunk = self.batch_size as usize;
        let lru = |state: &State| {
            state
                .slots
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.last_used)
                .map_or(0, |(i, _)| i)
        };
        if !self.prefix_cache {
            return lru(state);
        }
        // Per slot: (holds the whole first message, aligned reuse, last use, index).
        let scored: Vec<(bool, usize, u64, usize)> = state
            .slots
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let common = common_prefix(&s.cached, prompt);
                let covers = first_end > 0 && common >= first_end;
                (
                    covers,
                    aligned_reuse(common, prompt.len(), chunk),
                    s.last_used,
                    i,
                )
            })
            .collect();
        let best = |covering_only: bool| {
            scored
                .iter()
                .filter(|c| c.0 || !covering_only)
                .map(|&(_, reuse, used, i)| (reuse, used, i))
                .max()
        };
        if let Some((_, _, i)) = best(true) {
            return i;
        }
        if let Some(i) = state.slots.iter().position(|s| s.cached.is_empty()) {
            return i;
        }
        if state.slots.len() < self.prefix_slots {
            // A context that cannot be allocated is not an error: fall through to an old slot.
            if let Ok(slot) = self.new_slot() {
                state.slots.push(slot);
                return state.slots.len() - 1;
            }
        }
        match best(false) {
            Some((reuse, _, i)) if reuse > 0 => i,
            _ => lru(state),
        }
    }

    /// The context window in tokens.
    pub fn context_size(&self) -> u32 {
        self.context_size
    }

    /// The thread count in use.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The prompt the chat template makes of `messages` (ends with the assistant's turn opener).
    pub fn render_prompt(&self, messages: &[Message]) -> Result<String> {
        Ok(self.render(messages)?.0)
    }

    /// Prompt tokens `messages` make after templating.
    pub fn count_prompt_tokens(&self, messages: &[Message]) -> Result<usize> {
        Ok(self.prompt_tokens(messages)?.len())
    }

    /// [`ChatModel::complete`] plus timings.
    pub fn complete_with_stats(
        &self,
        messages: &[Message],
        params: &GenParams,
    ) -> Result<(Completion, GenStats)> {
        let (prompt, first_end) = self.prompt_tokens_split(messages)?;
        let n_ctx = self.context_size as usize;
        if prompt.len() >= n_ctx {
            return Err(local(format!(
                "the prompt is {} tokens but the context holds {n_ctx} (prompt + answer); \
                 shorten the prompt or load the model with a larger context_size",
                prompt.len()
            )));
        }
        let mut state = self.lock();
        let i = self.pick_slot(&mut state, &prompt, first_end);
        state.clock += 1;
        let clock = state.clock;
        let slot = &mut state.slots[i];
        slot.last_used = clock;
        let result = self.generate(slot, &prompt, params);
        if result.is_err() {
            // Whatever the cache holds now is unknown: start afresh next time.
            slot.forget();
        }
        result
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        let state = self.state.as_ref().expect("state is set until drop");
        state.lock().unwrap_or_else(|poisoned| {
            let mut guard = poisoned.into_inner();
            guard.slots.iter_mut().for_each(Slot::forget);
            guard
        })
    }

    /// Apply the chat template. Returns the prompt and, when the contents could be located in
    /// it, the template's pieces and the contents in order (`pieces.len() == contents + 1`).
    fn render(&self, messages: &[Message]) -> Result<(String, Option<Vec<String>>)> {
        if messages.is_empty() {
            return Err(LlmError::Config("no messages to complete".into()));
        }
        let apply = |contents: &mut dyn Iterator<Item = String>| -> Result<String> {
            let chat = messages
                .iter()
                .zip(contents)
                .map(|(m, content)| {
                    LlamaChatMessage::new(role_name(m.role).into(), content)
                        .map_err(|_| LlmError::Config("a message contains a NUL character".into()))
                })
                .collect::<Result<Vec<_>>>()?;
            self.model
                .apply_chat_template(&self.template, &chat, true)
                .map_err(|e| local(format!("cannot apply the model's chat template: {e}")))
        };
        let full = apply(&mut messages.iter().map(|m| m.content.clone()))?;
        // Render again with placeholders to find where each content sits.
        let marks: Vec<String> = (0..messages.len())
            .map(|i| format!("\u{e000}cardinal-content-{i}\u{e001}"))
            .collect();
        let marked = apply(&mut marks.iter().cloned())?;
        let mut pieces = Vec::with_capacity(marks.len() + 1);
        let mut rest = marked.as_str();
        for mark in &marks {
            match rest.split_once(mark.as_str()) {
                Some((before, after)) => {
                    pieces.push(before.to_string());
                    rest = after;
                }
                None => return Ok((full, None)),
            }
        }
        pieces.push(rest.to_string());
        let rebuilt: String = pieces
            .iter()
            .zip(messages.iter().map(|m| m.content.as_str()).chain([""]))
            .map(|(p, c)| format!("{p}{c}"))
            .collect();
        Ok((full.clone(), (rebuilt == full).then_some(pieces)))
    }

    fn prompt_tokens(&self, messages: &[Message]) -> Result<Vec<LlamaToken>> {
        Ok(self.prompt_tokens_split(messages)?.0)
    }

    /// The prompt's tokens, and how many of them run to the end of the first message's content
    /// (0 when the template rewrote the contents and the boundary is unknown).
    fn prompt_tokens_split(&self, messages: &[Message]) -> Result<(Vec<LlamaToken>, usize)> {
        let (full, pieces) = self.render(messages)?;
        let vocab = self.model.vocab();
        let add_bos = vocab.should_add_bos();
        let mut tokens = Vec::new();
        let mut first_end = 0;
        match pieces {
            Some(pieces) => {
                if add_bos {
                    tokens.push(vocab.bos());
                }
                for (i, piece) in pieces.iter().enumerate() {
                    tokens.extend(vocab.tokenize(piece.as_bytes(), false, true));
                    if let Some(m) = messages.get(i) {
                        tokens.extend(vocab.tokenize(m.content.as_bytes(), false, false));
                        if i == 0 {
                            first_end = tokens.len();
                        }
                    }
                }
            }
            // The template rewrote the contents: tokenize the whole prompt, specials parsed.
            None => tokens = vocab.tokenize(full.as_bytes(), add_bos, true),
        }
        if tokens.is_empty() {
            return Err(local("the chat template produced an empty prompt"));
        }
        Ok((tokens, first_end))
    }

    fn generate(
        &self,
        state: &mut Slot,
        prompt: &[LlamaToken],
        params: &GenParams,
    ) -> Result<(Completion, GenStats)> {
        let chunk = self.batch_size as usize;
        let n_ctx = self.context_size as usize;
        let mut stats = GenStats {
            prompt_tokens: prompt.len(),
            ..GenStats::default()
        };

        // Reuse whole aligned chunks of the shared prefix.
        let reuse = if self.prefix_cache {
            aligned_reuse(common_prefix(&state.cached, prompt), prompt.len(), chunk)
        } else {
            0
        };
        if reuse == 0 {
            state.ctx.clear_kv_cache();
        } else {
            let removed = state
                .ctx
                .clear_kv_cache_seq(Some(0), Some(reuse as u32), None)
                .unwrap_or(false);
            if !removed {
                return Err(local("llama.cpp could not trim the KV cache"));
            }
        }
        state.cached.truncate(reuse);
        stats.reused_tokens = reuse;

        // Prompt: aligned chunks from `reuse` on.
        let t0 = Instant::now();
        let mut batch = LlamaBatch::new(chunk, 1);
        let mut start = reuse;
        let mut last_logits = 0;
        while start < prompt.len() {
            let end = ((start / chunk + 1) * chunk).min(prompt.len());
            batch.clear();
            for (pos, &tok) in prompt.iter().enumerate().take(end).skip(start) {
                batch
                    .add(tok, pos as i32, &[0], pos + 1 == prompt.len())
                    .map_err(|e| local(format!("llama.cpp batch: {e}")))?;
            }
            state
                .ctx
                .decode(&mut batch)
                .map_err(|e| local(format!("llama.cpp failed on the prompt: {e}")))?;
            // Only whole chunks are computed exactly as a fresh run would; keep those.
            if end - start == chunk {
                state.cached.extend_from_slice(&prompt[start..end]);
            }
            last_logits = batch.n_tokens() - 1;
            start = end;
        }
        stats.prompt_seconds = t0.elapsed().as_secs_f64();

        // Answer.
        let t1 = Instant::now();
        let vocab = self.model.vocab();
        let mut sampler = sampler(params);
        let mut text: Vec<u8> = Vec::new();
        let max_stop = params.stop.iter().map(String::len).max().unwrap_or(0);
        let mut pos = prompt.len();
        let mut finish = FinishReason::Length;
        let mut generated = 0usize;
        while generated < params.max_tokens as usize {
            let token = sampler.sample(&state.ctx, last_logits);
            if vocab.is_eog(token) {
                finish = FinishReason::Stop;
                break;
            }
            generated += 1;
            let before = text.len();
            vocab.token_to_piece_into(token, &mut text, false, None);
            if let Some(cut) = find_stop(&text, &params.stop, before.saturating_sub(max_stop)) {
                text.truncate(cut);
                finish = FinishReason::Stop;
                break;
            }
            if generated == params.max_tokens as usize || pos + 1 >= n_ctx {
                // Out of budget or of context: no need to evaluate this token.
                break;
            }
            batch.clear();
            batch
                .add(token, pos as i32, &[0], true)
                .map_err(|e| local(format!("llama.cpp batch: {e}")))?;
            state
                .ctx
                .decode(&mut batch)
                .map_err(|e| local(format!("llama.cpp failed while decoding: {e}")))?;
            last_logits = 0;
            pos += 1;
        }
        stats.generated_tokens = generated;
        stats.decode_seconds = t1.elapsed().as_secs_f64();

        let completion = Completion {
            text: String::from_utf8_lossy(&text).into_owned(),
            finish_reason: finish,
            usage: Usage {
                prompt_tokens: prompt.len() as u32,
                completion_tokens: generated as u32,
            },
        };
        Ok((completion, stats))
    }
}

impl ChatModel for LocalModel {
    fn id(&self) -> String {
        self.id.clone()
    }

    fn complete(&self, messages: &[Message], params: &GenParams) -> Result<Completion> {
        self.complete_with_stats(messages, params).map(|(c, _)| c)
    }
}

/// Checks evaluated at once as parallel sequences over one prefix (more are done in rounds).
pub const MAX_PROBE_SEQS: usize = 32;

impl LocalModel {
    /// The token ids whose first-token probability counts as Yes, and as No.
    fn yes_no_tokens(&self) -> (Vec<LlamaToken>, Vec<LlamaToken>) {
        let vocab = self.model.vocab();
        let single = |forms: &[&str]| {
            let mut v: Vec<LlamaToken> = forms
                .iter()
                .filter_map(|f| {
                    let t = vocab.tokenize(f.as_bytes(), false, false);
                    (t.len() == 1).then(|| t[0])
                })
                .collect();
            v.sort_by_key(|t| t.0);
            v.dedup();
            v
        };
        (
            single(&cardinal_llm::probe::YES_FORMS),
            single(&cardinal_llm::probe::NO_FORMS),
        )
    }

    /// [`YesNoModel::yes_no`] with timings: the shared prompt (everything up to the end of the
    /// last message's content) is evaluated once in sequence 0 — reusing a slot's cached prefix
    /// like a completion does — then every check (its text, the template's closing of the user
    /// turn and the assistant opener) runs as its own sequence over a copy of that KV cache, in
    /// batches, and the logits of each sequence's last token give P(Yes)/P(No).
    pub fn yes_no_with_stats(
        &self,
        messages: &[Message],
        checks: &[String],
    ) -> Result<(Vec<cardinal_llm::YesNo>, GenStats)> {
        if checks.is_empty() {
            return Ok((Vec::new(), GenStats::default()));
        }
        let (prefix, suffixes, first_end) = self.probe_tokens(messages, checks)?;
        let longest = suffixes.iter().map(Vec::len).max().unwrap_or(0);
        let n_ctx = self.context_size as usize;
        if self.probe_seqs == 0 {
            return Err(local(
                "yes/no checks need a batch size of at least 2 (one sequence for the prompt, one per check)",
            ));
        }
        let round = self.probe_seqs.min(checks.len());
        if prefix.len() + longest * round >= n_ctx {
            return Err(local(format!(
                "the checks do not fit the context: prefix {} tokens + up to {round} checks of {longest} tokens > {n_ctx}",
                prefix.len()
            )));
        }
        let (yes, no) = self.checked_yes_no_tokens()?;
        let mut state = self.lock();
        let i = self.pick_slot(&mut state, &prefix, first_end);
        state.clock += 1;
        let clock = state.clock;
        let slot = &mut state.slots[i];
        slot.last_used = clock;
        let result = self.probe(slot, &prefix, &suffixes, &yes, &no);
        if result.is_err() {
            slot.forget();
        }
        result
    }

    /// The probe's tokens: the shared prompt (up to the end of the last message's content),
    /// each check's suffix (its text, then the template's closing of the user turn and the
    /// assistant opener), and where the first message ends (for slot choice).
    #[allow(clippy::type_complexity)]
    fn probe_tokens(
        &self,
        messages: &[Message],
        checks: &[String],
    ) -> Result<(Vec<LlamaToken>, Vec<Vec<LlamaToken>>, usize)> {
        let (full, pieces) = self.render(messages)?;
        let Some(pieces) = pieces else {
            let _ = full;
            return Err(local(
                "the chat template rewrites message contents; yes/no checks need the contents verbatim",
            ));
        };
        let (mut prefix, first_end) = self.prompt_tokens_split(messages)?;
        // `prefix` ends with the template's tail after the last content: cut it off.
        let vocab = self.model.vocab();
        let tail_piece = pieces.last().cloned().unwrap_or_default();
        let tail = vocab.tokenize(tail_piece.as_bytes(), false, true);
        let shared = prefix.len().saturating_sub(tail.len());
        if prefix[shared..] != tail[..] {
            return Err(local(
                "cannot locate the end of the last message in the prompt",
            ));
        }
        prefix.truncate(shared);
        let suffixes = checks
            .iter()
            .map(|c| {
                let mut s = vocab.tokenize(c.as_bytes(), false, false);
                s.extend_from_slice(&tail);
                s
            })
            .collect();
        Ok((prefix, suffixes, first_end))
    }

    fn checked_yes_no_tokens(&self) -> Result<(Vec<LlamaToken>, Vec<LlamaToken>)> {
        let (yes, no) = self.yes_no_tokens();
        if yes.is_empty() || no.is_empty() {
            return Err(local("the vocabulary has no single-token Yes/No"));
        }
        Ok((yes, no))
    }

    /// The same checks the plain way — each one the whole prompt with its suffix, evaluated
    /// from an empty cache as one sequence — for tests that hold the shared-prefix,
    /// multi-sequence path of [`Self::yes_no_with_stats`] to it. Slow; not for production.
    #[doc(hidden)]
    pub fn yes_no_reference(
        &self,
        messages: &[Message],
        checks: &[String],
    ) -> Result<Vec<cardinal_llm::YesNo>> {
        let (prefix, suffixes, _) = self.probe_tokens(messages, checks)?;
        let (yes, no) = self.checked_yes_no_tokens()?;
        let chunk = self.batch_size as usize;
        let mut state = self.lock();
        let slot = &mut state.slots[0];
        let mut out = Vec::with_capacity(suffixes.len());
        let mut result = Ok(());
        for suffix in &suffixes {
            slot.forget();
            let tokens: Vec<LlamaToken> = prefix.iter().chain(suffix).copied().collect();
            let mut batch = LlamaBatch::new(chunk, 1);
            let mut read = vec![None];
            for (n, piece) in tokens.chunks(chunk).enumerate() {
                batch.clear();
                let mut pending = Vec::new();
                for (j, &tok) in piece.iter().enumerate() {
                    let pos = n * chunk + j;
                    let last = pos + 1 == tokens.len();
                    if last {
                        pending.push((0, batch.n_tokens()));
                    }
                    if let Err(e) = batch.add(tok, pos as i32, &[0], last) {
                        result = Err(local(format!("llama.cpp batch: {e}")));
                        break;
                    }
                }
                if result.is_err() {
                    break;
                }
                result = self.decode_and_read(slot, &mut batch, &mut pending, &mut read, &yes, &no);
                if result.is_err() {
                    break;
                }
            }
            if result.is_err() {
                break;
            }
            match read[0] {
                Some(v) => out.push(v),
                None => {
                    result = Err(local("a check produced no logits"));
                    break;
                }
            }
        }
        slot.forget();
        result.map(|()| out)
    }

    fn probe(
        &self,
        slot: &mut Slot,
        prefix: &[LlamaToken],
        suffixes: &[Vec<LlamaToken>],
        yes: &[LlamaToken],
        no: &[LlamaToken],
    ) -> Result<(Vec<cardinal_llm::YesNo>, GenStats)> {
        let chunk = self.batch_size as usize;
        let mut stats = GenStats {
            prompt_tokens: prefix.len() + suffixes.iter().map(Vec::len).sum::<usize>(),
            ..GenStats::default()
        };
        let t0 = Instant::now();
        // Sequence 0: the shared prefix, reusing whole aligned chunks a slot already holds.
        // Every other sequence is dropped first (a failed earlier call may have left some).
        for s in 1..=self.probe_seqs {
            let _ = slot.ctx.clear_kv_cache_seq(Some(s as u32), None, None);
        }
        let reuse = if self.prefix_cache {
            // Keep at least one token to evaluate so sequence 0 ends in a fresh decode.
            aligned_reuse(common_prefix(&slot.cached, prefix), prefix.len(), chunk)
        } else {
            0
        };
        if reuse == 0 {
            slot.ctx.clear_kv_cache();
        } else {
            let removed = slot
                .ctx
                .clear_kv_cache_seq(Some(0), Some(reuse as u32), None)
                .unwrap_or(false);
            if !removed {
                return Err(local("llama.cpp could not trim the KV cache"));
            }
        }
        slot.cached.truncate(reuse);
        stats.reused_tokens = reuse;
        let mut batch = LlamaBatch::new(chunk, (self.probe_seqs + 1) as i32);
        let mut start = reuse;
        while start < prefix.len() {
            let end = ((start / chunk + 1) * chunk).min(prefix.len());
            batch.clear();
            for (pos, &tok) in prefix.iter().enumerate().take(end).skip(start) {
                batch
                    .add(tok, pos as i32, &[0], false)
                    .map_err(|e| local(format!("llama.cpp batch: {e}")))?;
            }
            slot.ctx
                .decode(&mut batch)
                .map_err(|e| local(format!("llama.cpp failed on the prompt: {e}")))?;
            if end - start == chunk {
                slot.cached.extend_from_slice(&prefix[start..end]);
            }
            start = end;
        }
        let p = prefix.len() as i32;
        let mut out = Vec::with_capacity(suffixes.len());
        for group in suffixes.chunks(self.probe_seqs) {
            // Copy the prefix into sequences 1..=n.
            for s in 1..=group.len() {
                slot.ctx
                    .copy_kv_cache_seq(0, s as i32, None, None)
                    .map_err(|e| {
                        local(format!("llama.cpp could not copy the prefix cache: {e}"))
                    })?;
            }
            // Every suffix token, sequence by sequence, in batches of at most `chunk` tokens;
            // logits only for each sequence's last token, read after the batch that holds it.
            let mut logits_at: Vec<Option<cardinal_llm::YesNo>> = vec![None; group.len()];
            let mut pending: Vec<(usize, i32)> = Vec::new();
            batch.clear();
            for (k, suffix) in group.iter().enumerate() {
                for (j, &tok) in suffix.iter().enumerate() {
                    if batch.n_tokens() as usize == chunk {
                        self.decode_and_read(
                            slot,
                            &mut batch,
                            &mut pending,
                            &mut logits_at,
                            yes,
                            no,
                        )?;
                    }
                    let last = j + 1 == suffix.len();
                    if last {
                        pending.push((k, batch.n_tokens()));
                    }
                    batch
                        .add(tok, p + j as i32, &[(k + 1) as i32], last)
                        .map_err(|e| local(format!("llama.cpp batch: {e}")))?;
                }
            }
            if batch.n_tokens() > 0 {
                self.decode_and_read(slot, &mut batch, &mut pending, &mut logits_at, yes, no)?;
            }
            for s in 1..=group.len() {
                let _ = slot.ctx.clear_kv_cache_seq(Some(s as u32), None, None);
            }
            for v in logits_at {
                out.push(v.ok_or_else(|| local("a check produced no logits"))?);
            }
        }
        stats.prompt_seconds = t0.elapsed().as_secs_f64();
        Ok((out, stats))
    }

    /// [`cardinal_llm::YesNoModel::reply_logprobs`]: the prompt (ending with the assistant's
    /// opener) and the pieces' tokens are evaluated as one sequence from an empty cache, with
    /// logits requested only where they predict a piece's token.
    fn reply_logprobs_impl(&self, messages: &[Message], pieces: &[String]) -> Result<Vec<f64>> {
        if pieces.is_empty() {
            return Ok(Vec::new());
        }
        let prompt = self.prompt_tokens(messages)?;
        let vocab = self.model.vocab();
        let mut tokens = prompt.clone();
        // For each reply token: which piece it belongs to.
        let mut owner: Vec<usize> = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            let text = if i == 0 {
                piece.clone()
            } else {
                format!(" {piece}")
            };
            let t = vocab.tokenize(text.as_bytes(), false, false);
            owner.extend(std::iter::repeat_n(i, t.len()));
            tokens.extend(t);
        }
        let n_ctx = self.context_size as usize;
        if tokens.len() >= n_ctx {
            return Err(local(format!(
                "the prompt and the reply are {} tokens but the context holds {n_ctx}",
                tokens.len()
            )));
        }
        let chunk = self.batch_size as usize;
        let start = prompt.len();
        let mut sums = vec![0.0f64; pieces.len()];
        let mut counts = vec![0usize; pieces.len()];
        let mut state = self.lock();
        let i = self.pick_slot(&mut state, &prompt, 0);
        state.clock += 1;
        let clock = state.clock;
        let slot = &mut state.slots[i];
        slot.last_used = clock;
        slot.forget();
        let mut batch = LlamaBatch::new(chunk, 1);
        let mut result = Ok(());
        'outer: for (n, part) in tokens.chunks(chunk).enumerate() {
            batch.clear();
            // (index in batch, position whose logits predict the next token)
            let mut read = Vec::new();
            for (j, &tok) in part.iter().enumerate() {
                let pos = n * chunk + j;
                // Position pos predicts token pos + 1: wanted when that token is a reply token.
                let wanted = pos + 1 >= start && pos + 1 < tokens.len();
                if wanted {
                    read.push((batch.n_tokens(), pos + 1));
                }
                if let Err(e) = batch.add(tok, pos as i32, &[0], wanted) {
                    result = Err(local(format!("llama.cpp batch: {e}")));
                    break 'outer;
                }
            }
            if let Err(e) = slot.ctx.decode(&mut batch) {
                result = Err(local(format!("llama.cpp failed on a reply: {e}")));
                break;
            }
            for (idx, next) in read {
                let logits = slot.ctx.get_logits_ith(idx);
                let log_z = log_normaliser(logits);
                let Some(&l) = logits.get(tokens[next].0 as usize) else {
                    result = Err(local("a reply token is outside the vocabulary"));
                    break 'outer;
                };
                let k = owner[next - start];
                sums[k] += l as f64 - log_z;
                counts[k] += 1;
            }
        }
        slot.forget();
        result?;
        Ok(sums
            .iter()
            .zip(&counts)
            .map(|(s, &c)| if c == 0 { 0.0 } else { s / c as f64 })
            .collect())
    }

    fn decode_and_read(
        &self,
        slot: &mut Slot,
        batch: &mut LlamaBatch,
        pending: &mut Vec<(usize, i32)>,
        out: &mut [Option<cardinal_llm::YesNo>],
        yes: &[LlamaToken],
        no: &[LlamaToken],
    ) -> Result<()> {
        slot.ctx
            .decode(batch)
            .map_err(|e| local(format!("llama.cpp failed on a check: {e}")))?;
        for (k, idx) in pending.drain(..) {
            let logits = slot.ctx.get_logits_ith(idx);
            let log_z = log_normaliser(logits);
            let pick = |ids: &[LlamaToken]| -> Vec<f64> {
                ids.iter()
                    .filter_map(|t| logits.get(t.0 as usize).map(|&l| l as f64))
                    .collect()
            };
            out[k] = cardinal_llm::probe::from_logprobs(&pick(yes), &pick(no), log_z);
        }
        batch.clear();
        Ok(())
    }
}

impl cardinal_llm::YesNoModel for LocalModel {
    fn id(&self) -> String {
        self.id.clone()
    }

    fn yes_no(&self, messages: &[Message], checks: &[String]) -> Result<Vec<cardinal_llm::YesNo>> {
        self.yes_no_with_stats(messages, checks).map(|(v, _)| v)
    }

    fn reply_logprobs(&self, messages: &[Message], pieces: &[String]) -> Result<Vec<f64>> {
        self.reply_logprobs_impl(messages, pieces)
    }

    fn span_states(&self, messages: &[Message], span: &str, layer: usize) -> Result<Vec<f32>> {
        let (tokens, from) = self.span_tokens(messages, span)?;
        let tokens: Vec<i32> = tokens.iter().map(|t| t.0).collect();
        self.with_hidden(|h| h.mean_from(&tokens, from, layer))
    }
}

/// Mean block outputs of one pass: for each block read, one mean per piece.
pub type BlockReadings = Vec<Vec<Vec<f32>>>;

impl LocalModel {
    /// Like [`cardinal_llm::YesNoModel::span_states`], one mean per piece: the pieces, joined,
    /// must end the last message's content, and each is tokenized on its own (split them where
    /// the tokenizer would split anyway, e.g. before the space that starts a sentence). Returns
    /// each piece's token count and mean block output, from one pass over the prompt. Used by
    /// experiments that read an answer sentence by sentence.
    pub fn span_piece_states(
        &self,
        messages: &[Message],
        pieces: &[String],
        layer: usize,
    ) -> Result<Vec<(usize, Vec<f32>)>> {
        let mut read = self.span_piece_layer_states(messages, pieces, &[layer])?;
        let means = read.1.pop().ok_or_else(|| local("no block was read"))?;
        Ok(read.0.into_iter().zip(means).collect())
    }

    /// Like [`Self::span_piece_states`] for several blocks read in one pass (`layers` strictly
    /// increasing): each piece's token count, and for each block (in the order given) one mean
    /// per piece. The pass costs what reading the highest block alone costs.
    pub fn span_piece_layer_states(
        &self,
        messages: &[Message],
        pieces: &[String],
        layers: &[usize],
    ) -> Result<(Vec<usize>, BlockReadings)> {
        let span: String = pieces.concat();
        let (mut tokens, from) = self.span_tokens(messages, &span)?;
        tokens.truncate(from);
        let vocab = self.model.vocab();
        let mut ranges = Vec::with_capacity(pieces.len());
        for piece in pieces {
            let a = tokens.len();
            tokens.extend(vocab.tokenize(piece.as_bytes(), false, false));
            if tokens.len() == a {
                return Err(LlmError::Config(format!(
                    "the piece {piece:?} has no token"
                )));
            }
            ranges.push((a, tokens.len()));
        }
        let tokens: Vec<i32> = tokens.iter().map(|t| t.0).collect();
        let means = self.with_hidden(|h| h.means_over_layers(&tokens, &ranges, layers))?;
        Ok((ranges.iter().map(|(a, b)| b - a).collect(), means))
    }

    /// Run `f` on the hidden-state context, created on first use.
    fn with_hidden<R>(&self, f: impl FnOnce(&mut hidden::HiddenContext) -> Result<R>) -> Result<R> {
        let mut guard = self
            .hidden
            .lock()
            .map_err(|_| local("the hidden-state context was poisoned by a panic"))?;
        if guard.is_none() {
            *guard = Some(hidden::HiddenContext::new(
                self.model,
                self.context_size,
                self.batch_size,
                self.threads,
            )?);
        }
        match guard.as_mut() {
            Some(h) => f(h),
            None => Err(local("no hidden-state context")),
        }
    }

    /// The prompt's tokens up to the end of `span` (which must end the last message's
    /// content), and the index of the span's first token. The last content is tokenized as two
    /// pieces, the text before the span and the span, so the span's tokens are exact.
    fn span_tokens(&self, messages: &[Message], span: &str) -> Result<(Vec<LlamaToken>, usize)> {
        let Some(last) = messages.last() else {
            return Err(LlmError::Config("no messages".into()));
        };
        let Some(head) = last.content.strip_suffix(span) else {
            return Err(LlmError::Config(
                "the span must end the last message's content".into(),
            ));
        };
        if span.trim().is_empty() {
            return Err(LlmError::Config("the span is empty".into()));
        }
        let (_, pieces) = self.render(messages)?;
        let Some(pieces) = pieces else {
            return Err(local(
                "the chat template rewrites message contents; hidden states need them verbatim",
            ));
        };
        let vocab = self.model.vocab();
        let mut tokens = Vec::new();
        if vocab.should_add_bos() {
            tokens.push(vocab.bos());
        }
        let n = messages.len();
        for (i, (piece, m)) in pieces.iter().zip(messages).enumerate() {
            tokens.extend(vocab.tokenize(piece.as_bytes(), false, true));
            if i + 1 < n {
                tokens.extend(vocab.tokenize(m.content.as_bytes(), false, false));
            } else {
                tokens.extend(vocab.tokenize(head.as_bytes(), false, false));
            }
        }
        let from = tokens.len();
        tokens.extend(vocab.tokenize(span.as_bytes(), false, false));
        if tokens.len() == from {
            return Err(local("the span has no token"));
        }
        Ok((tokens, from))
    }
}

/// log Σ exp(logits), computed stably in f64: the normaliser of a next-token distribution.
fn log_normaliser(logits: &[f32]) -> f64 {
    let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    m + logits
        .iter()
        .map(|&l| (l as f64 - m).exp())
        .sum::<f64>()
        .ln()
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

/// Greedy at temperature 0, else temperature sampling from a seeded distribution.
fn sampler(params: &GenParams) -> LlamaSampler {
    if params.temperature <= 0.0 || params.temperature.is_nan() {
        return LlamaSampler::greedy();
    }
    // llama.cpp treats seed 0xFFFFFFFF as "pick a random seed": never pass it.
    let folded = (params.seed ^ (params.seed >> 32)) as u32;
    let seed = if folded == u32::MAX { 0 } else { folded };
    LlamaSampler::chain_simple([
        LlamaSampler::temp(params.temperature),
        LlamaSampler::dist(seed),
    ])
}

/// Byte offset of the earliest stop string that ends at or after `from` (stop strings are
/// looked for only where new text could complete them).
fn find_stop(text: &[u8], stops: &[String], from: usize) -> Option<usize> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| {
            let s = s.as_bytes();
            text.get(from..)?
                .windows(s.len())
                .position(|w| w == s)
                .map(|i| from + i)
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_strings_are_found_across_token_boundaries() {
        let stops = vec!["END".to_string(), "\n\n".to_string()];
        assert_eq!(find_stop(b"hello EN", &stops, 0), None);
        assert_eq!(find_stop(b"hello END more", &stops, 3), Some(6));
        assert_eq!(find_stop(b"a\n\nb END", &stops, 0), Some(1));
        assert_eq!(find_stop(b"abc", &[String::new()], 0), None);
    }

    #[test]
    fn threads_resolve_from_options_first() {
        let opts = LocalOptions {
            threads: Some(3),
            ..LocalOptions::default()
        };
        assert_eq!(resolve_threads(&opts).unwrap(), 3);
        let zero = LocalOptions {
            threads: Some(0),
            ..LocalOptions::default()
        };
        assert!(matches!(resolve_threads(&zero), Err(LlmError::Config(_))));
    }

    #[test]
    fn missing_and_non_gguf_files_are_typed_errors() {
        let err = LocalModel::load(
            Path::new("/nonexistent/model.gguf"),
            LocalOptions::default(),
        )
        .unwrap_err();
        assert!(matches!(&err, LlmError::Local(m) if m.contains("/nonexistent/model.gguf")));

        let dir = std::env::temp_dir().join(format!("cardinal-llm-local-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bogus = dir.join("bogus.gguf");
        std::fs::write(&bogus, b"PK\x03\x04 not a gguf").unwrap();
        let err = LocalModel::load(&bogus, LocalOptions::default()).unwrap_err();
        assert!(
            matches!(&err, LlmError::Local(m) if m.contains("not a GGUF file")),
            "{err}"
        );

        // Right magic, truncated body: llama.cpp refuses it and we say so.
        let truncated = dir.join("truncated.gguf");
        let mut bytes = b"GGUF\x03\x00\x00\x00".to_vec();
        bytes.extend_from_slice(&[0xff; 40]);
        std::fs::write(&truncated, bytes).unwrap();
        let err = LocalModel::load(&truncated, LocalOptions::default()).unwrap_err();
        std::fs::remove_dir_all(&dir).ok();
        assert!(
            matches!(&err, LlmError::Local(m) if m.contains("could not load")),
            "{err}"
        );
    }
}
