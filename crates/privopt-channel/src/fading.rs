//! Block-fading channel gains and additive white Gaussian noise.

use rand::Rng;
use rand_distr::{Distribution, Normal, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::ChannelError;

/// The law of one device's channel gain in a round.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fading {
    /// Real Gaussian `h ~ N(μ, σ²)`: the paper's model (mean μ from the line of sight).
    Gaussian {
        /// Mean μ (must be non-zero: devices divide by it).
        mu: f64,
        /// Standard deviation σ ≥ 0.
        sigma: f64,
    },
    /// Rician amplitude `h = |ν + s(z₁ + i z₂)|` with K-factor `K = ν²/2s²` and `E[h²] = Ω`.
    Rician {
        /// Ratio of line-of-sight to scattered power, K ≥ 0.
        k_factor: f64,
        /// Mean power Ω > 0.
        omega: f64,
    },
}

impl Fading {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), ChannelError> {
        let bad = |m: String| Err(ChannelError::Invalid(m));
        match *self {
            Fading::Gaussian { mu, sigma } => {
                if mu == 0.0 || !mu.is_finite() {
                    return bad(format!(
                        "channel mean mu must be non-zero and finite, got {mu}"
                    ));
                }
                if !(sigma >= 0.0 && sigma.is_finite()) {
                    return bad(format!("channel sigma must be >= 0, got {sigma}"));
                }
            }
            Fading::Rician { k_factor, omega } => {
                if !(k_factor >= 0.0 && k_factor.is_finite() && omega > 0.0 && omega.is_finite()) {
                    return bad(format!(
                        "rician needs k_factor >= 0 and omega > 0, got {k_factor}, {omega}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Line-of-sight amplitude ν and per-dimension scatter s of the Rician law.
    fn rician_parts(k_factor: f64, omega: f64) -> (f64, f64) {
        let nu = (k_factor * omega / (k_factor + 1.0)).sqrt();
        let s = (omega / (2.0 * (k_factor + 1.0))).sqrt();
        (nu, s)
    }

    /// `E[h]` — what each device divides by.
    pub fn mean(&self) -> f64 {
        match *self {
            Fading::Gaussian { mu, .. } => mu,
            Fading::Rician { k_factor, omega } => {
                let (nu, s) = Self::rician_parts(k_factor, omega);
                rice_mean(nu, s)
            }
        }
    }

    /// `E[h²] = Ω`.
    pub fn second_moment(&self) -> f64 {
        match *self {
            Fading::Gaussian { mu, sigma } => mu * mu + sigma * sigma,
            Fading::Rician { omega, .. } => omega,
        }
    }

    /// `E[h⁴]` (for the noise budget, paper App. B eq. (24)).
    pub fn fourth_moment(&self) -> f64 {
        match *self {
            Fading::Gaussian { mu, sigma } => {
                let (m2, s2) = (mu * mu, sigma * sigma);
                m2 * m2 + 6.0 * m2 * s2 + 3.0 * s2 * s2
            }
            Fading::Rician { k_factor, omega } => {
                // h² = |ν + s z|², a non-central χ² with 2 dof: E[h⁴] = ν⁴ + 8ν²s² + 8s⁴.
                let (nu, s) = Self::rician_parts(k_factor, omega);
                let (n2, s2) = (nu * nu, s * s);
                n2 * n2 + 8.0 * n2 * s2 + 8.0 * s2 * s2
            }
        }
    }

    /// One gain.
    pub fn sample(&self, rng: &mut impl Rng) -> f64 {
        match *self {
            Fading::Gaussian { mu, sigma } => {
                let z: f64 = StandardNormal.sample(rng);
                mu + sigma * z
            }
            Fading::Rician { k_factor, omega } => {
                let (nu, s) = Self::rician_parts(k_factor, omega);
                let z1: f64 = StandardNormal.sample(rng);
                let z2: f64 = StandardNormal.sample(rng);
                ((nu + s * z1).powi(2) + (s * z2).powi(2)).sqrt()
            }
        }
    }
}

/// Mean of the Rice distribution by numerical integration of its density (Simpson's rule on
/// `[0, ν + 14s]`, with `e^{-x} I₀(x)` evaluated without overflow).
fn rice_mean(nu: f64, s: f64) -> f64 {
    let s2 = s * s;
    let pdf = |r: f64| {
        let x = r * nu / s2;
        // p(r) = r/s² · exp(−(r−ν)²/2s²) · e^{−x} I₀(x)
        r / s2 * (-(r - nu).powi(2) / (2.0 * s2)).exp() * scaled_bessel_i0(x)
    };
    let hi = nu + 14.0 * s;
    let steps = 20_000;
    let h = hi / steps as f64;
    let mut acc = 0.0;
    for k in 0..=steps {
        let r = k as f64 * h;
        let w = if k == 0 || k == steps {
            1.0
        } else if k % 2 == 1 {
            4.0
        } else {
            2.0
        };
        acc += w * r * pdf(r);
    }
    acc * h / 3.0
}

/// `e^{-x} I₀(x)` for `x ≥ 0`: power series below 30, the asymptotic expansion above.
fn scaled_bessel_i0(x: f64) -> f64 {
    if x < 30.0 {
        let (mut term, mut sum, q) = (1.0, 1.0, x * x / 4.0);
        for k in 1..200 {
            term *= q / (k as f64 * k as f64);
            sum += term;
            if term < 1e-17 * sum {
                break;
            }
        }
        sum * (-x).exp()
    } else {
        let t = 1.0 / (8.0 * x);
        (1.0 + t + 9.0 * t * t / 2.0 + 225.0 * t * t * t / 6.0)
            / (2.0 * std::f64::consts::PI * x).sqrt()
    }
}

/// Gains of `devices` devices for one round (one fading block).
pub fn round_gains(laws: &[Fading], rng: &mut impl Rng) -> Vec<f64> {
    laws.iter().map(|f| f.sample(rng)).collect()
}

/// `count` samples of AWGN with standard deviation `sigma` (zero when `sigma == 0`).
pub fn awgn(count: usize, sigma: f64, rng: &mut impl Rng) -> Result<Vec<f64>, ChannelError> {
    if sigma == 0.0 {
        return Ok(vec![0.0; count]);
    }
    let normal = Normal::new(0.0, sigma)
        .map_err(|e| ChannelError::Invalid(format!("noise sigma {sigma}: {e}")))?;
    Ok((0..count).map(|_| normal.sample(rng)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use privopt_math::SeedTree;

    fn moments(f: Fading, m: usize) -> (f64, f64, f64) {
        let mut r = SeedTree::new(1).stream("fading", &[]);
        let xs: Vec<f64> = (0..m).map(|_| f.sample(&mut r)).collect();
        let mean = xs.iter().sum::<f64>() / m as f64;
        let m2 = xs.iter().map(|x| x * x).sum::<f64>() / m as f64;
        let m4 = xs.iter().map(|x| x.powi(4)).sum::<f64>() / m as f64;
        (mean, m2, m4)
    }

    #[test]
    fn sampled_moments_match_the_formulas() {
        let m = 400_000;
        for f in [
            Fading::Gaussian {
                mu: 1.0,
                sigma: 1.0,
            },
            Fading::Gaussian {
                mu: 1.0,
                sigma: 10.0,
            },
            Fading::Rician {
                k_factor: 5.0,
                omega: 2.0,
            },
            Fading::Rician {
                k_factor: 0.0,
                omega: 1.0,
            },
        ] {
            let (mean, m2, m4) = moments(f, m);
            // Standard errors from the sample: sd(h)/√m etc.; allow 6 of them.
            let sd = (f.second_moment() - f.mean().powi(2)).max(1e-12).sqrt();
            assert!(
                (mean - f.mean()).abs() < 6.0 * sd / (m as f64).sqrt() + 1e-9,
                "{f:?} mean {mean} vs {}",
                f.mean()
            );
            let sd2 = (f.fourth_moment() - f.second_moment().powi(2)).sqrt();
            assert!(
                (m2 - f.second_moment()).abs() < 6.0 * sd2 / (m as f64).sqrt(),
                "{f:?} E[h²] {m2}"
            );
            assert!(
                (m4 - f.fourth_moment()).abs() < 0.05 * f.fourth_moment(),
                "{f:?} E[h⁴] {m4} vs {}",
                f.fourth_moment()
            );
        }
        // Rayleigh (K = 0, Ω = 1) has mean √π/2.
        let r = Fading::Rician {
            k_factor: 0.0,
            omega: 1.0,
        };
        assert!((r.mean() - std::f64::consts::PI.sqrt() / 2.0).abs() < 1e-6);
        // Strong line of sight: mean ≈ ν.
        let r = Fading::Rician {
            k_factor: 1e4,
            omega: 1.0,
        };
        assert!((r.mean() - 1.0).abs() < 1e-3);
    }

    #[test]
    fn validation() {
        assert!(
            Fading::Gaussian {
                mu: 0.0,
                sigma: 1.0
            }
            .validate()
            .is_err()
        );
        assert!(
            Fading::Gaussian {
                mu: 1.0,
                sigma: -1.0
            }
            .validate()
            .is_err()
        );
        assert!(
            Fading::Rician {
                k_factor: -1.0,
                omega: 1.0
            }
            .validate()
            .is_err()
        );
        assert!(
            Fading::Gaussian {
                mu: 1.0,
                sigma: 10.0
            }
            .validate()
            .is_ok()
        );
    }
}
