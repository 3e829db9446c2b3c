//! Scalar-only FL's reproductions: smoke runs of the shipped `hiso-*` configs and every
//! algorithm on the quickstart problem. (The replicated state and the protocol's checks are
//! tested in privopt-protocols' tests/scalar_fl_state.rs.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

#[test]
#[cfg_attr(not(data_mnist), ignore = "needs mnist: privopt data fetch mnist")]
fn hiso_mnist_smoke_run_writes_the_issue_keys() {
    let Some(data) = privopt_data::testing::real_data_dir(&["mnist"]) else {
        return;
    };
    let out = common::run_shipped_config_with_data("hiso-mnist", common::SMOKE_HISO_MNIST, &data);
    let s = &out.summary;
    for k in [
        "best_acc_decomfl",
        "best_acc_hiso",
        "rounds_to_decomfl_best_decomfl",
        "bytes_per_round_up_hiso",
        "bytes_per_round_up_decomfl",
        "bytes_per_round_up_fedavg",
        "bytes_per_round_up_fedzo",
        "bytes_per_round_up_fedadam",
        "fig5_hessian_p50",
        "fig8_best_acc_hiso_tau2",
        "best_lr_hiso",
    ] {
        assert!(
            s.get(k).is_some_and(|v| v.is_finite()),
            "{k} missing: {s:?}"
        );
    }
    // One f32 scalar up per round (τ = P = 1); FedAvg sends the 5 994-parameter model.
    assert_eq!(s["bytes_per_round_up_hiso"], 4.0);
    assert_eq!(s["bytes_per_round_up_decomfl"], 4.0);
    assert_eq!(s["bytes_per_round_up_fedavg"], 4.0 * 5994.0);
    assert!(s["best_acc_hiso"] > 0.0 && s["best_acc_hiso"] <= 1.0);
    assert_eq!(out.metrics.len(), 3, "rounds 0, 4 and 8");
}

#[test]
#[cfg_attr(not(data_mnist), ignore = "needs mnist: privopt data fetch mnist")]
fn hiso_mnist_public_smoke_run_reports_the_oracle_step_and_the_h_diagnostic() {
    let Some(data) = privopt_data::testing::real_data_dir(&["mnist"]) else {
        return;
    };
    let out = common::run_shipped_config_with_data(
        "hiso-mnist-public",
        &[
            (
                "lr_grid_decomfl = [0.00025, 0.00035, 0.0005, 0.0007, 0.001]",
                "lr_grid_decomfl = [0.0005, 0.001]",
            ),
            (
                "lr_grid_hiso = [0.00035, 0.0005, 0.0007, 0.001, 0.0014]",
                "lr_grid_hiso = [0.001]",
            ),
            ("seeds = 5", "seeds = 3\nscore_full_test = false"),
            (
                "hessian_diagnostic_batches = 200",
                "hessian_diagnostic_batches = 4",
            ),
            ("short_rounds = 500", "short_rounds = 2"),
            ("rounds = 2000", "rounds = 6"),
            ("eval_every = 50", "eval_every = 3"),
            ("eval_examples = 2000", "eval_examples = 100"),
        ],
        &data,
    );
    let s = &out.summary;
    // The public CNN_MNIST (28 938 parameters) in f32 for the full-model baselines.
    for b in ["fedavg", "fedadam", "fedyogi", "fedadagrad"] {
        assert_eq!(s[&format!("bytes_per_round_up_{b}")], 4.0 * 28_938.0, "{b}");
        assert!(s[&format!("best_acc_{b}")] > 0.0);
    }
    // The oracle step of seed 0 is HiSo's best rate over the median of seed 0's final H
    // (Fig. 5's H is seed 0's).
    let expect = s["best_lr_hiso"] / s["fig5_hessian_p50"];
    assert!((s["oracle_lr_seed0"] - expect).abs() < 1e-12 * expect);
    for k in [
        "oracle_lr_seed2",
        "oracle_best_acc_decomfl",
        "oracle_best_acc_diff",
        "best_acc_diff_ci95",
        "hiso_speedup_common_mean",
        "hiso_speedup_common_ci95",
        "oracle_hiso_speedup_common_mean",
    ] {
        assert!(s.get(k).is_some_and(|v| v.is_finite()), "{k}: {s:?}");
    }
    for k in ["hessian_rank_between_seeds", "hessian_rank_with_grad_sq"] {
        assert!(s[k].abs() <= 1.0, "{k} = {}", s[k]);
    }
    // A single-rate HiSo grid has no edge to sit on.
    assert_eq!(s["best_lr_hiso_on_grid_edge"], 0.0);
    assert_eq!(s["best_lr_decomfl_on_grid_edge"], 1.0);
}

#[test]
#[cfg_attr(
    not(all(data_minilm, data_movie_snippets)),
    ignore = "needs minilm, movie-snippets: privopt data fetch minilm movie-snippets"
)]
fn hiso_minilm_smoke_run_fine_tunes_from_the_zero_shot_head() {
    let Some(data) = privopt_data::testing::real_data_dir(&["minilm", "movie-snippets"]) else {
        return;
    };
    let out = common::run_shipped_config_with_data(
        "hiso-minilm",
        &[
            (
                "lr_grid_decomfl = [0.0003, 0.001]",
                "lr_grid_decomfl = [0.001]",
            ),
            ("lr_grid_hiso = [0.0003, 0.001]", "lr_grid_hiso = [0.001]"),
            ("rounds = 150", "rounds = 2"),
            ("perturbations = 5", "perturbations = 2"),
            ("batch_size = 16", "batch_size = 4"),
            ("eval_every = 25", "eval_every = 2"),
            ("eval_examples = 500", "eval_examples = 100"),
            ("seeds = 1", "seeds = 1\nscore_full_test = false"),
        ],
        &data,
    );
    let s = &out.summary;
    // 31 490 trainable parameters; two f32 scalars up per client per round.
    assert_eq!(s["n_params"], 31490.0);
    assert_eq!(s["bytes_per_round_up_hiso"], 8.0);
    // The zero-shot head already classifies sentiment better than chance on 100 snippets.
    let acc0 = out.metrics.column("accuracy/hiso_seed0").unwrap()[0];
    assert!(acc0 > 0.6, "zero-shot accuracy {acc0}");
}

#[test]
fn every_algorithm_learns_the_quickstart_problem_and_counts_its_traffic() {
    use privopt_experiments::config::ExperimentConfig;
    use privopt_experiments::runner::{RunOptions, run};
    use privopt_sim::context::NoProgress;
    let base = std::fs::read_to_string(format!(
        "{}/../../configs/quickstart/hiso.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
    .replace("rounds = 2000", "rounds = 600");
    for (alg, lr, up, extra) in [
        ("hiso", "0.05", 4.0, ""),
        (
            "hiso",
            "0.05",
            4.0 * 3.0,
            "difference = \"two_point\"\nperturbations = 3\n",
        ),
        ("decomfl", "0.05", 4.0 * 2.0, "local_steps = 2\n"),
        ("fedzo", "0.05", 4.0 * 21.0, ""),
        ("fedavg", "0.5", 4.0 * 21.0, ""),
        ("fedadam", "0.5", 4.0 * 21.0, ""),
        ("fedyogi", "0.5", 4.0 * 21.0, ""),
        ("fedadagrad", "0.5", 4.0 * 21.0, ""),
    ] {
        // The [method] table is the file's last, so `extra` keys land in it.
        let text = base
            .replace("algorithm = \"hiso\"", &format!("algorithm = \"{alg}\""))
            .replace("lr = 0.05", &format!("lr = {lr}"))
            .replace("perturbations = 1\n", "")
            + extra;
        let cfg = ExperimentConfig::from_toml(&text, alg).unwrap();
        let out = run(
            &cfg,
            &RunOptions {
                data_dir: "none".into(),
            },
            &NoProgress,
        )
        .unwrap();
        let s = &out.summary;
        let acc0 = out.metrics.column("test_accuracy").unwrap()[0];
        assert!(
            s["final_test_accuracy"] > 0.75 && s["final_test_accuracy"] > acc0 + 0.1,
            "{alg}: {acc0} → {}",
            s["final_test_accuracy"]
        );
        // Logistic regression on 20 features has 21 parameters.
        assert_eq!(s["bytes_per_round_up"], up, "{alg}");
    }
}
