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

/// What a run actually spent once dropouts are counted: each client's zCDP `ρ` summed over
/// the rounds its vector was in, at the noise those rounds' sums actually carried.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct RealisedPrivacy {
    /// ε of the worst client's ρ by the exact Bun–Steinke conversion.
    pub epsilon_zcdp_realised: f64,
    /// ε of the worst client's ρ by `privopt-dp`'s RDP accountant (a Gaussian composition
    /// of total ρ has the RDP curve `α·ρ`, so one release of multiplier `1/√(2ρ)`).
    pub epsilon_rdp_realised: f64,
    /// The smallest per-round ratio of the noise summed to the noise assumed.
    pub noise_ratio_min: f64,
    /// Its mean over completed rounds.
    pub noise_ratio_mean: f64,
}

/// The realised privacy of a finished run at `delta`.
pub fn realised(run: &super::DomeRun, delta: f64) -> Result<RealisedPrivacy> {
    let rho = run.rho_worst_client;
    let ratios = run.noise_ratio.iter().map(|&(_, r)| r);
    let n = run.noise_ratio.len().max(1) as f64;
    let (epsilon_zcdp_realised, epsilon_rdp_realised) = if rho > 0.0 {
        let single = GaussianRun {
            sigma: 1.0 / (2.0 * rho).sqrt(),
            sampling: Sampling::Full,
            steps: 1,
        };
        (
            zcdp::epsilon(rho, delta)?,
            single.epsilon(delta, Accountant::Rdp)?,
        )
    } else {
        (0.0, 0.0)
    };
    Ok(RealisedPrivacy {
        epsilon_zcdp_realised,
        epsilon_rdp_realised,
        noise_ratio_min: ratios.clone().fold(f64::INFINITY, f64::min),
        noise_ratio_mean: ratios.sum::<f64>() / n,
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
