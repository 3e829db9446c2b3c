//! Helpers shared by the integration tests.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use privopt_fl::config::ExperimentConfig;
use privopt_fl::runner::{NoProgress, RunOptions, RunOutcome, run};

/// Runs `configs/NAME.toml` after applying `(from, to)` text replacements (each must match),
/// so that smoke tests exercise the shipped reproduction configs at a small size.
pub fn run_shipped_config(name: &str, replacements: &[(&str, &str)]) -> RunOutcome {
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
            data_dir: "none".into(),
        },
        &NoProgress,
    )
    .unwrap()
}
