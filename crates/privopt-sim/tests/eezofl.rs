//! EEZOFL protocol: exact cancellation, missing shares, the un-reduced-key leak, and the noise
//! budget of App. B.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_channel::fading::Fading;
use privopt_math::SeedTree;
use privopt_sim::methods::eezofl::aggregate::{
    Csi, ExactHeOta, ModularHeOta, Precoder, ScalarAggregation,
};
use privopt_sim::methods::eezofl::audit::{decoded_noise_variance, recover_secret};
use privopt_sim::methods::eezofl::paper_params;

const N: usize = 10;

fn ota(smudging_log2: f64, sigma: f64, seed: u64) -> ExactHeOta {
    // Tests study smudging below the policy too.
    let params = paper_params(4096, smudging_log2, true).unwrap();
    let laws = vec![Fading::Gaussian { mu: 1.0, sigma }; N];
    ExactHeOta::new(
        params,
        laws,
        1.0,
        40,
        SeedTree::new(seed),
        Precoder::None,
        Csi {
            pilot_sigma: 0.1,
            weight_cap: 100.0,
        },
    )
    .unwrap()
}

fn predicted(smudging_log2: f64, sigma: f64) -> f64 {
    let laws = vec![Fading::Gaussian { mu: 1.0, sigma }; N];
    decoded_noise_variance(
        4096,
        &laws,
        3.2,
        1.0,
        2f64.powf(smudging_log2),
        2f64.powi(40),
    )
}

#[test]
fn q_scale_terms_cancel_and_the_channel_weighted_sum_is_recovered() {
    let mut o = ota(20.0, 1.0, 1);
    let deltas: Vec<f64> = (0..N).map(|i| (i as f64 - 4.0) * 0.0123).collect();
    for k in 0..3 {
        let out = o.round(k, &deltas, false).unwrap();
        // Without cancellation the error would be of order q/Λ ≈ 2^69; with it, the decoded
        // noise has the predicted standard deviation. Allow 6 of them.
        let sd = predicted(20.0, 1.0).sqrt();
        assert!(
            (out.value - out.ideal).abs() < 6.0 * sd,
            "round {k}: {} vs {} (sd {sd:e})",
            out.value,
            out.ideal
        );
        // And the ideal is the channel-weighted sum Σ h_i Δf_i / μ_i, not Σ Δf_i.
        assert!(out.ideal.abs() > 0.0);
    }
}

#[test]
fn a_missing_decryption_share_is_an_error_not_garbage() {
    let o = ota(20.0, 1.0, 2);
    let e = o
        .run_round(0, &[1 << 30; N], Some(3), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("device 3 did not transmit"), "{e}");
}

#[test]
fn unreduced_partial_keys_reveal_the_secret() {
    let o = ota(20.0, 1.0, 3);
    let setup = o.setup();
    for dev in &o.devices()[..2] {
        let s = recover_secret(&setup.ring, &setup.a, dev.key()).expect("attack ran");
        assert_eq!(
            s,
            dev.audit_secret_coeffs(),
            "device {}: secret not recovered",
            dev.id()
        );
    }
    // The same attack on the key reduced mod q (centered) recovers nothing.
    let basis = setup.params.basis();
    let dev = &o.devices()[0];
    let mut b = basis.to_eval(basis.from_signed(dev.audit_error_coeffs()));
    let s_mod = basis.to_eval(basis.from_signed(dev.audit_secret_coeffs()));
    let sa = basis.mul(&s_mod, &setup.a_mod_q);
    basis.sub_assign(&mut b, &sa);
    let reduced = setup.ring.from_bigints(&basis.lift_all(&basis.to_coeff(b)));
    let guess = recover_secret(&setup.ring, &setup.a, &reduced).unwrap();
    let agree = guess
        .iter()
        .zip(dev.audit_secret_coeffs())
        .filter(|(g, s)| g == s)
        .count();
    eprintln!("attack on the reduced key: {agree} of 4096 coefficients agree");
    assert!(
        agree < 4096 / 10,
        "reduced key leaked {agree} of 4096 coefficients"
    );
}

#[test]
fn decoded_noise_matches_the_noise_budget() {
    // σ* = σ_e (the paper's modelling), so the channel-weighted product terms dominate.
    let smudge = 3.2f64.log2();
    let mut o = ota(smudge, 1.0, 4);
    let deltas = vec![0.01; N];
    let rounds = 120;
    let v: Vec<f64> = (0..rounds)
        .map(|k| o.round(k, &deltas, true).unwrap().noise_var.unwrap())
        .collect();
    let mean = v.iter().sum::<f64>() / rounds as f64;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (rounds as f64 - 1.0)).sqrt();
    let pred = predicted(smudge, 1.0);
    eprintln!(
        "per-coefficient decoded variance: measured {mean:.4e} ± {:.2e}, eq. (26) {pred:.4e}",
        sd / (rounds as f64).sqrt()
    );
    // Each round's variance depends on that round's gains; the mean over rounds estimates the
    // expectation with standard error sd/√R. Allow 5 standard errors.
    assert!(
        (mean - pred).abs() < 5.0 * sd / (rounds as f64).sqrt(),
        "measured {mean:e} vs predicted {pred:e}"
    );
}

#[test]
fn the_modular_model_breaks_decryption() {
    let mut m = ModularHeOta::new(ota(20.0, 1.0, 5));
    let out = m.round(0, &[0.01; N], false).unwrap();
    let err = (out.value - out.ideal).abs();
    // q/Λ ≈ 2^69 ≈ 6e20; anything above 1e6 is garbage for a gradient scalar.
    assert!(err > 1e6, "modular model error {err:e}");
}
