//! `run`, `reproduce` and `quickstart`: run configs and write their result folders.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use privopt_fl::config::ExperimentConfig;
use privopt_fl::results::{default_out_dir, write_results};
use privopt_fl::runner::{RunOptions, RunOutcome, run};

use crate::configs;
use crate::progress::Bar;

/// A UTC timestamp for folder names, e.g. `20261122-111530`.
fn timestamp() -> String {
    let fmt = time::macros::format_description!("[year][month][day]-[hour][minute][second]");
    time::OffsetDateTime::now_utc()
        .format(&fmt)
        .unwrap_or_else(|_| "now".into())
}

/// `base`, or `base-2`, `base-3`, … if it exists already (two runs in the same second).
fn fresh_dir(base: PathBuf) -> PathBuf {
    if !base.exists() {
        return base;
    }
    (2..)
        .map(|k| PathBuf::from(format!("{}-{k}", base.display())))
        .find(|p| !p.exists())
        .unwrap_or(base)
}

/// Runs `cfg` and writes its results to `out` (or the default folder); returns both.
fn run_and_write(
    cfg: &ExperimentConfig,
    data_dir: &Path,
    out: Option<PathBuf>,
    quiet: bool,
) -> Result<(RunOutcome, PathBuf)> {
    let opts = RunOptions {
        data_dir: data_dir.to_owned(),
    };
    let bar = Bar::new(quiet);
    let outcome = run(cfg, &opts, &bar).with_context(|| format!("running `{}`", cfg.name))?;
    let dir = out.unwrap_or_else(|| fresh_dir(default_out_dir(&cfg.name, &timestamp())));
    write_results(&dir, cfg, &outcome)?;
    Ok((outcome, dir))
}

fn print_summary(outcome: &RunOutcome, dir: &Path) {
    for (k, v) in &outcome.summary {
        println!("{k:>24} = {v}");
    }
    println!("results written to {}", dir.display());
}

fn with_seed(mut cfg: ExperimentConfig, seed: Option<u64>) -> ExperimentConfig {
    if let Some(s) = seed {
        cfg.seed = s;
    }
    cfg
}

/// `privopt run CONFIG`.
pub fn run_file(
    path: &Path,
    data_dir: &Path,
    out: Option<PathBuf>,
    seed: Option<u64>,
    quiet: bool,
) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let cfg = with_seed(
        ExperimentConfig::from_toml(&text, &path.display().to_string())?,
        seed,
    );
    let (outcome, dir) = run_and_write(&cfg, data_dir, out, quiet)?;
    print_summary(&outcome, &dir);
    Ok(())
}

/// `privopt reproduce ID`.
pub fn reproduce(
    id: &str,
    data_dir: &Path,
    out: Option<PathBuf>,
    seed: Option<u64>,
    overrides: &privopt_fl::methods::SuiteOverrides,
    quiet: bool,
) -> Result<()> {
    let mut cfg = with_seed(configs::reproduction(id)?, seed);
    cfg.method.apply_overrides(overrides)?;
    let (outcome, dir) = run_and_write(&cfg, data_dir, out, quiet)?;
    print_summary(&outcome, &dir);
    Ok(())
}

/// Human-readable byte count.
fn bytes(b: f64) -> String {
    match b {
        b if b >= 1e6 => format!("{:.2} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.1} kB", b / 1e3),
        b => format!("{b:.0} B"),
    }
}

/// The one-line summary quickstart prints for a method.
fn summary_line(cfg: &ExperimentConfig, o: &RunOutcome) -> String {
    let s = &o.summary;
    let get = |k: &str| s.get(k).copied().unwrap_or(f64::NAN);
    let acc = s
        .get("final_test_accuracy")
        .map(|a| format!("test acc {:.2}%", 100.0 * a))
        .unwrap_or_else(|| "test acc   n/a ".into());
    format!(
        "{:<8} {:<20} {:<5} {}  test loss {:.4}  up {:>9}  down {:>9}  {:>6.2} s",
        cfg.method.name(),
        cfg.data.dataset,
        get("rounds"),
        acc,
        get("final_test_loss"),
        bytes(get("bytes_up_total")),
        bytes(get("bytes_down_total")),
        get("wall_time_s"),
    )
}

/// `privopt quickstart`: every quickstart config, one line each.
pub fn quickstart(data_dir: &Path, out: Option<PathBuf>, quiet: bool) -> Result<()> {
    let root = out.unwrap_or_else(|| {
        fresh_dir(PathBuf::from("results").join(format!("quickstart-{}", timestamp())))
    });
    println!(
        "{:<8} {:<20} {:<5} final metrics, traffic, time",
        "method", "data", "steps"
    );
    for cfg in configs::quickstart()? {
        let (outcome, _) = run_and_write(&cfg, data_dir, Some(root.join(&cfg.name)), quiet)?;
        println!("{}", summary_line(&cfg, &outcome));
    }
    println!("results written to {}", root.display());
    Ok(())
}
