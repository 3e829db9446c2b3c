//! privopt's accountant against Google's `dp-accounting` 0.6.0 (values in
//! `tests/data/dp_accounting_reference.json`, copied from `shared/reference/`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_dp::exact::{composed_mu, gaussian_epsilon};
use privopt_dp::{Accountant, Conversion, GaussianRun, RdpCurve, Sampling, default_orders, zcdp};
use serde_json::Value;

fn reference() -> Value {
    serde_json::from_str(include_str!("data/dp_accounting_reference.json")).unwrap()
}

fn run(row: &Value) -> GaussianRun {
    GaussianRun {
        sigma: row["sigma"].as_f64().unwrap(),
        sampling: Sampling::Poisson {
            q: row["q"].as_f64().unwrap(),
        },
        steps: row["steps"].as_u64().unwrap(),
    }
}

#[test]
fn rdp_epsilons_match_dp_accounting() {
    let r = reference();
    for row in r["rows"].as_array().unwrap() {
        let delta = row["delta"].as_f64().unwrap();
        let ours = run(row).epsilon(delta, Accountant::Rdp).unwrap();
        let lib = row["eps_rdp"].as_f64().unwrap();
        let pld = row["eps_pld"].as_f64().unwrap();
        let dropped = !row["rdp_orders_excluded_by_library"]
            .as_array()
            .unwrap()
            .is_empty();
        if dropped {
            // The library lost orders, so its value is pessimistic; ours must sit between the
            // tight PLD bound and it.
            assert!(ours >= pld && ours <= lib * 1.01, "{row}: ours {ours}");
        } else {
            assert!(
                (ours - lib).abs() <= 0.01 * lib,
                "{row}: ours {ours} vs {lib}"
            );
        }
        // Never below the PLD upper bound's neighbourhood: RDP is looser than PLD.
        assert!(ours >= pld * 0.999, "{row}: ours {ours} below PLD {pld}");
        let classic = run(row).epsilon(delta, Accountant::RdpClassic).unwrap();
        let lib_classic = row["eps_rdp_classic_conversion"].as_f64().unwrap();
        assert!(
            (classic - lib_classic).abs() <= 0.01 * lib_classic,
            "{row}: classic {classic}"
        );
    }
}

#[test]
fn rdp_values_match_at_each_order() {
    let r = reference();
    for row in r["rows"].as_array().unwrap() {
        let g = run(row);
        for (order, value) in row["rdp_total_at_orders"].as_object().unwrap() {
            let Some(lib) = value.as_f64() else { continue };
            let order: f64 = order.parse().unwrap();
            let ours = RdpCurve::gaussian(g.sigma, g.sampling, g.steps, &[order])
                .unwrap()
                .values()[0];
            if order.fract() == 0.0 {
                // Integer orders: both sides use the exact binomial expansion.
                assert!(
                    (ours - lib).abs() <= 1e-6 * lib.max(1e-9),
                    "{row} α={order}: {ours} vs {lib}"
                );
            } else {
                // Fractional orders: the library sums the series' terms by absolute value (an
                // upper bound); we integrate the exact moment, so ours is lower but close.
                assert!(
                    ours <= lib * (1.0 + 1e-9) && ours >= 0.7 * lib,
                    "{row} α={order}: {ours} vs {lib}"
                );
                // (α−1)·RDP(α) is convex in α: it lies under the chord between integer orders.
                let at = |a: f64| {
                    RdpCurve::gaussian(g.sigma, g.sampling, g.steps, &[a])
                        .unwrap()
                        .values()[0]
                        * (a - 1.0)
                };
                let (lo, hi) = (order.floor(), order.ceil());
                let chord =
                    if lo <= 1.0 { 0.0 } else { at(lo) } * (hi - order) + at(hi) * (order - lo);
                assert!(
                    ours * (order - 1.0) <= chord * (1.0 + 1e-9),
                    "{row} α={order}: not convex"
                );
            }
        }
    }
}

#[test]
fn optimal_orders_match_on_the_shared_grid() {
    let r = reference();
    for row in r["rows"].as_array().unwrap() {
        let g = run(row);
        let curve = RdpCurve::gaussian(g.sigma, g.sampling, g.steps, &default_orders()).unwrap();
        let at = curve
            .epsilon(row["delta"].as_f64().unwrap(), Conversion::Improved)
            .unwrap();
        if row["rdp_orders_excluded_by_library"]
            .as_array()
            .unwrap()
            .is_empty()
        {
            assert_eq!(
                at.order,
                row["rdp_optimal_order"].as_f64().unwrap(),
                "{row}"
            );
        }
    }
}

#[test]
fn exact_gaussian_matches_full_batch_rows() {
    let r = reference();
    for row in r["rows"].as_array().unwrap() {
        let Some(exact) = row["eps_exact_gaussian"].as_f64() else {
            continue;
        };
        let g = run(row);
        let ours = gaussian_epsilon(
            composed_mu(g.sigma, g.steps),
            row["delta"].as_f64().unwrap(),
        )
        .unwrap();
        assert!((ours - exact).abs() <= 1e-6 * exact, "{row}: {ours}");
    }
}

#[test]
fn zcdp_rows_are_exact() {
    let r = reference();
    for row in r["zcdp_check"].as_array().unwrap() {
        let rho = row["rho"].as_f64().unwrap();
        let delta = row["delta"].as_f64().unwrap();
        let ours = zcdp::epsilon(rho, delta).unwrap();
        let want = row["eps_zcdp_formula"].as_f64().unwrap();
        assert!(
            (ours - want).abs() <= 1e-12 * want,
            "ρ={rho}: {ours} vs {want}"
        );
        // The same mechanism through the zCDP accountant of a one-step Gaussian.
        let sigma = row["equivalent_gaussian_sigma"].as_f64().unwrap();
        let via_run = GaussianRun {
            sigma,
            sampling: Sampling::Full,
            steps: 1,
        }
        .epsilon(delta, Accountant::Zcdp)
        .unwrap();
        assert!((via_run - want).abs() <= 1e-9 * want);
        // And the RDP accountant agrees with the library's RDP value for this Gaussian.
        let rdp = GaussianRun {
            sigma,
            sampling: Sampling::Full,
            steps: 1,
        }
        .epsilon(delta, Accountant::Rdp)
        .unwrap();
        let lib = row["eps_rdp_accountant"].as_f64().unwrap();
        assert!(
            (rdp - lib).abs() <= 0.01 * lib,
            "ρ={rho}: rdp {rdp} vs {lib}"
        );
        let exact = gaussian_epsilon(1.0 / sigma, delta).unwrap();
        assert!((exact - row["eps_exact_gaussian"].as_f64().unwrap()).abs() < 1e-6);
    }
}
