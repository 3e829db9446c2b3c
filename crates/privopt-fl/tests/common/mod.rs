//! Helpers shared by the integration tests.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use privopt_fl::config::ExperimentConfig;
use privopt_fl::runner::{NoProgress, RunOptions, RunOutcome, run};

/// Runs `configs/NAME.toml` after applying `(from, to)` text replacements (each must match),
/// so that smoke tests exercise the shipped reproduction configs at a small size.
pub fn run_shipped_config(name: &str, replacements: &[(&str, &str)]) -> RunOutcome {
    run_shipped_config_with_data(name, replacements, std::path::Path::new("none"))
}

/// Where fetched datasets live: `PRIVOPT_DATA`, else the repository's `data/`. Returns `None`
/// (the test skips) when one of `names` is missing locally; under `CI=true` a missing dataset
/// fails the test instead, since CI fetches them first.
pub fn real_data_dir(names: &[&str]) -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("PRIVOPT_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| format!("{}/../../data", env!("CARGO_MANIFEST_DIR")).into());
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !dir.join(n).is_dir())
        .collect();
    if missing.is_empty() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "datasets {missing:?} missing from {} under CI",
        dir.display()
    );
    eprintln!("skipping: datasets {missing:?} not fetched");
    None
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
