//! What can go wrong in a protocol role.

use crate::wire::DecodeError;

/// Why a role refused an input or a call. A refused input changes no state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Parameters that cannot work (the message names the parameter).
    #[error("invalid parameters: {0}")]
    Parameters(String),
    /// Bytes that are not a well-formed message.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A peer sent a well-formed message the protocol forbids at this point (another round,
    /// a duplicate, the wrong size, a party that is not in the round). Drop it, and consider
    /// excluding the peer.
    #[error("{peer} misbehaved: {reason}")]
    PeerMisbehaved {
        /// Who.
        peer: Peer,
        /// What it did.
        reason: String,
    },
    /// The role was driven out of order by its own caller (a bug in the driver, not the peer).
    #[error("out of order: {0}")]
    OutOfOrder(String),
    /// Local training produced a non-finite value.
    #[error("diverged in round {round}: {what} is not finite (lower the learning rate?)")]
    Diverged {
        /// The round.
        round: u64,
        /// The quantity.
        what: String,
    },
    /// A round cannot complete: a party that must take part did not (dropped out). Nobody
    /// misbehaved; the round is abandoned or retried.
    #[error("incomplete round: {0}")]
    Incomplete(String),
    /// A Paillier failure.
    #[error(transparent)]
    Paillier(#[from] privopt_paillier::PaillierError),
    /// A CKKS failure (parameters, keys, shares, decoding).
    #[error(transparent)]
    Ckks(#[from] privopt_ckks::CkksError),
    /// A SecAgg+ failure (a refused message, a round below threshold).
    #[error("SecAgg+: {0}")]
    SecAgg(#[from] privopt_secagg::Error),
    /// A polynomial-approximation failure.
    #[error(transparent)]
    Approx(#[from] privopt_approx::ApproxError),
    /// An arithmetic or sampling failure.
    #[error(transparent)]
    Math(#[from] privopt_math::MathError),
    /// A channel-model failure (grid, exact ring bounds).
    #[error(transparent)]
    Channel(#[from] privopt_channel::ChannelError),
}

/// A party as its peers know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// The coordinating server.
    Server,
    /// The data owner (DP training under FHE).
    DataOwner,
    /// A client, device or agent, by its id in the protocol.
    Party(u64),
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Server => f.write_str("the server"),
            Peer::DataOwner => f.write_str("the data owner"),
            Peer::Party(id) => write!(f, "party {id}"),
        }
    }
}

/// `Error::PeerMisbehaved` by `peer`.
pub(crate) fn misbehaved(peer: Peer, reason: impl Into<String>) -> Error {
    Error::PeerMisbehaved {
        peer,
        reason: reason.into(),
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// `Err(Error::Parameters(msg()))` unless `cond` holds.
pub(crate) fn check_param(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(Error::Parameters(msg()))
    }
}
