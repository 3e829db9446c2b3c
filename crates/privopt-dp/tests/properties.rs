//! Monotonicity of ε in σ, q and T, and calibration as the inverse of accounting.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_dp::{Accountant, GaussianRun, Sampling};
use proptest::prelude::*;

fn eps(sigma: f64, sampling: Sampling, steps: u64) -> f64 {
    GaussianRun {
        sigma,
        sampling,
        steps,
    }
    .epsilon(1e-5, Accountant::Rdp)
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn epsilon_is_monotone(sigma in 0.6f64..4.0, q in 0.001f64..0.5, steps in 1u64..2000, wor in any::<bool>()) {
        let s = |q: f64| if wor { Sampling::WithoutReplacement { q } } else { Sampling::Poisson { q } };
        let base = eps(sigma, s(q), steps);
        prop_assert!(eps(sigma * 1.2, s(q), steps) <= base * (1.0 + 1e-9));
        prop_assert!(eps(sigma, s((q * 1.5).min(1.0)), steps) >= base * (1.0 - 1e-9));
        prop_assert!(eps(sigma, s(q), steps + steps / 2 + 1) >= base * (1.0 - 1e-9));
    }

    #[test]
    fn calibration_inverts_accounting(target in 0.3f64..8.0, q in 0.005f64..0.2, steps in 10u64..1500) {
        let sampling = Sampling::Poisson { q };
        let sigma = GaussianRun::calibrate(target, 1e-5, sampling, steps, Accountant::Rdp).unwrap();
        prop_assert!(eps(sigma, sampling, steps) <= target * (1.0 + 1e-9));
        prop_assert!(eps(sigma * 0.99, sampling, steps) > target);
    }
}

#[test]
fn without_replacement_costs_more_than_poisson_for_replace_one() {
    // Replace-one neighbours are the stronger notion: WOR accounting is never cheaper here.
    for (sigma, q, t) in [(1.0, 0.01, 1000), (2.0, 0.1, 100), (1.2, 0.05, 500)] {
        let p = eps(sigma, Sampling::Poisson { q }, t);
        let w = eps(sigma, Sampling::WithoutReplacement { q }, t);
        assert!(w >= p, "σ={sigma} q={q} T={t}: wor {w} < poisson {p}");
    }
}

#[test]
fn zcdp_refuses_subsampling_and_matches_rdp_on_full_batches() {
    let run = GaussianRun {
        sigma: 1.0,
        sampling: Sampling::Poisson { q: 0.1 },
        steps: 10,
    };
    assert!(run.epsilon(1e-5, Accountant::Zcdp).is_err());
    // zCDP conversion is looser than RDP's improved one for the same Gaussian.
    let full = GaussianRun {
        sigma: 3.0,
        sampling: Sampling::Full,
        steps: 50,
    };
    assert!(
        full.epsilon(1e-5, Accountant::Zcdp).unwrap()
            >= full.epsilon(1e-5, Accountant::Rdp).unwrap()
    );
}
