//! privopt's experiments: configs, the runner, the papers' reproduction suites and the result
//! folders.
//!
//! An experiment is a TOML file ([`config::ExperimentConfig`]) with either a `[method]` table
//! (one run of a method of `privopt-sim`) or a `[suite]` table (a paper's reproduction, which
//! runs many), plus `[data]`/`[model]` when the method or suite trains on them. The runner
//! ([`runner`]) builds the problem, runs the method or suite with a seeded
//! `privopt_sim::context::RunContext`, and [`results`] writes the run's folder:
//! `config.toml`, `metrics.csv`, `summary.json` and PNG plots.

pub mod config;
pub mod error;
mod flat;
mod plot;
pub mod results;
pub mod runner;
pub mod suites;

pub use error::{ExperimentError, Result};
