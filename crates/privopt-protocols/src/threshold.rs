//! The setup round of a threshold xMK-CKKS key (`privopt_ckks::multiparty::Committee`), with
//! every Shamir share sealed to its recipient: the server relays everything and reads nothing.
//!
//! 1. Each member sends a fresh X25519 [`SealingKey`]; the server relays all of them.
//! 2. Each member deals its secret ([`ThresholdSetup::deal`]) and sends one [`SealedShare`]
//!    per member: AES-128-GCM under a key derived (HKDF-SHA256) from the two members' X25519
//!    agreement, bound to the session, the ordered pair and both public keys, used once.
//! 3. Each member opens the shares addressed to it and keeps its share of the collective
//!    secret ([`ThresholdSetup::finish`]).
//!
//! A member refuses a key set that misses a member, repeats one, names a stranger, carries
//! another session or a low-order key; and a sealed share that is misaddressed, of another
//! session, from a stranger, repeated, or that does not open.

use std::collections::BTreeMap;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes128Gcm, Nonce};
use hkdf::Hkdf;
use privopt_ckks::multiparty::{Committee, Party, PartyId, SecretShare, ThresholdParty};
use rand::{CryptoRng, Rng};
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use crate::error::{Misbehavior, Peer, ProtocolError, Result, misbehaved};
use crate::wire::{DecodeError, Message, Method, Reader, Writer};

/// The wire kind of a saved [`ThresholdSetup`] (never sent).
const KIND_SETUP_STATE: u8 = 3;

/// Largest sealed share (a share at n = 2^16 with 30 primes is 15.7 MB).
pub const MAX_SEALED_BYTES: usize = 1 << 25;

/// A member's X25519 public key for this setup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealingKey {
    /// The setup's session.
    pub session: u64,
    /// The member.
    pub party: PartyId,
    /// Its X25519 public key.
    pub public: [u8; 32],
}

/// One Shamir share, sealed from `from` to `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedShare {
    /// The setup's session.
    pub session: u64,
    /// The dealer.
    pub from: PartyId,
    /// The recipient.
    pub to: PartyId,
    /// AES-128-GCM of the share's bytes (with its tag).
    pub ciphertext: Vec<u8>,
}

impl Message for SealingKey {
    const METHOD: Method = Method::Threshold;
    const KIND: u8 = 1;
    const NAME: &'static str = "threshold sealing key";
    fn write_fields(&self, w: &mut Writer) {
        w.u64(self.session);
        w.u32(self.party);
        w.raw(&self.public);
    }
    fn read_fields(r: &mut Reader<'_>) -> std::result::Result<Self, DecodeError> {
        Ok(Self {
            session: r.u64()?,
            party: r.u32()?,
            public: r.array()?,
        })
    }
}

impl Message for SealedShare {
    const METHOD: Method = Method::Threshold;
    const KIND: u8 = 2;
    const NAME: &'static str = "threshold sealed share";
    fn write_fields(&self, w: &mut Writer) {
        w.u64(self.session);
        w.u32(self.from);
        w.u32(self.to);
        w.bytes(&self.ciphertext);
    }
    fn read_fields(r: &mut Reader<'_>) -> std::result::Result<Self, DecodeError> {
        let session = r.u64()?;
        let from = r.u32()?;
        let to = r.u32()?;
        let ciphertext = r.bytes()?;
        if ciphertext.len() > MAX_SEALED_BYTES {
            return Err(r.invalid(format!(
                "{} sealed bytes, at most {MAX_SEALED_BYTES}",
                ciphertext.len()
            )));
        }
        Ok(Self {
            session,
            from,
            to,
            ciphertext: ciphertext.to_vec(),
        })
    }
}

/// One member's side of the setup round.
pub struct ThresholdSetup {
    id: PartyId,
    committee: Committee,
    session: u64,
    secret: StaticSecret,
    /// Every member's sealing key, once [`ThresholdSetup::deal`] has accepted them.
    peers: Option<BTreeMap<PartyId, [u8; 32]>>,
}

impl std::fmt::Debug for ThresholdSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThresholdSetup")
            .field("id", &self.id)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl ThresholdSetup {
    /// Member `party` of `committee` starts the setup of `session` with a fresh sealing key
    /// (OS randomness outside simulations).
    pub fn new(
        party: &Party,
        committee: &Committee,
        session: u64,
        rng: &mut (impl Rng + CryptoRng),
    ) -> Result<Self> {
        if committee.members().binary_search(&party.id()).is_err() {
            return Err(ProtocolError::Parameters(format!(
                "party {} is not a member of the committee",
                party.id()
            )));
        }
        let mut bytes = Zeroizing::new([0u8; 32]);
        rng.fill(&mut bytes[..]);
        Ok(Self {
            id: party.id(),
            committee: committee.clone(),
            session,
            secret: StaticSecret::from(*bytes),
            peers: None,
        })
    }

    /// Step 1: this member's sealing key.
    pub fn sealing_key(&self) -> SealingKey {
        SealingKey {
            session: self.session,
            party: self.id,
            public: PublicKey::from(&self.secret).to_bytes(),
        }
    }

    /// Step 2: with every member's sealing key, this member's shares, one sealed to each.
    pub fn deal(
        &mut self,
        party: &Party,
        keys: &[SealingKey],
        rng: &mut (impl Rng + CryptoRng),
    ) -> Result<Vec<SealedShare>> {
        if party.id() != self.id {
            return Err(ProtocolError::OutOfOrder(
                "deal with the party that started the setup".into(),
            ));
        }
        if self.peers.is_some() {
            // A second deal would seal fresh shares under the same one-use channel keys.
            return Err(misbehaved(
                Peer::Server,
                Misbehavior::Duplicate,
                format!("asked member {} to deal twice in one setup", self.id),
            ));
        }
        let mut peers = BTreeMap::new();
        for k in keys {
            let peer = Peer::Party(u64::from(k.party));
            if k.session != self.session {
                return Err(misbehaved(
                    peer,
                    Misbehavior::WrongRound,
                    format!("a sealing key of session {}", k.session),
                ));
            }
            if self.committee.members().binary_search(&k.party).is_err() {
                return Err(misbehaved(
                    peer,
                    Misbehavior::NotParticipant,
                    "not a committee member",
                ));
            }
            if peers.insert(k.party, k.public).is_some() {
                return Err(misbehaved(
                    peer,
                    Misbehavior::Duplicate,
                    "a second sealing key",
                ));
            }
        }
        if let Some(&missing) = self
            .committee
            .members()
            .iter()
            .find(|m| !peers.contains_key(m))
        {
            return Err(ProtocolError::Incomplete(format!(
                "no sealing key from member {missing}"
            )));
        }
        if peers.get(&self.id) != Some(&self.sealing_key().public) {
            return Err(misbehaved(
                Peer::Server,
                Misbehavior::Malformed,
                "the relayed keys replace this member's own",
            ));
        }
        let params = party.params();
        let shares = party.deal(&self.committee, self.session, rng)?;
        let sealed = shares
            .iter()
            .map(|s| {
                let key = self.channel_key(&peers, self.id, s.to())?;
                let plain = s.to_bytes(params);
                let ciphertext = seal(&key, self.session, self.id, s.to(), &plain)?;
                Ok(SealedShare {
                    session: self.session,
                    from: self.id,
                    to: s.to(),
                    ciphertext,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.peers = Some(peers);
        Ok(sealed)
    }

    /// Step 3: the shares addressed to this member, one from every member; its share of the
    /// collective secret.
    pub fn finish(&self, party: &Party, sealed: &[SealedShare]) -> Result<ThresholdParty> {
        let peers = self
            .peers
            .as_ref()
            .ok_or_else(|| ProtocolError::OutOfOrder("finish before deal".into()))?;
        let mut opened: BTreeMap<PartyId, SecretShare> = BTreeMap::new();
        for s in sealed {
            let peer = Peer::Party(u64::from(s.from));
            if s.session != self.session {
                return Err(misbehaved(
                    peer,
                    Misbehavior::WrongRound,
                    format!("a sealed share of session {}", s.session),
                ));
            }
            if s.to != self.id {
                return Err(misbehaved(
                    peer,
                    Misbehavior::Misaddressed,
                    format!("to {}", s.to),
                ));
            }
            if !peers.contains_key(&s.from) {
                return Err(misbehaved(
                    peer,
                    Misbehavior::NotParticipant,
                    "not a member",
                ));
            }
            if opened.contains_key(&s.from) {
                return Err(misbehaved(peer, Misbehavior::Duplicate, "a second share"));
            }
            let key = self.channel_key(peers, s.from, self.id)?;
            let plain = open(&key, self.session, s.from, self.id, &s.ciphertext)
                .map_err(|()| misbehaved(peer, Misbehavior::Tampered, "the share does not open"))?;
            let share = SecretShare::from_bytes(party.params(), &plain)?;
            if share.from() != s.from || share.to() != self.id {
                return Err(misbehaved(
                    peer,
                    Misbehavior::Malformed,
                    "the sealed share names other parties",
                ));
            }
            opened.insert(s.from, share);
        }
        let shares: Vec<SecretShare> = opened.into_values().collect();
        Ok(ThresholdParty::from_shares(
            party,
            &self.committee,
            self.session,
            &shares,
        )?)
    }

    /// The setup's state as bytes (its X25519 secret included), for the member's own storage
    /// between messages; [`ThresholdSetup::restore`] brings it back. Never restore an older
    /// copy: a member that dealt must not deal again under the same keys.
    pub fn save(&self) -> Zeroizing<Vec<u8>> {
        Zeroizing::new(crate::wire::encode(
            Method::Threshold,
            KIND_SETUP_STATE,
            |w| {
                w.u32(self.id);
                w.u64(self.session);
                w.len(self.committee.threshold());
                w.len(self.committee.members().len());
                self.committee.members().iter().for_each(|&m| w.u32(m));
                w.raw(self.secret.as_bytes());
                w.u8(u8::from(self.peers.is_some()));
                for (&m, key) in self.peers.iter().flatten() {
                    w.u32(m);
                    w.raw(key);
                }
            },
        ))
    }

    /// The setup [`ThresholdSetup::save`] wrote.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        Ok(crate::wire::decode(
            bytes,
            "threshold setup state",
            Method::Threshold,
            KIND_SETUP_STATE,
            |r| {
                let id = r.u32()?;
                let session = r.u64()?;
                let threshold = r.index()?;
                let n = r.count(4)?;
                let members = r.u32s(n)?;
                let committee =
                    Committee::new(threshold, &members).map_err(|e| r.invalid(e.to_string()))?;
                let secret = Zeroizing::new(r.array::<32>()?);
                let peers = if r.bool()? {
                    let mut peers = BTreeMap::new();
                    for _ in 0..committee.members().len() {
                        peers.insert(r.u32()?, r.array::<32>()?);
                    }
                    Some(peers)
                } else {
                    None
                };
                Ok(Self {
                    id,
                    committee,
                    session,
                    secret: StaticSecret::from(*secret),
                    peers,
                })
            },
        )?)
    }

    /// The one-use key of the channel `from → to`: HKDF of the X25519 agreement with the
    /// other member, bound to the session, the ordered pair and both public keys.
    fn channel_key(
        &self,
        peers: &BTreeMap<PartyId, [u8; 32]>,
        from: PartyId,
        to: PartyId,
    ) -> Result<Zeroizing<[u8; 16]>> {
        let other = if from == self.id { to } else { from };
        let (Some(from_key), Some(to_key), Some(other_key)) =
            (peers.get(&from), peers.get(&to), peers.get(&other))
        else {
            return Err(ProtocolError::OutOfOrder(
                "a channel to a non-member".into(),
            ));
        };
        let shared = self.secret.diffie_hellman(&PublicKey::from(*other_key));
        if !shared.was_contributory() {
            return Err(misbehaved(
                Peer::Party(u64::from(other)),
                Misbehavior::Malformed,
                "a sealing key of low order",
            ));
        }
        let mut info = Vec::with_capacity(26 + 8 + 8 + 64);
        info.extend_from_slice(b"privopt/threshold/share/v1");
        info.extend_from_slice(&self.session.to_le_bytes());
        info.extend_from_slice(&from.to_le_bytes());
        info.extend_from_slice(&to.to_le_bytes());
        info.extend_from_slice(from_key);
        info.extend_from_slice(to_key);
        let mut key = Zeroizing::new([0u8; 16]);
        Hkdf::<Sha256>::new(None, shared.as_bytes())
            .expand(&info, &mut key[..])
            .map_err(|_| ProtocolError::OutOfOrder("HKDF output length".into()))?;
        Ok(key)
    }
}

/// The associated data of a sealed share: who to whom in which session.
fn aad(session: u64, from: PartyId, to: PartyId) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..8].copy_from_slice(&session.to_le_bytes());
    a[8..12].copy_from_slice(&from.to_le_bytes());
    a[12..].copy_from_slice(&to.to_le_bytes());
    a
}

fn seal(key: &[u8; 16], session: u64, from: PartyId, to: PartyId, plain: &[u8]) -> Result<Vec<u8>> {
    // The key is used for this one message, so the zero nonce never repeats under it.
    Aes128Gcm::new(key.into())
        .encrypt(
            &Nonce::default(),
            Payload {
                msg: plain,
                aad: &aad(session, from, to),
            },
        )
        .map_err(|_| ProtocolError::OutOfOrder("AES-GCM sealing failed".into()))
}

fn open(
    key: &[u8; 16],
    session: u64,
    from: PartyId,
    to: PartyId,
    sealed: &[u8],
) -> std::result::Result<Zeroizing<Vec<u8>>, ()> {
    Aes128Gcm::new(key.into())
        .decrypt(
            &Nonce::default(),
            Payload {
                msg: sealed,
                aad: &aad(session, from, to),
            },
        )
        .map(Zeroizing::new)
        .map_err(|_| ())
}
