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
