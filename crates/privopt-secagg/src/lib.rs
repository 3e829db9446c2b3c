//! SecAgg+ secure aggregation (Bell et al., CCS 2020), with the original SecAgg (Bonawitz et
//! al., CCS 2017) as the complete-graph case.
//!
//! A server learns the sum, modulo 2^32, of vectors held by clients that survive a round, and
//! nothing else about them, while clients may drop out at any stage. The crate does no I/O:
//! [`Client`] and [`Server`] are state machines that take and return typed messages, so a
//! simulation and a networked deployment run the same code.
//!
//! A round has four stages ([`Stage`]):
//! 1. **Advertise keys.** Each client sends two fresh X25519 public keys.
//! 2. **Share keys.** Each client Shamir-shares its masking secret key and a fresh self-mask
//!    seed among its neighbours in the [`Graph`], encrypting each share with AES-GCM under a key
//!    agreed with the recipient.
//! 3. **Masked input.** Each client sends its input plus the expansion of its self-mask seed plus
//!    or minus one pairwise mask per neighbour that shared ([`mask`]).
//! 4. **Unmask.** For every neighbour, each surviving client reveals a share of the self-mask seed
//!    (neighbour survived) or of the masking key (neighbour dropped), never both. The server
//!    rebuilds what it needs and removes the masks.
//!
//! The graph degree and threshold come from [`find_parameters`] (2^−40 security, 2^−20 failure).
//! Float vectors enter through [`Quantizer`].
//!
//! Threat model: a semi-honest server that may collude with a fraction of clients. Integrity of
//! client↔server messages against a network attacker is the transport's job (TLS); shares, which
//! travel through the server, are authenticated end to end.

mod client;
pub mod graph;
mod keys;
pub mod mask;
pub mod messages;
pub mod params;
pub mod quantize;
mod server;
pub mod shamir;
#[cfg(feature = "simulation")]
pub mod simulation;

pub use client::{Client, ClientConfig, ClientSnapshot, UNMASK_LEDGER_CAPACITY, UnmaskLedger};
pub use graph::Graph;
pub use messages::*;
pub use params::{GraphParameters, ThreatModel, find_parameters, threshold_for_degree};
pub use quantize::{Quantizer, StochasticQuantizer};
pub use server::{Aggregate, Server, ServerConfig};

/// A client's index in the round's graph, `0..n`.
pub type ClientId = u32;

/// Why a message or a round was refused. A refused message changes no state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecAggError {
    /// Parameters that cannot work.
    #[error("invalid parameters: {0}")]
    Parameters(String),
    /// A message from another session.
    #[error("message from another session")]
    WrongSession,
    /// A message for another round (a replay or a straggler).
    #[error("message for round {got}, expected round {expected}")]
    WrongRound {
        /// The round this state machine runs.
        expected: u64,
        /// The round the message names.
        got: u64,
    },
    /// A message for a stage other than the current one.
    #[error("message for stage {got:?} while in stage {current:?}")]
    OutOfOrder {
        /// The current stage.
        current: Stage,
        /// The message's stage.
        got: Stage,
    },
    /// A second message from the same client in one stage.
    #[error("duplicate message from client {0}")]
    Duplicate(ClientId),
    /// A client that has no business sending this message (unknown, dropped earlier, or
    /// addressed to someone else).
    #[error("unexpected client {client}: {reason}")]
    UnexpectedClient {
        /// The client named by the message.
        client: ClientId,
        /// What is wrong.
        reason: String,
    },
    /// A share ciphertext that fails authentication (tampered, or from another round/pair).
    #[error("the shares from client {from} fail authentication")]
    Authentication {
        /// The claimed sender.
        from: ClientId,
    },
    /// A message whose content is malformed.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// Too few clients survive for the round to stay secure or recoverable; the round aborts.
    #[error(
        "round aborted at {stage:?}: client {client} has {live} live neighbours, threshold {threshold}"
    )]
    BelowThreshold {
        /// The stage at which it happened.
        stage: Stage,
        /// A client whose neighbourhood fell below the threshold.
        client: ClientId,
        /// Its live neighbours.
        live: usize,
        /// The threshold.
        threshold: usize,
    },
    /// Shares that do not reconstruct a consistent secret.
    #[error("reconstruction failed: {0}")]
    Reconstruction(String),
    /// The round aborted earlier; start a new one.
    #[error("the round has aborted")]
    Aborted,
    /// A second unmask request with another survivor list, to a client that answered one
    /// already (directly or through an earlier copy of its snapshot): answering would reveal
    /// both secrets of a neighbour.
    #[error("client {client} already answered the unmask stage for another survivor list")]
    Equivocation {
        /// The client asked.
        client: ClientId,
    },
    /// An unmask request listing fewer survivors than the client's input assumes (see
    /// [`UnmaskRequest::require_survivors`]).
    #[error(
        "client {client} will not unmask a sum of {survivors} inputs: its input assumes at least {floor}"
    )]
    TooFewSurvivors {
        /// The client asked.
        client: ClientId,
        /// The survivors the server listed.
        survivors: usize,
        /// The fewest the client accepts.
        floor: usize,
    },
}

/// Checks a message's session and round against the expected context.
pub(crate) fn check_context(expected: &Context, got: &Context) -> Result<(), SecAggError> {
    if expected.session != got.session {
        return Err(SecAggError::WrongSession);
    }
    if expected.round != got.round {
        return Err(SecAggError::WrongRound {
            expected: expected.round,
            got: got.round,
        });
    }
    Ok(())
}

/// The sign with which `me` adds its pairwise mask with `peer`: the lower id adds, the higher
/// subtracts, so the pair cancels in the sum.
pub(crate) fn pair_sign(me: ClientId, peer: ClientId) -> mask::Sign {
    if me < peer {
        mask::Sign::Plus
    } else {
        mask::Sign::Minus
    }
}
