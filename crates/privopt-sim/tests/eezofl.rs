//! EEZOFL protocol: exact cancellation, missing shares, the un-reduced-key leak, and the noise
//! budget of App. B.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_channel::fading::Fading;
use privopt_math::SeedTree;
use privopt_sim::methods::eezofl::aggregate::{
    Csi, DigitalHe, DigitalKey, ExactHeOta, ModularHeOta, Precoder, Recorded, ScalarAggregation,
};
use privopt_sim::methods::eezofl::audit::{
    CollusionReport, channel_layer, collusion, decoded_noise_variance, recover_secret,
};
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

/// Δf_i of one round: a part shared by all devices (same model, same Φ, IID data) and a
/// device's own part.
fn round_deltas(k: u64) -> Vec<f64> {
    let mut r = SeedTree::new(9).stream("deltas", &[k]);
    let shared: f64 = rand_distr::Distribution::sample(&rand_distr::StandardNormal, &mut r);
    (0..N)
        .map(|_| {
            let own: f64 = rand_distr::Distribution::sample(&rand_distr::StandardNormal, &mut r);
            0.01 * shared + 0.003 * own
        })
        .collect()
}

fn colluders(agg: &mut dyn ScalarAggregation, laws: &[Fading], seed: u64) -> CollusionReport {
    let mut rec = Recorded {
        inner: agg,
        rounds: Vec::new(),
    };
    for k in 0..40 {
        rec.round(k, &round_deltas(k), false).unwrap();
    }
    collusion(&rec.rounds, laws, &SeedTree::new(seed))
}

/// §IV-F: "colluding clients learn nothing". Devices 0..N−1 and the server estimate device
/// N's Δf from M_k. Digitally they get it exactly; over the air the unknown gains blur it,
/// and the blur is exactly the fading's spread: with a nearly deterministic channel the
/// estimate is as good as the digital one.
#[test]
fn colluders_recover_the_last_device_as_well_as_the_fading_allows() {
    let laws = |sigma: f64| vec![Fading::Gaussian { mu: 1.0, sigma }; N];
    let params = paper_params(4096, 20.0, false).unwrap();
    let mut digital = DigitalHe::new(
        params,
        N as u32,
        SeedTree::new(4),
        false,
        DigitalKey::Everyone,
    )
    .unwrap();
    let d = colluders(&mut digital, &laws(0.0), 4);
    // Exact up to the HE noise (sd ≈ 4e-6 with 2^20 share smudging).
    assert!(d.relative_rmse_messages_only < 1e-3, "{d:?}");
    let mut faded = ota(20.0, 1.0, 5);
    let f = colluders(&mut faded, &laws(1.0), 5);
    // Others' gains (σ = 1) swamp device N's own share of the sum.
    assert!(f.relative_rmse_messages_only > 1.0, "{f:?}");
    // Knowing their own gains leaves (h_N − 1)Δf_N: relative error ≈ σ/μ = 1.
    assert!((0.6..1.5).contains(&f.relative_rmse_with_gains), "{f:?}");
    let mut steady = ota(20.0, 0.01, 6);
    let s = colluders(&mut steady, &laws(0.01), 6);
    assert!(s.relative_rmse_with_gains < 0.05, "{s:?}");
    assert_eq!(s.sign_agreement_with_gains, 1.0, "{s:?}");
    println!("digital {d:?}\nsigma 1 {f:?}\nsigma 0.01 {s:?}");
}

/// §IV-F's channel layer: the best linear estimate of one device's key from the K phase-1
/// superpositions is no better than knowing the keys' sum, but the K observations span
/// exactly the N-dimensional space of the keys (a rank gap of many orders of magnitude).
#[test]
fn the_channel_hides_each_key_from_linear_estimates_but_not_the_keys_span() {
    let o = ota(20.0, 1.0, 7);
    let r = channel_layer(&o, 2 * N as u64, 1.0, 3.2).unwrap();
    assert_eq!(r.observations, 2 * N);
    // √(1 − 1/N) ≈ 0.95 for uncorrelated keys; the RLWE error is 20+ orders smaller.
    assert!(r.linear_relative_error > 0.8, "{r:?}");
    assert!(r.rlwe_relative_noise < 1e-20, "{r:?}");
    assert!(r.rank_gap > 1e8, "{r:?}");
    println!("{r:?}");
}

/// The digital path on a threshold key (7 of 10, the dealing check at setup, every message
/// through bytes): with three devices silent each round after uploading, every round gives
/// the N-of-N key's value within the HE noise, and a dropout count that leaves fewer than the
/// threshold is a config error.
#[test]
fn a_threshold_key_survives_three_silent_devices_a_round_with_the_same_values() {
    let params = paper_params(4096, 20.0, false).unwrap();
    let mut everyone = DigitalHe::new(
        params.clone(),
        10,
        SeedTree::new(8),
        true,
        DigitalKey::Everyone,
    )
    .unwrap();
    let key = DigitalKey::Threshold {
        threshold: 7,
        dropouts: 3,
    };
    let mut threshold = DigitalHe::new(params, 10, SeedTree::new(8), true, key).unwrap();
    for k in 0..5 {
        let deltas: Vec<f64> = (0..10)
            .map(|i| 0.01 * (i as f64 - 4.5) * (k + 1) as f64)
            .collect();
        let a = everyone.round(k, &deltas, false).unwrap();
        let b = threshold.round(k, &deltas, false).unwrap();
        assert!(
            (a.value - b.value).abs() < 1e-4,
            "round {k}: {} vs {}",
            a.value,
            b.value
        );
        assert!((b.value - b.ideal).abs() < 1e-4, "round {k}: {b:?}");
    }
}

#[test]
fn threshold_and_dropout_settings_are_checked_against_the_device_count() {
    use privopt_sim::methods::eezofl::EezoflConfig;
    let config = |extra: &str| -> EezoflConfig {
        toml::from_str(&format!("aggregation = \"digital\"\n{extra}")).unwrap()
    };
    let seeds = SeedTree::new(9);
    let err = |c: EezoflConfig| c.aggregation(10, &seeds).err().unwrap().to_string();
    let e = err(config("threshold = 7\ndropouts = 4"));
    assert!(
        e.contains("leaves fewer than method.threshold = 7 of 10"),
        "{e}"
    );
    let e = err(config("threshold = 1"));
    assert!(e.contains("method.threshold must be 0"), "{e}");
    let e = err(config("dropouts = 2"));
    assert!(e.contains("needs a threshold key"), "{e}");
    assert!(
        config("threshold = 7\ndropouts = 3")
            .aggregation(10, &seeds)
            .is_ok()
    );
}
