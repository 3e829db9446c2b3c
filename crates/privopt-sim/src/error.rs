//! The crate's error type.

/// What can go wrong while setting up or running a method.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The config file is malformed or a value is out of range; the message names the key.
    #[error("{0}")]
    Config(String),
    /// Data or model failure.
    #[error(transparent)]
    Ml(#[from] privopt_ml::MlError),
    /// A dataset could not be loaded, or the `[data]` table is out of range.
    #[error(transparent)]
    Data(privopt_data::DataError),
    /// A privacy-accounting failure.
    #[error(transparent)]
    Dp(#[from] privopt_dp::DpError),
    /// A polynomial-approximation failure.
    #[error(transparent)]
    Approx(#[from] privopt_approx::ApproxError),
    /// A protocol role refused an input or a call, or its cryptography failed.
    #[error(transparent)]
    Roles(privopt_protocols::ProtocolError),
    /// A simulated quantity left the range the run's parameters were sized for (e.g. a fading
    /// gain above the bound the exact ring assumes).
    #[error("{what} = {value} exceeds the proven bound {bound}")]
    OutOfBounds {
        /// The quantity.
        what: &'static str,
        /// Its value.
        value: f64,
        /// The bound.
        bound: f64,
    },
    /// Two runs that must agree bit for bit did not (e.g. real Paillier against the
    /// transparent backend): a bug, never a property of the input.
    #[error("{0}")]
    Mismatch(&'static str),
    /// What was asked for has no solution (no certified parameter set, every learning rate of
    /// a sweep diverged); the message says what was tried.
    #[error("{0}")]
    Infeasible(String),
    /// A metrics table or `metrics.csv` whose rows do not match its columns.
    #[error("{0}")]
    Metrics(String),
    /// A worker thread of [`crate::context::parallel_map`] panicked.
    #[error("a worker thread panicked")]
    WorkerPanicked,
    /// The caller asked the run to stop ([`crate::context::Progress::should_stop`]).
    #[error("interrupted")]
    Interrupted,
    /// The run diverged (a non-finite loss).
    #[error("run diverged at round {round}: {what} is not finite (lower the learning rate?)")]
    Diverged {
        /// Round at which it was detected.
        round: u64,
        /// The quantity that became non-finite.
        what: String,
    },
}

impl From<privopt_data::DataError> for SimError {
    fn from(e: privopt_data::DataError) -> Self {
        match e {
            // One configuration error, whichever layer checked the value.
            privopt_data::DataError::Config(m) => SimError::Config(m),
            privopt_data::DataError::Ml(e) => SimError::Ml(e),
            e => SimError::Data(e),
        }
    }
}

impl From<privopt_dpfhe::DpfheError> for SimError {
    fn from(e: privopt_dpfhe::DpfheError) -> Self {
        use privopt_dpfhe::DpfheError as E;
        match e {
            E::Config(m) => SimError::Config(m),
            E::Infeasible(m) => SimError::Infeasible(m),
            E::Interrupted => SimError::Interrupted,
            E::Ml(e) => SimError::Ml(e),
            E::Dp(e) => SimError::Dp(e),
            E::Approx(e) => SimError::Approx(e),
            E::Roles(e) => e.into(),
            e => SimError::Config(e.to_string()),
        }
    }
}

/// A roles-layer parameter check of a `[method]` value as the config error naming its key.
pub(crate) fn method_param(e: privopt_protocols::ProtocolError) -> SimError {
    match e {
        privopt_protocols::ProtocolError::Parameters(m) => SimError::Config(format!("method.{m}")),
        e => e.into(),
    }
}

impl From<privopt_protocols::ProtocolError> for SimError {
    fn from(e: privopt_protocols::ProtocolError) -> Self {
        match e {
            // One divergence error, whichever layer noticed.
            privopt_protocols::ProtocolError::Diverged { round, what } => {
                SimError::Diverged { round, what }
            }
            e => SimError::Roles(e),
        }
    }
}

/// Crypto and channel errors reach a driver through the roles' error type, so that a
/// deployment and a simulation report them alike.
macro_rules! via_protocols {
    ($($t:ty),*) => {$(
        impl From<$t> for SimError {
            fn from(e: $t) -> Self {
                SimError::Roles(e.into())
            }
        }
    )*};
}
via_protocols!(
    privopt_protocols::DecodeError,
    privopt_ckks::CkksError,
    privopt_paillier::PaillierError,
    privopt_secagg::SecAggError,
    privopt_channel::ChannelError,
    privopt_math::MathError
);

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, SimError>;

pub use privopt_math::MAX_ELEMENTS;

/// Most steps, rounds or iterations a run may ask for (past this a run would go on for days;
/// `1e12` ran until killed).
pub const MAX_STEPS: u64 = 100_000_000;

/// Refuses a count outside `1..=max`, naming the key and the bound.
pub fn ensure_count(key: &str, value: u64, max: u64) -> Result<()> {
    privopt_math::limits::count(key, value, max).map_err(SimError::Config)
}

/// Refuses a product of sizes (the numbers of one array) above [`MAX_ELEMENTS`].
pub fn ensure_elements(what: &str, sizes: &[u64]) -> Result<()> {
    privopt_math::limits::elements(what, sizes).map_err(SimError::Config)
}

/// `key` (a thread count) in `1..=MAX_THREADS`.
pub fn ensure_threads(key: &str, threads: usize) -> Result<()> {
    ensure_count(key, threads as u64, privopt_math::MAX_THREADS as u64)
}

/// Returns `Err(SimError::Config(..))` unless `cond` holds.
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(SimError::Config(msg()))
    }
}
