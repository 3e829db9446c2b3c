//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong while building, loading or using data and models.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MlError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying failure.
        source: std::io::Error,
    },
    /// A file exists but its contents are not what its format requires.
    #[error("{path}: corrupt file: {reason}")]
    Corrupt {
        /// The offending file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An argument is out of its valid range or inconsistent with another.
    #[error("invalid argument: {0}")]
    Invalid(String),
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, MlError>;

impl MlError {
    /// An [`MlError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// An [`MlError::Corrupt`] for `path`.
    pub fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Returns `Err(MlError::Invalid(..))` unless `cond` holds.
pub(crate) fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(MlError::Invalid(msg()))
    }
}
