//! Wireless channels for over-the-air (OTA) aggregation.
//!
//! - [`fading`]: block-fading gains `h_{i,k}`, constant within a round and independent
//!   across rounds and devices — Gaussian `N(μ, σ²)` or Rician amplitude — and AWGN.
//! - [`dyadic`]: the dyadic grid `2^-F` on which gains and noise are placed so that
//!   superpositions of ring elements are exact, and ring values with a power-of-two
//!   denominator.
//! - [`ota`]: superposition `Σ h_i x_i + w` of ring elements in two arithmetic models:
//!   *exact* over `Z[X]/(X^n+1)` (wide RNS, no reduction mod q anywhere) and *modular*
//!   (devices send residues mod q, the server rounds the real sum and reduces mod q).

pub mod dyadic;
pub mod fading;
pub mod ota;

/// Errors of the channel layer.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum ChannelError {
    /// Invalid channel parameters.
    #[error("invalid channel: {0}")]
    Invalid(String),
    /// A value too large for the grid or the exact basis.
    #[error("out of range: {0}")]
    OutOfRange(String),
    /// Arithmetic-layer failure.
    #[error(transparent)]
    Math(#[from] privopt_math::MathError),
}
