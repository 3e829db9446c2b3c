//! Runs an experiment: builds the problem, hands the method a [`RunContext`], and collects
//! metrics, communication and a summary.

use std::path::PathBuf;
use std::time::Instant;

use privopt_math::SeedTree;

use crate::config::ExperimentConfig;
use crate::context::{Progress, RunContext};
use crate::error::{Error, Result};
use crate::metrics::{MetricsTable, Summary};
use crate::problem::Problem;

/// Machine-specific options of a run (not part of the experiment's config).
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Where catalog datasets were fetched to.
    pub data_dir: PathBuf,
}

/// Everything a finished run produced.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// One row per evaluation.
    pub metrics: MetricsTable,
    /// Final metrics, totals and timing.
    pub summary: Summary,
    /// Final model parameters.
    pub params: Vec<f64>,
}

/// Runs `cfg` to completion.
pub fn run(
    cfg: &ExperimentConfig,
    opts: &RunOptions,
    progress: &dyn Progress,
) -> Result<RunOutcome> {
    let started = Instant::now();
    let seeds = SeedTree::new(cfg.seed);
    let problem = Problem::build(&cfg.data, &cfg.model, &opts.data_dir, &seeds)?;
    tracing::info!(
        name = %cfg.name,
        n_train = problem.train.len(),
        n_test = problem.test.len(),
        features = problem.train.n_features(),
        clients = problem.clients.len(),
        "problem built"
    );
    let mut ctx = RunContext::new(&problem, seeds, progress);
    ctx.data_dir = opts.data_dir.clone();
    let params = cfg.method.run(&mut ctx)?;
    let (metrics, comm, notes) = ctx.into_records();
    if metrics.is_empty() {
        return Err(Error::Config(format!(
            "method `{}` recorded no metrics",
            cfg.method.name()
        )));
    }
    let mut summary = Summary::new();
    for (k, v) in metrics.last() {
        if k != "round" && k != "bytes_up" && k != "bytes_down" {
            summary.insert(format!("final_{k}"), v);
        }
    }
    let rounds = metrics
        .column("round")
        .and_then(|r| r.last().copied())
        .unwrap_or(0.0);
    summary.insert("rounds".into(), rounds);
    summary.insert("bytes_up_total".into(), comm.up_bytes as f64);
    summary.insert("bytes_down_total".into(), comm.down_bytes as f64);
    summary.insert("n_train".into(), problem.train.len() as f64);
    summary.insert("n_test".into(), problem.test.len() as f64);
    summary.insert("n_features".into(), problem.train.n_features() as f64);
    summary.insert("n_params".into(), problem.model.num_params() as f64);
    summary.insert("clients".into(), problem.clients.len() as f64);
    summary.insert("seed".into(), cfg.seed as f64);
    summary.extend(notes);
    summary.insert("wall_time_s".into(), started.elapsed().as_secs_f64());
    Ok(RunOutcome {
        metrics,
        summary,
        params,
    })
}
