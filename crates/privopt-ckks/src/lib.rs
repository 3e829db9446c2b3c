//! CKKS for privopt: parameters checked against the homomorphic-encryption standard,
//! coefficient and slot encodings, and multi-key CKKS (xMK-CKKS) in [`multiparty`].
//!
//! The arithmetic lives in `privopt-math`; this crate adds the scheme. [`eval`] is the
//! leveled single-key engine (products, rescaling, hybrid key switching, rotations,
//! polynomial evaluation, and bootstrapping in [`eval::bootstrap`]).

#[cfg(feature = "testing")]
pub mod bench_support;
pub mod encoding;
pub mod error;
pub mod eval;
pub mod multiparty;
pub mod params;
pub mod wire;

pub use error::CkksError;
pub use params::{CkksParams, CkksParamsBuilder, SecretDistribution};
