//! privopt's methods, baselines and experiment runner.
//!
//! An experiment is a TOML file ([`config::ExperimentConfig`]): data, model, and one
//! `[method]` table whose `name` selects a module of [`methods`]. The runner builds the
//! problem ([`problem`]), runs the method with a [`context::RunContext`] that hands out seeded
//! random streams and records metrics and communication, and [`results`] writes the
//! run's folder: `config.toml`, `metrics.csv`, `summary.json` and PNG plots.
//!
//! Adding a method means one module under [`methods`], one variant of
//! [`methods::MethodConfig`], and one config file.

pub mod config;
pub mod context;
pub mod error;
pub mod methods;
pub mod metrics;
mod plot;
pub mod problem;
pub mod results;
pub mod runner;

pub use error::{Error, Result};
