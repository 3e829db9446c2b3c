//! The functions privopt approximates, and one entry point that picks the method.

use serde::{Deserialize, Serialize};

use crate::ApproxError;
use crate::chebyshev::{ChebPoly, Interval, interpolate};
use crate::least_squares::least_squares;
use crate::remez::{RemezOptions, remez};

/// How a polynomial is fitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Interpolation at Chebyshev points.
    Chebyshev,
    /// Continuous least squares.
    LeastSquares,
    /// Minimax (Remez).
    Minimax,
}

impl Method {
    /// Short label used in result keys (`cheb`, `ls`, `mm`).
    pub fn label(&self) -> &'static str {
        match self {
            Method::Chebyshev => "cheb",
            Method::LeastSquares => "ls",
            Method::Minimax => "mm",
        }
    }
}

/// Fits `f` on `interval` with `method`.
pub fn approximate(
    f: impl Fn(f64) -> f64,
    interval: Interval,
    degree: usize,
    method: Method,
) -> Result<ChebPoly, ApproxError> {
    match method {
        Method::Chebyshev => interpolate(f, interval, degree),
        Method::LeastSquares => least_squares(f, interval, degree),
        Method::Minimax => remez(f, interval, degree, RemezOptions::default()).map(|m| m.poly),
    }
}

/// The logistic sigmoid 1/(1 + e^{−z}), computed without overflow.
pub fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// sup |sigmoid′| = 1/4.
pub const SIGMOID_LIPSCHITZ: f64 = 0.25;

/// 1/x.
pub fn reciprocal(x: f64) -> f64 {
    1.0 / x
}

/// sup |(1/x)′| on [lo, hi] with lo > 0.
pub fn reciprocal_lipschitz(interval: Interval) -> f64 {
    1.0 / (interval.lo * interval.lo)
}
