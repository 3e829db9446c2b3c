//! The server's side of a round.

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;

use crate::graph::Graph;
use crate::keys::{self, SecretKey};
use crate::mask::{MaskSeed, Sign, apply_all_parallel};
use crate::messages::*;
use crate::shamir::{self, Share};
use crate::{ClientId, SecAggError, check_context, pair_sign};

/// The public description of a round.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Session and round.
    pub context: Context,
    /// Who masks with whom.
    pub graph: Graph,
    /// Shares needed to reconstruct a secret (above half the degree, at most the degree).
    pub threshold: usize,
    /// Length of every input vector.
    pub vector_len: usize,
}

/// The result of a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aggregate {
    /// Σ inputs of the contributors, modulo 2^32.
    pub sum: Vec<u32>,
    /// Clients whose inputs are in the sum, increasing.
    pub contributors: Vec<ClientId>,
}

/// The server in one round: `receive_*` takes one client message of the current stage,
/// `finish_*` closes the stage (whoever has not answered has dropped) and returns the messages
/// for the next one. A refused message changes nothing; a round that falls below the threshold
/// aborts with [`SecAggError::BelowThreshold`] and refuses everything afterwards. A clone is a
/// checkpoint of the server's own (public) state.
#[derive(Clone)]
pub struct Server {
    config: ServerConfig,
    stage: Stage,
    aborted: bool,
    keys: BTreeMap<ClientId, PublicKeys>,
    shares: BTreeMap<ClientId, Vec<EncryptedShares>>,
    masked: BTreeSet<ClientId>,
    sum: Vec<u32>,
    unmask: BTreeMap<ClientId, UnmaskShares>,
}

impl Server {
    /// Opens a round in the key-advertising stage.
    pub fn new(config: ServerConfig) -> Result<Self, SecAggError> {
        crate::params::check_round(config.threshold, config.graph.degree(), config.vector_len)?;
        let sum = vec![0; config.vector_len];
        Ok(Self {
            config,
            stage: Stage::AdvertiseKeys,
            aborted: false,
            keys: BTreeMap::new(),
            shares: BTreeMap::new(),
            masked: BTreeSet::new(),
            sum,
            unmask: BTreeMap::new(),
        })
    }

    /// The current stage.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    fn neighbours(&self, c: ClientId) -> &[ClientId] {
        self.config.graph.neighbours(c)
    }

    /// Checks that the round is alive, the context is ours and `stage` is the current one.
    fn check_stage(&self, stage: Stage, context: &Context) -> Result<(), SecAggError> {
        if self.aborted {
            return Err(SecAggError::Aborted);
        }
        check_context(&self.config.context, context)?;
        if self.stage != stage {
            return Err(SecAggError::OutOfOrder {
                current: self.stage,
                got: stage,
            });
        }
        Ok(())
    }

    /// [`Server::check_stage`], then that `sender` is in the round, was live at the previous
    /// stage (`was_live`) and has not spoken in this one (`already`).
    fn admit(
        &self,
        stage: Stage,
        context: &Context,
        sender: ClientId,
        was_live: Option<&dyn Fn(ClientId) -> bool>,
        already: bool,
    ) -> Result<(), SecAggError> {
        self.check_stage(stage, context)?;
        if sender as usize >= self.config.graph.len() {
            return Err(SecAggError::UnexpectedClient {
                client: sender,
                reason: format!("not in this round's {} clients", self.config.graph.len()),
            });
        }
        if was_live.is_some_and(|live| !live(sender)) {
            return Err(SecAggError::UnexpectedClient {
                client: sender,
                reason: "dropped at an earlier stage".into(),
            });
        }
        if already {
            return Err(SecAggError::Duplicate(sender));
        }
        Ok(())
    }

    /// Fails unless at least `threshold` clients own secrets and each owner has at least
    /// `threshold` neighbours in `live`.
    fn require(
        &self,
        stage: Stage,
        owners: &BTreeSet<ClientId>,
        live: &BTreeSet<ClientId>,
    ) -> Result<(), SecAggError> {
        let t = self.config.threshold;
        if owners.len() < t {
            let client = owners.first().copied().unwrap_or(0);
            return Err(SecAggError::BelowThreshold {
                stage,
                client,
                live: owners.len(),
                threshold: t,
            });
        }
        for &c in owners {
            let count = self
                .neighbours(c)
                .iter()
                .filter(|n| live.contains(n))
                .count();
            if count < t {
                return Err(SecAggError::BelowThreshold {
                    stage,
                    client: c,
                    live: count,
                    threshold: t,
                });
            }
        }
        Ok(())
    }

    /// Marks the round aborted when `result` is a round-ending error.
    fn abort_on<T>(&mut self, result: Result<T, SecAggError>) -> Result<T, SecAggError> {
        if matches!(
            result,
            Err(SecAggError::BelowThreshold { .. } | SecAggError::Reconstruction(_))
        ) {
            self.aborted = true;
        }
        result
    }

    /// Stage 1: a client's public keys.
    pub fn receive_keys(&mut self, message: AdvertiseKeys) -> Result<(), SecAggError> {
        let dup = self.keys.contains_key(&message.sender);
        self.admit(
            Stage::AdvertiseKeys,
            &message.context,
            message.sender,
            None,
            dup,
        )?;
        // A low-order key would make every honest neighbour's agreement with it fail.
        keys::check_public(&message.keys.encryption)?;
        keys::check_public(&message.keys.masking)?;
        self.keys.insert(message.sender, message.keys);
        Ok(())
    }

    /// Closes stage 1 and relays to each live client its live neighbours' keys.
    pub fn finish_advertising(&mut self) -> Result<Vec<NeighbourKeys>, SecAggError> {
        self.check_stage(Stage::AdvertiseKeys, &self.config.context)?;
        let live: BTreeSet<ClientId> = self.keys.keys().copied().collect();
        let checked = self.require(Stage::AdvertiseKeys, &live, &live);
        self.abort_on(checked)?;
        let out = self
            .keys
            .keys()
            .map(|&c| NeighbourKeys {
                context: self.config.context,
                recipient: c,
                keys: self
                    .neighbours(c)
                    .iter()
                    .filter_map(|n| self.keys.get(n).map(|k| (*n, *k)))
                    .collect(),
            })
            .collect();
        self.stage = Stage::ShareKeys;
        Ok(out)
    }

    /// Stage 2: a client's encrypted shares, exactly one per live neighbour.
    pub fn receive_shares(&mut self, message: ShareKeys) -> Result<(), SecAggError> {
        let dup = self.shares.contains_key(&message.sender);
        let keys = &self.keys;
        let was_live = |c: ClientId| keys.contains_key(&c);
        self.admit(
            Stage::ShareKeys,
            &message.context,
            message.sender,
            Some(&was_live),
            dup,
        )?;
        let expected: Vec<ClientId> = self
            .neighbours(message.sender)
            .iter()
            .copied()
            .filter(|n| self.keys.contains_key(n))
            .collect();
        let got: Vec<ClientId> = message.shares.iter().map(|s| s.peer).collect();
        if got != expected {
            return Err(SecAggError::Malformed(format!(
                "client {} sent shares for {got:?}, its live neighbours are {expected:?}",
                message.sender
            )));
        }
        self.shares.insert(message.sender, message.shares);
        Ok(())
    }

    /// Closes stage 2 and routes to each sharing client the shares addressed to it.
    pub fn finish_sharing(&mut self) -> Result<Vec<IncomingShares>, SecAggError> {
        self.check_stage(Stage::ShareKeys, &self.config.context)?;
        let live: BTreeSet<ClientId> = self.shares.keys().copied().collect();
        let checked = self.require(Stage::ShareKeys, &live, &live);
        self.abort_on(checked)?;
        let mut inbox: BTreeMap<ClientId, Vec<EncryptedShares>> =
            self.shares.keys().map(|&c| (c, Vec::new())).collect();
        for (&from, outgoing) in &self.shares {
            for s in outgoing {
                if let Some(list) = inbox.get_mut(&s.peer) {
                    list.push(EncryptedShares {
                        peer: from,
                        ciphertext: s.ciphertext.clone(),
                    });
                }
            }
        }
        self.stage = Stage::MaskedInput;
        Ok(inbox
            .into_iter()
            .map(|(recipient, shares)| IncomingShares {
                context: self.config.context,
                recipient,
                shares,
            })
            .collect())
    }

    /// Stage 3: a masked input, added to the running sum at once (the server never keeps
    /// individual vectors).
    pub fn receive_masked(&mut self, message: &MaskedInput) -> Result<(), SecAggError> {
        let dup = self.masked.contains(&message.sender);
        let shares = &self.shares;
        let was_live = |c: ClientId| shares.contains_key(&c);
        self.admit(
            Stage::MaskedInput,
            &message.context,
            message.sender,
            Some(&was_live),
            dup,
        )?;
        if message.masked.len() != self.config.vector_len {
            return Err(SecAggError::Malformed(format!(
                "masked input of length {}, expected {}",
                message.masked.len(),
                self.config.vector_len
            )));
        }
        add_into(&mut self.sum, &message.masked);
        self.masked.insert(message.sender);
        Ok(())
    }

    /// Closes stage 3 and asks every contributor for the shares that remove the masks.
    pub fn finish_masking(&mut self) -> Result<Vec<UnmaskRequest>, SecAggError> {
        self.check_stage(Stage::MaskedInput, &self.config.context)?;
        // Every client that shared needs t surviving holders for its secret to be rebuilt.
        let owners: BTreeSet<ClientId> = self.shares.keys().copied().collect();
        let checked = self.require(Stage::MaskedInput, &owners, &self.masked);
        self.abort_on(checked)?;
        let survivors: Vec<ClientId> = self.masked.iter().copied().collect();
        self.stage = Stage::Unmask;
        Ok(survivors
            .iter()
            .map(|&recipient| UnmaskRequest {
                context: self.config.context,
                recipient,
                survivors: survivors.clone(),
            })
            .collect())
    }

    /// Stage 4: a survivor's shares: exactly one per neighbour that shared, of the right kind.
    pub fn receive_unmask(&mut self, message: UnmaskShares) -> Result<(), SecAggError> {
        let dup = self.unmask.contains_key(&message.sender);
        let masked = &self.masked;
        let was_live = |c: ClientId| masked.contains(&c);
        self.admit(
            Stage::Unmask,
            &message.context,
            message.sender,
            Some(&was_live),
            dup,
        )?;
        let sharers: Vec<ClientId> = self
            .neighbours(message.sender)
            .iter()
            .copied()
            .filter(|n| self.shares.contains_key(n))
            .collect();
        let (want_seeds, want_keys): (Vec<ClientId>, Vec<ClientId>) =
            sharers.iter().partition(|n| self.masked.contains(n));
        let owners = |list: &[(ClientId, Share)]| list.iter().map(|(o, _)| *o).collect::<Vec<_>>();
        if owners(&message.self_seed_shares) != want_seeds
            || owners(&message.mask_key_shares) != want_keys
        {
            return Err(SecAggError::Malformed(format!(
                "client {} must reveal seed shares of {want_seeds:?} and key shares of {want_keys:?}",
                message.sender
            )));
        }
        let all = message
            .self_seed_shares
            .iter()
            .chain(&message.mask_key_shares);
        if all.clone().any(|(_, s)| s.holder != message.sender) {
            return Err(SecAggError::Malformed(
                "a share held by someone else".into(),
            ));
        }
        // A limb outside the field would make the reconstruction fail for everyone: refuse
        // the reply (its sender is left out of the unmasking) instead.
        if all
            .flat_map(|(_, s)| s.limbs.iter())
            .any(|&l| l >= shamir::PRIME)
        {
            return Err(SecAggError::Malformed(format!(
                "client {} sent a share limb outside the field",
                message.sender
            )));
        }
        self.unmask.insert(message.sender, message);
        Ok(())
    }

    /// Closes stage 4: rebuilds the secrets, removes the masks and returns the sum.
    pub fn finish(&mut self) -> Result<Aggregate, SecAggError> {
        self.check_stage(Stage::Unmask, &self.config.context)?;
        let masks = self.unmask_seeds();
        let masks = self.abort_on(masks)?;
        let mut sum = std::mem::take(&mut self.sum);
        apply_all_parallel(&masks, &mut sum);
        self.stage = Stage::Done;
        Ok(Aggregate {
            sum,
            contributors: self.masked.iter().copied().collect(),
        })
    }

    /// Rebuilds every secret the unmasking needs and lists the masks to remove.
    fn unmask_seeds(&self) -> Result<Vec<(MaskSeed, Sign)>, SecAggError> {
        let t = self.config.threshold;
        // Collect shares by owner.
        let mut seed_shares: BTreeMap<ClientId, Vec<Share>> = BTreeMap::new();
        let mut key_shares: BTreeMap<ClientId, Vec<Share>> = BTreeMap::new();
        for reply in self.unmask.values() {
            for (owner, s) in &reply.self_seed_shares {
                seed_shares.entry(*owner).or_default().push(s.clone());
            }
            for (owner, s) in &reply.mask_key_shares {
                key_shares.entry(*owner).or_default().push(s.clone());
            }
        }
        let dropped: Vec<ClientId> = self
            .shares
            .keys()
            .copied()
            .filter(|c| !self.masked.contains(c))
            .collect();
        let mut masks: Vec<(MaskSeed, Sign)> = Vec::new();
        for &owner in &self.masked {
            let shares = seed_shares.get(&owner).map_or(&[][..], Vec::as_slice);
            let seed = rebuild(owner, shares, t)?;
            masks.push((MaskSeed(seed), Sign::Minus));
        }
        for &owner in &dropped {
            let partners: Vec<ClientId> = self
                .neighbours(owner)
                .iter()
                .copied()
                .filter(|n| self.masked.contains(n))
                .collect();
            if partners.is_empty() {
                continue;
            }
            let shares = key_shares.get(&owner).map_or(&[][..], Vec::as_slice);
            let secret = SecretKey::from_bytes(rebuild(owner, shares, t)?);
            if secret.public() != self.keys[&owner].masking {
                return Err(SecAggError::Reconstruction(format!(
                    "client {owner}'s masking key does not match its advertised public key"
                )));
            }
            for partner in partners {
                let seed = keys::pairwise_seed(
                    &secret,
                    &self.keys[&partner].masking,
                    &self.config.context,
                    owner,
                    partner,
                )?;
                // The partner added its mask with its own sign: take it back out.
                masks.push((seed, pair_sign(partner, owner).flip()));
            }
        }
        Ok(masks)
    }
}

/// Rebuilds `owner`'s secret from the revealed shares.
fn rebuild(owner: ClientId, shares: &[Share], t: usize) -> Result<[u8; 32], SecAggError> {
    if shares.len() < t {
        return Err(SecAggError::BelowThreshold {
            stage: Stage::Unmask,
            client: owner,
            live: shares.len(),
            threshold: t,
        });
    }
    shamir::combine(shares, t)
}

/// `acc += v` modulo 2^32, in parallel for long vectors.
fn add_into(acc: &mut [u32], v: &[u32]) {
    const CHUNK: usize = 1 << 16;
    acc.par_chunks_mut(CHUNK)
        .zip(v.par_chunks(CHUNK))
        .for_each(|(a, b)| {
            a.iter_mut()
                .zip(b)
                .for_each(|(x, y)| *x = x.wrapping_add(*y));
        });
}
