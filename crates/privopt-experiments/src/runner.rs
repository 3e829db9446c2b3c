//! Runs an experiment: builds the problem, hands the method a [`RunContext`], and collects
//! metrics, communication and a summary.

use std::path::PathBuf;
use std::time::Instant;

use privopt_data::problem::Problem;
use privopt_math::SeedTree;
use privopt_sim::context::{Progress, RunContext};
use privopt_sim::methods::Report;
use privopt_sim::metrics::{MetricsTable, Summary};

use crate::config::{ExperimentConfig, Job};
use crate::error::{ExperimentError, Result};
use crate::flat::write_flat;
use crate::suites::SuiteReport;

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
    /// Final model parameters (empty for a suite, which trains many).
    pub params: Vec<f64>,
    /// The method's or suite's typed report; its numbers are also in `summary`.
    pub report: Option<Outcome>,
}

/// A method's or a suite's typed report.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// One run of a method.
    Method(Report),
    /// A reproduction suite.
    Suite(Box<SuiteReport>),
}

/// Runs `cfg` to completion.
pub fn run(
    cfg: &ExperimentConfig,
    opts: &RunOptions,
    progress: &dyn Progress,
) -> Result<RunOutcome> {
    let started = Instant::now();
    let seeds = SeedTree::new(cfg.seed);
    let problem = match (&cfg.data, &cfg.model) {
        (Some(data), Some(model)) if cfg.uses_data() => {
            let p = Problem::build(data, model, &opts.data_dir, &seeds)?;
            tracing::info!(
                name = %cfg.name,
                n_train = p.train.len(),
                n_test = p.test.len(),
                features = p.train.n_features(),
                clients = p.clients.len(),
                "problem built"
            );
            Some(p)
        }
        _ => None,
    };
    let mut ctx = RunContext::new(problem.as_ref(), seeds, progress);
    ctx.data_dir = opts.data_dir.clone();
    let (params, report) = match &cfg.job {
        Job::Method(method) => {
            let trained = method.run(&mut ctx)?;
            (trained.params, Some(Outcome::Method(trained.report)))
        }
        Job::Suite(suite) => (
            Vec::new(),
            Some(Outcome::Suite(Box::new(suite.run(&mut ctx)?))),
        ),
    };
    let (metrics, comm) = ctx.into_records();
    if metrics.is_empty() {
        return Err(ExperimentError::Config(format!(
            "{} recorded no metrics",
            cfg.job_name()
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
    if let Some(problem) = &problem {
        summary.insert("n_train".into(), problem.train.len() as f64);
        summary.insert("n_test".into(), problem.test.len() as f64);
        summary.insert("n_features".into(), problem.train.n_features() as f64);
        summary.insert("n_params".into(), problem.model.num_params() as f64);
        summary.insert("clients".into(), problem.clients.len() as f64);
    }
    summary.insert("seed".into(), cfg.seed as f64);
    match &report {
        Some(Outcome::Method(r)) => {
            write_flat(&mut summary, "", r);
        }
        Some(Outcome::Suite(r)) => r.write_summary(&mut summary),
        None => {}
    }
    summary.insert("wall_time_s".into(), started.elapsed().as_secs_f64());
    Ok(RunOutcome {
        metrics,
        summary,
        params,
        report,
    })
}
