//! The client's side of a round.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rand::{CryptoRng, Rng};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::keys::{self, SecretKey, SharePair};
use crate::mask::{MaskSeed, Sign, apply_all};
use crate::messages::*;
use crate::shamir::{self, Share};
use crate::{ClientId, SecAggError, check_context, pair_sign};

/// What a client knows before a round starts (all of it public).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// Session and round.
    pub context: Context,
    /// This client's id.
    pub id: ClientId,
    /// Its neighbours in the round's graph, increasing.
    pub neighbours: Vec<ClientId>,
    /// Shares needed to reconstruct a secret.
    pub threshold: usize,
    /// Length of the input vector.
    pub vector_len: usize,
}

impl ClientConfig {
    fn check(&self) -> Result<(), SecAggError> {
        let mut sorted = self.neighbours.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted != self.neighbours || sorted.contains(&self.id) {
            return Err(SecAggError::Parameters(
                "neighbours must be increasing and exclude self".into(),
            ));
        }
        crate::params::check_round(self.threshold, self.neighbours.len(), self.vector_len)
    }
}

/// Everything a client holds between stages, so a client whose process ends between two
/// stages can resume in another (a Flower ClientApp runs each message in a fresh process).
/// It holds the round's private keys, self-mask seed and the neighbours' shares: keep it as
/// secret as the client itself.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientSnapshot {
    /// The round's public facts.
    pub config: ClientConfig,
    /// The stage whose server message the client expects next.
    pub stage: Stage,
    /// The key-agreement secret the shares are sealed with.
    pub encryption_secret: Zeroizing<[u8; 32]>,
    /// The key-agreement secret the pairwise masks derive from.
    pub masking_secret: Zeroizing<[u8; 32]>,
    /// The self-mask seed.
    pub self_seed: Zeroizing<[u8; 32]>,
    /// The neighbours' public keys, by neighbour (from stage 2 on).
    pub peers: Vec<(ClientId, PublicKeys)>,
    /// The shares neighbours gave this client, by owner: (masking-key share, self-seed share)
    /// (from stage 3 on).
    pub held: Vec<(ClientId, Share, Share)>,
    /// The survivor list the unmask stage answered (stage `Done` only). A client restored
    /// from this snapshot answers that list again, identically, and refuses any other.
    pub answered: Option<Vec<ClientId>>,
}

impl std::fmt::Debug for ClientSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSnapshot")
            .field("config", &self.config)
            .field("stage", &self.stage)
            .finish_non_exhaustive()
    }
}

/// A client in one round. Each method consumes the server's message for the current stage and
/// returns the client's reply; a refused message leaves the client as it was.
pub struct Client {
    config: ClientConfig,
    stage: Stage,
    encryption: SecretKey,
    masking: SecretKey,
    self_seed: MaskSeed,
    peers: BTreeMap<ClientId, PublicKeys>,
    held: BTreeMap<ClientId, SharePair>,
    answered: Option<Vec<ClientId>>,
}

impl Client {
    /// Starts a round: draws the round's keys and self-mask seed and advertises the keys.
    pub fn new<R: Rng + CryptoRng + ?Sized>(
        config: ClientConfig,
        rng: &mut R,
    ) -> Result<(Self, AdvertiseKeys), SecAggError> {
        config.check()?;
        let encryption = SecretKey::generate(rng);
        let masking = SecretKey::generate(rng);
        let mut seed = [0u8; 32];
        rng.fill(&mut seed);
        let client = Self {
            config,
            stage: Stage::AdvertiseKeys,
            encryption,
            masking,
            self_seed: MaskSeed(seed),
            peers: BTreeMap::new(),
            held: BTreeMap::new(),
            answered: None,
        };
        let advert = client.advertisement();
        Ok((client, advert))
    }

    /// The stage-1 message: this round's public keys.
    pub fn advertisement(&self) -> AdvertiseKeys {
        AdvertiseKeys {
            context: self.config.context,
            sender: self.config.id,
            keys: PublicKeys {
                encryption: self.encryption.public(),
                masking: self.masking.public(),
            },
        }
    }

    /// This client's id.
    pub fn id(&self) -> ClientId {
        self.config.id
    }

    /// The stage whose server message the client expects next.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// The client's whole state, secrets included (see [`ClientSnapshot`]).
    pub fn snapshot(&self) -> ClientSnapshot {
        ClientSnapshot {
            config: self.config.clone(),
            stage: self.stage,
            encryption_secret: Zeroizing::new(self.encryption.to_bytes()),
            masking_secret: Zeroizing::new(self.masking.to_bytes()),
            self_seed: Zeroizing::new(self.self_seed.0),
            peers: self.peers.iter().map(|(&c, &k)| (c, k)).collect(),
            held: self
                .held
                .iter()
                .map(|(&c, p)| (c, p.mask_key.clone(), p.self_seed.clone()))
                .collect(),
            answered: self.answered.clone(),
        }
    }

    /// This client's round, named by what only this client of this round holds: the session,
    /// the round, its id and its fresh masking public key. Hosts key an [`UnmaskLedger`] by it,
    /// so every copy restored from one snapshot is the same client to the ledger.
    pub fn round_key(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"privopt secagg client round");
        h.update(self.config.context.session.0);
        h.update(self.config.context.round.to_le_bytes());
        h.update(self.config.id.to_le_bytes());
        h.update(self.masking.public());
        h.finalize().into()
    }

    /// The client a [`Client::snapshot`] was taken of. Refuses a snapshot no client could
    /// have produced: a bad configuration, keys or shares from non-neighbours, repeated
    /// entries, shares addressed to another holder, or state its stage cannot have.
    pub fn restore(snapshot: ClientSnapshot) -> Result<Self, SecAggError> {
        let ClientSnapshot {
            config,
            stage,
            encryption_secret,
            masking_secret,
            self_seed,
            peers: peer_list,
            held: held_list,
            answered,
        } = snapshot;
        config.check()?;
        let malformed =
            |what: &str| Err(SecAggError::Malformed(format!("client snapshot: {what}")));
        let mut peers = BTreeMap::new();
        for (peer, keys) in peer_list {
            if config.neighbours.binary_search(&peer).is_err() {
                return malformed("keys of a client that is not a neighbour");
            }
            if peers.insert(peer, keys).is_some() {
                return malformed("a neighbour's keys twice");
            }
        }
        let mut held = BTreeMap::new();
        for (owner, mask_key, seed) in held_list {
            if !peers.contains_key(&owner) {
                return malformed("shares from a client whose keys it does not hold");
            }
            if mask_key.holder != config.id || seed.holder != config.id {
                return malformed("shares addressed to another holder");
            }
            let pair = SharePair {
                mask_key,
                self_seed: seed,
            };
            if held.insert(owner, pair).is_some() {
                return malformed("a neighbour's shares twice");
            }
        }
        let consistent = match stage {
            Stage::AdvertiseKeys => peers.is_empty() && held.is_empty() && answered.is_none(),
            Stage::ShareKeys => held.is_empty() && answered.is_none(),
            Stage::MaskedInput => answered.is_none(),
            Stage::Done => true,
            Stage::Unmask => false,
        };
        if !consistent {
            return malformed("state its stage cannot hold");
        }
        if let Some(list) = &answered
            && list.windows(2).any(|w| w[0] >= w[1])
        {
            return malformed("an answered survivor list that is not increasing");
        }
        Ok(Self {
            config,
            stage,
            encryption: SecretKey::from_bytes(*encryption_secret),
            masking: SecretKey::from_bytes(*masking_secret),
            self_seed: MaskSeed(*self_seed),
            peers,
            held,
            answered,
        })
    }

    fn expect(
        &self,
        stage: Stage,
        context: &Context,
        recipient: ClientId,
    ) -> Result<(), SecAggError> {
        check_context(&self.config.context, context)?;
        if self.stage != stage {
            return Err(SecAggError::OutOfOrder {
                current: self.stage,
                got: stage,
            });
        }
        self.check_recipient(recipient)
    }

    fn check_recipient(&self, recipient: ClientId) -> Result<(), SecAggError> {
        if recipient != self.config.id {
            return Err(SecAggError::UnexpectedClient {
                client: recipient,
                reason: format!(
                    "message addressed to another client (I am {})",
                    self.config.id
                ),
            });
        }
        Ok(())
    }

    fn enough(&self, stage: Stage, live: usize) -> Result<(), SecAggError> {
        if live < self.config.threshold {
            return Err(SecAggError::BelowThreshold {
                stage,
                client: self.config.id,
                live,
                threshold: self.config.threshold,
            });
        }
        Ok(())
    }

    /// Stage 2: shares the masking key and self-mask seed among the neighbours whose keys the
    /// server relayed, each share encrypted to its holder.
    pub fn share_keys<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        message: &NeighbourKeys,
        rng: &mut R,
    ) -> Result<ShareKeys, SecAggError> {
        self.expect(Stage::AdvertiseKeys, &message.context, message.recipient)?;
        let mut peers = BTreeMap::new();
        for (peer, keys) in &message.keys {
            if self.config.neighbours.binary_search(peer).is_err() {
                return Err(SecAggError::UnexpectedClient {
                    client: *peer,
                    reason: "keys relayed for a client that is not my neighbour".into(),
                });
            }
            if peers.insert(*peer, *keys).is_some() {
                return Err(SecAggError::Duplicate(*peer));
            }
        }
        self.enough(Stage::AdvertiseKeys, peers.len())?;
        let holders: Vec<ClientId> = peers.keys().copied().collect();
        let t = self.config.threshold;
        let masking_secret = Zeroizing::new(self.masking.to_bytes());
        let key_shares = shamir::split(&masking_secret, &holders, t, rng)?;
        let seed_shares = shamir::split(&self.self_seed.0, &holders, t, rng)?;
        let mut shares = Vec::with_capacity(holders.len());
        for (mask_key, self_seed) in key_shares.into_iter().zip(seed_shares) {
            let to = mask_key.holder;
            let pair = SharePair {
                mask_key,
                self_seed,
            };
            let ciphertext = keys::seal(
                &pair,
                &self.encryption,
                &peers[&to],
                &self.config.context,
                self.id(),
                to,
            )?;
            shares.push(EncryptedShares {
                peer: to,
                ciphertext,
            });
        }
        self.peers = peers;
        self.stage = Stage::ShareKeys;
        Ok(ShareKeys {
            context: self.config.context,
            sender: self.id(),
            shares,
        })
    }

    /// Stage 3: stores the neighbours' shares and returns the masked input.
    pub fn mask_input(
        &mut self,
        message: &IncomingShares,
        input: &[u32],
    ) -> Result<MaskedInput, SecAggError> {
        self.expect(Stage::ShareKeys, &message.context, message.recipient)?;
        if input.len() != self.config.vector_len {
            return Err(SecAggError::Malformed(format!(
                "input of length {}, the round aggregates length {}",
                input.len(),
                self.config.vector_len
            )));
        }
        let mut held = BTreeMap::new();
        for incoming in &message.shares {
            let from = incoming.peer;
            let keys = self
                .peers
                .get(&from)
                .ok_or_else(|| SecAggError::UnexpectedClient {
                    client: from,
                    reason: "shares from a client whose keys I never received".into(),
                })?;
            let pair = keys::open(
                &incoming.ciphertext,
                &self.encryption,
                keys,
                &self.config.context,
                from,
                self.id(),
            )?;
            if held.insert(from, pair).is_some() {
                return Err(SecAggError::Duplicate(from));
            }
        }
        self.enough(Stage::ShareKeys, held.len())?;
        let pair_seeds = held
            .keys()
            .map(|&peer| {
                let seed = keys::pairwise_seed(
                    &self.masking,
                    &self.peers[&peer].masking,
                    &self.config.context,
                    self.id(),
                    peer,
                )?;
                Ok((seed, pair_sign(self.id(), peer)))
            })
            .collect::<Result<Vec<_>, SecAggError>>()?;
        let masks: Vec<(&MaskSeed, Sign)> = std::iter::once((&self.self_seed, Sign::Plus))
            .chain(pair_seeds.iter().map(|(seed, sign)| (seed, *sign)))
            .collect();
        let mut masked = input.to_vec();
        apply_all(&masks, &mut masked, 0);
        self.held = held;
        self.stage = Stage::MaskedInput;
        Ok(MaskedInput {
            context: self.config.context,
            sender: self.id(),
            masked,
        })
    }

    /// Stage 4: reveals, for each neighbour that shared, its self-mask seed share if it
    /// survived and its masking-key share if it dropped.
    ///
    /// The answer is single-use: once given, the client (and any client restored from a
    /// snapshot taken after it) answers only the same survivor list again, with the same
    /// shares, and refuses another list with [`SecAggError::Equivocation`]. A server that could ask
    /// twice with the victim alive in one list and dropped in the other would collect both
    /// of its secrets. Restoring a snapshot taken *before* the answer escapes this record: see
    /// [`UnmaskLedger`] and docs/security.md for what a snapshot's storage must guarantee.
    pub fn unmask(&mut self, message: &UnmaskRequest) -> Result<UnmaskShares, SecAggError> {
        check_context(&self.config.context, &message.context)?;
        if let Some(answered) = &self.answered {
            self.check_recipient(message.recipient)?;
            let mut asked = message.survivors.clone();
            asked.sort_unstable();
            if &asked != answered {
                return Err(SecAggError::Equivocation {
                    client: self.config.id,
                });
            }
            return Ok(self.unmask_reply(answered));
        }
        self.expect(Stage::MaskedInput, &message.context, message.recipient)?;
        let survivors: BTreeSet<ClientId> = message.survivors.iter().copied().collect();
        if survivors.len() != message.survivors.len() {
            return Err(SecAggError::Malformed("repeated survivor".into()));
        }
        if !survivors.contains(&self.id()) {
            return Err(SecAggError::UnexpectedClient {
                client: self.id(),
                reason: "the survivor list omits me although I sent my masked input".into(),
            });
        }
        if let Some(&stranger) = survivors
            .iter()
            .find(|c| self.config.neighbours.binary_search(c).is_ok() && !self.held.contains_key(c))
        {
            // A neighbour that never shared with me cannot have masked with me.
            return Err(SecAggError::UnexpectedClient {
                client: stranger,
                reason: "listed as a survivor but never shared keys with me".into(),
            });
        }
        let live = self.held.keys().filter(|c| survivors.contains(c)).count();
        self.enough(Stage::MaskedInput, live)?;
        // Recorded before the reply exists: the state that releases it already holds it.
        let answered: Vec<ClientId> = survivors.into_iter().collect();
        let reply = self.unmask_reply(&answered);
        self.answered = Some(answered);
        self.stage = Stage::Done;
        Ok(reply)
    }

    /// The unmask reply for `survivors` (increasing): a function of the held shares alone.
    fn unmask_reply(&self, survivors: &[ClientId]) -> UnmaskShares {
        let mut self_seed_shares: Vec<(ClientId, Share)> = Vec::new();
        let mut mask_key_shares: Vec<(ClientId, Share)> = Vec::new();
        for (&owner, pair) in &self.held {
            if survivors.binary_search(&owner).is_ok() {
                self_seed_shares.push((owner, pair.self_seed.clone()));
            } else {
                mask_key_shares.push((owner, pair.mask_key.clone()));
            }
        }
        UnmaskShares {
            context: self.config.context,
            sender: self.id(),
            self_seed_shares,
            mask_key_shares,
        }
    }
}

/// Most client rounds an [`UnmaskLedger`] remembers.
pub const UNMASK_LEDGER_CAPACITY: usize = 1 << 20;

/// The unmask answers a host has released, by [`Client::round_key`]: what makes a snapshot
/// single-use for the unmask stage when the host restores clients from snapshots. A client
/// restored from a snapshot taken before its answer does not know it answered; the ledger does,
/// and lets it answer only the survivor list it answered before.
///
/// The ledger is as good as its storage: a host whose clients live in several processes keeps
/// one ledger per process and must persist each client's snapshot after `unmask` and before
/// sending the reply (docs/security.md).
#[derive(Debug, Default)]
pub struct UnmaskLedger {
    answered: HashMap<[u8; 32], Vec<ClientId>>,
}

impl UnmaskLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Client rounds recorded.
    pub fn len(&self) -> usize {
        self.answered.len()
    }

    /// Whether no answer is recorded.
    pub fn is_empty(&self) -> bool {
        self.answered.is_empty()
    }

    /// [`Client::unmask`] with the ledger's record of this client's round: a copy restored
    /// from a snapshot older than its answer is given that answer back as its own record, so
    /// the client's single-use rule refuses another survivor list; a new answer is recorded
    /// before it is returned.
    pub fn unmask(
        &mut self,
        client: &mut Client,
        message: &UnmaskRequest,
    ) -> Result<UnmaskShares, SecAggError> {
        let key = client.round_key();
        if let Some(answered) = self.answered.get(&key) {
            client.answered = Some(answered.clone());
            client.stage = Stage::Done;
        } else if self.answered.len() >= UNMASK_LEDGER_CAPACITY {
            return Err(SecAggError::Parameters(format!(
                "the unmask ledger holds {UNMASK_LEDGER_CAPACITY} rounds; start a new one"
            )));
        }
        let reply = client.unmask(message)?;
        if let Some(list) = &client.answered {
            self.answered.insert(key, list.clone());
        }
        Ok(reply)
    }
}
