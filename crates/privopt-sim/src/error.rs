//! The crate's error type.

/// What can go wrong while setting up or running a method.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config file is malformed or a value is out of range; the message names the key.
    #[error("{0}")]
    Config(String),
    /// Data or model failure.
    #[error(transparent)]
    Ml(#[from] privopt_ml::Error),
    /// A privacy-accounting failure.
    #[error(transparent)]
    Dp(#[from] privopt_dp::DpError),
    /// A polynomial-approximation failure.
    #[error(transparent)]
    Approx(#[from] privopt_approx::ApproxError),
    /// A protocol role refused an input or a call.
    #[error(transparent)]
    Roles(privopt_protocols::Error),
    /// A protocol round failed (missing transmission, out-of-range value, crypto error).
    #[error("protocol: {0}")]
    Protocol(String),
    /// The run diverged (a non-finite loss).
    #[error("run diverged at round {round}: {what} is not finite (lower the learning rate?)")]
    Diverged {
        /// Round at which it was detected.
        round: u64,
        /// The quantity that became non-finite.
        what: String,
    },
}

impl From<privopt_protocols::Error> for Error {
    fn from(e: privopt_protocols::Error) -> Self {
        match e {
            // One divergence error, whichever layer noticed.
            privopt_protocols::Error::Diverged { round, what } => Error::Diverged { round, what },
            e => Error::Roles(e),
        }
    }
}

impl From<privopt_protocols::DecodeError> for Error {
    fn from(e: privopt_protocols::DecodeError) -> Self {
        Error::Roles(e.into())
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Returns `Err(Error::Config(..))` unless `cond` holds.
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(Error::Config(msg()))
    }
}
