//! In-process simulations of privopt's methods and baselines.
//!
//! Each module of [`methods`] is one method: a config struct implementing [`methods::Method`]
//! and a driver that plays every party of the method inside one process, through the roles
//! of `privopt-protocols`, deterministic from the run's seed. A driver runs against a
//! [`context::RunContext`]: the problem (`privopt_data::problem`), seeded random streams, progress, and
//! the sinks for metrics and communication.
//!
//! Configs, the runner, the papers' reproduction suites and result files live one crate up,
//! in `privopt-experiments`; nothing here reads TOML, writes files or draws plots.

pub mod context;
pub mod error;
pub mod methods;
pub mod metrics;

pub use error::{Result, SimError};
