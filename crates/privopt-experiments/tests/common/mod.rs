//! Helpers shared by the integration tests.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

pub mod golden;

use privopt_experiments::config::ExperimentConfig;
use privopt_experiments::runner::{RunOptions, RunOutcome, run};
use privopt_sim::context::NoProgress;

/// Runs `configs/NAME.toml` after applying `(from, to)` text replacements (each must match),
/// so that smoke tests exercise the shipped reproduction configs at a small size.
pub fn run_shipped_config(name: &str, replacements: &[(&str, &str)]) -> RunOutcome {
    run_shipped_config_with_data(name, replacements, std::path::Path::new("none"))
}

/// [`run_shipped_config`] reading catalog data from `data_dir`.
pub fn run_shipped_config_with_data(
    name: &str,
    replacements: &[(&str, &str)],
    data_dir: &std::path::Path,
) -> RunOutcome {
    let path = format!("{}/../../configs/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (from, to) in replacements {
        assert!(text.contains(from), "{name}.toml has no `{from}`");
        text = text.replace(from, to);
    }
    let cfg = ExperimentConfig::from_toml(&text, name).unwrap();
    run(
        &cfg,
        &RunOptions {
            data_dir: data_dir.to_path_buf(),
        },
        &NoProgress,
    )
    .unwrap()
}

/// Smoke-size replacements of the shipped `eezofl-table3` config, on generated data.
pub const SMOKE_EEZOFL_TABLE3: &[(&str, &str)] = &[
    (
        "dataset = \"mnist\"\nclasses = [0, 1]",
        "dataset = \"synthetic_logistic\"\nn_train = 500\nn_test = 200\ndim = 8",
    ),
    ("seeds = [0, 1, 2, 3, 4]", "seeds = [0, 1]"),
    ("he_sets = [8192, 4096]", "he_sets = [4096]"),
    ("noise_audit_rounds = 20", "noise_audit_rounds = 2"),
    ("modular_audit_rounds = 2", "modular_audit_rounds = 1"),
    ("rounds = 400", "rounds = 6"),
    ("eval_every = 10", "eval_every = 3"),
];

/// Smoke-size replacements of the shipped `pdsgd-fig3` config.
pub const SMOKE_PDSGD_FIG3: &[(&str, &str)] = &[
    ("trials = 1000", "trials = 6"),
    ("iterations = 10000", "iterations = 200"),
    ("eval_every = 100", "eval_every = 50"),
    (
        "paillier_timing_iterations = 5",
        "paillier_timing_iterations = 1",
    ),
    (
        "paillier_bits = 2048",
        "paillier_bits = 1024\ninsecure = true",
    ),
];

/// Smoke-size replacements of the shipped `dome-mnist` config (needs MNIST).
pub const SMOKE_DOME_MNIST: &[(&str, &str)] = &[
    ("clients = 1000", "clients = 40"),
    ("max_train = 10000", "max_train = 160"),
    ("hidden = 128", "hidden = 4"),
    ("epsilons = [1, 2, 4, 8]", "epsilons = [2, 4]"),
    ("ks = [16, 64, 256]", "ks = [2, 8]"),
    ("clients_per_round = 500", "clients_per_round = 20"),
    ("eval_examples = 2000", "eval_examples = 100"),
];

/// Smoke-size replacements of the shipped `hiso-mnist` config (needs MNIST).
pub const SMOKE_HISO_MNIST: &[(&str, &str)] = &[
    (
        "lr_grid_decomfl = [0.001, 0.002, 0.004]",
        "lr_grid_decomfl = [0.002]",
    ),
    (
        "lr_grid_hiso = [0.001, 0.002, 0.004]",
        "lr_grid_hiso = [0.002, 0.004]",
    ),
    ("seeds = 3", "seeds = 2"),
    ("nu_grid = [0.001, 0.1]", "nu_grid = [0.1]"),
    ("tau_grid = [1, 2, 5, 10]", "tau_grid = [2]"),
    ("short_rounds = 500", "short_rounds = 4"),
    ("rounds = 2000", "rounds = 8"),
    ("eval_every = 50", "eval_every = 4"),
    ("eval_examples = 2000", "eval_examples = 200"),
];
