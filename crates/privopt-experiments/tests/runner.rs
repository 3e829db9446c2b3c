//! End-to-end runs of the baseline methods on generated data.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_experiments::config::ExperimentConfig;
use privopt_experiments::results::write_results;
use privopt_experiments::runner::{RunOptions, run};
use privopt_sim::context::NoProgress;

fn opts() -> RunOptions {
    RunOptions {
        data_dir: "does-not-exist".into(),
    }
}

const ZO: &str = r#"
name = "zo-test"
seed = 17
[data]
dataset = "synthetic_logistic"
n_train = 600
n_test = 300
dim = 8
clients = 5
partition = { kind = "dirichlet", alpha = 1.0 }
[model]
kind = "logistic"
[method]
name = "zo_sgd"
rounds = 300
lr = 0.3
batch_size = 32
eval_every = 100
[method.zo]
mu = 0.001
perturbations = 2
"#;

const SGD: &str = r#"
name = "sgd-test"
seed = 5
[data]
dataset = "synthetic_logistic"
n_train = 1000
n_test = 1000
dim = 10
[model]
kind = "logistic"
[method]
name = "sgd"
steps = 300
lr = 0.5
batch_size = 32
"#;

#[test]
fn sgd_learns_a_planted_logistic_model() {
    let cfg = ExperimentConfig::from_toml(SGD, "sgd").unwrap();
    let out = run(&cfg, &opts(), &NoProgress).unwrap();
    let acc = out.metrics.column("test_accuracy").unwrap();
    let loss = out.metrics.column("train_loss").unwrap();
    // Margins ~ N(0, 9): the Bayes accuracy is about 0.87; a fit model gets close to it.
    assert!(*acc.last().unwrap() > 0.8, "accuracy {acc:?}");
    assert!(loss.last().unwrap() < &(0.8 * loss[0]), "loss {loss:?}");
    assert_eq!(out.summary["bytes_up_total"], 0.0);
}

#[test]
fn zo_sgd_descends_and_counts_scalar_traffic() {
    let cfg = ExperimentConfig::from_toml(ZO, "zo").unwrap();
    let out = run(&cfg, &opts(), &NoProgress).unwrap();
    let loss = out.metrics.column("train_loss").unwrap();
    assert!(loss.last().unwrap() < &(0.8 * loss[0]), "loss {loss:?}");
    // 300 rounds x 5 clients x 2 scalars x 8 bytes up; (2 x 8 + 8) bytes x 5 clients down.
    assert_eq!(out.summary["bytes_up_total"], (300 * 5 * 2 * 8) as f64);
    assert_eq!(out.summary["bytes_down_total"], (300 * 5 * 24) as f64);
    assert_eq!(
        out.metrics.column("round").unwrap(),
        vec![0.0, 100.0, 200.0, 300.0]
    );
}

#[test]
fn same_seed_same_bits_and_all_result_files() {
    let cfg = ExperimentConfig::from_toml(ZO, "zo").unwrap();
    let a = run(&cfg, &opts(), &NoProgress).unwrap();
    let b = run(&cfg, &opts(), &NoProgress).unwrap();
    assert_eq!(a.metrics.to_csv(), b.metrics.to_csv());
    assert_eq!(a.params, b.params);
    let mut other = cfg.clone();
    other.seed += 1;
    let c = run(&other, &opts(), &NoProgress).unwrap();
    assert_ne!(a.params, c.params);

    let dir = tempfile::tempdir().unwrap();
    let files = write_results(dir.path(), &cfg, &a).unwrap();
    for name in [
        "config.toml",
        "metrics.csv",
        "summary.json",
        "loss.png",
        "test_accuracy.png",
        "communication.png",
    ] {
        let p = dir.path().join(name);
        assert!(files.contains(&p), "{name} not reported");
        assert!(std::fs::metadata(&p).unwrap().len() > 0, "{name} empty");
    }
    let png = std::fs::read(dir.path().join("loss.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // The written config is the resolved one and runs again to the same numbers.
    let text = std::fs::read_to_string(dir.path().join("config.toml")).unwrap();
    let again = ExperimentConfig::from_toml(&text, "config.toml").unwrap();
    assert_eq!(again, cfg);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap())
            .unwrap();
    assert!(summary.as_object().unwrap().values().all(|v| v.is_number()));
    assert_eq!(
        summary["final_test_accuracy"].as_f64().unwrap(),
        *a.metrics.column("test_accuracy").unwrap().last().unwrap()
    );
}

#[test]
fn divergence_is_an_error_not_a_nan_result() {
    // Least squares with a far too large step grows geometrically until it overflows.
    let text = SGD
        .replace("synthetic_logistic", "synthetic_linear")
        .replace("kind = \"logistic\"", "kind = \"least_squares\"")
        .replace("lr = 0.5", "lr = 50.0");
    let cfg = ExperimentConfig::from_toml(&text, "sgd").unwrap();
    let e = run(&cfg, &opts(), &NoProgress).unwrap_err().to_string();
    assert!(e.contains("diverged"), "{e}");
}

#[test]
fn missing_dataset_names_the_fetch_command() {
    let text = SGD.replace(
        "dataset = \"synthetic_logistic\"\nn_train = 1000\nn_test = 1000\ndim = 10",
        "dataset = \"mnist\"",
    );
    let cfg = ExperimentConfig::from_toml(&text, "x").unwrap();
    let e = run(&cfg, &opts(), &NoProgress).unwrap_err().to_string();
    assert!(e.contains("privopt data fetch mnist"), "{e}");
}
