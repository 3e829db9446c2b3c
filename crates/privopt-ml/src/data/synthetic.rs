//! Small generated problems for quickstarts and tests (no download needed).

use rand::{Rng, RngCore};
use rand_distr::{Distribution, StandardNormal};

use crate::data::{Dataset, TrainTest};
use crate::error::{Result, ensure};

fn gaussian_rows(n: usize, d: usize, rng: &mut impl Rng) -> Vec<f64> {
    (0..n * d).map(|_| StandardNormal.sample(rng)).collect()
}

fn planted_weights(d: usize, rng: &mut impl Rng) -> Vec<f64> {
    // Unit-norm direction scaled so that margins x.w* ~ N(0, 9): a well-separated problem.
    let w: Vec<f64> = (0..d).map(|_| StandardNormal.sample(rng)).collect();
    let norm = w
        .iter()
        .map(|v| v * v)
        .sum::<f64>()
        .sqrt()
        .max(f64::MIN_POSITIVE);
    w.iter().map(|v| 3.0 * v / norm).collect()
}

/// `n_train` and `n_test` examples with `x ~ N(0, I_d)` and labels drawn by `label(x·w*, rng)`
/// for one planted `w*` shared by both parts.
fn planted(
    n_train: usize,
    n_test: usize,
    d: usize,
    num_classes: Option<usize>,
    rng: &mut impl Rng,
    mut label: impl FnMut(f64, &mut dyn RngCore) -> f64,
) -> Result<TrainTest> {
    ensure(n_train > 0 && n_test > 0 && d > 0, || {
        "synthetic data needs n_train, n_test, d > 0".into()
    })?;
    let w = planted_weights(d, rng);
    let mut make = |n: usize| -> Result<Dataset> {
        let x = gaussian_rows(n, d, rng);
        let y = x
            .chunks_exact(d)
            .map(|row| label(row.iter().zip(&w).map(|(a, b)| a * b).sum(), rng))
            .collect();
        Dataset::new(x, y, d, num_classes)
    };
    Ok(TrainTest {
        train: make(n_train)?,
        test: make(n_test)?,
    })
}

/// A logistic model with a planted weight vector: `x ~ N(0, I_d)`, `P(y = 1) = σ(x·w*)`.
/// Returns `n_train` training and `n_test` test examples from the same distribution.
pub fn logistic(n_train: usize, n_test: usize, d: usize, rng: &mut impl Rng) -> Result<TrainTest> {
    planted(n_train, n_test, d, Some(2), rng, |z, r| {
        let p = 1.0 / (1.0 + (-z).exp());
        let u: f64 = r.random();
        f64::from(u8::from(u < p))
    })
}

/// A linear regression problem `y = x·w* + ε`, `ε ~ N(0, noise²)`.
pub fn linear(
    n_train: usize,
    n_test: usize,
    d: usize,
    noise: f64,
    rng: &mut impl Rng,
) -> Result<TrainTest> {
    ensure(noise >= 0.0 && noise.is_finite(), || {
        "synthetic noise must be >= 0".into()
    })?;
    planted(n_train, n_test, d, None, rng, |z, r| {
        let e: f64 = StandardNormal.sample(r);
        z + noise * e
    })
}
