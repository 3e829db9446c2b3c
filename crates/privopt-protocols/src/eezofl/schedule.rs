//! The paper's step-size and smoothing-radius sequences.

use crate::error::{Result, check_param};

/// The step size `η_k = η₀(1+k)^{−u₁}` and the two-point smoothing radius
/// `γ_k = γ₀(1+k)^{−u₂}` of round `k` (from 0). Theorem 1 asks `u₁ + u₂ ≤ 1`,
/// `u₁ + 3u₂ > 1` and `2(u₁ + u₂) > 1`; the defaults (the paper's §VI) meet all three. A
/// constant radius is `gamma_decay = 0`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    /// `η₀`.
    pub eta0: f64,
    /// `u₁`.
    pub eta_decay: f64,
    /// `γ₀`.
    pub gamma0: f64,
    /// `u₂`.
    pub gamma_decay: f64,
}

impl Default for Schedule {
    fn default() -> Self {
        Self {
            eta0: 0.05,
            eta_decay: 0.5,
            gamma0: 0.05,
            gamma_decay: 0.25,
        }
    }
}

impl Schedule {
    /// Refuses `η₀` or `γ₀` that is not finite and positive, and a decay outside [0, 2]; the
    /// message names the field.
    pub fn check(&self) -> Result<()> {
        for (key, v) in [("eta0", self.eta0), ("gamma0", self.gamma0)] {
            check_param(v > 0.0 && v.is_finite(), || {
                format!("{key} must be > 0, got {v}")
            })?;
        }
        for (key, v) in [
            ("eta_decay", self.eta_decay),
            ("gamma_decay", self.gamma_decay),
        ] {
            check_param((0.0..=2.0).contains(&v), || {
                format!("{key} must be in [0, 2], got {v}")
            })?;
        }
        Ok(())
    }

    /// `η_k`.
    pub fn eta(&self, k: u64) -> f64 {
        self.eta0 * (1.0 + k as f64).powf(-self.eta_decay)
    }

    /// `γ_k`.
    pub fn gamma(&self, k: u64) -> f64 {
        self.gamma0 * (1.0 + k as f64).powf(-self.gamma_decay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequences_decay_as_the_paper_writes_them() {
        let s = Schedule::default();
        assert_eq!((s.eta(0), s.gamma(0)), (0.05, 0.05));
        assert!((s.eta(3) - 0.05 / 2.0).abs() < 1e-17);
        assert!((s.gamma(15) - 0.05 / 2.0).abs() < 1e-17);
        let flat = Schedule {
            gamma_decay: 0.0,
            ..s
        };
        assert_eq!(flat.gamma(1000), 0.05);
    }

    #[test]
    fn a_bad_field_is_refused_by_name() {
        let base = Schedule::default();
        let bad = |s: Schedule| s.check().unwrap_err().to_string();
        assert!(bad(Schedule { eta0: 0.0, ..base }).contains("eta0 must be > 0"));
        assert!(
            bad(Schedule {
                gamma0: f64::INFINITY,
                ..base
            })
            .contains("gamma0")
        );
        assert!(
            bad(Schedule {
                gamma_decay: 2.5,
                ..base
            })
            .contains("gamma_decay must be in [0, 2]")
        );
        assert!(base.check().is_ok());
    }
}
