//! DP training under FHE (the FHE paper, §3–6, App. D): logistic regression with polynomial
//! sigmoid approximations, DP without clipping through a barrier term (Algorithm 3), Theorem 3's
//! conditions and the data-independent parameter selection of App. D.3, the clipping and
//! output-perturbation baselines, and the encrypted Algorithms 4/5 driven through the data
//! owner and compute server roles of `privopt-protocols`.
//!
//! One fit from one seed ([`estimator::fit`]) is what `privopt run`'s suites and Python's
//! `privopt.dpfhe.LogisticRegression` both call, so the two agree to the bit. The Table 3 /
//! Table 4 / Fig. 4–5 suites that use these live in `privopt-experiments`.

pub mod algorithms;
pub mod encrypted;
mod error;
pub mod estimator;
pub mod logreg;
pub mod plan;
pub mod theorem;

pub use error::{DpfheError, Result};

use privopt_math::{SeedTree, StreamRng};

/// The random streams of one dataset's plan and encrypted runs, labelled by its index in the
/// suite: the suites and [`estimator::fit`] draw from these, so a fit from seed `s` is the
/// `encrypted` suite's run of its first dataset with `seed = s`.
#[derive(Clone, Copy, Debug)]
pub struct DatasetStreams {
    seeds: SeedTree,
    dataset: u64,
}

impl DatasetStreams {
    /// The streams of dataset `dataset` under `seeds`.
    pub fn new(seeds: SeedTree, dataset: u64) -> Self {
        Self { seeds, dataset }
    }

    /// The DP release of d (Remark 5.3).
    pub fn release_d(&self) -> StreamRng {
        self.seeds.stream("dpfhe/table4/d", &[self.dataset])
    }

    /// An encrypted run's batches and noise (a fresh copy each call: the plaintext twin and
    /// the pre-sampled inputs draw the same values).
    pub fn training(&self) -> StreamRng {
        self.seeds.stream("dpfhe/encrypted", &[self.dataset])
    }

    /// The data owner's keys.
    pub fn keys(&self) -> StreamRng {
        privopt_math::sample::secret_rng(Some(
            self.seeds
                .child_seed("dpfhe/encrypted/keys", &[self.dataset]),
        ))
    }
}
