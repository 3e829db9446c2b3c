//! Zero-concentrated differential privacy (Bun and Steinke 2016).

use crate::DpError;
use crate::rdp::check_delta;

/// ρ of one Gaussian mechanism with noise multiplier `sigma`: ρ = 1/(2σ²).
pub fn rho_gaussian(sigma: f64) -> Result<f64, DpError> {
    if !(sigma.is_finite() && sigma > 0.0) {
        return Err(DpError::Invalid(format!(
            "noise multiplier σ = {sigma} must be positive"
        )));
    }
    Ok(1.0 / (2.0 * sigma * sigma))
}

/// ε of ρ-zCDP at δ: ε = ρ + 2·√(ρ·ln(1/δ)) (Bun–Steinke Prop. 1.3).
pub fn epsilon(rho: f64, delta: f64) -> Result<f64, DpError> {
    check_delta(delta)?;
    if !(rho.is_finite() && rho >= 0.0) {
        return Err(DpError::Invalid(format!("ρ = {rho} must be non-negative")));
    }
    Ok(rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt())
}

/// The largest ρ whose conversion gives at most `epsilon` at `delta` (inverse of [`epsilon`]):
/// ρ = (√(ln(1/δ) + ε) − √(ln(1/δ)))².
pub fn rho_for_epsilon(epsilon: f64, delta: f64) -> Result<f64, DpError> {
    check_delta(delta)?;
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(DpError::Invalid(format!("ε = {epsilon} must be positive")));
    }
    let l = (1.0 / delta).ln();
    Ok(((l + epsilon).sqrt() - l.sqrt()).powi(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_round_trips() {
        for eps in [0.1, 1.0, 8.0] {
            let rho = rho_for_epsilon(eps, 1e-5).unwrap();
            assert!((epsilon(rho, 1e-5).unwrap() - eps).abs() < 1e-12);
        }
        assert!(epsilon(-1.0, 1e-5).is_err());
        assert!(rho_gaussian(0.0).is_err());
    }
}
