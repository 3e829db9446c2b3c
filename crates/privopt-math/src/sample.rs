//! Samplers for lattice cryptography.
//!
//! Secrets and noise must come from a cryptographic generator: [`secret_rng`] seeds ChaCha20
//! from the operating system, or from a fixed seed in tests.

use rand::{CryptoRng, Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, Normal};

use crate::MathError;
use crate::rns::{Eval, Poly, RnsBasis};

/// A ChaCha20 generator seeded by the operating system, or by `test_seed` when given
/// (reproducible tests and experiments only — never for deployed secrets).
pub fn secret_rng(test_seed: Option<u64>) -> ChaCha20Rng {
    match test_seed {
        Some(s) => ChaCha20Rng::seed_from_u64(s),
        None => ChaCha20Rng::from_os_rng(),
    }
}

/// A uniformly random element of `R_Q`, sampled directly in evaluation form (the NTT is a
/// bijection, so this is uniform in coefficient form too). Used for the common polynomial
/// `a` from a public CRS stream.
pub fn uniform(basis: &RnsBasis, rng: &mut impl Rng) -> Poly<Eval> {
    let n = basis.n();
    let mut p = basis.zero::<Eval>();
    for (i, &q) in basis.moduli().iter().enumerate() {
        for x in &mut p.as_mut_slice()[i * n..(i + 1) * n] {
            *x = rng.random_range(0..q);
        }
    }
    p
}

/// Uniform ternary coefficients in {−1, 0, 1}.
pub fn ternary(n: usize, rng: &mut impl CryptoRng) -> Vec<i64> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut bits = rng.next_u64();
        // 32 two-bit draws per word; the value 3 is rejected to keep the law uniform.
        for _ in 0..32 {
            if out.len() == n {
                break;
            }
            match bits & 3 {
                0 => out.push(-1),
                1 => out.push(0),
                2 => out.push(1),
                _ => {}
            }
            bits >>= 2;
        }
    }
    out
}

/// Uniform signs in {−1, 1} (Bernoulli(½) mapped to ±1: the EEZOFL paper's secret).
pub fn signs(n: usize, rng: &mut impl CryptoRng) -> Vec<i64> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let bits = rng.next_u64();
        for k in 0..64.min(n - out.len()) {
            out.push(if (bits >> k) & 1 == 1 { 1 } else { -1 });
        }
    }
    out
}

/// Exactly `weight` non-zero coefficients, each ±1 with probability ½, at uniformly random
/// distinct positions (a partial Fisher–Yates shuffle): a sparse ternary secret. A weight
/// above `n` is capped at `n` (callers validate it with the parameters).
pub fn sparse_ternary(n: usize, weight: usize, rng: &mut impl CryptoRng) -> Vec<i64> {
    let weight = weight.min(n);
    let mut positions: Vec<usize> = (0..n).collect();
    let mut out = vec![0i64; n];
    for i in 0..weight {
        let j = rng.random_range(i..n);
        positions.swap(i, j);
        out[positions[i]] = if rng.next_u32() & 1 == 1 { 1 } else { -1 };
    }
    out
}

/// The discrete Gaussian `D_{Z,σ}` by inversion of a cumulative table.
///
/// The table holds `P(|x| ≤ k)` for `k = 0 … ⌈10σ⌉` in 64-bit fixed point; the mass beyond
/// `10σ` is below `2^-70`, under the table's resolution, so the tail cut changes nothing
/// observable. A sample scans the whole table (no early exit, so its time does not depend on
/// the value) and draws its sign from one more bit.
#[derive(Clone, Debug)]
pub struct DiscreteGaussian {
    sigma: f64,
    /// `cdf[k] = P(|x| ≤ k)` scaled by 2^64 (saturating at u64::MAX).
    cdf: Vec<u64>,
}

impl DiscreteGaussian {
    /// The sampler for `σ` in `[0.5, 1000]` (the RLWE error range).
    pub fn new(sigma: f64) -> Result<Self, MathError> {
        if !(0.5..=1000.0).contains(&sigma) {
            return Err(MathError::OutOfRange(format!(
                "discrete Gaussian σ = {sigma} outside [0.5, 1000]"
            )));
        }
        let tail = (10.0 * sigma).ceil() as usize;
        let rho = |k: f64| (-k * k / (2.0 * sigma * sigma)).exp();
        // |x| = 0 has weight ρ(0); |x| = k > 0 has weight 2ρ(k) (both signs).
        let weights: Vec<f64> = (0..=tail)
            .map(|k| if k == 0 { 1.0 } else { 2.0 * rho(k as f64) })
            .collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cdf = weights
            .iter()
            .map(|w| {
                acc += w / total;
                if acc >= 1.0 {
                    u64::MAX
                } else {
                    (acc * 2f64.powi(64)) as u64
                }
            })
            .collect();
        Ok(Self { sigma, cdf })
    }

    /// The standard deviation parameter σ.
    pub fn sigma(&self) -> f64 {
        self.sigma
    }

    /// One sample.
    pub fn sample(&self, rng: &mut impl CryptoRng) -> i64 {
        let u = rng.next_u64();
        let magnitude = self.cdf.iter().filter(|&&c| c < u).count() as i64;
        // Zero has no sign; for |x| > 0 the sign bit is uniform.
        let sign = if rng.next_u32() & 1 == 1 { -1 } else { 1 };
        sign * magnitude
    }

    /// `n` independent samples.
    pub fn sample_vec(&self, n: usize, rng: &mut impl CryptoRng) -> Vec<i64> {
        (0..n).map(|_| self.sample(rng)).collect()
    }
}

/// Largest smudging σ [`wide_gaussian`] draws: 2^100 (samples stay far inside `i128`).
pub const MAX_WIDE_SIGMA_LOG2: f64 = 100.0;

/// σ up to which one rounded `f64` draw is exact: its integer part has bits to spare below
/// the 53-bit mantissa.
const DIRECT_SIGMA_LOG2: f64 = 50.0;

/// The grid step of the high part of a composed draw, and the σ of its low part: 2^40 is 2^8
/// times the step, far above the smoothing parameter of `2^32·Z` (≈ 2.1·2^32 at 2^−80), so
/// the sum is a Gaussian over the integers, not a grid with noise.
const HIGH_STEP_LOG2: i32 = 32;
const LOW_SIGMA_LOG2: i32 = 40;

/// `n` samples of a rounded continuous Gaussian of standard deviation `sigma` in `[1, 2^100]`:
/// the wide "smudging" noise that floods decryption shares. For σ ≥ 2^10 rounding is
/// statistically indistinguishable from a discrete Gaussian. Up to 2^50 one `f64` draw is
/// exact; above, a draw is `2^32·X_hi + X_lo` with `X_lo` of σ 2^40 (which smooths the 2^32
/// grid of the high part) and `X_hi` drawn the same way for the rest of the variance.
pub fn wide_gaussian(
    n: usize,
    sigma: f64,
    rng: &mut impl CryptoRng,
) -> Result<Vec<i128>, MathError> {
    if !(sigma >= 1.0 && sigma <= 2f64.powf(MAX_WIDE_SIGMA_LOG2)) {
        return Err(MathError::OutOfRange(format!(
            "smudging σ = {sigma} outside [1, 2^{MAX_WIDE_SIGMA_LOG2}]"
        )));
    }
    if sigma <= 2f64.powf(DIRECT_SIGMA_LOG2) {
        let normal = Normal::new(0.0, sigma).map_err(|e| MathError::OutOfRange(e.to_string()))?;
        return Ok((0..n).map(|_| normal.sample(rng).round() as i128).collect());
    }
    let low_sigma = 2f64.powi(LOW_SIGMA_LOG2);
    // σ² = 2^64·σ_hi² + σ_lo²; σ > 2^50 keeps σ_hi ≥ 2^18 (well above 1).
    let high_sigma = (sigma * sigma - low_sigma * low_sigma).sqrt() / 2f64.powi(HIGH_STEP_LOG2);
    let high = wide_gaussian(n, high_sigma, rng)?;
    let low = wide_gaussian(n, low_sigma, rng)?;
    Ok(high
        .into_iter()
        .zip(low)
        .map(|(h, l)| (h << HIGH_STEP_LOG2) + l)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mean and variance with a bound of `k` standard errors for the variance estimate.
    fn moments(xs: &[i64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var)
    }

    #[test]
    fn discrete_gaussian_has_the_right_variance_and_tail() {
        let g = DiscreteGaussian::new(3.2).unwrap();
        let mut r = secret_rng(Some(1));
        let m = 200_000;
        let xs = g.sample_vec(m, &mut r);
        let (mean, var) = moments(&xs);
        // The variance of D_{Z,3.2} equals 3.2² to 1e-9 (σ well above the smoothing parameter).
        // Standard error of the sample variance: σ²·sqrt(2/m) ≈ 0.032; allow 5 of them.
        let se = 10.24 * (2.0 / m as f64).sqrt();
        assert!((var - 10.24).abs() < 5.0 * se, "variance {var}");
        assert!(mean.abs() < 5.0 * (10.24 / m as f64).sqrt(), "mean {mean}");
        assert!(xs.iter().all(|x| x.abs() <= 32));
        // P(0) = 1/Σρ ≈ 0.1247 for σ = 3.2.
        let zeros = xs.iter().filter(|&&x| x == 0).count() as f64 / m as f64;
        let p0 = 1.0
            / (-40..=40)
                .map(|k: i64| (-(k * k) as f64 / 20.48).exp())
                .sum::<f64>();
        assert!(
            (zeros - p0).abs() < 5.0 * (p0 * (1.0 - p0) / m as f64).sqrt(),
            "{zeros} vs {p0}"
        );
        assert!(DiscreteGaussian::new(0.1).is_err());
    }

    #[test]
    fn sparse_ternary_has_exactly_its_weight_with_balanced_signs() {
        let mut rng = secret_rng(Some(7));
        let mut plus = 0;
        let mut hits = vec![0u32; 64];
        for _ in 0..2000 {
            let s = sparse_ternary(64, 12, &mut rng);
            assert_eq!(s.iter().filter(|&&c| c != 0).count(), 12);
            assert!(s.iter().all(|c| c.abs() <= 1));
            plus += s.iter().filter(|&&c| c == 1).count();
            for (h, &c) in hits.iter_mut().zip(&s) {
                *h += u32::from(c != 0);
            }
        }
        // 24 000 signs: ½ ± 4σ (σ = 0.0032); each position hit 2000·12/64 = 375 times.
        let frac = plus as f64 / 24_000.0;
        assert!((frac - 0.5).abs() < 0.013, "{frac}");
        assert!(hits.iter().all(|&h| (300..450).contains(&h)), "{hits:?}");
        assert_eq!(
            sparse_ternary(8, 9, &mut rng)
                .iter()
                .filter(|&&c| c != 0)
                .count(),
            8
        );
    }

    #[test]
    fn ternary_and_signs_are_uniform() {
        let mut r = secret_rng(Some(2));
        let m = 90_000;
        let t = ternary(m, &mut r);
        for v in [-1, 0, 1] {
            let f = t.iter().filter(|&&x| x == v).count() as f64 / m as f64;
            assert!(
                (f - 1.0 / 3.0).abs() < 5.0 * (2.0 / 9.0 / m as f64).sqrt(),
                "{v}: {f}"
            );
        }
        let s = signs(m, &mut r);
        assert!(s.iter().all(|&x| x == 1 || x == -1));
        let f = s.iter().filter(|&&x| x == 1).count() as f64 / m as f64;
        assert!((f - 0.5).abs() < 5.0 * (0.25 / m as f64).sqrt());
    }

    #[test]
    fn wide_gaussian_variance() {
        let mut r = secret_rng(Some(3));
        let sigma = 2f64.powi(20);
        let m = 100_000;
        let xs: Vec<i64> = wide_gaussian(m, sigma, &mut r)
            .unwrap()
            .into_iter()
            .map(|x| i64::try_from(x).unwrap())
            .collect();
        let (_, var) = moments(&xs);
        let se = sigma * sigma * (2.0 / m as f64).sqrt();
        assert!((var - sigma * sigma).abs() < 5.0 * se);
        assert!(wide_gaussian(4, 2f64.powi(101), &mut r).is_err());
        assert!(wide_gaussian(4, 0.5, &mut r).is_err());
    }

    /// Above 2^50 a draw is composed: its variance must still be σ², and its low bits must
    /// be uniform (a grid of the high part that the low part failed to smooth would show as
    /// residues mod 2^32 piling up near 0).
    #[test]
    fn composed_wide_gaussian_has_the_variance_and_uniform_low_bits() {
        let mut r = secret_rng(Some(5));
        for sigma_log2 in [57.0, 90.0] {
            let sigma: f64 = 2f64.powf(sigma_log2);
            let m = 60_000;
            let xs = wide_gaussian(m, sigma, &mut r).unwrap();
            let var = xs.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / m as f64;
            let se = sigma * sigma * (2.0 / m as f64).sqrt();
            assert!(
                (var - sigma * sigma).abs() < 5.0 * se,
                "σ 2^{sigma_log2}: var {var:e}"
            );
            // 16 bins of the residue mod 2^32 by its top four bits, and of the bits 2^4..2^8.
            for shift in [28, 4] {
                let mut bins = [0f64; 16];
                for &x in &xs {
                    bins[((x.rem_euclid(1 << 32) >> shift) & 15) as usize] += 1.0;
                }
                let expect = m as f64 / 16.0;
                let chi2: f64 = bins.iter().map(|b| (b - expect).powi(2) / expect).sum();
                // 15 degrees of freedom: P(χ² > 50) < 1e-5.
                assert!(
                    chi2 < 50.0,
                    "σ 2^{sigma_log2}, bits from {shift}: χ² {chi2}"
                );
            }
        }
    }

    #[test]
    fn uniform_covers_each_prime_range() {
        let basis = RnsBasis::generate(1024, 36, 3, crate::ntt::NttBackend::Fast).unwrap();
        let mut r = secret_rng(Some(4));
        let p = uniform(&basis, &mut r);
        for (i, &q) in basis.moduli().iter().enumerate() {
            let row = p.row(i, 1024);
            let mean = row.iter().map(|&x| x as f64).sum::<f64>() / 1024.0;
            // Uniform on [0, q): sd of the mean = q / sqrt(12 · 1024).
            assert!((mean - q as f64 / 2.0).abs() < 5.0 * q as f64 / (12.0f64 * 1024.0).sqrt());
        }
    }
}
