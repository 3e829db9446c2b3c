//! What can go wrong in a protocol role.

use crate::wire::DecodeError;

/// Why a role refused an input or a call. A refused input changes no state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// Parameters that cannot work (the message names the parameter).
    #[error("invalid parameters: {0}")]
    Parameters(String),
    /// Bytes that are not a well-formed message.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A peer sent a well-formed message the protocol forbids at this point (another round,
    /// a duplicate, the wrong size, a party that is not in the round). Drop it, and consider
    /// excluding the peer.
    #[error("{peer} misbehaved: {detail}")]
    PeerMisbehaved {
        /// Who.
        peer: Peer,
        /// What kind of misbehaviour, for a caller that treats them apart (a late message is
        /// dropped, a malformed one excludes the sender).
        kind: Misbehavior,
        /// What it did, with the numbers involved.
        detail: String,
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
    SecAgg(#[from] privopt_secagg::SecAggError),
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

/// What a peer did wrong, by kind; [`ProtocolError::PeerMisbehaved`] carries the details.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Misbehavior {
    /// A message of another round, step, iteration or session: late, replayed, or of another
    /// run.
    WrongRound,
    /// A message from, or a request about, a party that is not in the round (not a member,
    /// not a neighbour, left out of the plan).
    NotParticipant,
    /// A message meant for another party.
    Misaddressed,
    /// A second message where the protocol allows only one (a second reply, a second
    /// decryption share).
    Duplicate,
    /// A message of the wrong shape: count, dimension, key or layout.
    Malformed,
    /// A value outside the bound the protocol sets for it.
    OutOfBounds,
    /// An answer to a question nobody asked.
    Unsolicited,
    /// A request the protocol forbids, such as a decryption share for a ciphertext the party
    /// did not help make.
    Forbidden,
    /// A message that fails its authentication, or contradicts what the peer told another
    /// party.
    Tampered,
}

impl Misbehavior {
    /// The kind's name in snake case (`"wrong_round"`, …), as the Python bindings report it.
    pub fn name(self) -> &'static str {
        match self {
            Misbehavior::WrongRound => "wrong_round",
            Misbehavior::NotParticipant => "not_participant",
            Misbehavior::Misaddressed => "misaddressed",
            Misbehavior::Duplicate => "duplicate",
            Misbehavior::Malformed => "malformed",
            Misbehavior::OutOfBounds => "out_of_bounds",
            Misbehavior::Unsolicited => "unsolicited",
            Misbehavior::Forbidden => "forbidden",
            Misbehavior::Tampered => "tampered",
        }
    }
}

/// `ProtocolError::PeerMisbehaved` by `peer`.
pub(crate) fn misbehaved(
    peer: Peer,
    kind: Misbehavior,
    detail: impl Into<String>,
) -> ProtocolError {
    ProtocolError::PeerMisbehaved {
        peer,
        kind,
        detail: detail.into(),
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, ProtocolError>;

/// `Err(ProtocolError::Parameters(msg()))` unless `cond` holds.
pub(crate) fn check_param(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(ProtocolError::Parameters(msg()))
    }
}
