//! The crate's error type.

/// What can go wrong while planning or running a fit.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DpfheError {
    /// A setting or the data is out of range; the message names the key.
    #[error("{0}")]
    Config(String),
    /// What was asked for has no solution (no certified barrier, no parameter set that fits);
    /// the message says what was tried.
    #[error("{0}")]
    Infeasible(String),
    /// The caller asked the fit to stop ([`privopt_math::progress::Progress::should_stop`]).
    #[error("interrupted")]
    Interrupted,
    /// Data or model failure.
    #[error(transparent)]
    Ml(#[from] privopt_ml::MlError),
    /// A privacy-accounting failure.
    #[error(transparent)]
    Dp(#[from] privopt_dp::DpError),
    /// A polynomial-approximation failure.
    #[error(transparent)]
    Approx(#[from] privopt_approx::ApproxError),
    /// A role refused an input or a call, or its cryptography failed.
    #[error(transparent)]
    Roles(#[from] privopt_protocols::ProtocolError),
}

/// Crypto errors reach the fit through the roles' error type, as they do in a deployment.
macro_rules! via_protocols {
    ($($t:ty),*) => {$(
        impl From<$t> for DpfheError {
            fn from(e: $t) -> Self {
                DpfheError::Roles(e.into())
            }
        }
    )*};
}
via_protocols!(privopt_protocols::DecodeError, privopt_ckks::CkksError);

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, DpfheError>;

/// `key` (a thread count) in `1..=MAX_THREADS`.
pub fn ensure_threads(key: &str, threads: usize) -> Result<()> {
    privopt_math::limits::count(key, threads as u64, privopt_math::MAX_THREADS as u64)
        .map_err(DpfheError::Config)
}

/// Returns `Err(DpfheError::Config(..))` unless `cond` holds.
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(DpfheError::Config(msg()))
    }
}
