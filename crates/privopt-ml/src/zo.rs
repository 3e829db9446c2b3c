//! Zeroth-order (derivative-free) gradient estimators.
//!
//! The estimate at `x` averages `P` directional finite differences along perturbations
//! `u_1 … u_P`:
//!
//! - two-point: `s_p = (f(x + μu_p) − f(x − μu_p)) / (2μ)`,
//! - one-sided: `s_p = (f(x + μu_p) − f(x)) / μ`,
//!
//! and `ĝ = (1/P) Σ_p s_p u_p`. Every `u_p` is regenerated from the address
//! `(seed, round, step, p)` by a counter-based PRG ([`privopt_math::SeedTree`]), so parties
//! that share the seed exchange only the scalars `s_p` — never a vector — and nothing is stored.
//! All three direction laws have `E[u uᵀ] = I`, so `ĝ` estimates the (smoothed) gradient
//! without rescaling.

use privopt_math::SeedTree;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Result, ensure};

/// PRG domain of perturbation vectors.
const PERTURBATION_DOMAIN: &str = "zo/perturbation";

/// The law of a perturbation direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// `u ~ N(0, I_d)`.
    #[default]
    Gaussian,
    /// Independent uniform signs: `u_i ∈ {−1, +1}`.
    Rademacher,
    /// Uniform on the sphere of radius `√d`.
    Sphere,
}

/// The finite-difference scheme.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Difference {
    /// Symmetric: `(f(x + μu) − f(x − μu)) / 2μ`, bias `O(μ²)`.
    #[default]
    TwoPoint,
    /// Forward: `(f(x + μu) − f(x)) / μ`, bias `O(μ)`; `f(x)` is shared by all `P` directions.
    OneSided,
}

/// A configured zeroth-order estimator.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoEstimator {
    /// Direction law.
    #[serde(default)]
    pub direction: Direction,
    /// Difference scheme.
    #[serde(default)]
    pub difference: Difference,
    /// Smoothing radius μ (> 0).
    pub mu: f64,
    /// Perturbations per estimate, P (>= 1).
    #[serde(default = "one")]
    pub perturbations: usize,
}

fn one() -> usize {
    1
}

/// Where in a run an estimate is made; with the seed, it addresses the perturbations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoAddress {
    /// Communication round.
    pub round: u64,
    /// Local step within the round.
    pub step: u64,
}

impl ZoEstimator {
    /// Checks the parameters, naming the offending key under `prefix` (e.g. `method.zo`).
    pub fn validate(&self, prefix: &str) -> Result<()> {
        ensure(self.mu > 0.0 && self.mu.is_finite(), || {
            format!("{prefix}.mu must be > 0, got {}", self.mu)
        })?;
        ensure((1..=1 << 16).contains(&self.perturbations), || {
            format!(
                "{prefix}.perturbations must be in 1..=65536, got {}",
                self.perturbations
            )
        })
    }

    /// Writes perturbation `index` at `at` into `out` (its length is the dimension).
    pub fn perturbation(&self, seeds: &SeedTree, at: ZoAddress, index: u64, out: &mut [f64]) {
        let mut rng = seeds.stream(PERTURBATION_DOMAIN, &[at.round, at.step, index]);
        match self.direction {
            Direction::Gaussian => out
                .iter_mut()
                .for_each(|v| *v = StandardNormal.sample(&mut rng)),
            Direction::Rademacher => {
                // One random bit per coordinate, 64 coordinates per draw.
                for chunk in out.chunks_mut(64) {
                    let bits: u64 = rng.random();
                    for (k, v) in chunk.iter_mut().enumerate() {
                        *v = if (bits >> k) & 1 == 1 { 1.0 } else { -1.0 };
                    }
                }
            }
            Direction::Sphere => {
                out.iter_mut()
                    .for_each(|v| *v = StandardNormal.sample(&mut rng));
                let norm = out.iter().map(|v| v * v).sum::<f64>().sqrt();
                let scale = (out.len() as f64).sqrt() / norm.max(f64::MIN_POSITIVE);
                out.iter_mut().for_each(|v| *v *= scale);
            }
        }
    }

    /// The `P` directional-derivative scalars of `f` at `x`; the only numbers a client sends.
    pub fn scalars(
        &self,
        f: &mut dyn FnMut(&[f64]) -> f64,
        x: &[f64],
        seeds: &SeedTree,
        at: ZoAddress,
    ) -> Vec<f64> {
        let mut u = vec![0.0; x.len()];
        let mut probe = x.to_vec();
        let base = match self.difference {
            Difference::OneSided => f(x),
            Difference::TwoPoint => 0.0,
        };
        (0..self.perturbations as u64)
            .map(|p| {
                self.perturbation(seeds, at, p, &mut u);
                set_shifted(&mut probe, x, &u, self.mu);
                let plus = f(&probe);
                match self.difference {
                    Difference::OneSided => (plus - base) / self.mu,
                    Difference::TwoPoint => {
                        set_shifted(&mut probe, x, &u, -self.mu);
                        (plus - f(&probe)) / (2.0 * self.mu)
                    }
                }
            })
            .collect()
    }

    /// Rebuilds `ĝ = (1/P) Σ s_p u_p` from the scalars alone (what a receiver does).
    pub fn gradient_from_scalars(
        &self,
        scalars: &[f64],
        seeds: &SeedTree,
        at: ZoAddress,
        dim: usize,
    ) -> Vec<f64> {
        let mut g = vec![0.0; dim];
        let mut u = vec![0.0; dim];
        let inv = 1.0 / scalars.len().max(1) as f64;
        for (p, s) in scalars.iter().enumerate() {
            self.perturbation(seeds, at, p as u64, &mut u);
            for (gi, ui) in g.iter_mut().zip(&u) {
                *gi += inv * s * ui;
            }
        }
        g
    }

    /// Number of function evaluations one estimate costs.
    pub fn evaluations(&self) -> usize {
        match self.difference {
            Difference::TwoPoint => 2 * self.perturbations,
            Difference::OneSided => self.perturbations + 1,
        }
    }
}

/// Coordinates per independently keyed block of a [`gaussian_fill`] direction.
pub const DIRECTION_BLOCK: usize = 4096;
/// Directions at least this long are generated on all cores.
const PARALLEL_FILL_MIN: usize = 1 << 16;

/// Fills `out` with i.i.d. N(0, 1) values from the counter-based stream under `key`.
///
/// Coordinates `b·4096 … (b+1)·4096` come from ChaCha8 under `key` with stream number `b`, so
/// any block can be generated on its own and blocks are filled in parallel; the values do not
/// depend on the thread count. Nothing is allocated: this runs at the speed of the normal
/// sampler (see `privopt bench zo`). ChaCha8 is ample for perturbations, which are public.
pub fn gaussian_fill(key: &[u8; 32], out: &mut [f64]) {
    gaussian_fill_at(key, 0, out);
}

/// Fills `out` with coordinates `offset .. offset + out.len()` of the direction under `key`:
/// the window [`gaussian_fill`] would write there in a longer vector. A model stored in pieces
/// (a PyTorch module's tensors) is perturbed piece by piece with it; only the part of the first
/// block before `offset` is generated and thrown away.
pub fn gaussian_fill_at(key: &[u8; 32], offset: usize, out: &mut [f64]) {
    with_direction(key, offset, out, |_, o, u| o.copy_from_slice(u));
}

/// `x += t · s ⊙ u` in place, `u` the coordinates `offset ..` of the direction under `key`
/// and `s` a window of per-coordinate scales (`None`: all one; the product by one is exact, so
/// both give the same values). The direction is used as it is generated, never stored.
pub fn add_direction(key: &[u8; 32], offset: usize, x: &mut [f64], t: f64, s: Option<&[f64]>) {
    match s {
        Some(s) => with_direction(key, offset, x, |i, xs, u| {
            for ((xj, sj), uj) in xs.iter_mut().zip(&s[i..]).zip(u) {
                *xj += t * sj * uj;
            }
        }),
        None => with_direction(key, offset, x, |_, xs, u| {
            for (xj, uj) in xs.iter_mut().zip(u) {
                *xj += t * uj;
            }
        }),
    }
}

/// Calls `f(i, x[i..i + n], u)` for consecutive pieces of `x` (at most one block each), `u`
/// the direction's coordinates `offset + i ..` under `key`: the direction is consumed as it
/// is generated, one block at a time on the stack, never stored whole. Pieces are handed out
/// on all cores when `x` is long; the values do not depend on the thread count.
pub fn with_direction(
    key: &[u8; 32],
    offset: usize,
    x: &mut [f64],
    f: impl Fn(usize, &mut [f64], &[f64]) + Sync,
) {
    let piece = |block: usize, skip: usize, at: usize, xs: &mut [f64]| {
        let mut rng = ChaCha8Rng::from_seed(*key);
        rng.set_stream(block as u64);
        for _ in 0..skip {
            let _: f64 = StandardNormal.sample(&mut rng);
        }
        let mut u = [0.0; DIRECTION_BLOCK];
        let u = &mut u[..xs.len()];
        for v in u.iter_mut() {
            *v = StandardNormal.sample(&mut rng);
        }
        f(at, xs, u);
    };
    let lead = offset % DIRECTION_BLOCK;
    let mut first = offset / DIRECTION_BLOCK;
    let (mut x, mut at) = (x, 0);
    if lead > 0 {
        let (head, rest) = x.split_at_mut((DIRECTION_BLOCK - lead).min(x.len()));
        piece(first, lead, 0, head);
        (first, at, x) = (first + 1, head.len(), rest);
    }
    if x.len() >= PARALLEL_FILL_MIN {
        x.par_chunks_mut(DIRECTION_BLOCK)
            .enumerate()
            .for_each(|(b, xs)| piece(first + b, 0, at + b * DIRECTION_BLOCK, xs));
    } else {
        for (b, xs) in x.chunks_mut(DIRECTION_BLOCK).enumerate() {
            piece(first + b, 0, at + b * DIRECTION_BLOCK, xs);
        }
    }
}

fn set_shifted(out: &mut [f64], x: &[f64], u: &[f64], step: f64) {
    for ((o, xi), ui) in out.iter_mut().zip(x).zip(u) {
        *o = xi + step * ui;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(direction: Direction, difference: Difference, p: usize) -> ZoEstimator {
        ZoEstimator {
            direction,
            difference,
            mu: 1e-4,
            perturbations: p,
        }
    }

    #[test]
    fn perturbations_are_regenerated_not_stored() {
        let seeds = SeedTree::new(5);
        let e = est(Direction::Gaussian, Difference::TwoPoint, 3);
        let at = ZoAddress { round: 4, step: 1 };
        let (mut a, mut b, mut c) = (vec![0.0; 50], vec![0.0; 50], vec![0.0; 50]);
        e.perturbation(&seeds, at, 2, &mut a);
        e.perturbation(&seeds, at, 2, &mut b);
        e.perturbation(&seeds, ZoAddress { round: 4, step: 2 }, 2, &mut c);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn direction_laws_have_identity_second_moment() {
        // Mean of u_i² over 200 vectors of dimension 500: the estimate of E[u_i²] = 1 has
        // sd sqrt(2/100000) ≈ 0.0045 for Gaussian; Rademacher and sphere are exact or tighter.
        let seeds = SeedTree::new(9);
        for dir in [
            Direction::Gaussian,
            Direction::Rademacher,
            Direction::Sphere,
        ] {
            let e = est(dir, Difference::TwoPoint, 1);
            let mut u = vec![0.0; 500];
            let (mut sq, mut cross) = (0.0, 0.0);
            for k in 0..200 {
                e.perturbation(&seeds, ZoAddress { round: k, step: 0 }, 0, &mut u);
                sq += u.iter().map(|v| v * v).sum::<f64>();
                cross += u.windows(2).map(|w| w[0] * w[1]).sum::<f64>();
            }
            let mean_sq = sq / (200.0 * 500.0);
            let mean_cross = cross / (200.0 * 499.0);
            assert!(
                (mean_sq - 1.0).abs() < 0.03,
                "{dir:?}: E[u_i^2] ≈ {mean_sq}"
            );
            assert!(
                mean_cross.abs() < 0.03,
                "{dir:?}: E[u_i u_j] ≈ {mean_cross}"
            );
        }
    }

    #[test]
    fn directional_derivative_of_a_quadratic_is_exact_and_unbiased() {
        // f(x) = ½‖x − c‖²: the two-point scalar equals u·(x − c) exactly.
        let c: Vec<f64> = (0..20).map(|i| i as f64 / 10.0).collect();
        let mut f = |x: &[f64]| {
            0.5 * x
                .iter()
                .zip(&c)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
        };
        let x = vec![0.3; 20];
        let seeds = SeedTree::new(1);
        let at = ZoAddress { round: 0, step: 0 };
        let e = est(Direction::Gaussian, Difference::TwoPoint, 4000);
        let s = e.scalars(&mut f, &x, &seeds, at);
        let mut u = vec![0.0; 20];
        e.perturbation(&seeds, at, 7, &mut u);
        let exact: f64 = u
            .iter()
            .zip(x.iter().zip(&c))
            .map(|(ui, (xi, ci))| ui * (xi - ci))
            .sum();
        assert!((s[7] - exact).abs() < 1e-6);
        // Averaged over 4000 directions, ĝ ≈ ∇f = x − c. Per coordinate, Var[s u_i] ≈ ‖∇f‖² + ∇f_i²,
        // so the standard error is about sqrt(‖∇f‖²/4000); allow 5 of them.
        let g = e.gradient_from_scalars(&s, &seeds, at, 20);
        let grad: Vec<f64> = x.iter().zip(&c).map(|(a, b)| a - b).collect();
        let norm = grad.iter().map(|v| v * v).sum::<f64>().sqrt();
        let tol = 5.0 * (2.0f64).sqrt() * norm / (4000f64).sqrt();
        for (gi, ti) in g.iter().zip(&grad) {
            assert!((gi - ti).abs() < tol, "{gi} vs {ti} (tol {tol})");
        }
        // One-sided on a quadratic has bias μ/2·‖u‖², tiny at μ = 1e-4.
        let one = est(Direction::Rademacher, Difference::OneSided, 3);
        assert_eq!(one.evaluations(), 4);
        let s1 = one.scalars(&mut f, &x, &seeds, at);
        one.perturbation(&seeds, at, 1, &mut u);
        let exact1: f64 = u
            .iter()
            .zip(x.iter().zip(&c))
            .map(|(ui, (xi, ci))| ui * (xi - ci))
            .sum();
        assert!((s1[1] - exact1).abs() < 1e-4 * 20.0);
    }

    #[test]
    fn fast_gaussian_directions_are_blockwise_addressable_and_standard() {
        let key = SeedTree::new(3).key("zo/test", &[1]);
        let mut long = vec![0.0; 3 * DIRECTION_BLOCK + 17];
        gaussian_fill(&key, &mut long);
        // Block 2 regenerated on its own equals the same coordinates of the long vector.
        let mut rng = ChaCha8Rng::from_seed(key);
        rng.set_stream(2);
        let alone: Vec<f64> = (0..DIRECTION_BLOCK)
            .map(|_| StandardNormal.sample(&mut rng))
            .collect();
        assert_eq!(&long[2 * DIRECTION_BLOCK..3 * DIRECTION_BLOCK], &alone[..]);
        // The parallel path (>= 2^16) gives the serial path's values.
        let mut big = vec![0.0; PARALLEL_FILL_MIN + 5];
        gaussian_fill(&key, &mut big);
        assert_eq!(&big[..long.len()], &long[..]);
        // Any window, aligned or not, is the same coordinates of the whole direction.
        for (offset, len) in [(0, 5), (17, 4096), (4095, 2), (4096, 4097), (5000, 9000)] {
            let mut window = vec![0.0; len];
            gaussian_fill_at(&key, offset, &mut window);
            assert_eq!(
                &window[..],
                &big[offset..offset + len],
                "window at {offset}"
            );
        }
        // Distinct blocks differ, and the moments are those of N(0, 1): over 65541 values the
        // mean has sd 0.004 and the variance sd 0.0055.
        assert_ne!(&long[..16], &long[DIRECTION_BLOCK..DIRECTION_BLOCK + 16]);
        let n = big.len() as f64;
        let mean = big.iter().sum::<f64>() / n;
        let var = big.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        assert!(
            mean.abs() < 0.02 && (var - 1.0).abs() < 0.03,
            "{mean} {var}"
        );
    }

    #[test]
    fn validation_names_keys() {
        let mut e = est(Direction::Gaussian, Difference::TwoPoint, 0);
        assert!(
            e.validate("method.zo")
                .unwrap_err()
                .to_string()
                .contains("method.zo.perturbations")
        );
        e.perturbations = 1;
        e.mu = 0.0;
        assert!(
            e.validate("method.zo")
                .unwrap_err()
                .to_string()
                .contains("method.zo.mu")
        );
    }
}
