//! Datasets: the in-memory container, file formats, preprocessing, and the catalog of real
//! datasets privopt can fetch from package registries.

pub mod catalog;
mod dataset;
pub mod fetch;
pub mod idx;
pub mod load;
pub mod pca;
pub mod scale;
pub mod split;
pub mod synthetic;
pub mod tabular;

pub use dataset::{Dataset, TrainTest};
