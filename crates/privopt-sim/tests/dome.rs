//! DOME's driver on a small synthetic problem: privacy noise of the measured size (Lemma 3.1),
//! the uplink of a k-dimensional sketch, the non-private baseline learning, setting errors,
//! dropouts thinning the noise, and the downlink.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_data::problem::{DataConfig, Problem};
use privopt_math::SeedTree;
use privopt_ml::model::ModelSpec;
use privopt_sim::methods::dome::{
    DomeConfig, DropStage, DropoutSettings, SecAggSettings, Variant, privacy, train,
};

fn problem() -> Problem {
    let data: DataConfig = toml::from_str(
        r#"
        dataset = "synthetic_logistic"
        n_train = 600
        n_test = 300
        dim = 40
        clients = 60
        "#,
    )
    .unwrap();
    data.validate().unwrap();
    let model = ModelSpec::Logistic { l2: 0.0 };
    Problem::build(
        &data,
        &model,
        std::path::Path::new("none"),
        &SeedTree::new(3),
    )
    .unwrap()
}

fn config(variant: Variant, k: usize, epsilon: f64) -> DomeConfig {
    DomeConfig {
        variant,
        k,
        epsilon,
        delta: 1e-5,
        epochs: 2,
        clients_per_round: 30,
        clip: 1.0,
        lr: 0.05,
        beta1: 0.9,
        beta2: 0.999,
        gamma_prime: 1e-6,
        energy: 0.9,
        secagg: SecAggSettings::default(),
        dropouts: DropoutSettings::default(),
        noise_floor: None,
        eval_every: 0,
        eval_examples: 0,
    }
}

fn run(c: &DomeConfig, p: &Problem) -> privopt_sim::methods::dome::DomeRun {
    train(c, p, &SeedTree::new(1), |_, _| Ok(())).unwrap()
}

#[test]
fn the_noise_in_the_decompressed_gradient_has_lemma_3_1_size() {
    // Measured ‖S z̄‖² over the rounds against dim·a²/B: k for a sketch, d at full dimension.
    // The measured value is a mean of R·dim squared Gaussians: relative sd √(2/(R·dim)).
    let p = problem();
    let d = p.model.num_params();
    for (variant, k) in [
        (Variant::Dome, 4),
        (Variant::RandomSketch, 8),
        (Variant::DpFull, 0),
    ] {
        let run = train(&config(variant, k, 2.0), &p, &SeedTree::new(1), |_, _| {
            Ok(())
        })
        .unwrap();
        let dim = if variant == Variant::DpFull { d } else { k };
        let n_max = p.clients.iter().map(Vec::len).max().unwrap();
        let sigma = privacy::thm33_sigma(2.0, 1e-5);
        let a2 = (n_max * 2) as f64 * sigma * sigma / 30.0;
        assert!(
            (run.noise_mse_theory - dim as f64 * a2 / 30.0).abs() < 1e-9 * run.noise_mse_theory
        );
        let rel_sd = (2.0 / (run.total_rounds as f64 * dim as f64)).sqrt();
        let ratio = run.noise_mse / run.noise_mse_theory;
        assert!(
            (ratio - 1.0).abs() < 5.0 * rel_sd,
            "{variant:?}: measured/theory = {ratio}"
        );
    }
}

#[test]
fn the_uplink_is_the_sketch_plus_secagg_overhead() {
    let p = problem();
    let d = p.model.num_params();
    let sketch = train(
        &config(Variant::Dome, 4, 4.0),
        &p,
        &SeedTree::new(1),
        |_, _| Ok(()),
    )
    .unwrap();
    let full = train(
        &config(Variant::DpFull, 0, 4.0),
        &p,
        &SeedTree::new(1),
        |_, _| Ok(()),
    )
    .unwrap();
    assert_eq!(sketch.uplink_vector_bytes, 16.0);
    assert_eq!(full.uplink_vector_bytes, 4.0 * d as f64);
    // Both pay the same key and share traffic; the difference is exactly the vector.
    let overhead = sketch.uplink_bytes - sketch.uplink_vector_bytes;
    assert!(overhead > 0.0);
    assert!((full.uplink_bytes - full.uplink_vector_bytes - overhead).abs() < 1e-9);
    // Each epoch uses every example once: 600 examples / 30 per round.
    assert_eq!(sketch.total_rounds, 40);
}

#[test]
fn nonprivate_fedadam_learns_and_privacy_costs_accuracy() {
    let p = problem();
    let plain = train(
        &config(Variant::Nonprivate, 0, 1.0),
        &p,
        &SeedTree::new(1),
        |_, _| Ok(()),
    )
    .unwrap();
    assert!(
        plain.final_acc > 0.8,
        "non-private accuracy {}",
        plain.final_acc
    );
    assert_eq!(plain.noise_mse, 0.0);
    let first = plain.test_acc[0];
    assert!(
        plain.final_acc > first + 0.2,
        "{first} → {}",
        plain.final_acc
    );
}

#[test]
fn bad_settings_are_named() {
    let p = problem();
    let mut c = config(Variant::Dome, 4, 1.0);
    c.clients_per_round = 2;
    let err = train(&c, &p, &SeedTree::new(1), |_, _| Ok(()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("clients_per_round"), "{err}");
    let mut c = config(Variant::Dome, 4, 1.0);
    c.epsilon = 0.0;
    let err = train(&c, &p, &SeedTree::new(1), |_, _| Ok(()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("epsilon"), "{err}");
    let mut c = config(Variant::Dome, 4, 1.0);
    c.energy = 1.5;
    let err = train(&c, &p, &SeedTree::new(1), |_, _| Ok(()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("energy"), "{err}");
}

#[test]
fn dropouts_before_masking_thin_the_noise_and_the_realised_epsilon_shows_it() {
    let p = problem();
    let base = config(Variant::Dome, 4, 2.0);
    let target = privacy::report(2.0, 1e-5, 10, 2).unwrap();
    // Without dropouts the realised ε is the accountant's, and every round's ratio is 1.
    let full = run(&base, &p);
    let r = privacy::realised(&full, 1e-5).unwrap();
    assert!(
        (r.epsilon_zcdp_realised - target.epsilon_zcdp).abs() < 1e-9,
        "{r:?}"
    );
    assert!((r.epsilon_rdp_realised - target.epsilon_rdp).abs() < 1e-6 * target.epsilon_rdp);
    assert_eq!((r.noise_ratio_min, r.noise_ratio_mean), (1.0, 1.0));
    assert_eq!((full.contributors_mean, full.aborted_rounds), (30.0, 0));

    // 10% drop before sending their masked vectors: their noise shares are missing.
    let mut thin = base.clone();
    thin.dropouts = DropoutSettings {
        rate: 0.1,
        stage: DropStage::MaskedInput,
    };
    let dropped = run(&thin, &p);
    let r = privacy::realised(&dropped, 1e-5).unwrap();
    let completed = dropped.noise_ratio.len() as u64;
    assert_eq!(completed + dropped.aborted_rounds, dropped.total_rounds);
    assert!(
        completed >= dropped.total_rounds / 2,
        "{completed} rounds completed"
    );
    // E[contributors] = 27 of 30; over ≥ 20 rounds the mean is within ±2.
    assert!(
        (dropped.contributors_mean - 27.0).abs() < 2.0,
        "{}",
        dropped.contributors_mean
    );
    assert!(r.noise_ratio_min < 1.0 && r.noise_ratio_mean < 1.0, "{r:?}");
    assert!(
        r.epsilon_zcdp_realised > target.epsilon_zcdp,
        "{r:?} vs {target:?}"
    );
    // The noise measured in ĝ still follows Lemma 3.1 at the actual contributor count.
    let ratio = dropped.noise_mse / dropped.noise_mse_theory;
    assert!((ratio - 1.0).abs() < 0.25, "measured/theory = {ratio}");

    // Dropping after masking keeps the vector (and its noise) in the sum.
    let mut late = base.clone();
    late.dropouts = DropoutSettings {
        rate: 0.1,
        stage: DropStage::Unmask,
    };
    let late = run(&late, &p);
    let r = privacy::realised(&late, 1e-5).unwrap();
    assert_eq!(late.contributors_mean, 30.0);
    assert_eq!(r.noise_ratio_min, 1.0);
    // Rounds SecAgg+ could not unmask release nothing, so a client may have spent less.
    assert!(
        r.epsilon_zcdp_realised <= target.epsilon_zcdp + 1e-9,
        "{r:?}"
    );
    assert!(r.epsilon_zcdp_realised > 0.5 * target.epsilon_zcdp, "{r:?}");

    // The noise floor: shares for ⌈0.8·30⌉ = 24, so the sum never carries less than assumed.
    let mut floored = thin.clone();
    floored.noise_floor = Some(0.8);
    let floored = run(&floored, &p);
    let r = privacy::realised(&floored, 1e-5).unwrap();
    assert!(r.noise_ratio_min >= 1.0, "{r:?}");
    assert!(
        r.epsilon_zcdp_realised <= target.epsilon_zcdp + 1e-12,
        "{r:?}"
    );
    assert!(floored.final_acc.is_finite());
}

#[test]
fn the_downlink_counts_the_model_and_a_stale_sketch() {
    let p = problem();
    let d = p.model.num_params() as f64;
    let learned = run(&config(Variant::Dome, 4, 4.0), &p);
    let random = run(&config(Variant::RandomSketch, 4, 4.0), &p);
    let full = run(&config(Variant::DpFull, 0, 4.0), &p);
    // Every variant sends the model (8d) and the broadcast (8d for m̂ and a header);
    // a learned sketch adds 8dk every round, a random one only on a client's first round.
    let sketch = privopt_protocols::dome::basis_wire_bytes(d as usize, 4) as f64;
    assert!(full.downlink_bytes > 16.0 * d);
    assert!((learned.downlink_bytes - full.downlink_bytes - sketch).abs() < 1e-6 * sketch);
    // 60 clients each get the random sketch once over 40 rounds of 30.
    let once = sketch * 60.0 / (40.0 * 30.0);
    assert!((random.downlink_bytes - full.downlink_bytes - once).abs() < 1e-6 * sketch);
}
