//! DOME end to end on a small problem: privacy noise of the measured size (Lemma 3.1), the
//! uplink of a k-dimensional sketch, the non-private baseline learning, config errors, and a
//! smoke run of the shipped reproduction.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use privopt_experiments::config::ExperimentConfig;
use privopt_math::SeedTree;
use privopt_sim::methods::dome::{DomeConfig, SecAggSettings, Variant, privacy, train};
use privopt_sim::problem::Problem;

fn problem() -> Problem {
    let text = r#"
        name = "dome-test"
        seed = 3
        [data]
        dataset = "synthetic_logistic"
        n_train = 600
        n_test = 300
        dim = 40
        clients = 60
        [model]
        kind = "logistic"
        [method]
        name = "sgd"
        lr = 0.1
        steps = 1
        batch_size = 1
    "#;
    let cfg = ExperimentConfig::from_toml(text, "dome-test").unwrap();
    Problem::build(
        cfg.data.as_ref().unwrap(),
        cfg.model.as_ref().unwrap(),
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
        eval_every: 0,
        eval_examples: 0,
    }
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
fn dome_mnist_smoke_run_writes_the_issue_keys() {
    let Some(data) = common::real_data_dir(&["mnist"]) else {
        return;
    };
    let out = common::run_shipped_config_with_data("dome-mnist", common::SMOKE_DOME_MNIST, &data);
    let s = &out.summary;
    let mut keys = vec!["acc_nonprivate".to_string()];
    for m in ["dome", "dome_noprobe", "random_sketch", "dp_full"] {
        for e in [2, 4] {
            keys.push(format!("acc_{m}_eps{e}"));
        }
        keys.push(format!("uplink_bytes_{m}"));
        keys.push(format!("grad_mse_{m}"));
    }
    for k in &keys {
        assert!(
            s.get(k).is_some_and(|v| v.is_finite()),
            "{k} missing: {s:?}"
        );
    }
    for m in ["dome", "dome_noprobe", "random_sketch"] {
        let k = s[&format!("best_k_{m}")];
        assert!(k == 2.0 || k == 8.0);
        assert_eq!(s[&format!("uplink_vector_bytes_{m}")], 4.0 * k);
    }
    // 784·4 + 4 + 4·10 + 10 parameters, sent as u32 words under SecAgg.
    assert_eq!(s["params"], 3190.0);
    assert_eq!(s["uplink_vector_bytes_dp_full"], 4.0 * 3190.0);
    assert!(s["epsilon_rdp_eps4"] <= 4.0 && s["epsilon_zcdp_eps4"] <= 4.0);
    // 160 examples, 20 per round, 2 epochs; evaluations every 5 rounds from 0.
    assert_eq!(s["rounds"], 16.0);
    assert_eq!(out.metrics.len(), 5);
}
