//! EEZOFL's messages and their byte encodings.
//!
//! Digital path: the xMK-CKKS objects keep `privopt-ckks`'s own encodings (parameter
//! fingerprint, session, binding digest, residues checked against their primes), carried
//! inside this crate's frame (round number, checksum). Decoding needs the parameters.
//!
//! Over the air: a [`Transmission`] is one phase's ring element(s) — what a device sends into
//! the channel or the server broadcasts — with numerators over the exact ring's wide basis.
//! Decoding needs the [`ExactRing`]. (Over a real radio the uplink is analog; the encoding is
//! for the digital downlink and for moving a simulated transmission between processes.)

use std::sync::Arc;

use privopt_channel::dyadic::{Dyadic, ExactRing};
use privopt_ckks::CkksParams;
use privopt_ckks::multiparty::{
    Ciphertext, DecryptionShare, Party, PartyId, PublicKeyShare, ThresholdParty,
};

use crate::threshold::ThresholdSetup;
use crate::wire::{self, DecodeError, Method, Reader, Writer};

const KIND_KEY_SHARE: u8 = 1;
const KIND_KEY_RELAY: u8 = 2;
const KIND_UPLOAD: u8 = 3;
const KIND_SUM: u8 = 4;
const KIND_SHARE_UPLOAD: u8 = 5;
const KIND_TRANSMISSION: u8 = 6;
const KIND_DEVICE_STATE: u8 = 7;

/// Most devices a relay may carry.
pub const MAX_DEVICES: usize = 1 << 12;
/// Largest denominator exponent of a transmitted value.
pub const MAX_EXP: u32 = 1 << 12;

/// A device's ciphertext of its scalar for one round.
#[derive(Clone, Debug)]
pub struct Upload {
    /// The sender (the transport must authenticate it).
    pub from: PartyId,
    /// The round.
    pub round: u64,
    /// One encryption under the collective key.
    pub ct: Ciphertext,
}

/// The server's broadcast of a round's summed ciphertext.
#[derive(Clone, Debug)]
pub struct SumBroadcast {
    /// The round.
    pub round: u64,
    /// The sum of every member's upload.
    pub sum: Ciphertext,
}

/// A device's decryption share of a round's sum.
#[derive(Clone, Debug)]
pub struct ShareUpload {
    /// The round.
    pub round: u64,
    /// The share (it names its party).
    pub share: DecryptionShare,
}

/// The server's relay of every member's key share, from which each device aggregates the key.
#[derive(Clone, Debug)]
pub struct KeyRelay {
    /// The members, ascending.
    pub members: Vec<PartyId>,
    /// One key share per member.
    pub shares: Vec<PublicKeyShare>,
}

fn put_nested(w: &mut Writer, bytes: &[u8]) {
    w.bytes(bytes);
}

fn ckks<T>(r: &Reader<'_>, parsed: Result<T, privopt_ckks::CkksError>) -> Result<T, DecodeError> {
    parsed.map_err(|e| r.invalid(e.to_string()))
}

/// A key share, framed.
pub fn key_share_to_bytes(share: &PublicKeyShare, params: &CkksParams) -> Vec<u8> {
    wire::encode(Method::Eezofl, KIND_KEY_SHARE, |w| {
        put_nested(w, &share.to_bytes(params))
    })
}

/// Parses a framed key share made under `params`.
pub fn key_share_from_bytes(
    params: &CkksParams,
    bytes: &[u8],
) -> Result<PublicKeyShare, DecodeError> {
    wire::decode(
        bytes,
        "eezofl key share",
        Method::Eezofl,
        KIND_KEY_SHARE,
        |r| {
            let inner = r.bytes()?;
            ckks(r, PublicKeyShare::from_bytes(params, inner))
        },
    )
}

impl KeyRelay {
    /// The framed bytes.
    pub fn to_bytes(&self, params: &CkksParams) -> Vec<u8> {
        wire::encode(Method::Eezofl, KIND_KEY_RELAY, |w| {
            w.len(self.members.len());
            self.members.iter().for_each(|&m| w.u32(m));
            w.len(self.shares.len());
            self.shares
                .iter()
                .for_each(|s| put_nested(w, &s.to_bytes(params)));
        })
    }

    /// Parses a relay made under `params`: members strictly ascending, one share each.
    pub fn from_bytes(params: &CkksParams, bytes: &[u8]) -> Result<Self, DecodeError> {
        wire::decode(
            bytes,
            "eezofl key relay",
            Method::Eezofl,
            KIND_KEY_RELAY,
            |r| {
                let n = r.count(4)?;
                if n > MAX_DEVICES {
                    return Err(r.invalid(format!("{n} members, at most {MAX_DEVICES}")));
                }
                let members = (0..n).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
                if members.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(r.invalid("members are not strictly ascending"));
                }
                let k = r.count(4)?;
                if k != n {
                    return Err(r.invalid(format!("{k} shares for {n} members")));
                }
                let shares = (0..k)
                    .map(|_| {
                        let inner = r.bytes()?;
                        ckks(r, PublicKeyShare::from_bytes(params, inner))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Self { members, shares })
            },
        )
    }
}

/// A digital device's saved state: its party (secret included), the relay its key came from,
/// the rounds it encrypted for and decrypted, the digest of the last sum it decrypted, and its
/// threshold setup or share. Never sent: it is for the device's own storage.
pub(crate) struct DeviceState<P, R, D, T> {
    pub party: P,
    pub relay: Option<R>,
    pub encrypted: Option<u64>,
    pub decrypted: Option<u64>,
    pub last_sum: Option<[u8; 32]>,
    pub dealing: Option<D>,
    pub threshold: Option<T>,
}

/// The state as [`DeviceState::from_bytes`] returns it.
pub(crate) type OwnedDeviceState = DeviceState<Party, KeyRelay, ThresholdSetup, ThresholdParty>;

impl DeviceState<&Party, &KeyRelay, &ThresholdSetup, &ThresholdParty> {
    pub fn to_bytes(&self, params: &CkksParams) -> Vec<u8> {
        wire::encode(Method::Eezofl, KIND_DEVICE_STATE, |w| {
            put_nested(w, &self.party.to_bytes());
            w.u8(u8::from(self.relay.is_some()));
            if let Some(relay) = self.relay {
                put_nested(w, &relay.to_bytes(params));
            }
            for round in [self.encrypted, self.decrypted] {
                w.u8(u8::from(round.is_some()));
                w.u64(round.unwrap_or(0));
            }
            w.u8(u8::from(self.last_sum.is_some()));
            w.raw(&self.last_sum.unwrap_or([0; 32]));
            w.u8(u8::from(self.dealing.is_some()));
            if let Some(setup) = self.dealing {
                put_nested(w, &setup.save());
            }
            w.u8(u8::from(self.threshold.is_some()));
            if let Some(party) = self.threshold {
                put_nested(w, &party.to_bytes());
            }
        })
    }
}

impl OwnedDeviceState {
    /// Parses what [`DeviceState::to_bytes`] wrote.
    pub fn from_bytes(params: &Arc<CkksParams>, bytes: &[u8]) -> Result<Self, DecodeError> {
        wire::decode(
            bytes,
            "eezofl device state",
            Method::Eezofl,
            KIND_DEVICE_STATE,
            |r| {
                let inner = r.bytes()?;
                let party = ckks(r, Party::from_bytes(params, inner))?;
                let relay = match r.bool()? {
                    true => Some(KeyRelay::from_bytes(params, r.bytes()?)?),
                    false => None,
                };
                let mut round = || -> Result<Option<u64>, DecodeError> {
                    let present = r.bool()?;
                    let round = r.u64()?;
                    Ok(present.then_some(round))
                };
                let encrypted = round()?;
                let decrypted = round()?;
                let has_sum = r.bool()?;
                let sum: [u8; 32] = r.array()?;
                let dealing = match r.bool()? {
                    true => Some(
                        ThresholdSetup::restore(r.bytes()?)
                            .map_err(|e| r.invalid(e.to_string()))?,
                    ),
                    false => None,
                };
                let threshold = match r.bool()? {
                    true => {
                        let inner = r.bytes()?;
                        Some(ckks(r, ThresholdParty::from_bytes(params, inner))?)
                    }
                    false => None,
                };
                Ok(DeviceState {
                    party,
                    relay,
                    encrypted,
                    decrypted,
                    last_sum: has_sum.then_some(sum),
                    dealing,
                    threshold,
                })
            },
        )
    }
}

/// Encodes `(kind, from, round, ciphertext)`.
fn ct_message(kind: u8, from: PartyId, round: u64, ct: &Ciphertext) -> Vec<u8> {
    wire::encode(Method::Eezofl, kind, |w| {
        w.u32(from);
        w.u64(round);
        put_nested(w, &ct.to_bytes());
    })
}

/// Decodes what [`ct_message`] wrote.
fn ct_message_from(
    params: &Arc<CkksParams>,
    bytes: &[u8],
    what: &'static str,
    kind: u8,
) -> Result<(PartyId, u64, Ciphertext), DecodeError> {
    wire::decode(bytes, what, Method::Eezofl, kind, |r| {
        let (from, round) = (r.u32()?, r.u64()?);
        let inner = r.bytes()?;
        Ok((from, round, ckks(r, Ciphertext::from_bytes(params, inner))?))
    })
}

impl Upload {
    /// The framed bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        ct_message(KIND_UPLOAD, self.from, self.round, &self.ct)
    }

    /// Parses an upload made under `params`.
    pub fn from_bytes(params: &Arc<CkksParams>, bytes: &[u8]) -> Result<Self, DecodeError> {
        let (from, round, ct) = ct_message_from(params, bytes, "eezofl upload", KIND_UPLOAD)?;
        Ok(Self { from, round, ct })
    }
}

impl SumBroadcast {
    /// The framed bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        ct_message(KIND_SUM, 0, self.round, &self.sum)
    }

    /// Parses a broadcast sum made under `params`.
    pub fn from_bytes(params: &Arc<CkksParams>, bytes: &[u8]) -> Result<Self, DecodeError> {
        let (_, round, sum) = ct_message_from(params, bytes, "eezofl sum", KIND_SUM)?;
        Ok(Self { round, sum })
    }
}

impl ShareUpload {
    /// The framed bytes.
    pub fn to_bytes(&self, params: &CkksParams) -> Vec<u8> {
        wire::encode(Method::Eezofl, KIND_SHARE_UPLOAD, |w| {
            w.u64(self.round);
            put_nested(w, &self.share.to_bytes(params));
        })
    }

    /// Parses a decryption share made under `params`.
    pub fn from_bytes(params: &CkksParams, bytes: &[u8]) -> Result<Self, DecodeError> {
        wire::decode(
            bytes,
            "eezofl decryption share",
            Method::Eezofl,
            KIND_SHARE_UPLOAD,
            |r| {
                let round = r.u64()?;
                let inner = r.bytes()?;
                Ok(Self {
                    round,
                    share: ckks(r, DecryptionShare::from_bytes(params, inner))?,
                })
            },
        )
    }
}

/// The four phases of an over-the-air round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Partial keys `b_i`, and the broadcast `b̃`.
    Keys = 1,
    /// Ciphertexts `(c0, c1)`, and the broadcast `c̃1`.
    Ciphertexts = 2,
    /// Decryption shares `D_i`.
    Shares = 3,
}

/// One over-the-air transmission or broadcast: a round, a phase, and one or two ring values
/// (two only for a device's ciphertext `(c0, c1)`).
#[derive(Clone, Debug, PartialEq)]
pub struct Transmission {
    /// The round.
    pub round: u64,
    /// The phase.
    pub phase: Phase,
    /// The values.
    pub values: Vec<Dyadic>,
}

impl Transmission {
    /// The framed bytes: round, phase, count, then per value its exponent and residues.
    pub fn to_bytes(&self) -> Vec<u8> {
        wire::encode(Method::Eezofl, KIND_TRANSMISSION, |w| {
            w.u64(self.round);
            w.u8(self.phase as u8);
            w.u8(self.values.len() as u8);
            for v in &self.values {
                w.u32(v.exp);
                v.poly.as_slice().iter().for_each(|&x| w.u64(x));
            }
        })
    }

    /// Parses a transmission over `ring`: one or two values, each exactly `ring`'s size with
    /// every residue below its prime.
    pub fn from_bytes(ring: &ExactRing, bytes: &[u8]) -> Result<Self, DecodeError> {
        wire::decode(
            bytes,
            "eezofl transmission",
            Method::Eezofl,
            KIND_TRANSMISSION,
            |r| {
                let round = r.u64()?;
                let phase = match r.u8()? {
                    1 => Phase::Keys,
                    2 => Phase::Ciphertexts,
                    3 => Phase::Shares,
                    p => return Err(r.invalid(format!("unknown phase {p}"))),
                };
                let count = r.u8()?;
                if !(1..=2).contains(&count) {
                    return Err(r.invalid(format!("{count} values (1 or 2)")));
                }
                let basis = ring.basis();
                let (n, moduli) = (basis.n(), basis.moduli());
                let values = (0..count)
                    .map(|_| {
                        let exp = r.u32()?;
                        if exp > MAX_EXP {
                            return Err(r.invalid(format!("exponent {exp} above {MAX_EXP}")));
                        }
                        let raw = r.fixed(8 * n * moduli.len())?;
                        let mut data = Vec::with_capacity(n * moduli.len());
                        for (k, c) in raw.chunks_exact(8).enumerate() {
                            let mut a = [0u8; 8];
                            a.copy_from_slice(c);
                            let x = u64::from_le_bytes(a);
                            let q = moduli[k / n];
                            if x >= q {
                                return Err(
                                    r.invalid(format!("residue {x} is not below its prime {q}"))
                                );
                            }
                            data.push(x);
                        }
                        let poly = basis
                            .from_residues(data)
                            .map_err(|e| r.invalid(e.to_string()))?;
                        Ok(Dyadic { poly, exp })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Self {
                    round,
                    phase,
                    values,
                })
            },
        )
    }
}
