//! The protocol's messages. Every message names its session, round and client, and each state
//! machine refuses messages that belong elsewhere.

use crate::shamir::Share;
use crate::{ClientId, SecAggError};

/// A random identifier of one aggregation session (one federation, one server instance).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionId(pub [u8; 16]);

/// Where a message belongs: a session and a training round within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Context {
    /// The session.
    pub session: SessionId,
    /// The round within the session.
    pub round: u64,
}

/// The four stages of a round, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Clients send their two public keys.
    AdvertiseKeys,
    /// Clients send encrypted Shamir shares for their neighbours.
    ShareKeys,
    /// Clients send their masked input vectors.
    MaskedInput,
    /// Clients reveal the shares the server needs to remove the masks.
    Unmask,
    /// The round has produced its sum.
    Done,
}

/// A client's public keys for one round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublicKeys {
    /// X25519 key whose agreements encrypt shares.
    pub encryption: [u8; 32],
    /// X25519 key whose agreements seed pairwise masks.
    pub masking: [u8; 32],
}

/// Stage 1, client → server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdvertiseKeys {
    /// Session and round.
    pub context: Context,
    /// The sending client.
    pub sender: ClientId,
    /// Its public keys.
    pub keys: PublicKeys,
}

/// Stage 1, server → client: the keys of the client's neighbours that advertised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighbourKeys {
    /// Session and round.
    pub context: Context,
    /// The receiving client.
    pub recipient: ClientId,
    /// `(neighbour, keys)` in increasing neighbour order.
    pub keys: Vec<(ClientId, PublicKeys)>,
}

/// An encrypted pair of shares (of the masking key and of the self-mask seed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncryptedShares {
    /// For outgoing shares the recipient, for incoming ones the sender.
    pub peer: ClientId,
    /// AES-GCM ciphertext with tag.
    pub ciphertext: Vec<u8>,
}

/// Stage 2, client → server: one encrypted share pair per live neighbour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareKeys {
    /// Session and round.
    pub context: Context,
    /// The sending client.
    pub sender: ClientId,
    /// Addressed to each neighbour (`peer` = recipient).
    pub shares: Vec<EncryptedShares>,
}

/// Stage 2, server → client: the share pairs addressed to this client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncomingShares {
    /// Session and round.
    pub context: Context,
    /// The receiving client.
    pub recipient: ClientId,
    /// From each neighbour that shared (`peer` = sender).
    pub shares: Vec<EncryptedShares>,
}

/// Stage 3, client → server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MaskedInput {
    /// Session and round.
    pub context: Context,
    /// The sending client.
    pub sender: ClientId,
    /// Input + self mask ± pairwise masks, modulo 2^32.
    pub masked: Vec<u32>,
}

/// Stage 3, server → client: which clients' masked inputs arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnmaskRequest {
    /// Session and round.
    pub context: Context,
    /// The receiving client.
    pub recipient: ClientId,
    /// Every client whose masked input the server holds, increasing.
    pub survivors: Vec<ClientId>,
}

/// Stage 4, client → server: for each neighbour that shared, exactly one share — of its
/// self-mask seed if it survived, of its masking key if it dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnmaskShares {
    /// Session and round.
    pub context: Context,
    /// The sending client.
    pub sender: ClientId,
    /// `(owner, share of owner's self-mask seed)` for surviving neighbours.
    pub self_seed_shares: Vec<(ClientId, Share)>,
    /// `(owner, share of owner's masking key)` for neighbours that dropped.
    pub mask_key_shares: Vec<(ClientId, Share)>,
}

/// Bytes of a fixed-width encoding: 24 (session + round) + 4 (client id) per header,
/// 4-byte length prefixes on lists, 8 bytes per field element.
const HEADER_BYTES: usize = 16 + 8 + 4;
const SHARE_BYTES: usize = 4 + 8 * crate::shamir::LIMBS;

impl AdvertiseKeys {
    /// Encoded size in bytes.
    pub fn wire_bytes(&self) -> usize {
        HEADER_BYTES + 64
    }
}

/// Encoded size of a list of encrypted share pairs: a 4-byte count, then per pair a peer id
/// and a length prefix (8 bytes) and the ciphertext.
fn shares_bytes(shares: &[EncryptedShares]) -> usize {
    4 + shares.iter().map(|s| 8 + s.ciphertext.len()).sum::<usize>()
}

impl ShareKeys {
    /// Encoded size in bytes.
    pub fn wire_bytes(&self) -> usize {
        HEADER_BYTES + shares_bytes(&self.shares)
    }
}

impl MaskedInput {
    /// Encoded size in bytes.
    pub fn wire_bytes(&self) -> usize {
        HEADER_BYTES + 4 + 4 * self.masked.len()
    }
}

impl NeighbourKeys {
    /// Encoded size in bytes.
    pub fn wire_bytes(&self) -> usize {
        HEADER_BYTES + 4 + self.keys.len() * (4 + 64)
    }
}

impl IncomingShares {
    /// Encoded size in bytes.
    pub fn wire_bytes(&self) -> usize {
        HEADER_BYTES + shares_bytes(&self.shares)
    }
}

impl UnmaskRequest {
    /// Encoded size in bytes.
    pub fn wire_bytes(&self) -> usize {
        HEADER_BYTES + 4 + 4 * self.survivors.len()
    }

    /// Refuses a survivor list shorter than `floor`: a client whose input carries a share of
    /// noise sized for at least `floor` contributors checks this before it unmasks, so a server
    /// that lists fewer gets no shares from it and no under-noised sum.
    pub fn require_survivors(&self, floor: usize) -> Result<(), SecAggError> {
        if self.survivors.len() < floor {
            return Err(SecAggError::TooFewSurvivors {
                client: self.recipient,
                survivors: self.survivors.len(),
                floor,
            });
        }
        Ok(())
    }
}

impl UnmaskShares {
    /// Encoded size in bytes.
    pub fn wire_bytes(&self) -> usize {
        let shares = self.self_seed_shares.len() + self.mask_key_shares.len();
        HEADER_BYTES + 8 + shares * (4 + SHARE_BYTES)
    }
}
