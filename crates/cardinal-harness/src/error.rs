//! Errors of the harness, each with its class in the exit-code contract.

use std::path::PathBuf;

/// Where a failure belongs in the exit-code contract (the binary maps it: input → 2,
/// runtime → 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Bad usage or bad input: a flag, a configuration file, a data file, a run directory that
    /// belongs to other settings. Fixing the input fixes it.
    Input,
    /// Something the run depends on is unavailable: a model that cannot be pulled or loaded, an
    /// endpoint or a store that does not answer, a file system that refuses a write.
    Runtime,
}

/// Errors of the run library.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// Bad usage or input, with everything the user needs to fix it.
    #[error("{0}")]
    Input(String),
    /// The configuration file is invalid.
    #[error("{path}:{line}: {message}")]
    Config {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// The run directory holds records made under other settings.
    #[error(
        "{run_dir} holds {records} record(s) made under other settings; resuming would mix them \
         into one report. Differing fields:\n{fields}\nUse --fresh to start over, or another --run-dir."
    )]
    ManifestMismatch {
        run_dir: PathBuf,
        records: usize,
        fields: String,
    },
    /// Another process holds the run directory.
    #[error("{run_dir} is in use by another cardinal process{holder}; wait for it or use another --run-dir")]
    Locked { run_dir: PathBuf, holder: String },
    /// A file could not be read or written.
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Dataset(#[from] cardinal_dataset::error::DatasetError),
    #[error(transparent)]
    Kb(#[from] cardinal_kb::KbError),
    #[error(transparent)]
    Eval(#[from] cardinal_eval::EvalError),
    #[error(transparent)]
    Retrieval(#[from] cardinal_retrieval::RetrievalError),
    #[error(transparent)]
    Model(#[from] cardinal_models::ModelError),
    #[error(transparent)]
    Llm(#[from] cardinal_llm::LlmError),
    #[error(transparent)]
    Agent(#[from] cardinal_agent::AgentError),
    #[error(transparent)]
    Embed(#[from] cardinal_embed::EmbedError),
    #[error(transparent)]
    Trec(#[from] cardinal_trec::TrecError),
    /// Context around another harness error.
    #[error("{context}: {source}")]
    Context {
        context: String,
        #[source]
        source: Box<HarnessError>,
    },
}

pub type Result<T, E = HarnessError> = std::result::Result<T, E>;

impl HarnessError {
    /// The error's class in the exit-code contract.
    pub fn class(&self) -> ErrorClass {
        use HarnessError::*;
        match self {
            Input(_)
            | Config { .. }
            | ManifestMismatch { .. }
            | Locked { .. }
            | Dataset(_)
            | Kb(_)
            | Eval(_)
            | Trec(_) => ErrorClass::Input,
            Io { .. } => ErrorClass::Runtime,
            Retrieval(e) => retrieval_class(e),
            Model(e) => model_class(e),
            Llm(e) => llm_class(e),
            Agent(cardinal_agent::AgentError::Retrieval(e)) => retrieval_class(e),
            Agent(cardinal_agent::AgentError::Llm(e)) => llm_class(e),
            Agent(cardinal_agent::AgentError::SecondOpinion(e)) => llm_class(e),
            Agent(cardinal_agent::AgentError::Embed(_)) => ErrorClass::Runtime,
            // The bundled policy does not fit the chosen embedder (or its file is invalid):
            // a configuration problem.
            Agent(cardinal_agent::AgentError::Policy(_)) => ErrorClass::Input,
            Embed(_) => ErrorClass::Runtime,
            Context { source, .. } => source.class(),
        }
    }

    /// Wrap with a line of context.
    pub fn context(self, context: impl Into<String>) -> Self {
        HarnessError::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }

    pub fn io(what: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| HarnessError::Io { what, path, source }
    }
}

/// Class of a retrieval error: configuration problems are input, the rest runtime.
pub fn retrieval_class(e: &cardinal_retrieval::RetrievalError) -> ErrorClass {
    match e {
        cardinal_retrieval::RetrievalError::Config(_) => ErrorClass::Input,
        _ => ErrorClass::Runtime,
    }
}

/// Class of a model (pull/convert) error: an unknown name is input, the rest runtime.
pub fn model_class(e: &cardinal_models::ModelError) -> ErrorClass {
    match e {
        cardinal_models::ModelError::Unknown(..) => ErrorClass::Input,
        _ => ErrorClass::Runtime,
    }
}

/// Class of an LLM error: configuration is input, transport/model failures runtime.
pub fn llm_class(e: &cardinal_llm::LlmError) -> ErrorClass {
    match e {
        cardinal_llm::LlmError::Config(_) => ErrorClass::Input,
        _ => ErrorClass::Runtime,
    }
}

/// Add context to a result's error.
pub trait ResultExt<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<HarnessError>> ResultExt<T> for std::result::Result<T, E> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| e.into().context(context()))
    }
}
