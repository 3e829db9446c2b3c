//! Builds the problem an experiment runs on: data (loaded or generated, subset, projected),
//! its partition across clients, and the model.

use std::path::Path;

use privopt_math::SeedTree;
use privopt_ml::data::pca::Pca;
use privopt_ml::data::{Dataset, TrainTest, synthetic};
use privopt_ml::model::{Model, ModelSpec};
use privopt_ml::partition::{Partition, partition};
use rand::seq::SliceRandom;
use rand::seq::index::sample;
use serde::{Deserialize, Serialize};

use crate::catalog::{CATALOG, lookup};
use crate::error::{DataError, Result};
use crate::load::{SplitOptions, load};
use crate::store::require;

/// Returns `Err(DataError::Config(..))` unless `cond` holds.
fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(DataError::Config(msg()))
    }
}

fn ensure_count(key: &str, value: u64, max: u64) -> Result<()> {
    privopt_math::limits::count(key, value, max).map_err(DataError::Config)
}

fn ensure_elements(what: &str, sizes: &[u64]) -> Result<()> {
    privopt_math::limits::elements(what, sizes).map_err(DataError::Config)
}

/// Most clients a training set may be split across.
const MAX_CLIENTS: u64 = 10_000_000;

/// Synthetic problems generated from the seed.
pub const SYNTHETIC_DATASETS: &[&str] = &["synthetic_logistic", "synthetic_linear"];

/// The `[data]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// A catalog dataset (`mnist`, `adult`, …) or a synthetic one (`synthetic_logistic`, …).
    pub dataset: String,
    /// Keep only these classes, relabelled in the order given (e.g. `[0, 1]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<Vec<usize>>,
    /// Project features onto this many principal components (fitted on the training set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pca: Option<usize>,
    /// Use at most this many training examples (a seeded random subset), for smoke runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_train: Option<usize>,
    /// Hold out this many training examples (a seeded random subset, disjoint from the
    /// clients' data and from the test set) as a validation split for tuning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<usize>,
    /// Held-out fraction for datasets without an official test set.
    #[serde(default = "default_test_fraction")]
    pub test_fraction: f64,
    /// Synthetic only: training examples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_train: Option<usize>,
    /// Synthetic only: test examples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_test: Option<usize>,
    /// Synthetic only: features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dim: Option<usize>,
    /// `synthetic_linear` only: standard deviation of the target noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
    /// Number of clients the training set is split across.
    #[serde(default = "one")]
    pub clients: usize,
    /// How the training set is split across clients.
    #[serde(default)]
    pub partition: Partition,
}

fn default_test_fraction() -> f64 {
    0.2
}

fn one() -> usize {
    1
}

impl DataConfig {
    /// Checks every value against its range; errors name the key (`data.…`).
    pub fn validate(&self) -> Result<()> {
        let d = self;
        let known = lookup(&d.dataset).is_ok();
        ensure(d.is_synthetic() || known, || {
            format!(
                "data.dataset: unknown dataset `{}` (synthetic: {}; fetchable: {})",
                d.dataset,
                SYNTHETIC_DATASETS.join(", "),
                CATALOG
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        ensure(d.dataset != "minilm", || {
            "data.dataset: `minilm` is a model, not a dataset".into()
        })?;
        if !d.is_synthetic() {
            for (key, set) in [
                ("n_train", d.n_train.is_some()),
                ("n_test", d.n_test.is_some()),
                ("dim", d.dim.is_some()),
                ("noise", d.noise.is_some()),
            ] {
                ensure(!set, || {
                    format!("data.{key} applies only to synthetic datasets")
                })?;
            }
        }
        ensure(d.dataset == "synthetic_linear" || d.noise.is_none(), || {
            "data.noise applies only to synthetic_linear".into()
        })?;
        ensure(d.test_fraction > 0.0 && d.test_fraction < 1.0, || {
            format!(
                "data.test_fraction must be in (0, 1), got {}",
                d.test_fraction
            )
        })?;
        for (key, v) in [
            ("n_train", d.n_train),
            ("n_test", d.n_test),
            ("dim", d.dim),
            ("pca", d.pca),
            ("max_train", d.max_train),
            ("validation", d.validation),
        ] {
            ensure(v != Some(0), || format!("data.{key} must be >= 1"))?;
        }
        let dim = d.dim.unwrap_or(SYNTHETIC_DIM) as u64;
        for (key, n) in [("n_train", d.n_train), ("n_test", d.n_test)] {
            if let Some(n) = n {
                ensure_elements(&format!("data.{key} × data.dim"), &[n as u64, dim])?;
            }
        }
        ensure_elements("data.dim", &[dim])?;
        ensure_count("data.clients", d.clients as u64, MAX_CLIENTS)?;
        ensure(d.noise.is_none_or(|n| n >= 0.0 && n.is_finite()), || {
            "data.noise must be >= 0".into()
        })?;
        if let Some(c) = &d.classes {
            ensure(c.len() >= 2, || {
                "data.classes must list at least 2 classes".into()
            })?;
            let mut s = c.clone();
            s.sort_unstable();
            s.dedup();
            ensure(s.len() == c.len(), || {
                "data.classes has a repeated class".into()
            })?;
        }
        match d.partition {
            Partition::Dirichlet { alpha } => ensure(alpha > 0.0 && alpha.is_finite(), || {
                format!("data.partition.alpha must be > 0, got {alpha}")
            })?,
            Partition::Shards { shards_per_client } => ensure(shards_per_client >= 1, || {
                "data.partition.shards_per_client must be >= 1".into()
            })?,
            Partition::Iid => {}
        }
        Ok(())
    }

    /// Whether the dataset is generated rather than loaded.
    pub fn is_synthetic(&self) -> bool {
        SYNTHETIC_DATASETS.contains(&self.dataset.as_str())
    }
}

/// Defaults of the synthetic problems.
const SYNTHETIC_N_TRAIN: usize = 2000;
const SYNTHETIC_N_TEST: usize = 500;
const SYNTHETIC_DIM: usize = 20;
const SYNTHETIC_NOISE: f64 = 0.1;

/// Everything a method needs to know about the task.
pub struct Problem {
    /// Training examples (the union of all clients' data).
    pub train: Dataset,
    /// Held-out examples, for evaluation only.
    pub test: Dataset,
    /// Held-out training examples for tuning (`data.validation`), never trained on.
    pub validation: Option<Dataset>,
    /// For each client, its indices into `train`.
    pub clients: Vec<Vec<usize>>,
    /// The model being trained.
    pub model: Box<dyn Model>,
}

impl Problem {
    /// Builds the problem of the `[data]` and `[model]` tables, reading catalog data from
    /// `data_dir`.
    pub fn build(
        d: &DataConfig,
        model: &ModelSpec,
        data_dir: &Path,
        seeds: &SeedTree,
    ) -> Result<Problem> {
        let mut tt = if d.is_synthetic() {
            let mut rng = seeds.stream("data/synthetic", &[]);
            let (n, m, dim) = (
                d.n_train.unwrap_or(SYNTHETIC_N_TRAIN),
                d.n_test.unwrap_or(SYNTHETIC_N_TEST),
                d.dim.unwrap_or(SYNTHETIC_DIM),
            );
            match d.dataset.as_str() {
                "synthetic_linear" => {
                    synthetic::linear(n, m, dim, d.noise.unwrap_or(SYNTHETIC_NOISE), &mut rng)?
                }
                _ => synthetic::logistic(n, m, dim, &mut rng)?,
            }
        } else {
            let split = SplitOptions {
                seed: seeds.child_seed("data/split", &[]),
                test_fraction: d.test_fraction,
            };
            load(&d.dataset, data_dir, split)?
        };
        if let Some(classes) = &d.classes {
            tt = TrainTest {
                train: tt.train.class_subset(classes)?,
                test: tt.test.class_subset(classes)?,
            };
        }
        let mut validation = None;
        if let Some(v) = d.validation {
            ensure(v >= 1 && v < tt.train.len(), || {
                format!(
                    "data.validation = {v} must be in 1..{} (the training examples)",
                    tt.train.len()
                )
            })?;
            let mut rng = seeds.stream("data/validation", &[]);
            let mut idx: Vec<usize> = (0..tt.train.len()).collect();
            idx.shuffle(&mut rng);
            let (held, kept) = idx.split_at_mut(v);
            held.sort_unstable();
            kept.sort_unstable();
            validation = Some(tt.train.select(held));
            tt.train = tt.train.select(kept);
        }
        if let Some(max) = d.max_train.filter(|&m| m < tt.train.len()) {
            let mut rng = seeds.stream("data/subsample", &[]);
            let mut idx = sample(&mut rng, tt.train.len(), max).into_vec();
            idx.sort_unstable();
            tt.train = tt.train.select(&idx);
        }
        if let Some(k) = d.pca {
            ensure(k <= tt.train.n_features(), || {
                format!(
                    "data.pca = {k} exceeds the {} features of the data",
                    tt.train.n_features()
                )
            })?;
            let pca = Pca::fit(&tt.train, k)?;
            validation = validation.map(|v| pca.transform(&v)).transpose()?;
            tt = TrainTest {
                train: pca.transform(&tt.train)?,
                test: pca.transform(&tt.test)?,
            };
        }
        ensure(!tt.train.is_empty() && !tt.test.is_empty(), || {
            "data: the training or test set is empty after subsetting".into()
        })?;
        ensure(
            tt.train.num_classes().is_some()
                || matches!(d.partition, privopt_ml::partition::Partition::Iid),
            || "data.partition: only kind = \"iid\" applies to regression targets".into(),
        )?;
        let mut rng = seeds.stream("data/partition", &[]);
        let clients = partition(tt.train.labels(), d.clients, &d.partition, &mut rng)
            .map_err(|e| DataError::Config(format!("data.partition: {e}")))?;
        let minilm = match model {
            ModelSpec::Minilm { .. } => Some(require(data_dir, "minilm")?),
            _ => None,
        };
        let model = model.build_with(
            tt.train.n_features(),
            tt.train.num_classes(),
            minilm.as_deref(),
        )?;
        Ok(Problem {
            train: tt.train,
            test: tt.test,
            validation,
            clients,
            model,
        })
    }
}
