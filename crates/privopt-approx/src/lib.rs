//! Polynomial approximation on an interval, for running non-polynomial functions (sigmoid,
//! 1/x, √x) under CKKS.
//!
//! - [`chebyshev`]: polynomials as Chebyshev series on [a, b]; interpolation at Chebyshev points;
//!   conversion to the monomial basis.
//! - [`least_squares`]: the continuous L2-optimal polynomial (Legendre projection).
//! - [`remez`]: the minimax polynomial, with its equioscillation certificate.
//! - [`analysis`]: sup error (found and certified), L2 error, extreme values, smoothness
//!   β = m·max|p′|, monotonicity.
//! - [`plan`]: evaluation plans for ciphertexts and their multiplicative depth.
//! - [`functions`]: the targets privopt uses (sigmoid, 1/x) with their Lipschitz constants.

pub mod analysis;
pub mod chebyshev;
pub mod functions;
pub mod least_squares;
pub mod plan;
pub mod remez;

pub use analysis::{ErrorReport, error_report, max_abs_derivative};
pub use chebyshev::{ChebPoly, Interval, interpolate};
pub use least_squares::least_squares;
pub use plan::EvalPlan;
pub use remez::{Minimax, RemezOptions, remez};

/// Errors from approximation: bad intervals or degrees, or a Remez iteration that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApproxError {
    /// Invalid input or a numerical failure, described.
    #[error("{0}")]
    Invalid(String),
}
