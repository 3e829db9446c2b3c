//! EEZOFL's digital path: the same one-scalar payload summed under xMK-CKKS over a network
//! instead of a fading channel (mod q, what a deployment uses).
//!
//! Setup: every [`DigitalDevice`] sends its key share; the [`DigitalServer`] relays them
//! ([`KeyRelay`]) and each side aggregates the collective key itself. Each round: devices send
//! one ciphertext of their encoded scalar ([`Upload`]); the server sums them
//! ([`DigitalServer::sum`]) and broadcasts the sum ([`SumBroadcast`]); devices answer with
//! decryption shares ([`ShareUpload`]); the server fuses them into `M_k`
//! ([`DigitalServer::fuse`]). A device that drops out of a round makes it undecryptable (every
//! member's share is needed); the server reports that as [`ProtocolError::Incomplete`].

use std::collections::BTreeSet;
use std::sync::Arc;

use privopt_ckks::CkksParams;
use privopt_ckks::multiparty::{
    Ciphertext, CollectivePublicKey, CommonPoly, DecryptionShare, Party, PartyId, PublicKeyShare,
    fuse,
};
use rand::CryptoRng;

use super::messages::{
    KeyRelay, ShareUpload, SumBroadcast, Upload, device_state_from_bytes, device_state_to_bytes,
};
use crate::error::{Misbehavior, Peer, ProtocolError, Result, misbehaved};

/// The key session every digital EEZOFL key share belongs to.
pub const KEY_SESSION: u64 = 0;

/// `round(Λ·x)` as the constant coefficient's integer, refusing values that do not fit.
pub fn encode_scalar(x: f64, params: &CkksParams) -> Result<i64> {
    let v = (x * params.scale()).round();
    if !v.is_finite() || v.abs() > 2f64.powi(62) {
        return Err(ProtocolError::Parameters(format!(
            "message {x} does not fit at scale 2^{}",
            params.scale_log2()
        )));
    }
    Ok(v as i64)
}

/// A device: its xMK-CKKS party and, once set up, the collective key.
#[derive(Debug)]
pub struct DigitalDevice {
    party: Party,
    params: Arc<CkksParams>,
    key: Option<CollectivePublicKey>,
    /// The relay the key was aggregated from (kept so a saved device can rebuild it).
    relay: Option<KeyRelay>,
    /// The round it last encrypted for (the only sum it will help decrypt).
    encrypted: Option<u64>,
    /// The last round it gave a decryption share for: it gives one share per round, and
    /// encrypts only for later rounds (of this key: a new key restarts the rounds).
    decrypted: Option<u64>,
    /// The digest of the last sum it decrypted (`Ciphertext::digest`), kept across keys: a server that re-keys to restart
    /// the rounds cannot have the same ciphertext decrypted again.
    last_sum: Option<[u8; 32]>,
}

impl DigitalDevice {
    /// Device `id` with a fresh secret (use OS randomness outside simulations).
    pub fn generate(
        id: PartyId,
        params: &Arc<CkksParams>,
        crs: &CommonPoly,
        rng: &mut impl CryptoRng,
    ) -> Self {
        Self {
            party: Party::generate(id, params, crs, rng),
            params: Arc::clone(params),
            key: None,
            relay: None,
            encrypted: None,
            decrypted: None,
            last_sum: None,
        }
    }

    /// The device's state as bytes (its secret included), for its own storage between
    /// processes; [`DigitalDevice::restore`] brings it back. Keep it as secret as the device.
    pub fn save(&self) -> Vec<u8> {
        device_state_to_bytes(
            &self.party,
            self.relay.as_ref(),
            self.encrypted,
            self.decrypted,
            self.last_sum,
            &self.params,
        )
    }

    /// The device [`DigitalDevice::save`] wrote, its collective key rebuilt from the saved
    /// relay under `crs`.
    pub fn restore(params: &Arc<CkksParams>, crs: &CommonPoly, bytes: &[u8]) -> Result<Self> {
        let (party, relay, encrypted, decrypted, last_sum) =
            device_state_from_bytes(params, bytes)?;
        let mut device = Self {
            party,
            params: Arc::clone(params),
            key: None,
            relay: None,
            encrypted,
            decrypted,
            last_sum,
        };
        if let Some(relay) = relay {
            device.aggregate_key(crs, &relay)?;
        }
        Ok(device)
    }

    /// The device's id.
    pub fn id(&self) -> PartyId {
        self.party.id()
    }

    /// Setup, step 1: the key share to send.
    pub fn key_share(&self) -> PublicKeyShare {
        self.party.public_key_share(KEY_SESSION)
    }

    /// Setup, step 2 (and every re-key): aggregates the collective key from the server's relay
    /// of every member's share; refuses a relay that leaves this device out. A new key starts
    /// its rounds afresh (the server's do too).
    pub fn set_key(&mut self, crs: &CommonPoly, relay: &KeyRelay) -> Result<()> {
        self.aggregate_key(crs, relay)?;
        self.encrypted = None;
        self.decrypted = None;
        Ok(())
    }

    /// The collective key of `relay`, kept with the relay (a saved device rebuilds it).
    fn aggregate_key(&mut self, crs: &CommonPoly, relay: &KeyRelay) -> Result<()> {
        if !relay.members.contains(&self.id()) {
            return Err(misbehaved(
                Peer::Server,
                Misbehavior::NotParticipant,
                format!("left device {} out of the key", self.id()),
            ));
        }
        self.key = Some(CollectivePublicKey::aggregate(
            &self.params,
            crs,
            &relay.members,
            KEY_SESSION,
            &relay.shares,
        )?);
        self.relay = Some(relay.clone());
        Ok(())
    }

    /// Round `round`, step 1: the ciphertext of the encoded scalar `m` ([`encode_scalar`]).
    pub fn encrypt(&mut self, round: u64, m: i64, rng: &mut impl CryptoRng) -> Result<Upload> {
        let key = self
            .key
            .as_ref()
            .ok_or_else(|| ProtocolError::OutOfOrder("encrypt before the key is set".into()))?;
        if let Some(done) = self.decrypted
            && round <= done
        {
            return Err(misbehaved(
                Peer::Server,
                Misbehavior::WrongRound,
                format!(
                    "asked device {} to encrypt for round {round}, but round {done} is decrypted",
                    self.id()
                ),
            ));
        }
        let mut coeffs = vec![0i64; self.params.n()];
        coeffs[0] = m;
        let ct = key.encrypt(&coeffs, rng)?;
        self.encrypted = Some(round);
        Ok(Upload {
            from: self.id(),
            round,
            ct,
        })
    }

    /// Round step 2: this device's decryption share of the broadcast sum: only for the round
    /// it encrypted for, only for a sum of one encryption per member, and only once per round
    /// (a second smudged share of the same secret is what key-recovery attacks on multiparty
    /// HE collect). A server that relabels one device's upload as the sum is refused by the
    /// member count unless it also forges the count (docs/security.md).
    pub fn decryption_share(
        &mut self,
        sum: &SumBroadcast,
        rng: &mut impl CryptoRng,
    ) -> Result<ShareUpload> {
        let refuse = |kind, detail: String| Err(misbehaved(Peer::Server, kind, detail));
        if self.encrypted != Some(sum.round) {
            return refuse(
                Misbehavior::Forbidden,
                format!(
                    "asked device {} to decrypt a sum of round {}, which it did not encrypt for",
                    self.id(),
                    sum.round
                ),
            );
        }
        if self.decrypted == Some(sum.round) {
            return refuse(
                Misbehavior::Duplicate,
                format!(
                    "asked device {} for a second decryption share in round {}",
                    self.id(),
                    sum.round
                ),
            );
        }
        let members = self.key.as_ref().map_or(&[][..], |k| k.members());
        if usize::try_from(sum.sum.count()).ok() != Some(members.len())
            || sum.sum.members() != members
        {
            return refuse(
                Misbehavior::Forbidden,
                format!(
                    "asked device {} to decrypt a sum of {} encryptions under members {:?}; the \
                 round has members {members:?}",
                    self.id(),
                    sum.sum.count(),
                    sum.sum.members()
                ),
            );
        }
        // A share depends on the parameters, the session and C1 only: what `digest` covers.
        let digest = sum.sum.digest();
        if self.last_sum == Some(digest) {
            return refuse(
                Misbehavior::Duplicate,
                format!(
                    "asked device {} to decrypt again a sum it decrypted before",
                    self.id()
                ),
            );
        }
        let share = self.party.partial_decrypt(&sum.sum, rng)?;
        self.decrypted = Some(sum.round);
        self.last_sum = Some(digest);
        Ok(ShareUpload {
            round: sum.round,
            share,
        })
    }
}

/// The server: the collective key, the round, and the sum awaiting decryption.
#[derive(Debug)]
pub struct DigitalServer {
    key: CollectivePublicKey,
    round: u64,
    open: Option<Ciphertext>,
}

impl DigitalServer {
    /// Setup: aggregates every member's key share and returns the relay to broadcast.
    pub fn setup(
        params: &Arc<CkksParams>,
        crs: &CommonPoly,
        members: &[PartyId],
        shares: Vec<PublicKeyShare>,
    ) -> Result<(Self, KeyRelay)> {
        let key = CollectivePublicKey::aggregate(params, crs, members, KEY_SESSION, &shares)?;
        let relay = KeyRelay {
            members: key.members().to_vec(),
            shares,
        };
        Ok((
            Self {
                key,
                round: 0,
                open: None,
            },
            relay,
        ))
    }

    /// The members of the key.
    pub fn members(&self) -> &[PartyId] {
        self.key.members()
    }

    /// The round being run (or next to run).
    pub fn round(&self) -> u64 {
        self.round
    }

    /// Sums one upload per member of this round, in any order, and returns the sum to
    /// broadcast. A member that sent nothing makes the round [`ProtocolError::Incomplete`].
    pub fn sum(&mut self, received: &[Upload]) -> Result<SumBroadcast> {
        if self.open.is_some() {
            return Err(ProtocolError::OutOfOrder(format!(
                "round {} is awaiting decryption shares",
                self.round
            )));
        }
        let members: BTreeSet<PartyId> = self.members().iter().copied().collect();
        let mut seen = BTreeSet::new();
        for up in received {
            let peer = Peer::Party(u64::from(up.from));
            if up.round != self.round {
                return Err(misbehaved(
                    peer,
                    Misbehavior::WrongRound,
                    format!(
                        "sent a ciphertext for round {}, the round is {}",
                        up.round, self.round
                    ),
                ));
            }
            if !members.contains(&up.from) {
                return Err(misbehaved(
                    peer,
                    Misbehavior::NotParticipant,
                    "sent a ciphertext but is not a member",
                ));
            }
            if !seen.insert(up.from) {
                return Err(misbehaved(
                    peer,
                    Misbehavior::Duplicate,
                    "sent two ciphertexts in one round",
                ));
            }
            if up.ct.count() != 1 || up.ct.members() != self.members() {
                return Err(misbehaved(
                    peer,
                    Misbehavior::Malformed,
                    "sent a ciphertext that is not one encryption under the collective key",
                ));
            }
        }
        if let Some(missing) = members.difference(&seen).next() {
            return Err(ProtocolError::Incomplete(format!(
                "device {missing} sent no ciphertext in round {}; the sum would lack its scalar",
                self.round
            )));
        }
        let cts: Vec<Ciphertext> = received.iter().map(|u| u.ct.clone()).collect();
        let sum = Ciphertext::sum(&cts)?;
        self.open = Some(sum.clone());
        Ok(SumBroadcast {
            round: self.round,
            sum,
        })
    }

    /// Fuses every member's decryption share of the open round into `M_k = Σ m_i / Λ` and
    /// closes the round. A missing, foreign or wrong-round share leaves the round open.
    pub fn fuse(&mut self, shares: &[ShareUpload]) -> Result<f64> {
        let sum = self
            .open
            .as_ref()
            .ok_or_else(|| ProtocolError::OutOfOrder("no round awaits decryption shares".into()))?;
        if let Some(s) = shares.iter().find(|s| s.round != self.round) {
            return Err(misbehaved(
                Peer::Party(u64::from(s.share.party())),
                Misbehavior::WrongRound,
                format!(
                    "sent a share for round {}, the round is {}",
                    s.round, self.round
                ),
            ));
        }
        let raw: Vec<DecryptionShare> = shares.iter().map(|s| s.share.clone()).collect();
        let value = fuse(sum, &raw)?.scalar()?;
        self.open = None;
        self.round += 1;
        Ok(value)
    }
}
