//! Algorithms 1–3 of the FHE paper and the baselines, as one gradient-descent loop:
//!
//! - Algorithm 1: approximate GD, `link = Poly`, no noise, no barrier;
//! - Algorithm 2: plus Gaussian noise χ_i ~ N(0, σ²I) on the averaged gradient;
//! - Algorithm 3: plus the barrier gradient 2λ·P_κ(Θ − ‖w‖²)·w (objective f − λ·ln(Θ − ‖w‖²));
//! - DP-GD / DP-SGD: `link = Exact`, per-example clipping, noise;
//! - mini-batch versions (§7) draw `batch` examples without replacement each step.
//!
//! Output perturbation (Wu et al. 2017, Alg. 2) is [`output_perturbation`].

use privopt_dp::GaussianMechanism;
use privopt_ml::data::Dataset;
use rand::Rng;
use rand::seq::SliceRandom;

use super::logreg::{Link, gradient_sum};
use privopt_ml::data::minibatch;

pub use privopt_protocols::dpfhe::Barrier;

/// One training run's settings.
#[derive(Clone, Debug)]
pub struct GdSpec {
    /// σ(z) or its polynomial.
    pub link: Link,
    /// Number of updates T.
    pub steps: u64,
    /// Learning rate η.
    pub lr: f64,
    /// Examples per step, drawn without replacement; `None` uses all (full-batch GD).
    pub batch: Option<usize>,
    /// Per-example L2 clipping bound (DP-SGD); `None` for no clipping.
    pub clip: Option<f64>,
    /// Standard deviation of the Gaussian noise added to the averaged gradient.
    pub noise_std: f64,
    /// The barrier of Algorithm 3.
    pub barrier: Option<Barrier>,
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct Trajectory {
    /// Final weights (the last finite iterate if the run diverged).
    pub w: Vec<f64>,
    /// The step at which the weights stopped being finite (or exceeded 1e12).
    pub diverged_at: Option<u64>,
    /// max_i |⟨w_t, x_i⟩| over the step's batch, for each step t = 0, 1, …, when requested.
    pub max_margin: Vec<f64>,
}

/// Runs `spec` on `data` from w₀ = 0.
pub fn train(data: &Dataset, spec: &GdSpec, rng: &mut impl Rng, track_margins: bool) -> Trajectory {
    train_observed(data, spec, rng, track_margins, |_| {})
}

/// [`train`], calling `observe(w_t)` with every iterate w₀, w₁, …, w_T, in order (up to the
/// last finite one when the run diverges).
pub fn train_observed(
    data: &Dataset,
    spec: &GdSpec,
    rng: &mut impl Rng,
    track_margins: bool,
    mut observe: impl FnMut(&[f64]),
) -> Trajectory {
    let d = data.n_features();
    let all: Vec<usize> = (0..data.len()).collect();
    let mut w = vec![0.0; d];
    let mut grad = vec![0.0; d];
    let mut max_margin = Vec::new();
    // σ·N(0, 1) per coordinate: the same draws, in the same order, as a plain sampler.
    let noise = (spec.noise_std > 0.0)
        .then(|| GaussianMechanism::new(spec.noise_std, 1.0))
        .transpose()
        .ok()
        .flatten();
    for t in 0..spec.steps {
        observe(&w);
        let sampled;
        let batch: &[usize] = match spec.batch {
            Some(b) => {
                sampled = minibatch(&all, b, rng);
                &sampled
            }
            None => &all,
        };
        grad.iter_mut().for_each(|g| *g = 0.0);
        let batch_max_margin = gradient_sum(&spec.link, &w, data, batch, spec.clip, &mut grad);
        if track_margins {
            // Margins of the iterate this step starts from (full batches see every example).
            max_margin.push(batch_max_margin);
        }
        let inv = 1.0 / batch.len() as f64;
        let barrier = spec.barrier.as_ref().map_or(0.0, |b| b.gradient_factor(&w));
        let chi = noise
            .as_ref()
            .map_or_else(|| vec![0.0; d], |m| m.noise(d, rng));
        let next: Vec<f64> = w
            .iter()
            .zip(&grad)
            .zip(&chi)
            .map(|((wi, gi), c)| wi - spec.lr * (barrier * wi + gi * inv + c))
            .collect();
        if next.iter().any(|x| !x.is_finite() || x.abs() > 1e12) {
            return Trajectory {
                w,
                diverged_at: Some(t),
                max_margin,
            };
        }
        w = next;
    }
    observe(&w);
    Trajectory {
        w,
        diverged_at: None,
        max_margin,
    }
}

/// Output perturbation (Wu et al. 2017, Algorithm 2, convex case): `passes` passes of
/// permutation SGD with constant step `lr` and batch `batch` on the exact logistic loss, then
/// Gaussian noise of standard deviation `noise_std` on the output. The caller calibrates the
/// noise to the L2 sensitivity 2·passes·L·η/batch ([`output_sensitivity`]).
pub fn output_perturbation(
    data: &Dataset,
    passes: u64,
    lr: f64,
    batch: usize,
    noise_std: f64,
    rng: &mut impl Rng,
) -> Vec<f64> {
    let d = data.n_features();
    let mut w = vec![0.0; d];
    let mut order: Vec<usize> = (0..data.len()).collect();
    let mut grad = vec![0.0; d];
    for _ in 0..passes {
        order.shuffle(rng);
        for chunk in order.chunks(batch.max(1)) {
            grad.iter_mut().for_each(|g| *g = 0.0);
            gradient_sum(&Link::Exact, &w, data, chunk, None, &mut grad);
            let scale = lr / batch.max(1) as f64;
            w.iter_mut()
                .zip(&grad)
                .for_each(|(wi, gi)| *wi -= scale * gi);
        }
    }
    if let Ok(mechanism) = GaussianMechanism::new(noise_std, 1.0) {
        mechanism.perturb(&mut w, rng);
    }
    w
}

/// Wu et al.'s L2 sensitivity of `passes` passes of constant-step PSGD on an `lipschitz`-Lipschitz
/// convex loss with step `lr ≤ 2/β` and batch `batch`: 2·k·L·η/b.
pub fn output_sensitivity(passes: u64, lipschitz: f64, lr: f64, batch: usize) -> f64 {
    2.0 * passes as f64 * lipschitz * lr / batch.max(1) as f64
}
