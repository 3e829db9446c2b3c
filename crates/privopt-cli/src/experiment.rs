//! `run`, `reproduce` and `quickstart`: run configs and write their result folders.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use privopt_experiments::config::ExperimentConfig;
use privopt_experiments::results::{StagedDir, default_out_dir, write_results};
use privopt_experiments::runner::{Outcome, RunOptions, RunOutcome, run};

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

/// Where a run's results go.
#[derive(clap::Args, Debug)]
pub struct OutArgs {
    /// Results folder (default: results/<name>-<timestamp>). It must not exist or be empty,
    /// unless --force.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write into an existing, non-empty --out folder (files of the same name are replaced).
    #[arg(long)]
    force: bool,
}

/// Runs `cfg` and writes its results to `dir`; returns both. The folder is checked and
/// made before the run, and the files move into it only once all are written.
fn run_and_write(
    cfg: &ExperimentConfig,
    data_dir: &Path,
    dir: &Path,
    force: bool,
    quiet: bool,
) -> Result<(RunOutcome, PathBuf)> {
    let staged = StagedDir::create(dir, force)?;
    let opts = RunOptions {
        data_dir: data_dir.to_owned(),
    };
    let bar = Bar::new(quiet);
    let outcome = run(cfg, &opts, &bar).with_context(|| format!("running `{}`", cfg.name))?;
    write_results(staged.path(), cfg, &outcome)?;
    Ok((outcome, staged.commit()?))
}

/// `--out`, or the default folder of a run named `name`.
fn out_dir(out: &OutArgs, name: &str) -> PathBuf {
    out.out
        .clone()
        .unwrap_or_else(|| fresh_dir(default_out_dir(name, &timestamp())))
}

fn print_summary(outcome: &RunOutcome, dir: &Path) -> Result<()> {
    for (k, v) in &outcome.summary {
        outln!("{k:>24} = {v}")?;
    }
    outln!("results written to {}", dir.display())?;
    Ok(())
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
    out: &OutArgs,
    seed: Option<u64>,
    quiet: bool,
) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let cfg = with_seed(
        ExperimentConfig::from_toml(&text, &path.display().to_string())?,
        seed,
    );
    let dir = out_dir(out, &cfg.name);
    let (outcome, dir) = run_and_write(&cfg, data_dir, &dir, out.force, quiet)?;
    print_summary(&outcome, &dir)?;
    Ok(())
}

/// `privopt plot DIR`: redraws DIR's plots from its `metrics.csv`, titled with the run name
/// in its `config.toml`.
pub fn replot(dir: &Path) -> Result<()> {
    let read = |name: &str| {
        let p = dir.join(name);
        std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))
    };
    let config_path = dir.join("config.toml");
    let cfg =
        ExperimentConfig::from_toml(&read("config.toml")?, &config_path.display().to_string())?;
    let metrics = privopt_sim::metrics::MetricsTable::from_csv(&read("metrics.csv")?)
        .with_context(|| format!("in {}", dir.display()))?;
    for p in privopt_experiments::results::write_plots(dir, &cfg.name, &metrics)? {
        outln!("{}", p.display())?;
    }
    Ok(())
}

/// `privopt reproduce ID`.
pub fn reproduce(
    id: &str,
    data_dir: &Path,
    out: &OutArgs,
    seed: Option<u64>,
    overrides: &privopt_experiments::suites::SuiteOverrides,
    quiet: bool,
) -> Result<()> {
    let mut cfg = with_seed(configs::reproduction(id)?, seed);
    cfg.apply_overrides(overrides)?;
    let dir = out_dir(out, &cfg.name);
    let (outcome, dir) = run_and_write(&cfg, data_dir, &dir, out.force, quiet)?;
    print_summary(&outcome, &dir)?;
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

/// The headline result of a run and its traffic, as quickstart prints them: what the
/// method's own summary says best (accuracy, error, the encrypted-vs-plain agreement).
fn headline(cfg: &ExperimentConfig, o: &RunOutcome) -> (String, String) {
    use privopt_experiments::suites::SuiteConfig;
    use privopt_sim::methods::Report;
    let s = &o.summary;
    let get = |k: &str| s.get(k).copied().unwrap_or(f64::NAN);
    let pct = |k: &str| format!("{:.1}%", 100.0 * get(k));
    let suite = match &cfg.job {
        privopt_experiments::config::Job::Suite(s) => Some(s),
        privopt_experiments::config::Job::Method(_) => None,
    };
    match (&o.report, suite) {
        (Some(Outcome::Method(Report::Pdsgd(r))), _) => {
            let real = r
                .paillier
                .map(|p| format!(", {:.2} s/iter encrypted", p.seconds_per_iteration))
                .unwrap_or_default();
            (
                format!("final MSE {:.2e}{real}", r.final_mse.proposed),
                format!("{}/iter", bytes(r.ciphertext_bytes_per_iteration as f64)),
            )
        }
        (_, Some(SuiteConfig::Dpfhe(_))) => (
            format!(
                "acc enc {} vs plain {} (|Δw| {:.0e})",
                pct("acc_encrypted"),
                pct("acc_plain"),
                get("max_abs_diff_vs_plain")
            ),
            format!("{:.2} s/step", get("sec_per_iter_alg5")),
        ),
        (Some(Outcome::Method(Report::Dome(r))), _) => (
            format!(
                "test acc {:.1}%, RDP ε {:.2}",
                100.0 * r.final_acc_full_test,
                r.privacy.map_or(f64::INFINITY, |p| p.epsilon_rdp)
            ),
            format!("{}/client-round", bytes(r.uplink_bytes_per_client_round)),
        ),
        _ => (
            format!(
                "test acc {}, loss {:.3}",
                pct("final_test_accuracy"),
                get("final_test_loss")
            ),
            format!("{} up", bytes(get("bytes_up_total"))),
        ),
    }
}

/// `privopt quickstart`: every quickstart config, one aligned line each.
pub fn quickstart(data_dir: &Path, out: &OutArgs, quiet: bool) -> Result<()> {
    let root = out_dir(out, "quickstart");
    // The root is checked (and kept) before the first run; each run's folder inside it
    // appears when that run's files are complete.
    StagedDir::create(&root, out.force)?.commit()?;
    let configs = configs::quickstart()?;
    // Names and mechanisms are known before anything runs, so the columns can be sized now
    // and each line printed as its run finishes.
    let privacy: Vec<String> = configs.iter().map(ExperimentConfig::privacy).collect();
    let name_w = configs
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0);
    let privacy_w = privacy.iter().map(|p| p.chars().count()).max().unwrap_or(0);
    let line = |name: &str, mech: &str, result: &str, traffic: &str, time: &str| {
        format!("{name:<name_w$}  {mech:<privacy_w$}  {result:<46}  {traffic:>18}  {time:>7}")
    };
    outln!("{}", line("method", "privacy", "result", "traffic", "time"))?;
    let start = std::time::Instant::now();
    for (cfg, mech) in configs.iter().zip(&privacy) {
        let (outcome, _) = run_and_write(cfg, data_dir, &root.join(&cfg.name), true, quiet)?;
        let (result, traffic) = headline(cfg, &outcome);
        let secs = outcome
            .summary
            .get("wall_time_s")
            .copied()
            .unwrap_or(f64::NAN);
        outln!(
            "{}",
            line(&cfg.name, mech, &result, &traffic, &format!("{secs:.1} s"))
        )?;
    }
    outln!(
        "{} runs in {:.0} s; results written to {}",
        configs.len(),
        start.elapsed().as_secs_f64(),
        root.display()
    )?;
    Ok(())
}
