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

pub use client::{Release, quantizer, release, release_many};
pub use messages::{BasisAssembler, BasisChunk, RoundBroadcast, basis_chunks, basis_wire_bytes};
pub use server::{DomeServer, ServerSettings};
pub use sketch::{Basis, Sketch, SketchKind};
