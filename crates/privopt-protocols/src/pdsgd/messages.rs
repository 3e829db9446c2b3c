//! The messages of the pairwise exchange and their byte encodings.
//!
//! A [`Request`] carries ciphertexts under its sender's key, a [`Response`] ciphertexts under
//! its receiver's key, so decoding either needs that key: an [`Agent`](super::Agent) decodes
//! what is sent to it with [`Agent::decode_request`](super::Agent::decode_request) and
//! [`Agent::decode_response`](super::Agent::decode_response). A [`KeyAnnouncement`] tells
//! neighbours the key to encrypt to an agent with.

use super::scheme::Scheme;
use crate::wire::{self, DecodeError, Method, Reader, Writer};

/// Step 1, from initiator i to neighbour j: `E_i(−Q(x_i))`, one ciphertext per coordinate.
#[derive(Clone, Debug)]
pub struct Request<C> {
    /// The initiator i.
    pub from: usize,
    /// The neighbour j.
    pub to: usize,
    /// The iteration the exchange belongs to.
    pub iteration: u64,
    /// Ciphertexts under i's key.
    pub cts: Vec<C>,
}

/// Step 2, from j back to i: `E_i(k_{j→i}(Q(x_j) − Q(x_i)))`.
#[derive(Clone, Debug)]
pub struct Response<C> {
    /// The responder j.
    pub from: usize,
    /// The initiator i.
    pub to: usize,
    /// The iteration of the request answered.
    pub iteration: u64,
    /// Ciphertexts under i's key.
    pub cts: Vec<C>,
}

/// An agent's public key, announced to its neighbours before the first iteration.
#[derive(Clone, Debug)]
pub struct KeyAnnouncement<K> {
    /// The agent.
    pub agent: usize,
    /// Its public key.
    pub key: K,
}

pub(super) const KIND_REQUEST: u8 = 1;
pub(super) const KIND_RESPONSE: u8 = 2;
const KIND_KEY: u8 = 3;
pub(super) const KIND_AGENT_STATE: u8 = 4;

/// The fields both exchange messages share: from, to, iteration, ciphertexts.
pub(super) fn encode_exchange<S: Scheme>(
    kind: u8,
    pk: &S::PublicKey,
    from: usize,
    to: usize,
    iteration: u64,
    cts: &[S::Ct],
) -> Vec<u8> {
    wire::encode(Method::Pdsgd, kind, |w: &mut Writer| {
        w.len(from);
        w.len(to);
        w.u64(iteration);
        w.len(cts.len());
        cts.iter().for_each(|c| S::write_ct(pk, c, w));
    })
}

/// The header fields of an exchange message, before its ciphertexts.
pub(super) struct ExchangeHead {
    pub from: usize,
    pub to: usize,
    pub iteration: u64,
}

/// Decodes an exchange message; `key_for(head)` picks the key its ciphertexts are under (or
/// refuses the head).
pub(super) fn decode_exchange<'k, S: Scheme + 'k>(
    bytes: &[u8],
    what: &'static str,
    kind: u8,
    key_for: impl FnOnce(&ExchangeHead) -> Result<&'k S::PublicKey, String>,
) -> Result<(ExchangeHead, Vec<S::Ct>), DecodeError> {
    wire::decode(bytes, what, Method::Pdsgd, kind, |r: &mut Reader<'_>| {
        let (from, to, iteration) = (r.index()?, r.index()?, r.u64()?);
        let head = ExchangeHead {
            from,
            to,
            iteration,
        };
        let pk = key_for(&head).map_err(|reason| r.invalid(reason))?;
        // Every ciphertext takes at least 8 bytes on the wire.
        let count = r.count(8)?;
        let cts = (0..count)
            .map(|_| S::read_ct(pk, r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((head, cts))
    })
}

impl<K> KeyAnnouncement<K> {
    /// The framed bytes.
    pub fn to_bytes<S: Scheme<PublicKey = K>>(&self) -> Vec<u8> {
        wire::encode(Method::Pdsgd, KIND_KEY, |w| {
            w.len(self.agent);
            S::write_public_key(&self.key, w);
        })
    }

    /// Parses and validates an announcement.
    pub fn from_bytes<S: Scheme<PublicKey = K>>(bytes: &[u8]) -> Result<Self, DecodeError> {
        wire::decode(
            bytes,
            "pdsgd key announcement",
            Method::Pdsgd,
            KIND_KEY,
            |r| {
                Ok(Self {
                    agent: r.index()?,
                    key: S::read_public_key(r)?,
                })
            },
        )
    }
}
