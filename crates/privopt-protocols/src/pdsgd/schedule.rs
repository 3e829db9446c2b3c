//! Algorithm 1's schedules: what an agent does with the mixing term and its gradient once its
//! exchanges of an iteration are done.

use crate::error::{Result, check_param};

/// The attenuation `γ^k = 1/(1 + a·k^b)` of the mixing term and the private random stepsize
/// `λ^k = λ₀·k^{−p}·(1 + ζ/k^q)` with `ζ ~ U[0, 1]` drawn by the agent per coordinate, at
/// iteration `k ≥ 1`. The randomness of the stepsize is what hides an agent's gradient from
/// its neighbours (the paper's §3); `ζ = 0` gives the conventional algorithm's `α^k`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    /// `λ₀`, the stepsize scale (problem-dependent).
    pub lambda0: f64,
    /// `p`, the stepsize decay.
    pub lambda_decay: f64,
    /// `q`, the decay of the stepsize's random part.
    pub zeta_decay: f64,
    /// `a` of the attenuation.
    pub attenuation_a: f64,
    /// `b` of the attenuation.
    pub attenuation_b: f64,
}

impl Default for Schedule {
    /// The paper's §4 values (λ₀ for its sensor-localization problem).
    fn default() -> Self {
        Self {
            lambda0: 0.005,
            lambda_decay: 0.6,
            zeta_decay: 1.2,
            attenuation_a: 0.1,
            attenuation_b: 0.81,
        }
    }
}

impl Schedule {
    /// Refuses a non-finite or negative exponent or coefficient, and `λ₀ ≤ 0`; the message
    /// names the field.
    pub fn check(&self) -> Result<()> {
        for (key, v) in [
            ("lambda_decay", self.lambda_decay),
            ("zeta_decay", self.zeta_decay),
            ("attenuation_a", self.attenuation_a),
            ("attenuation_b", self.attenuation_b),
        ] {
            check_param(v >= 0.0 && v.is_finite(), || {
                format!("{key} must be finite and >= 0, got {v}")
            })?;
        }
        check_param(self.lambda0 > 0.0 && self.lambda0.is_finite(), || {
            format!("lambda0 must be finite and > 0, got {}", self.lambda0)
        })
    }

    /// `γ^k` (iterations count from `k = 1`).
    pub fn attenuation(&self, k: f64) -> f64 {
        1.0 / (1.0 + self.attenuation_a * k.powf(self.attenuation_b))
    }

    /// One stepsize entry at iteration `k ≥ 1` for the private draw `ζ ∈ [0, 1]`.
    pub fn stepsize(&self, k: f64, zeta: f64) -> f64 {
        self.lambda0 / k.powf(self.lambda_decay) * (1.0 + zeta / k.powf(self.zeta_decay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedules_are_the_papers_formulas() {
        let s = Schedule::default();
        assert_eq!(s.attenuation(1.0), 1.0 / 1.1);
        let k: f64 = 16.0;
        assert!((s.attenuation(k) - 1.0 / (1.0 + 0.1 * k.powf(0.81))).abs() < 1e-15);
        // ζ = 0 is the deterministic α^k; ζ = 1 adds k^{-q} of it.
        let alpha = 0.005 / k.powf(0.6);
        assert!((s.stepsize(k, 0.0) - alpha).abs() < 1e-18);
        assert!((s.stepsize(k, 1.0) - alpha * (1.0 + k.powf(-1.2))).abs() < 1e-18);
    }

    #[test]
    fn a_bad_field_is_refused_by_name() {
        let bad = |s: Schedule| s.check().unwrap_err().to_string();
        let base = Schedule::default();
        assert!(
            bad(Schedule {
                lambda0: 0.0,
                ..base
            })
            .contains("lambda0 must be finite and > 0")
        );
        assert!(
            bad(Schedule {
                zeta_decay: f64::NAN,
                ..base
            })
            .contains("zeta_decay")
        );
        assert!(
            bad(Schedule {
                attenuation_a: -1.0,
                ..base
            })
            .contains("attenuation_a")
        );
        assert!(base.check().is_ok());
    }
}
