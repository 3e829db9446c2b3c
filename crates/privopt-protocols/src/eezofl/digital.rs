//! EEZOFL's digital path: the same one-scalar payload summed under xMK-CKKS over a network
//! instead of a fading channel (mod q, what a deployment uses).
//!
//! Setup: every [`DigitalDevice`] sends its key share; the [`DigitalServer`] relays them
//! ([`KeyRelay`]) and each side aggregates the collective key itself. Each round: devices send
//! one ciphertext of their encoded scalar ([`Upload`]); the server sums them
//! ([`DigitalServer::sum`]) and broadcasts the sum ([`SumBroadcast`]); devices answer with
//! decryption shares ([`ShareUpload`]); the server fuses them into `M_k`
//! ([`DigitalServer::fuse`]).
//!
//! With an N-of-N key (the paper's xMK-CKKS) a device that drops out of a round makes it
//! undecryptable (every member's share is needed); the server reports that as
//! [`ProtocolError::Incomplete`]. With a **threshold key** (after setup, the members re-share
//! their secrets: [`DigitalDevice::start_threshold`], [`DigitalDevice::deal_threshold`],
//! [`DigitalDevice::finish_threshold`]) a round needs uploads from any `t` members and shares
//! from `t` of the members still present once the sum exists: the server fixes them as the
//! round's [`ActiveSet`] ([`DigitalServer::active_set`]) before asking
//! ([`DigitalDevice::threshold_share`]). After the re-sharing the server checks every
//! dealing once ([`DigitalServer::dealing_check`], [`DigitalDevice::answer_dealing_check`],
//! [`DigitalServer::failed_dealers`]) and keys again without a dealer it names. A round that
//! cannot finish is abandoned
//! ([`DigitalServer::abandon`]) and never asked about again: the next round is a fresh
//! encryption.

use std::collections::BTreeSet;
use std::sync::Arc;

use privopt_ckks::CkksParams;
use privopt_ckks::multiparty::{
    ActiveSet, Ciphertext, CollectivePublicKey, Committee, CommonPoly, DealingAnswer, DealingCheck,
    DecryptionShare, Party, PartyId, PublicKeyShare, ThresholdParty, failed_dealers, fuse,
    fuse_threshold, lift_log2,
};
use rand::{CryptoRng, Rng};

use super::messages::{DeviceState, KeyRelay, OwnedDeviceState, ShareUpload, SumBroadcast, Upload};
use crate::error::{Misbehavior, Peer, ProtocolError, Result, misbehaved};
use crate::threshold::{SealedShare, SealingKey, ThresholdSetup};

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

/// The threshold a committee of `members` gets by default: two thirds, rounded up (at least
/// 2). Any `t` members can decrypt any ciphertext, so `t` is the collusion a deployment must
/// rule out; `N − t` is the dropouts a round survives.
pub fn default_threshold(members: usize) -> usize {
    members.saturating_mul(2).div_ceil(3).max(2)
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
    /// The re-sharing under way, between [`DigitalDevice::start_threshold`] and
    /// [`DigitalDevice::finish_threshold`].
    dealing: Option<ThresholdSetup>,
    /// Its Shamir share of the collective secret, once the re-sharing has finished.
    threshold: Option<ThresholdParty>,
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
            dealing: None,
            threshold: None,
        }
    }

    /// The device's state as bytes (its secret included), for its own storage between
    /// processes; [`DigitalDevice::restore`] brings it back. Keep it as secret as the device.
    pub fn save(&self) -> Vec<u8> {
        DeviceState {
            party: &self.party,
            relay: self.relay.as_ref(),
            encrypted: self.encrypted,
            decrypted: self.decrypted,
            last_sum: self.last_sum,
            dealing: self.dealing.as_ref(),
            threshold: self.threshold.as_ref(),
        }
        .to_bytes(&self.params)
    }

    /// The device [`DigitalDevice::save`] wrote, its collective key rebuilt from the saved
    /// relay under `crs`.
    pub fn restore(params: &Arc<CkksParams>, crs: &CommonPoly, bytes: &[u8]) -> Result<Self> {
        let saved = OwnedDeviceState::from_bytes(params, bytes)?;
        let mut device = Self {
            party: saved.party,
            params: Arc::clone(params),
            key: None,
            relay: None,
            encrypted: saved.encrypted,
            decrypted: saved.decrypted,
            last_sum: saved.last_sum,
            dealing: saved.dealing,
            threshold: saved.threshold,
        };
        if let Some(relay) = saved.relay {
            device.aggregate_key(crs, &relay)?;
        }
        let key_members = device.key.as_ref().map(CollectivePublicKey::members);
        if let Some(t) = &device.threshold
            && key_members != Some(t.committee().members())
        {
            return Err(ProtocolError::Parameters(
                "the saved threshold share is not of the saved key's members".into(),
            ));
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
    /// its rounds afresh (the server's do too) and is N-of-N until re-shared.
    pub fn set_key(&mut self, crs: &CommonPoly, relay: &KeyRelay) -> Result<()> {
        self.aggregate_key(crs, relay)?;
        self.encrypted = None;
        self.decrypted = None;
        self.dealing = None;
        self.threshold = None;
        Ok(())
    }

    /// The threshold of this device's key, once re-shared (`None`: every member decrypts).
    pub fn threshold(&self) -> Option<usize> {
        self.threshold.as_ref().map(|t| t.committee().threshold())
    }

    /// Threshold setup, step 1 (after [`DigitalDevice::set_key`]): starts re-sharing the
    /// secret so that any `threshold` of the key's members decrypt, in setup `session` (fresh
    /// per setup); returns the sealing key to send.
    pub fn start_threshold(
        &mut self,
        threshold: usize,
        session: u64,
        rng: &mut (impl Rng + CryptoRng),
    ) -> Result<SealingKey> {
        let key = self.key.as_ref().ok_or_else(|| {
            ProtocolError::OutOfOrder("threshold setup before the key is set".into())
        })?;
        let committee = Committee::new(threshold, key.members())?;
        let setup = ThresholdSetup::new(&self.party, &committee, session, rng)?;
        let sealing = setup.sealing_key();
        self.dealing = Some(setup);
        self.threshold = None;
        Ok(sealing)
    }

    /// Threshold setup, step 2: with every member's sealing key, one sealed share of this
    /// device's secret for each member (itself included).
    pub fn deal_threshold(
        &mut self,
        keys: &[SealingKey],
        rng: &mut (impl Rng + CryptoRng),
    ) -> Result<Vec<SealedShare>> {
        let setup = self
            .dealing
            .as_mut()
            .ok_or_else(|| ProtocolError::OutOfOrder("deal before the threshold setup".into()))?;
        setup.deal(&self.party, keys, rng)
    }

    /// Threshold setup, step 3: the shares sealed to this device, one from every member; from
    /// here on any `t` members decrypt.
    pub fn finish_threshold(&mut self, sealed: &[SealedShare]) -> Result<()> {
        let setup = self
            .dealing
            .as_ref()
            .ok_or_else(|| ProtocolError::OutOfOrder("finish before the threshold setup".into()))?;
        self.threshold = Some(setup.finish(&self.party, sealed)?);
        self.dealing = None;
        Ok(())
    }

    /// Threshold setup, step 4: this device's answers to the server's dealing check (once per
    /// setup; saved with the device).
    pub fn answer_dealing_check(
        &mut self,
        check: &DealingCheck,
        crs: &CommonPoly,
        rng: &mut impl CryptoRng,
    ) -> Result<DealingAnswer> {
        let member = self.threshold.as_mut().ok_or_else(|| {
            ProtocolError::OutOfOrder("a dealing check before the threshold setup".into())
        })?;
        Ok(member.answer_dealing_check(check, crs, rng)?)
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
        // Lifted above the smudging of every member's share (0 at the default smudging); the
        // members' sum of such values must not wrap Q.
        let lift = lift_log2(&self.params);
        let bits = (m.unsigned_abs() as f64 + 1.0).log2()
            + f64::from(lift)
            + (key.members().len() as f64).log2()
            + 2.0;
        if bits > self.params.basis().log_modulus() {
            return Err(ProtocolError::Parameters(format!(
                "an encoded scalar of {m} lifted by 2^{lift} (smudging 2^{:.1}) summed over {} \
                 members needs 2^{bits:.1} of the modulus 2^{:.1}",
                self.params.smudging_log2(),
                key.members().len(),
                self.params.basis().log_modulus()
            )));
        }
        let mut coeffs = vec![0i64; self.params.n()];
        coeffs[0] = m;
        let ct = key.encrypt_lifted(&coeffs, lift, rng)?;
        self.encrypted = Some(round);
        Ok(Upload {
            from: self.id(),
            round,
            ct,
        })
    }

    /// Round step 2 (N-of-N key): this device's decryption share of the broadcast sum: only
    /// for the round it encrypted for, only for a sum of one encryption per member, and only
    /// once per round (a second smudged share of the same secret is what key-recovery attacks
    /// on multiparty HE collect). A server that relabels one device's upload as the sum is
    /// refused by the member count unless it also forges the count (docs/security.md).
    pub fn decryption_share(
        &mut self,
        sum: &SumBroadcast,
        rng: &mut impl CryptoRng,
    ) -> Result<ShareUpload> {
        if self.threshold.is_some() {
            return Err(ProtocolError::OutOfOrder(
                "the key is a threshold key: ask with the round's active set".into(),
            ));
        }
        let members = self.key.as_ref().map_or(0, |k| k.members().len());
        let digest = self.check_sum(sum, members)?;
        let share = self.party.partial_decrypt(&sum.sum, rng)?;
        self.answered(sum.round, digest);
        Ok(ShareUpload {
            round: sum.round,
            share,
        })
    }

    /// Round step 2 (threshold key): this device's share of the broadcast sum as a member of
    /// the round's `active` set, under the same rules as [`DigitalDevice::decryption_share`]
    /// but for a sum of at least `t` encryptions; the ciphertext is spent even if the share
    /// is lost (never asked about again, whatever the active set).
    pub fn threshold_share(
        &mut self,
        sum: &SumBroadcast,
        active: &ActiveSet,
        rng: &mut impl CryptoRng,
    ) -> Result<ShareUpload> {
        let t = self.threshold().ok_or_else(|| {
            ProtocolError::OutOfOrder("a threshold share before the threshold setup".into())
        })?;
        let digest = self.check_sum(sum, t)?;
        let share = match self.threshold.as_mut() {
            Some(party) => party.partial_decrypt(&sum.sum, active, rng),
            None => unreachable!("the threshold was read above"),
        };
        // Whatever came of it, the ciphertext is spent (the party's ledger has it too).
        self.answered(sum.round, digest);
        Ok(ShareUpload {
            round: sum.round,
            share: share?,
        })
    }

    /// Refuses a sum this device must not help decrypt: not of the round it encrypted for,
    /// of a round it answered, of fewer than `min_count` (or more than all) members'
    /// encryptions, under another key, or decrypted before. Its digest otherwise.
    fn check_sum(&self, sum: &SumBroadcast, min_count: usize) -> Result<[u8; 32]> {
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
        let count = usize::try_from(sum.sum.count()).unwrap_or(usize::MAX);
        if !(min_count.max(1)..=members.len()).contains(&count) || sum.sum.members() != members {
            return refuse(
                Misbehavior::Forbidden,
                format!(
                    "asked device {} to decrypt a sum of {count} encryptions under members {:?}; \
                     the round has members {members:?} and a sum needs at least {min_count}",
                    self.id(),
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
        Ok(digest)
    }

    /// Records that this device answered for round `round`'s sum of `digest`.
    fn answered(&mut self, round: u64, digest: [u8; 32]) {
        self.decrypted = Some(round);
        self.last_sum = Some(digest);
    }
}

/// The server: the collective key (N-of-N, or of a [`Committee`] once the members have
/// re-shared it), the round, and the sum awaiting decryption.
#[derive(Debug)]
pub struct DigitalServer {
    key: CollectivePublicKey,
    /// The members' key shares: what their dealings are checked against.
    shares: Vec<PublicKeyShare>,
    committee: Option<Committee>,
    round: u64,
    open: Option<OpenRound>,
}

/// A summed round awaiting its decryption shares.
#[derive(Debug)]
struct OpenRound {
    sum: Ciphertext,
    /// Who contributed to the sum.
    contributors: Vec<PartyId>,
    /// Who was asked for shares (threshold keys only), once fixed.
    active: Option<ActiveSet>,
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
            shares: shares.clone(),
        };
        Ok((
            Self {
                key,
                shares,
                committee: None,
                round: 0,
                open: None,
            },
            relay,
        ))
    }

    /// From now on, rounds are decrypted by any `threshold` members: call once every member
    /// has finished its threshold setup for this key.
    pub fn use_threshold(&mut self, threshold: usize) -> Result<()> {
        if self.open.is_some() {
            return Err(ProtocolError::OutOfOrder(format!(
                "round {} is awaiting decryption shares",
                self.round
            )));
        }
        self.committee = Some(Committee::new(threshold, self.key.members())?);
        Ok(())
    }

    /// The check of the members' dealings for a `threshold` key set up in `session`, among
    /// the members `present`: `seed` must be fresh, drawn once every dealing has arrived.
    pub fn dealing_check(
        &self,
        threshold: usize,
        session: u64,
        seed: [u8; 32],
        present: &[PartyId],
    ) -> Result<DealingCheck> {
        let committee = Committee::new(threshold, self.key.members())?;
        Ok(DealingCheck::new(&committee, session, seed, present)?)
    }

    /// The members whose dealing fails `check` (sorted; empty when all are sound), from the
    /// devices' answers: key again without them. A missing or foreign answer is refused by
    /// party.
    pub fn failed_dealers(
        &self,
        threshold: usize,
        crs: &CommonPoly,
        check: &DealingCheck,
        answers: &[DealingAnswer],
    ) -> Result<Vec<PartyId>> {
        let committee = Committee::new(threshold, self.key.members())?;
        let params = self.key.params();
        Ok(failed_dealers(
            params,
            &committee,
            crs,
            &self.shares,
            check,
            answers,
        )?)
    }

    /// The threshold (`None`: every member decrypts).
    pub fn threshold(&self) -> Option<usize> {
        self.committee.as_ref().map(Committee::threshold)
    }

    /// The members of the key.
    pub fn members(&self) -> &[PartyId] {
        self.key.members()
    }

    /// The round being run (or next to run).
    pub fn round(&self) -> u64 {
        self.round
    }

    /// The members whose uploads make up the open round's sum.
    pub fn contributors(&self) -> Option<&[PartyId]> {
        self.open.as_ref().map(|o| o.contributors.as_slice())
    }

    /// Sums one upload per member of this round, in any order, and returns the sum to
    /// broadcast. Every member must have sent one (N-of-N), or at least the threshold of them
    /// ([`ProtocolError::Incomplete`] otherwise, naming who is missing).
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
        let missing: Vec<PartyId> = members.difference(&seen).copied().collect();
        let needed = self.threshold().unwrap_or(members.len());
        if seen.len() < needed {
            let names: Vec<String> = missing.iter().map(ToString::to_string).collect();
            return Err(ProtocolError::Incomplete(format!(
                "device{} {} sent no ciphertext in round {}: {} of {} uploads, {needed} needed",
                if missing.len() == 1 { "" } else { "s" },
                names.join(", "),
                self.round,
                seen.len(),
                members.len()
            )));
        }
        let cts: Vec<Ciphertext> = received.iter().map(|u| u.ct.clone()).collect();
        let sum = Ciphertext::sum(&cts)?;
        self.open = Some(OpenRound {
            sum: sum.clone(),
            contributors: seen.into_iter().collect(),
            active: None,
        });
        Ok(SumBroadcast {
            round: self.round,
            sum,
        })
    }

    /// Threshold keys: fixes who decrypts the open round: the first `t` of the `present`
    /// members (those still answering once the sum exists). Ask exactly them, with this set,
    /// and only once. Fewer than `t` present is [`ProtocolError::Incomplete`]: abandon the
    /// round ([`DigitalServer::abandon`]).
    pub fn active_set(&mut self, present: &[PartyId]) -> Result<ActiveSet> {
        let committee = self.committee.as_ref().ok_or_else(|| {
            ProtocolError::OutOfOrder(
                "an N-of-N key has no active set: every member decrypts".into(),
            )
        })?;
        let open = self
            .open
            .as_mut()
            .ok_or_else(|| ProtocolError::OutOfOrder("no round awaits decryption shares".into()))?;
        if open.active.is_some() {
            // A second set would have members answer the same ciphertext twice.
            return Err(ProtocolError::OutOfOrder(format!(
                "round {}'s active set is fixed; a failed round is abandoned, never re-asked",
                self.round
            )));
        }
        let mut present: Vec<PartyId> = present
            .iter()
            .copied()
            .filter(|p| committee.members().binary_search(p).is_ok())
            .collect();
        present.sort_unstable();
        present.dedup();
        let t = committee.threshold();
        if present.len() < t {
            return Err(ProtocolError::Incomplete(format!(
                "{} of {} devices present to decrypt round {}, the threshold is {t}",
                present.len(),
                committee.members().len(),
                self.round
            )));
        }
        let active = ActiveSet::new(committee, &open.sum, &present[..t])?;
        open.active = Some(active.clone());
        Ok(active)
    }

    /// Fuses the decryption shares of the open round (every member's, or the active set's)
    /// into `M_k = Σ m_i / Λ` over the round's contributors, and closes the round. A missing,
    /// foreign or wrong-round share leaves the round open (late shares may still come;
    /// otherwise [`DigitalServer::abandon`] it).
    pub fn fuse(&mut self, shares: &[ShareUpload]) -> Result<f64> {
        let open = self
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
        let decrypted = match (&self.committee, &open.active) {
            (None, _) => fuse(&open.sum, &raw)?,
            (Some(_), Some(active)) => fuse_threshold(&open.sum, active, &raw)?,
            (Some(_), None) => {
                return Err(ProtocolError::OutOfOrder(
                    "fix the round's active set before fusing".into(),
                ));
            }
        };
        let lift = lift_log2(self.key.params());
        let value = decrypted.scalar()? / 2f64.powi(lift as i32);
        self.open = None;
        self.round += 1;
        Ok(value)
    }

    /// Gives up the open round (its sum is never decrypted, and never asked about again) and
    /// moves to the next: a retry is a fresh encryption. Returns the abandoned round.
    pub fn abandon(&mut self) -> u64 {
        let round = self.round;
        self.open = None;
        self.round += 1;
        round
    }
}
