//! Which catalog datasets are fetched, as `cfg(data_NAME)` flags (`-` becomes `_`), so a test
//! that needs one is marked ignored, with the command that fetches it, instead of passing
//! without running:
//! `#[cfg_attr(not(data_mnist), ignore = "needs mnist: privopt data fetch mnist")]`.
//!
//! The datasets live in `PRIVOPT_DATA`, else the workspace's `data/` (created here, empty, so
//! that it can be watched: a fetch into it reruns this script). Under `CI=true` every flag is
//! set: CI fetches first, and a missing dataset must fail its test, not skip it.

use std::path::{Path, PathBuf};

/// Every dataset `privopt data fetch` knows.
const DATASETS: [&str; 6] = [
    "mnist",
    "adult",
    "compas",
    "credit",
    "minilm",
    "movie-snippets",
];

/// Emits the flags and what to watch.
pub fn emit() {
    println!("cargo::rerun-if-env-changed=PRIVOPT_DATA");
    println!("cargo::rerun-if-env-changed=CI");
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let dir = match std::env::var_os("PRIVOPT_DATA") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
            // Best effort: without it the script reruns at every build (a missing path is
            // always out of date), which only costs time.
            let _ = std::fs::create_dir_all(&dir);
            dir
        }
    };
    // Under CI every flag is set whatever the folder holds, so a fetch must not rerun this.
    if !ci {
        println!("cargo::rerun-if-changed={}", dir.display());
    } else {
        println!("cargo::rerun-if-changed=build.rs");
    }
    for name in DATASETS {
        let flag = format!("data_{}", name.replace('-', "_"));
        println!("cargo::rustc-check-cfg=cfg({flag})");
        if ci || dir.join(name).join(".complete").is_file() {
            println!("cargo::rustc-cfg={flag}");
        }
    }
}
