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
