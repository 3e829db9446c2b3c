//! DOME (the DOME paper, Alg. 1): DP federated Adam on a learned low-rank sketch, summed with
//! SecAgg+. Each round the [`DomeServer`] opens the round ([`RoundBroadcast`], and the sketch
//! as [`BasisChunk`]s); each participant [`release`]s its privatized, quantized sketch through
//! a SecAgg+ client ([`privopt_secagg::Client`], messages encoded by [`crate::secagg`]); the
//! server closes the round with the SecAgg+ sum: decompression, debiased Adam, sketch update
//! (Alg. 2, [`Sketch`]).

mod client;
mod messages;
mod server;
mod sketch;

/// DOME's defaults, the one source for the simulation's config, the Python binding and the
/// Flower app (which checks its own `dome.*` defaults against them).
pub mod defaults {
    /// Adam step size η of the server (Adam's customary 1e-3).
    pub const LR: f64 = 1e-3;
    /// Adam β1.
    pub const BETA1: f64 = 0.9;
    /// Adam β2.
    pub const BETA2: f64 = 0.999;
    /// Floor γ′ of the debiased second moment.
    pub const GAMMA_PRIME: f64 = 1e-6;
    /// Energy a learned sketch keeps.
    pub const ENERGY: f64 = 0.9;
    /// δ of client-level (ε, δ)-DP.
    pub const DELTA: f64 = 1e-5;
    /// Expected fraction of dropouts SecAgg+'s graph is sized for.
    pub const DROPOUT_RATE: f64 = 0.1;
    /// Fraction of clients that may collude with the server, for SecAgg+'s graph.
    pub const CORRUPT_RATE: f64 = 0.05;
}

pub use client::{Release, check_broadcast, quantizer, release, release_many};
pub use messages::{BasisAssembler, BasisChunk, RoundBroadcast, basis_chunks, basis_wire_bytes};
pub use server::{DomeServer, ServerSettings};
pub use sketch::{Basis, Sketch, SketchKind};
