//! DOME's privacy: the noise multiplier of Thm 3.3 and two independent accountings of it.
//!
//! The unit is a client (all of its `n` examples). Each round a participant releases one
//! clipped sketch with noise of variance `a² = n·E·σ²·C²/B'`; the `B'` participants' noises sum
//! to `N(0, n·E·σ²·C²)`, so each release is `1/(2nEσ²)`-zCDP, and a client's `n·E` releases
//! compose to `ρ = 1/(2σ²)`.

use privopt_dp::accountant::{Accountant, GaussianRun};
use privopt_dp::rdp::Sampling;
use privopt_dp::zcdp;

use crate::error::Result;

/// Thm 3.3: `σ = max(1/√ε, (2√2/ε)·√ln(1/δ))`.
pub fn thm33_sigma(epsilon: f64, delta: f64) -> f64 {
    (1.0 / epsilon.sqrt()).max(2.0 * 2f64.sqrt() / epsilon * (1.0 / delta).ln().sqrt())
}

/// What a run's noise buys, by three routes.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct PrivacyReport {
    /// Target ε (Thm 3.3's guarantee; the config's `epsilon`, so not repeated in summaries).
    #[serde(skip)]
    pub epsilon_target: f64,
    /// σ from Thm 3.3.
    pub sigma: f64,
    /// ε of ρ = 1/(2σ²) by the exact Bun–Steinke conversion (Thm 3.3 without its relaxation).
    pub epsilon_zcdp: f64,
    /// ε from `privopt-dp`'s RDP accountant: `n·E` full-batch Gaussian releases of noise
    /// multiplier `σ·√(nE)`.
    pub epsilon_rdp: f64,
}

/// The report for `examples_per_client` examples per client over `epochs` epochs.
pub fn report(
    epsilon: f64,
    delta: f64,
    examples_per_client: usize,
    epochs: usize,
) -> Result<PrivacyReport> {
    let sigma = thm33_sigma(epsilon, delta);
    let epsilon_zcdp = zcdp::epsilon(zcdp::rho_gaussian(sigma)?, delta)?;
    let releases = (examples_per_client * epochs) as u64;
    let run = GaussianRun {
        sigma: sigma * (releases as f64).sqrt(),
        sampling: Sampling::Full,
        steps: releases,
    };
    let epsilon_rdp = run.epsilon(delta, Accountant::Rdp)?;
    Ok(PrivacyReport {
        epsilon_target: epsilon,
        sigma,
        epsilon_zcdp,
        epsilon_rdp,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn thm33_is_conservative_and_the_accountants_agree() {
        for eps in [1.0, 2.0, 4.0, 8.0] {
            let r = report(eps, 1e-5, 25, 2).unwrap();
            // σ = 2√2·√ln(1e5)/ε dominates for these ε.
            assert!((r.sigma - 2.0 * 2f64.sqrt() * (1e5f64).ln().sqrt() / eps).abs() < 1e-12);
            assert!(r.epsilon_zcdp <= eps, "{r:?}");
            // The RDP accountant composes the same Gaussian releases: at least as tight as zCDP.
            assert!(r.epsilon_rdp <= r.epsilon_zcdp * 1.0001, "{r:?}");
            assert!(r.epsilon_rdp > 0.5 * r.epsilon_zcdp, "{r:?}");
        }
        // Where 1/√ε dominates (large ε, loose δ), σ = 1/√ε.
        assert!((thm33_sigma(100.0, 0.1) - 0.1).abs() < 1e-12);
    }
}
