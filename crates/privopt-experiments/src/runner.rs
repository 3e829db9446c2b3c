//! Runs an experiment: builds the problem, hands the method a [`RunContext`], and collects
//! metrics, communication and a summary.

use std::path::PathBuf;
use std::time::Instant;

use privopt_math::SeedTree;
use privopt_sim::context::{Progress, RunContext};
use privopt_sim::methods::Report;
use privopt_sim::metrics::{MetricsTable, Summary};
use privopt_sim::problem::Problem;

use crate::config::ExperimentConfig;
use crate::error::{Error, Result};
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
    let (params, report) = match (&cfg.method, &cfg.suite) {
        (Some(method), _) => {
            let trained = method.run(&mut ctx)?;
            (trained.params, Some(Outcome::Method(trained.report)))
        }
        (None, Some(suite)) => (
            Vec::new(),
            Some(Outcome::Suite(Box::new(suite.run(&mut ctx)?))),
        ),
        (None, None) => return Err(Error::Config(cfg.job_name() + " has nothing to run")),
    };
    let (metrics, comm, notes) = ctx.into_records();
    if metrics.is_empty() {
        return Err(Error::Config(format!(
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
    summary.extend(notes);
    match &report {
        Some(Outcome::Method(r)) => {
            let value = serde_json::to_value(r)
                .map_err(|e| Error::Config(format!("cannot serialize the run's report: {e}")))?;
            flatten_into(&mut summary, "", &value);
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

/// Adds every number of `value` to `summary`, a nested field `a: { b }` under the key `a_b`.
fn flatten_into(summary: &mut Summary, prefix: &str, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                summary.insert(prefix.to_owned(), x);
            }
        }
        Value::Object(fields) => {
            for (k, v) in fields {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}_{k}")
                };
                flatten_into(summary, &key, v);
            }
        }
        // serde_json turns a non-finite float into null (absent options are skipped, not
        // null), so a null field is a number that is not finite; `Report::Plain` is a bare null.
        Value::Null if !prefix.is_empty() => {
            summary.insert(prefix.to_owned(), f64::NAN);
        }
        Value::Null | Value::Bool(_) | Value::String(_) | Value::Array(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_reports_flatten_to_underscored_keys_and_keep_non_finite_numbers() {
        let value = serde_json::json!({
            "a": 1.5,
            "b": { "c": 2, "d": { "e": -3.0 } },
            "nan": null,
        });
        let mut s = Summary::new();
        flatten_into(&mut s, "", &value);
        assert_eq!(s.len(), 4, "{s:?}");
        assert_eq!((s["a"], s["b_c"], s["b_d_e"]), (1.5, 2.0, -3.0));
        assert!(s["nan"].is_nan());
        // `Report::Plain` serializes as a bare null and adds nothing.
        let mut s = Summary::new();
        flatten_into(&mut s, "", &serde_json::to_value(Report::Plain).unwrap());
        assert!(s.is_empty());
    }
}
