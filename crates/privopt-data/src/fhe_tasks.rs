//! The FHE paper's (DP training under FHE) four binary tasks, preprocessed as its §7 says: features in [−1, 1] plus a
//! bias feature of 1, labels in {0, 1}, and a real held-out test split (the authors' released
//! data used the training set as the test set; we do not).

use std::path::Path;

use crate::error::{DataError, Result};
use crate::load::{CategoricalEncoding, SplitOptions, load_with};
use privopt_math::SeedTree;
use privopt_ml::data::pca::Pca;
use privopt_ml::data::scale::FeatureScaling;
use privopt_ml::data::{Dataset, TrainTest};

/// The datasets of Tables 3 and 4.
pub const PAPER_DATASETS: &[&str] = &["mnist", "adult", "compas", "credit"];

/// A built-in task that needs no download (for the quickstart and smoke runs): a planted
/// logistic model with `SYNTHETIC_FEATURES` Gaussian features, scaled into [−1, 1] like MNIST.
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
fn unknown_dataset(name: &str) -> DataError {
    DataError::Config(format!(
        "method.datasets: `{name}` is not one of the paper's datasets ({}) or `{SYNTHETIC_DATASET}`",
        PAPER_DATASETS.join(", ")
    ))
}

/// MNIST digits of the paper's binary task (3 → label 0, 8 → label 1) and its PCA size.
const MNIST_CLASSES: [usize; 2] = [3, 8];
const MNIST_PCA: usize = 49;

/// The preprocessing choices the paper leaves open (it only asks for features in [−1, 1]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Preprocessing {
    /// How features are mapped into [−1, 1]. `None` keeps each dataset's default: max-abs per
    /// PCA component for MNIST (and the synthetic task), the tabular loader's min-max for
    /// Adult, COMPAS and credit. A map given here is fitted on the training part *after* the
    /// loader's (so on tabular data `max_abs` and `min_max` change nothing).
    pub scaling: Option<FeatureScaling>,
    /// How tabular categories become features (one-hot by default; `Label` is the authors').
    pub encoding: CategoricalEncoding,
}

/// Loads `name` with the paper's preprocessing. COMPAS and credit (no official test split) are
/// split 80/20 with a seed derived from `seeds`.
pub fn load_task(
    name: &str,
    data_dir: &Path,
    seeds: &SeedTree,
    prep: &Preprocessing,
) -> Result<TrainTest> {
    let split = SplitOptions {
        seed: seeds.child_seed("data/split", &[]),
        test_fraction: 0.2,
    };
    let unit_box = |tt: &TrainTest| prep.scaling.unwrap_or(FeatureScaling::MaxAbs).apply(tt);
    let tt = match name {
        "mnist" => {
            let tt = load_with("mnist", data_dir, split, prep.encoding)?;
            let train = tt.train.class_subset(&MNIST_CLASSES)?;
            let test = tt.test.class_subset(&MNIST_CLASSES)?;
            let pca = Pca::fit(&train, MNIST_PCA)?;
            let (train, test) = (pca.transform(&train)?, pca.transform(&test)?);
            unit_box(&TrainTest { train, test })?
        }
        "adult" | "compas" | "credit" => {
            let tt = load_with(name, data_dir, split, prep.encoding)?;
            match prep.scaling {
                Some(scaling) => scaling.apply(&tt)?,
                None => tt,
            }
        }
        SYNTHETIC_DATASET => {
            let mut rng = seeds.stream("data/synthetic", &[]);
            let tt =
                privopt_ml::data::synthetic::logistic(4000, 1000, SYNTHETIC_FEATURES, &mut rng)?;
            unit_box(&tt)?
        }
        other => return Err(unknown_dataset(other)),
    };
    Ok(TrainTest {
        train: with_bias(&tt.train)?,
        test: with_bias(&tt.test)?,
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
