//! One entry point for "what ε does this training run spend?" and its inverse, "what σ does
//! this ε allow?".

use serde::{Deserialize, Serialize};

use crate::rdp::{Conversion, RdpCurve, Sampling, default_orders};
use crate::{DpError, zcdp};

/// Which accountant turns a run into (ε, δ).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Accountant {
    /// Rényi DP over [`default_orders`], improved conversion.
    Rdp,
    /// Rényi DP with the classic conversion (what older papers report).
    RdpClassic,
    /// zCDP (no subsampling amplification: defined for full batches only).
    Zcdp,
}

/// `steps` compositions of a Gaussian mechanism with noise multiplier `sigma`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GaussianRun {
    /// Noise standard deviation divided by the L2 sensitivity.
    pub sigma: f64,
    /// How each step's batch is drawn.
    pub sampling: Sampling,
    /// Number of noisy steps.
    pub steps: u64,
}

impl GaussianRun {
    /// ε at `delta` under `accountant`.
    pub fn epsilon(&self, delta: f64, accountant: Accountant) -> Result<f64, DpError> {
        if self.steps == 0 {
            return Err(DpError::Invalid("a run needs at least one step".into()));
        }
        match accountant {
            Accountant::Rdp | Accountant::RdpClassic => {
                let conversion = if accountant == Accountant::Rdp {
                    Conversion::Improved
                } else {
                    Conversion::Classic
                };
                let curve =
                    RdpCurve::gaussian(self.sigma, self.sampling, self.steps, &default_orders())?;
                Ok(curve.epsilon(delta, conversion)?.epsilon)
            }
            Accountant::Zcdp => {
                if self.sampling.rate() < 1.0 {
                    return Err(DpError::Invalid(
                        "the zCDP accountant has no subsampling amplification; use the RDP accountant for q < 1".into(),
                    ));
                }
                zcdp::epsilon(zcdp::rho_gaussian(self.sigma)? * self.steps as f64, delta)
            }
        }
    }

    /// The smallest noise multiplier (to relative precision 1e-6, rounded up) with which
    /// `steps` steps under `sampling` stay within (`epsilon`, `delta`).
    pub fn calibrate(
        epsilon: f64,
        delta: f64,
        sampling: Sampling,
        steps: u64,
        accountant: Accountant,
    ) -> Result<f64, DpError> {
        if !(epsilon.is_finite() && epsilon > 0.0) {
            return Err(DpError::Invalid(format!(
                "target ε = {epsilon} must be positive"
            )));
        }
        let eps_at = |sigma: f64| {
            GaussianRun {
                sigma,
                sampling,
                steps,
            }
            .epsilon(delta, accountant)
        };
        let (mut lo, mut hi) = (1e-3, 1.0);
        while eps_at(hi)? > epsilon {
            lo = hi;
            hi *= 2.0;
            if hi > 1e7 {
                return Err(DpError::Invalid(format!(
                    "no noise multiplier reaches ε = {epsilon}"
                )));
            }
        }
        // A target that needs σ below the floor has no useful guarantee, and the accountants
        // slow down as 1/σ² there: refuse it with one evaluation at the floor. Above it, points
        // below the floor are above target without evaluating them (ε falls as σ grows), so
        // the search takes the same steps as an unbounded one.
        let floor = 2.0 * crate::rdp::MIN_SIGMA;
        if hi == 1.0 && eps_at(floor)? <= epsilon {
            return Err(DpError::Invalid(format!(
                "ε = {epsilon} is reached with a noise multiplier below {floor}: such a \
                 guarantee is vacuous"
            )));
        }
        while hi - lo > 1e-6 * hi {
            let mid = 0.5 * (lo + hi);
            if mid < floor || eps_at(mid)? > epsilon {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(hi)
    }
}
