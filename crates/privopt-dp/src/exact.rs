//! The exact privacy curve of the (composed) Gaussian mechanism without subsampling (Balle and
//! Wang 2018): T steps with noise multiplier σ are one Gaussian with μ = √T/σ, and
//! δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2).

use crate::DpError;
use crate::logmath::normal_cdf;
use crate::rdp::check_delta;

/// δ(ε) of a μ-Gaussian mechanism.
pub fn gaussian_delta(mu: f64, epsilon: f64) -> f64 {
    let a = normal_cdf(-epsilon / mu + mu / 2.0);
    // e^ε·Φ(−ε/μ − μ/2) computed in log space: the factor overflows long before the product.
    let b = (epsilon + normal_cdf(-epsilon / mu - mu / 2.0).ln()).exp();
    (a - b).max(0.0)
}

/// The smallest ε with δ(ε) ≤ `delta` for a μ-Gaussian mechanism, by bisection (δ(ε) is
/// decreasing).
pub fn gaussian_epsilon(mu: f64, delta: f64) -> Result<f64, DpError> {
    check_delta(delta)?;
    if !(mu.is_finite() && mu > 0.0) {
        return Err(DpError::Invalid(format!("μ = {mu} must be positive")));
    }
    if gaussian_delta(mu, 0.0) <= delta {
        return Ok(0.0);
    }
    let mut hi = 1.0;
    while gaussian_delta(mu, hi) > delta {
        hi *= 2.0;
        if hi > 1e9 {
            return Err(DpError::Invalid("ε does not converge".into()));
        }
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if gaussian_delta(mu, mid) > delta {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-12 * hi {
            break;
        }
    }
    Ok(hi)
}

/// μ of `steps` compositions of a Gaussian with noise multiplier `sigma`.
pub fn composed_mu(sigma: f64, steps: u64) -> f64 {
    (steps as f64).sqrt() / sigma
}

/// The largest μ whose μ-Gaussian mechanism is (`epsilon`, `delta`)-DP: the noise standard
/// deviation of a one-shot Gaussian release is then sensitivity/μ (the analytic Gaussian
/// mechanism of Balle and Wang 2018, tighter than σ = Δ·√(2 ln(1.25/δ))/ε).
pub fn gaussian_mu_for_epsilon(epsilon: f64, delta: f64) -> Result<f64, DpError> {
    check_delta(delta)?;
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(DpError::Invalid(format!("ε = {epsilon} must be positive")));
    }
    // δ(ε) grows with μ; bisect for δ(ε; μ) = delta.
    let (mut lo, mut hi) = (1e-6, 1.0);
    while gaussian_delta(hi, epsilon) < delta {
        hi *= 2.0;
        if hi > 1e6 {
            return Err(DpError::Invalid("μ does not converge".into()));
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if gaussian_delta(mid, epsilon) < delta {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-12 * hi {
            break;
        }
    }
    Ok(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mu_calibration_inverts_epsilon() {
        for eps in [0.5, 1.0, 4.0] {
            let mu = gaussian_mu_for_epsilon(eps, 1e-5).unwrap();
            let back = gaussian_epsilon(mu, 1e-5).unwrap();
            assert!((back - eps).abs() < 1e-6 * eps, "{eps}: {back}");
            // Tighter than the classic calibration: μ_classic = ε/√(2 ln(1.25/δ)).
            assert!(mu > eps / (2.0 * (1.25e5_f64).ln()).sqrt());
        }
    }
}
