//! DOME's reproductions: smoke runs of the shipped configs and the seeds suite's tuning. (The
//! driver on a synthetic problem is tested in privopt-sim's tests/dome.rs.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use privopt_experiments::config::ExperimentConfig;

#[test]
#[cfg_attr(not(data_mnist), ignore = "needs mnist: privopt data fetch mnist")]
fn dome_mnist_smoke_run_writes_the_issue_keys() {
    let Some(data) = privopt_data::testing::real_data_dir(&["mnist"]) else {
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

/// `dome-mnist-seeds` at smoke size on generated data (the suite's logic, not MNIST's).
const SMOKE_DOME_SEEDS: &[(&str, &str)] = &[
    (
        "dataset = \"mnist\"",
        "dataset = \"synthetic_logistic\"\nn_train = 800\nn_test = 200\ndim = 12",
    ),
    ("clients = 1000", "clients = 40"),
    ("validation = 5000", "validation = 150"),
    ("max_train = 10000", "max_train = 400"),
    ("hidden = 128", "hidden = 4"),
    ("k = 256", "k = 3"),
    ("seeds = 5", "seeds = 3"),
    ("clients_per_round = 500", "clients_per_round = 20"),
    ("eval_examples = 2000", "eval_examples = 100"),
];

#[test]
fn the_seeds_suite_tunes_on_validation_and_reports_intervals() {
    let out = common::run_shipped_config_with_data(
        "dome-mnist-seeds",
        SMOKE_DOME_SEEDS,
        std::path::Path::new("none"),
    );
    let s = &out.summary;
    let grids: [(&str, &[f64]); 5] = [
        ("nonprivate", &[0.001, 0.003]),
        ("dp_full", &[0.001, 0.003, 0.01]),
        ("dome", &[0.003, 0.01, 0.03]),
        ("random_sketch", &[0.003, 0.01, 0.03]),
        ("dome_noprobe", &[0.01, 0.03]),
    ];
    for (label, grid) in grids {
        // The chosen step is the first with the best validation accuracy.
        let vals: Vec<f64> = grid
            .iter()
            .map(|lr| s[&format!("val_acc_{label}_lr{lr}")])
            .collect();
        let best = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let first_best = grid[vals.iter().position(|&v| v == best).unwrap()];
        assert_eq!(s[&format!("lr_{label}")], first_best, "{label}: {vals:?}");
        let accs: Vec<f64> = (0..3).map(|i| s[&format!("acc_{label}_seed{i}")]).collect();
        let mean = accs.iter().sum::<f64>() / 3.0;
        assert!((s[&format!("acc_mean_{label}")] - mean).abs() < 1e-12);
        assert!(s[&format!("acc_ci95_{label}")] >= 0.0);
        assert!(!s.contains_key(&format!("acc_{label}_seed3")));
    }
    // Seeds differ (different initial models and schedules), so the interval is not zero.
    assert!(s["acc_ci95_dome"] > 0.0 || s["acc_ci95_dp_full"] > 0.0);
    // Paired differences against the baseline, and none for the baseline itself.
    let d: Vec<f64> = (0..3)
        .map(|i| s[&format!("acc_dome_seed{i}")] - s[&format!("acc_dp_full_seed{i}")])
        .collect();
    assert!((s["diff_mean_dome_vs_dp_full"] - d.iter().sum::<f64>() / 3.0).abs() < 1e-12);
    assert!(!s.contains_key("diff_mean_dp_full_vs_dp_full"));
    // No dropouts: the realised ε is the target, and the non-private run has none.
    assert!((s["epsilon_rdp_realised_dome"] - s["epsilon_rdp_target"]).abs() < 1e-9);
    assert!(!s.contains_key("epsilon_rdp_realised_nonprivate"));
    assert!(s["downlink_bytes_dome"] > s["downlink_bytes_dp_full"]);
}

#[test]
fn tuning_without_a_validation_split_is_refused() {
    let path = format!(
        "{}/../../configs/dome-mnist-seeds.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut text = std::fs::read_to_string(path).unwrap();
    for (from, to) in SMOKE_DOME_SEEDS {
        let to = if from.starts_with("validation") {
            ""
        } else {
            to
        };
        text = text.replace(from, to);
    }
    let cfg = ExperimentConfig::from_toml(&text, "no-validation").unwrap();
    let options = privopt_experiments::runner::RunOptions {
        data_dir: "none".into(),
    };
    let err = privopt_experiments::runner::run(&cfg, &options, &privopt_sim::context::NoProgress)
        .unwrap_err()
        .to_string();
    assert!(err.contains("data.validation"), "{err}");
}
