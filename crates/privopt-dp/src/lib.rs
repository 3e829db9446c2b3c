//! Differential privacy for privopt: the Gaussian mechanism, per-example L2 clipping, and
//! accountants.
//!
//! - [`rdp`]: Rényi DP of the Gaussian mechanism, full-batch, Poisson-subsampled (exact
//!   log-moments at integer orders, numerical integration at fractional ones) and subsampled
//!   without replacement (Wang–Balle–Kasiviswanathan 2019), with classic and improved
//!   conversions to (ε, δ).
//! - [`zcdp`]: ρ-zCDP composition and conversion.
//! - [`exact`]: the exact (ε, δ) curve of the composed Gaussian without subsampling.
//! - [`GaussianRun`]: ε of a training run under a chosen accountant, and calibration of the
//!   smallest σ for a target (ε, δ).
//!
//! Noise multipliers are relative to the L2 sensitivity: the mechanism adds N(0, (σ·Δ)²).

pub mod accountant;
pub mod exact;
pub mod logmath;
pub mod mechanism;
pub mod rdp;
pub mod zcdp;

pub use accountant::{Accountant, GaussianRun};
pub use mechanism::{GaussianMechanism, clip_l2};
pub use rdp::{Conversion, EpsilonAt, RdpCurve, Sampling, default_orders};

/// Errors from the DP crate: every one names the parameter that is wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DpError {
    /// A parameter is out of its domain.
    #[error("{0}")]
    Invalid(String),
}
