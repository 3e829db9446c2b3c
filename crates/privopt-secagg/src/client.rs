//! The client's side of a round.

use std::collections::{BTreeMap, BTreeSet};

use rand::{CryptoRng, Rng};

use crate::keys::{self, SecretKey, SharePair};
use crate::mask::{MaskSeed, Sign};
use crate::messages::*;
use crate::shamir::{self, Share};
use crate::{ClientId, Error, check_context, pair_sign};

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
}

impl Client {
    /// Starts a round: draws the round's keys and self-mask seed and advertises the keys.
    pub fn new<R: Rng + CryptoRng + ?Sized>(
        config: ClientConfig,
        rng: &mut R,
    ) -> Result<(Self, AdvertiseKeys), Error> {
        let mut sorted = config.neighbours.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted != config.neighbours || sorted.contains(&config.id) {
            return Err(Error::Parameters(
                "neighbours must be increasing and exclude self".into(),
            ));
        }
        if config.threshold < 2 || config.threshold > config.neighbours.len() {
            return Err(Error::Parameters(format!(
                "threshold {} with {} neighbours (need 2 ≤ t ≤ neighbours)",
                config.threshold,
                config.neighbours.len()
            )));
        }
        let encryption = SecretKey::generate(rng);
        let masking = SecretKey::generate(rng);
        let mut seed = [0u8; 32];
        rng.fill(&mut seed);
        let advert = AdvertiseKeys {
            context: config.context,
            sender: config.id,
            keys: PublicKeys {
                encryption: encryption.public(),
                masking: masking.public(),
            },
        };
        let client = Self {
            config,
            stage: Stage::AdvertiseKeys,
            encryption,
            masking,
            self_seed: MaskSeed(seed),
            peers: BTreeMap::new(),
            held: BTreeMap::new(),
        };
        Ok((client, advert))
    }

    /// This client's id.
    pub fn id(&self) -> ClientId {
        self.config.id
    }

    /// The stage whose server message the client expects next.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    fn expect(&self, stage: Stage, context: &Context, recipient: ClientId) -> Result<(), Error> {
        check_context(&self.config.context, context)?;
        if self.stage != stage {
            return Err(Error::OutOfOrder {
                current: self.stage,
                got: stage,
            });
        }
        if recipient != self.config.id {
            return Err(Error::UnexpectedClient {
                client: recipient,
                reason: format!(
                    "message addressed to another client (I am {})",
                    self.config.id
                ),
            });
        }
        Ok(())
    }

    fn enough(&self, stage: Stage, live: usize) -> Result<(), Error> {
        if live < self.config.threshold {
            return Err(Error::BelowThreshold {
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
    ) -> Result<ShareKeys, Error> {
        self.expect(Stage::AdvertiseKeys, &message.context, message.recipient)?;
        let mut peers = BTreeMap::new();
        for (peer, keys) in &message.keys {
            if self.config.neighbours.binary_search(peer).is_err() {
                return Err(Error::UnexpectedClient {
                    client: *peer,
                    reason: "keys relayed for a client that is not my neighbour".into(),
                });
            }
            if peers.insert(*peer, *keys).is_some() {
                return Err(Error::Duplicate(*peer));
            }
        }
        self.enough(Stage::AdvertiseKeys, peers.len())?;
        let holders: Vec<ClientId> = peers.keys().copied().collect();
        let t = self.config.threshold;
        let key_shares = shamir::split(&self.masking.to_bytes(), &holders, t, rng)?;
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
    ) -> Result<MaskedInput, Error> {
        self.expect(Stage::ShareKeys, &message.context, message.recipient)?;
        if input.len() != self.config.vector_len {
            return Err(Error::Malformed(format!(
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
                .ok_or_else(|| Error::UnexpectedClient {
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
                return Err(Error::Duplicate(from));
            }
        }
        self.enough(Stage::ShareKeys, held.len())?;
        let mut masked = input.to_vec();
        self.self_seed.apply(&mut masked, 0, Sign::Plus);
        for &peer in held.keys() {
            let seed = keys::pairwise_seed(
                &self.masking,
                &self.peers[&peer].masking,
                &self.config.context,
                self.id(),
                peer,
            )?;
            seed.apply(&mut masked, 0, pair_sign(self.id(), peer));
        }
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
    pub fn unmask(&mut self, message: &UnmaskRequest) -> Result<UnmaskShares, Error> {
        self.expect(Stage::MaskedInput, &message.context, message.recipient)?;
        let survivors: BTreeSet<ClientId> = message.survivors.iter().copied().collect();
        if survivors.len() != message.survivors.len() {
            return Err(Error::Malformed("repeated survivor".into()));
        }
        if !survivors.contains(&self.id()) {
            return Err(Error::UnexpectedClient {
                client: self.id(),
                reason: "the survivor list omits me although I sent my masked input".into(),
            });
        }
        if let Some(&stranger) = survivors
            .iter()
            .find(|c| self.config.neighbours.binary_search(c).is_ok() && !self.held.contains_key(c))
        {
            // A neighbour that never shared with me cannot have masked with me.
            return Err(Error::UnexpectedClient {
                client: stranger,
                reason: "listed as a survivor but never shared keys with me".into(),
            });
        }
        let live = self.held.keys().filter(|c| survivors.contains(c)).count();
        self.enough(Stage::MaskedInput, live)?;
        let mut self_seed_shares: Vec<(ClientId, Share)> = Vec::new();
        let mut mask_key_shares: Vec<(ClientId, Share)> = Vec::new();
        for (&owner, pair) in &self.held {
            if survivors.contains(&owner) {
                self_seed_shares.push((owner, pair.self_seed));
            } else {
                mask_key_shares.push((owner, pair.mask_key));
            }
        }
        self.stage = Stage::Done;
        Ok(UnmaskShares {
            context: self.config.context,
            sender: self.id(),
            self_seed_shares,
            mask_key_shares,
        })
    }
}
