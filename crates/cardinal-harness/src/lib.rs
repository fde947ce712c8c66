//! Cardinal's run library: everything between the command line and the pure crates.
//!
//! - [`settings`] — one settings layer: defaults < `cardinal.toml` < environment < flags.
//! - [`index`] — [`index::Index::prepare`], the one way to get a retriever (search, ingest,
//!   ask, eval and bench all use it).
//! - [`models`] — the agent's generator and the judge's model from settings.
//! - [`manifest`] — the run manifest: every number-changing setting; resume and baseline
//!   comparisons refuse to mix manifests.
//! - [`rundir`] — the run directory: lock, crash-safe records, atomic reports.
//! - [`sample`] — stratified `--sample N`.
//! - [`scorer`] — the judge-based scorer seam.
//! - [`sweep`] — the evaluation sweep.
//! - [`error`] — typed errors, each with its exit-code class (input vs runtime).
//!
//! The binary parses flags into [`settings::Overrides`], calls these functions, renders and maps
//! [`error::ErrorClass`] to exit codes (input 2, runtime 3).

pub mod calibration;
pub mod corpus;
pub mod error;
pub mod index;
pub mod manifest;
pub mod models;
pub mod observer;
pub mod rundir;
pub mod sample;
pub mod scorer;
pub mod settings;
pub mod sweep;

pub use error::{ErrorClass, HarnessError, Result};
pub use index::Index;
pub use observer::{Observer, Silent};
pub use settings::{Overrides, Settings};
