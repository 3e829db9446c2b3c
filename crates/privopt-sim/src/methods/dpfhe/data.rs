//! The FHE paper's four binary tasks, preprocessed as its §7 says: features in [−1, 1] plus a
//! bias feature of 1, labels in {0, 1}, and a real held-out test split (the authors' released
//! data used the training set as the test set; we do not).

use std::path::Path;

use privopt_math::SeedTree;
use privopt_ml::data::load::{SplitOptions, load};
use privopt_ml::data::pca::Pca;
use privopt_ml::data::{Dataset, TrainTest};

use crate::error::{Error, Result};

/// The datasets of Tables 3 and 4.
pub const PAPER_DATASETS: &[&str] = &["mnist", "adult", "compas", "credit"];

/// A built-in task that needs no download (for the quickstart and smoke runs): a planted
/// logistic model with [`SYNTHETIC_FEATURES`] Gaussian features, scaled into [−1, 1] like MNIST.
pub const SYNTHETIC_DATASET: &str = "synthetic";

/// Features of the built-in task (16 with the bias: one packing block of 16 slots).
const SYNTHETIC_FEATURES: usize = 15;

/// Refuses a dataset name [`load_task`] does not know.
pub fn check_known(name: &str) -> Result<()> {
    if name == SYNTHETIC_DATASET || PAPER_DATASETS.contains(&name) {
        Ok(())
    } else {
        Err(unknown_dataset(name))
    }
}

/// The error for a dataset name [`load_task`] does not know, naming those it does.
fn unknown_dataset(name: &str) -> Error {
    Error::Config(format!(
        "method.datasets: `{name}` is not one of the paper's datasets ({}) or `{SYNTHETIC_DATASET}`",
        PAPER_DATASETS.join(", ")
    ))
}

/// MNIST digits of the paper's binary task (3 → label 0, 8 → label 1) and its PCA size.
const MNIST_CLASSES: [usize; 2] = [3, 8];
const MNIST_PCA: usize = 49;

/// Loads `name` with the paper's preprocessing. COMPAS and credit (no official test split) are
/// split 80/20 with a seed derived from `seeds`.
pub fn load_task(name: &str, data_dir: &Path, seeds: &SeedTree) -> Result<TrainTest> {
    let split = SplitOptions {
        seed: seeds.child_seed("data/split", &[]),
        test_fraction: 0.2,
    };
    let tt = match name {
        "mnist" => {
            let tt = load("mnist", data_dir, split)?;
            let train = tt.train.class_subset(&MNIST_CLASSES)?;
            let test = tt.test.class_subset(&MNIST_CLASSES)?;
            let pca = Pca::fit(&train, MNIST_PCA)?;
            let (train, test) = (pca.transform(&train)?, pca.transform(&test)?);
            scale_to_unit_box(train, test)?
        }
        "adult" | "compas" | "credit" => load(name, data_dir, split)?,
        SYNTHETIC_DATASET => {
            let mut rng = seeds.stream("data/synthetic", &[]);
            let tt =
                privopt_ml::data::synthetic::logistic(4000, 1000, SYNTHETIC_FEATURES, &mut rng)?;
            scale_to_unit_box(tt.train, tt.test)?
        }
        other => return Err(unknown_dataset(other)),
    };
    Ok(TrainTest {
        train: with_bias(&tt.train)?,
        test: with_bias(&tt.test)?,
    })
}

/// Scales each feature by its largest absolute training value so training features lie in
/// [−1, 1]; test features are clamped to the same box (the bound the DP analysis uses).
fn scale_to_unit_box(train: Dataset, test: Dataset) -> Result<TrainTest> {
    let d = train.n_features();
    let mut scale = vec![0.0_f64; d];
    for i in 0..train.len() {
        for (s, x) in scale.iter_mut().zip(train.row(i)) {
            *s = s.max(x.abs());
        }
    }
    let apply = |ds: &Dataset| {
        ds.map_rows(d, |row, out| {
            for ((o, x), s) in out.iter_mut().zip(row).zip(&scale) {
                *o = if *s > 0.0 {
                    (x / s).clamp(-1.0, 1.0)
                } else {
                    0.0
                };
            }
        })
    };
    Ok(TrainTest {
        train: apply(&train)?,
        test: apply(&test)?,
    })
}

/// Appends a constant feature 1 (the intercept).
pub fn with_bias(ds: &Dataset) -> Result<Dataset> {
    let d = ds.n_features();
    Ok(ds.map_rows(d + 1, |row, out| {
        out[..d].copy_from_slice(row);
        out[d] = 1.0;
    })?)
}
