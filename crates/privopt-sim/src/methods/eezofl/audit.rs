//! Audits of the paper's claims: the App. B noise budget (eq. (26)) and the leak of
//! un-reduced partial keys.

use num_traits::ToPrimitive;
use privopt_channel::dyadic::{Dyadic, ExactRing};
use privopt_channel::fading::Fading;

/// App. B eq. (26): `B_ε²`, the expected squared norm of `ε̂` over all n coefficients, for
/// independent channels `laws`, RLWE error σ_e, channel noise σ_w per coefficient and
/// decryption-share noise σ_φ. `E[(Σ h_i²)²] = Σ E[h_i⁴] + (Σ Ω_i)² − Σ Ω_i²` (eq. (24) for
/// Gaussian gains).
pub fn noise_budget(n: usize, laws: &[Fading], sigma_e: f64, sigma_w: f64, sigma_phi: f64) -> f64 {
    let n = n as f64;
    let s_omega: f64 = laws.iter().map(Fading::second_moment).sum();
    let s_omega2: f64 = laws.iter().map(|f| f.second_moment().powi(2)).sum();
    let s_h4: f64 = laws.iter().map(Fading::fourth_moment).sum();
    let e2 = s_h4 + s_omega * s_omega - s_omega2;
    let (se2, sw2, sp2) = (sigma_e * sigma_e, sigma_w * sigma_w, sigma_phi * sigma_phi);
    2.0 / 3.0 * n * n * (se2 * e2 + sw2 * s_omega)
        + n * se2 * s_omega
        + n * sw2
        + n * n * se2 * e2
        + n * n * sw2 * s_omega
        + n * sp2 * s_omega
        + n * sw2
}

/// Per-coefficient decoded variance `σ̄_ε² = B_ε² / (n Λ²)` (eq. (20)).
pub fn decoded_noise_variance(
    n: usize,
    laws: &[Fading],
    sigma_e: f64,
    sigma_w: f64,
    sigma_phi: f64,
    scale: f64,
) -> f64 {
    noise_budget(n, laws, sigma_e, sigma_w, sigma_phi) / (n as f64 * scale * scale)
}

/// The noise floor ρ of eq. (21): `L b₂² σ̄_ε² η₀ / (2 b₁ γ₀)`.
pub fn noise_floor(
    smoothness: f64,
    b1: f64,
    b2_sq: f64,
    decoded_var: f64,
    eta0: f64,
    gamma0: f64,
) -> f64 {
    smoothness * b2_sq * decoded_var * eta0 / (2.0 * b1 * gamma0)
}

#[derive(Clone, Copy, Debug)]
struct C64 {
    re: f64,
    im: f64,
}

impl C64 {
    fn mul(self, o: C64) -> C64 {
        C64 {
            re: self.re * o.re - self.im * o.im,
            im: self.re * o.im + self.im * o.re,
        }
    }
    fn div(self, o: C64) -> C64 {
        let d = o.re * o.re + o.im * o.im;
        C64 {
            re: (self.re * o.re + self.im * o.im) / d,
            im: (self.im * o.re - self.re * o.im) / d,
        }
    }
}

/// In-place iterative radix-2 complex FFT (`sign = −1` forward, `+1` inverse without 1/n).
fn fft(a: &mut [C64], sign: f64) {
    let n = a.len();
    privopt_math::ntt::bit_reverse_permute(a);
    let mut len = 2;
    while len <= n {
        let ang = sign * 2.0 * std::f64::consts::PI / len as f64;
        for start in (0..n).step_by(len) {
            for k in 0..len / 2 {
                let w = C64 {
                    re: (ang * k as f64).cos(),
                    im: (ang * k as f64).sin(),
                };
                let u = a[start + k];
                let v = a[start + k + len / 2].mul(w);
                a[start + k] = C64 {
                    re: u.re + v.re,
                    im: u.im + v.im,
                };
                a[start + k + len / 2] = C64 {
                    re: u.re - v.re,
                    im: u.im - v.im,
                };
            }
        }
        len *= 2;
    }
}

/// Evaluations of a real polynomial at the primitive 2n-th roots `ψ·ω^k` (negacyclic FFT).
fn negacyclic_eval(coeffs: &[f64]) -> Vec<C64> {
    let n = coeffs.len();
    let mut a: Vec<C64> = coeffs
        .iter()
        .enumerate()
        .map(|(j, &c)| {
            let t = std::f64::consts::PI * j as f64 / n as f64;
            C64 {
                re: c * t.cos(),
                im: c * t.sin(),
            }
        })
        .collect();
    fft(&mut a, -1.0);
    a
}

fn negacyclic_interpolate(mut vals: Vec<C64>) -> Vec<f64> {
    let n = vals.len();
    fft(&mut vals, 1.0);
    vals.iter()
        .enumerate()
        .map(|(j, v)| {
            let t = -std::f64::consts::PI * j as f64 / n as f64;
            (v.re * t.cos() - v.im * t.sin()) / n as f64
        })
        .collect()
}

/// Recovers `s` from an **un-reduced** partial key `b = −s·a + e` over the integers: in the
/// canonical embedding `−b/a = s − e/a`, and `e/a` is tiny because `a` has q-size
/// coefficients, so rounding the interpolated quotient gives `s`. Nothing about RLWE makes
/// this hard: the hardness comes from the reduction mod q that this key skipped.
pub fn recover_secret(ring: &ExactRing, a: &Dyadic, b: &Dyadic) -> Option<Vec<i64>> {
    let to_f64 = |x: &Dyadic| -> Option<Vec<f64>> {
        ring.numerators(x)
            .ok()?
            .iter()
            .map(|v| v.to_f64())
            .collect()
    };
    let a_eval = negacyclic_eval(&to_f64(a)?);
    let b_eval = negacyclic_eval(&to_f64(b)?);
    let quotient: Vec<C64> = b_eval
        .iter()
        .zip(&a_eval)
        .map(|(bv, av)| {
            C64 {
                re: -bv.re,
                im: -bv.im,
            }
            .div(*av)
        })
        .collect();
    Some(
        negacyclic_interpolate(quotient)
            .iter()
            .map(|x| x.round() as i64)
            .collect(),
    )
}

/// §IV-F's collusion question, measured: the server and devices `0..N−1` pool what they know
/// to estimate the last device's `Δf_N` from the decoded `M_k`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct CollusionReport {
    /// RMS error of `M_k − Σ_{i<N} Δf_i` over the RMS of `Δf_N` (colluders know their own
    /// messages, not their gains).
    pub relative_rmse_messages_only: f64,
    /// Its correlation with `Δf_N`.
    pub correlation_messages_only: f64,
    /// RMS error of `M_k − Σ_{i<N} h_i Δf_i/μ_i` over the RMS of `Δf_N` (colluders also know
    /// their own gains, e.g. from pilots); what remains is `(h_N/μ_N − 1)Δf_N` and the noise.
    pub relative_rmse_with_gains: f64,
    /// Fraction of rounds in which that estimate has the sign of `Δf_N`.
    pub sign_agreement_with_gains: f64,
}

/// Pearson correlation of two equally long samples.
fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().max(1) as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}

/// The colluders' estimates over `rounds` recorded by [`super::aggregate::Recorded`], with the
/// channel `laws` and the run's `seeds` (which drew the gains).
pub fn collusion(
    rounds: &[(u64, Vec<f64>, super::aggregate::RoundOutput)],
    laws: &[Fading],
    seeds: &privopt_math::SeedTree,
) -> CollusionReport {
    let (mut target, mut blind, mut informed) = (Vec::new(), Vec::new(), Vec::new());
    for (k, deltas, out) in rounds {
        let Some((&last, others)) = deltas.split_last() else {
            continue;
        };
        let h = super::aggregate::gains(laws, seeds, *k);
        target.push(last);
        blind.push(out.value - others.iter().sum::<f64>());
        let known: f64 = others
            .iter()
            .zip(&h)
            .zip(laws)
            .map(|((d, h), f)| d * h / f.mean())
            .sum();
        informed.push(out.value - known);
    }
    let rms = |v: &[f64]| (v.iter().map(|x| x * x).sum::<f64>() / v.len().max(1) as f64).sqrt();
    let err = |est: &[f64]| {
        let e: Vec<f64> = est.iter().zip(&target).map(|(a, b)| a - b).collect();
        rms(&e) / rms(&target)
    };
    let agree = informed
        .iter()
        .zip(&target)
        .filter(|(e, t)| e.signum() == t.signum())
        .count() as f64
        / target.len().max(1) as f64;
    CollusionReport {
        relative_rmse_messages_only: err(&blind),
        correlation_messages_only: correlation(&blind, &target),
        relative_rmse_with_gains: err(&informed),
        sign_agreement_with_gains: agree,
    }
}

/// §IV-F's channel-layer claim, measured on phase 1's superpositions `b̃_k = Σ h_{i,k} b_i + w`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ChannelLayerReport {
    /// Rounds observed.
    pub observations: usize,
    /// `‖b̂_1 − b_1‖/‖b_1‖` for `b̂_1 = mean_k b̃_k/(Nμ)`: by the devices' exchangeability the
    /// best linear estimate is proportional to `Σ_k b̃_k`, so it learns the sum of the keys,
    /// not device 1's (≈ √(1 − 1/N) when the keys are uncorrelated).
    pub linear_relative_error: f64,
    /// The RLWE error `‖e_1‖/‖b_1‖` a useful estimate would have to reach.
    pub rlwe_relative_noise: f64,
    /// Singular values of the K × n matrix of observations over the largest, descending.
    pub singular_values: Vec<f64>,
    /// `s_N / max(s_{N+1}, max(K, n)·ε)`: a large gap says the observations span exactly the
    /// N-dimensional space of the keys, whatever the gains.
    pub rank_gap: f64,
}

/// Observes `rounds` phase-1 superpositions of `ota` (gain mean `mu`, RLWE error σ `sigma_e`)
/// and measures what they reveal about device 0's key.
pub fn channel_layer(
    ota: &super::aggregate::ExactHeOta,
    rounds: u64,
    mu: f64,
    sigma_e: f64,
) -> crate::error::Result<ChannelLayerReport> {
    let ring = &ota.setup().ring;
    let coeffs = |x: &Dyadic| -> crate::error::Result<Vec<f64>> {
        Ok(ring
            .numerators(x)?
            .iter()
            .map(|v| ExactRing::to_f64(v, x.exp))
            .collect())
    };
    let devices = ota.devices();
    let key = coeffs(devices[0].key())?;
    let obs: Vec<Vec<f64>> = (0..rounds)
        .map(|k| coeffs(&ota.phase1_observation(k)?))
        .collect::<crate::error::Result<_>>()?;
    let n_dev = devices.len() as f64;
    let estimate: Vec<f64> = (0..key.len())
        .map(|j| obs.iter().map(|o| o[j]).sum::<f64>() / (obs.len() as f64 * n_dev * mu))
        .collect();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let diff: Vec<f64> = estimate.iter().zip(&key).map(|(a, b)| a - b).collect();
    // Singular values of the scaled K × n matrix (faer's SVD, sequential).
    let scale = obs
        .iter()
        .flat_map(|o| o.iter())
        .fold(0.0f64, |m, x| m.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    let k = obs.len();
    let x = faer::Mat::<f64>::from_fn(k, key.len(), |a, j| obs[a][j] / scale);
    let mut eig: Vec<f64> = x
        .singular_values()
        .map_err(|e| crate::SimError::Config(format!("channel layer: SVD failed: {e:?}")))?;
    eig.sort_by(|a, b| b.total_cmp(a));
    let top = eig.first().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE);
    let singular_values: Vec<f64> = eig.iter().map(|s| s / top).collect();
    let nd = devices.len();
    // Below max(K, n)·ε of the largest, a singular value is zero to working precision (the
    // usual numerical-rank threshold); its digits are rounding, which differs between SIMD
    // paths, so the gap is measured against that floor.
    let zero = k.max(key.len()) as f64 * f64::EPSILON;
    let rank_gap = match (singular_values.get(nd - 1), singular_values.get(nd)) {
        (Some(a), Some(b)) => a / b.max(zero),
        _ => f64::NAN,
    };
    Ok(ChannelLayerReport {
        observations: k,
        linear_relative_error: norm(&diff) / norm(&key),
        rlwe_relative_noise: sigma_e * (key.len() as f64).sqrt() / norm(&key),
        singular_values,
        rank_gap,
    })
}
