//! Machine-learning pieces shared by every privopt method.
//!
//! - [`data`]: the in-memory dataset, scaling, PCA, binary subsets, seeded splits and
//!   synthetic problems (files and fetching are `privopt-data`'s).
//! - [`partition`]: IID, Dirichlet(α) and shard partitions of examples across clients.
//! - [`model`]: least squares, logistic regression and a small MLP, with loss, gradient and
//!   per-example gradient.
//! - [`text`]: a WordPiece tokenizer and a MiniLM encoder classifier (forward passes only).
//! - [`zo`]: zeroth-order gradient estimators whose perturbations are regenerated from
//!   `(seed, round, step, index)` instead of being stored or sent.

pub mod data;
pub mod error;
pub mod model;
pub mod partition;
pub mod text;
pub mod zo;

pub use error::{MlError, Result};
