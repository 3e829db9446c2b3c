//! Datasets: the in-memory container, preprocessing, splits and synthetic problems. Reading
//! the real datasets from files and fetching them is `privopt-data`'s job.

mod batch;
mod dataset;
pub mod pca;
pub mod scale;
pub mod split;
pub mod synthetic;

pub use batch::minibatch;
pub use dataset::{Dataset, TrainTest};
