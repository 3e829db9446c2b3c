//! The reproduction suites write the keys their docs and plots read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use privopt_experiments::runner::Outcome;
use privopt_sim::methods::Report;

#[test]
fn the_eezofl_suite_writes_every_key() {
    // The eezofl-table3 config with a smoke-sized workload on generated data.
    let out = common::run_shipped_config("eezofl-table3", common::SMOKE_EEZOFL_TABLE3);
    let s = &out.summary;
    for key in [
        "acc_n4096_sigma1",
        "acc_noenc_sigma1",
        "acc_n4096_sigma10",
        "acc_noenc_sigma10",
        "noise_var_measured_n4096",
        "noise_var_predicted_n4096",
        "final_loss_zf",
        "final_loss_mmse",
        "modular_model_decrypt_error",
        "uplink_bits_per_device_n4096",
        "rho_n4096",
    ] {
        assert!(
            s.contains_key(key),
            "summary lacks {key}: {:?}",
            s.keys().collect::<Vec<_>>()
        );
    }
    assert!(s["modular_model_decrypt_error"] > 1e6);
    assert_eq!(s["uplink_bits_per_device_n4096"], 4.0 * 4096.0 * 109.0);
    assert!(out.metrics.columns().iter().any(|c| c.starts_with("fig2/")));
    assert!(out.metrics.columns().iter().any(|c| c.starts_with("fig3/")));
    // The paper's υ₁ = 0.5, υ₂ = 0.25 meet Assumption 3.3 but not Theorem 1's Σ η² < ∞.
    assert_eq!(s["theorem_assumption_3_3_holds"], 1.0);
    assert_eq!(s["theorem_theorem1_holds"], 0.0);
    // Theorem 2's bound holds at the run's K (it is loose, not wrong) and K grows as ε shrinks.
    let r = s["theorem2_r"];
    assert!(r.is_finite() && r > 0.0);
    assert!(s["theorem2_bound_at_rounds"] >= s["grad_norm_sq_he4096_sigma1"]);
    assert!(s["theorem2_iterations_eps0.1"] > s["theorem2_iterations_eps1"]);
    assert!((0.0..=1.0).contains(&s["collapsed_fraction_noenc_sigma10"]));
    // Prop. 1 holds at the real q and is loose: no audited round's noise wraps at the modulus
    // where the bound allows 1% failures, nor even where it allows 100%.
    assert!(s["prop1_bound_at_q_n4096"] < 1e-20);
    assert_eq!(s["prop1_failures_at_bound_1pct_n4096"], 0.0);
    assert_eq!(s["prop1_failures_at_bound_1_n4096"], 0.0);
    assert!(s["prop1_log2_q_no_failure_n4096"] < s["prop1_log2_q_bound_1pct_n4096"]);
    assert!(s["prop1_log2_q_message_n4096"].is_finite());
    // §IV-F: digitally, colluders get the last device's Δf up to the HE noise; over a fading
    // channel not. Phase 1's superpositions span exactly the keys' space.
    assert!(s["collusion_rmse_messages_only_digital"] < 1e-2);
    assert!(s["collusion_rmse_messages_only_sigma10"] > s["collusion_rmse_messages_only_digital"]);
    assert!(s["channel_layer_linear_relative_error"] > 0.5);
    assert!(s["channel_layer_rank_gap"] > 1e8);
}

#[test]
fn the_pdsgd_fig3_run_reports_typed_numbers_and_writes_them_flat() {
    let out = common::run_shipped_config("pdsgd-fig3", common::SMOKE_PDSGD_FIG3);
    let Some(Outcome::Method(Report::Pdsgd(r))) = &out.report else {
        panic!("pdsgd reported {:?}", out.report)
    };
    let timing = r.paillier.expect("the smoke config times real Paillier");
    assert_eq!((timing.bits, timing.agents), (1024, 5));
    assert!(timing.seconds_per_iteration > 0.0 && timing.keygen_seconds > 0.0);
    let s = &out.summary;
    for (key, typed) in [
        ("final_mse_proposed", r.final_mse.proposed),
        ("final_mse_no_attenuation", r.final_mse.no_attenuation),
        ("final_mse_conventional", r.final_mse.conventional),
        ("final_mse_variance_proposed", r.final_mse_variance.proposed),
        ("paillier_bits", 1024.0),
        (
            "paillier_seconds_per_iteration",
            timing.seconds_per_iteration,
        ),
    ] {
        assert!(typed.is_finite(), "{key}");
        assert_eq!(
            s.get(key).map(|v| v.to_bits()),
            Some(typed.to_bits()),
            "{key}"
        );
    }
    assert!(
        out.metrics
            .columns()
            .iter()
            .any(|c| c.starts_with("fig3_log10_mse/"))
    );
    // Theorem 2's eavesdropper: Paillier views indistinguishable, the plaintext control not.
    let e = r
        .eavesdropper
        .as_ref()
        .expect("the config taps the messages");
    assert_eq!(e.ks_paillier.len() as u64, e.iterations);
    assert!(e.final_ks_paillier < e.final_critical, "{e:?}");
    assert!(e.final_ks_plaintext > e.final_critical, "{e:?}");
    assert_eq!(s["eavesdropper_final_ks_paillier"], e.final_ks_paillier);
    assert_eq!(s["paillier_final_error"], timing.final_error);
    // Remark 2's recovery error falls with the iteration.
    let worst = out.metrics.column("gradient_recovery_error/worst").unwrap();
    assert!(worst.windows(2).all(|w| w[1] <= w[0]) && worst[0] > worst[worst.len() - 1]);
}
