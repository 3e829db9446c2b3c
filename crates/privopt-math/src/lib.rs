//! Arithmetic foundations of privopt.
//!
//! For now this crate holds the project's one source of reproducible randomness,
//! [`prg`]: every random stream in an experiment (data split, client sampling,
//! perturbations, DP noise, channel, test randomness) is derived from one master seed
//! by a domain-separated key, so a rerun with the same seed is bit-for-bit identical.

pub mod prg;

pub use prg::{SeedTree, StreamRng};
