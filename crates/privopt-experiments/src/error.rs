//! The crate's error type.

use std::path::PathBuf;

/// What can go wrong while configuring, running or recording an experiment.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExperimentError {
    /// The config file is malformed or a value is out of range; the message names the key.
    #[error("{0}")]
    Config(String),
    /// The method or suite failed (bad parameters, divergence, a protocol or crypto error).
    #[error(transparent)]
    Run(#[from] privopt_sim::SimError),
    /// A result file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying failure.
        source: std::io::Error,
    },
    /// A plot could not be drawn.
    #[error("plotting {path}: {reason}")]
    Plot {
        /// The PNG being drawn.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, ExperimentError>;

/// Returns `Err(ExperimentError::Config(..))` unless `cond` holds.
pub(crate) fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(ExperimentError::Config(msg()))
    }
}

/// Data errors reach an experiment as the driver reports them (one `Config` for a bad
/// `[data]` value, whichever layer checked it).
impl From<privopt_data::DataError> for ExperimentError {
    fn from(e: privopt_data::DataError) -> Self {
        ExperimentError::Run(e.into())
    }
}
