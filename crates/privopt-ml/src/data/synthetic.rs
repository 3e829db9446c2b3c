//! Small generated problems for quickstarts and tests (no download needed).

use rand::Rng;
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

/// A logistic model with a planted weight vector: `x ~ N(0, I_d)`, `P(y = 1) = σ(x·w*)`.
/// Returns `n_train` training and `n_test` test examples from the same distribution.
pub fn logistic(n_train: usize, n_test: usize, d: usize, rng: &mut impl Rng) -> Result<TrainTest> {
    ensure(n_train > 0 && n_test > 0 && d > 0, || {
        "synthetic data needs n_train, n_test, d > 0".into()
    })?;
    let w = planted_weights(d, rng);
    let mut make = |n: usize| -> Result<Dataset> {
        let x = gaussian_rows(n, d, rng);
        let y = x
            .chunks_exact(d)
            .map(|row| {
                let z: f64 = row.iter().zip(&w).map(|(a, b)| a * b).sum();
                let p = 1.0 / (1.0 + (-z).exp());
                f64::from(u8::from(rng.random::<f64>() < p))
            })
            .collect();
        Dataset::new(x, y, d, Some(2))
    };
    Ok(TrainTest {
        train: make(n_train)?,
        test: make(n_test)?,
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
    ensure(n_train > 0 && n_test > 0 && d > 0 && noise >= 0.0, || {
        "synthetic data needs n_train, n_test, d > 0 and noise >= 0".into()
    })?;
    let w = planted_weights(d, rng);
    let mut make = |n: usize| -> Result<Dataset> {
        let x = gaussian_rows(n, d, rng);
        let y = x
            .chunks_exact(d)
            .map(|row| {
                let e: f64 = StandardNormal.sample(rng);
                row.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>() + noise * e
            })
            .collect();
        Dataset::new(x, y, d, None)
    };
    Ok(TrainTest {
        train: make(n_train)?,
        test: make(n_test)?,
    })
}
