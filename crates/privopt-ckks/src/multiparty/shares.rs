//! Typed shares and the one place that validates and combines them.

use std::marker::PhantomData;
use std::sync::Arc;

use privopt_math::rns::{Eval, Poly};

use super::PartyId;
use crate::error::CkksError;
use crate::params::CkksParams;

/// A protocol round whose messages are shares of a sum.
pub trait Round: private::Sealed {
    /// Round name, for messages.
    const NAME: &'static str;
    /// What the binding digest identifies.
    const BINDING: &'static str;
    /// Wire tag.
    const TAG: u8;
}

mod private {
    pub trait Sealed {}
    impl Sealed for super::KeyRound {}
    impl Sealed for super::DecryptRound {}
    impl Sealed for super::SharingRound {}
}

/// Phase 1: partial public keys `b_i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRound {}
/// Phase 3: decryption shares `D_i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecryptRound {}
/// Threshold setup: Shamir shares `f_i(x_j)` of the parties' secrets (checked by the
/// collector, carried by [`super::threshold::SecretShare`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharingRound {}

impl Round for KeyRound {
    const NAME: &'static str = "public-key share";
    const BINDING: &'static str = "common polynomial";
    const TAG: u8 = 1;
}

impl Round for DecryptRound {
    const NAME: &'static str = "decryption share";
    const BINDING: &'static str = "ciphertext";
    const TAG: u8 = 2;
}

impl Round for SharingRound {
    const NAME: &'static str = "secret share";
    const BINDING: &'static str = "committee";
    // The wire's message kinds 3–10 are taken by ciphertexts and keys.
    const TAG: u8 = 11;
}

/// One party's share in round `R`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share<R: Round> {
    pub(crate) party: PartyId,
    pub(crate) session: u64,
    pub(crate) binding: [u8; 32],
    pub(crate) poly: Poly<Eval>,
    pub(crate) round: PhantomData<R>,
}

/// A partial public key `b_i`.
pub type PublicKeyShare = Share<KeyRound>;
/// A partial decryption `D_i`.
pub type DecryptionShare = Share<DecryptRound>;

impl<R: Round> Share<R> {
    pub(crate) fn new(party: PartyId, session: u64, binding: [u8; 32], poly: Poly<Eval>) -> Self {
        Self {
            party,
            session,
            binding,
            poly,
            round: PhantomData,
        }
    }

    /// The sending party.
    pub fn party(&self) -> PartyId {
        self.party
    }

    /// The session (protocol round) the share was made for.
    pub fn session(&self) -> u64 {
        self.session
    }

    /// Digest of what the share is bound to (common polynomial or ciphertext).
    pub fn binding(&self) -> &[u8; 32] {
        &self.binding
    }

    /// The share's polynomial (evaluation form).
    pub fn poly(&self) -> &Poly<Eval> {
        &self.poly
    }
}

/// Collects the shares of one round from a fixed set of members, validating each on arrival
/// and keeping only the running sum.
pub struct ShareCollector<R: Round> {
    params: Arc<CkksParams>,
    members: Vec<PartyId>,
    session: u64,
    binding: [u8; 32],
    received: Vec<bool>,
    sum: Poly<Eval>,
    round: PhantomData<R>,
}

impl<R: Round> ShareCollector<R> {
    /// A collector expecting one share from each of `members` (sorted and deduplicated here),
    /// for `session`, bound to `binding`.
    pub fn new(
        params: &Arc<CkksParams>,
        members: &[PartyId],
        session: u64,
        binding: [u8; 32],
    ) -> Result<Self, CkksError> {
        let mut members = members.to_vec();
        members.sort_unstable();
        members.dedup();
        if members.is_empty() {
            return Err(CkksError::InvalidParams(
                "a share collection needs at least one member".into(),
            ));
        }
        Ok(Self {
            params: Arc::clone(params),
            received: vec![false; members.len()],
            members,
            session,
            binding,
            sum: params.basis().zero(),
            round: PhantomData,
        })
    }

    /// Validates `share` and adds it to the sum; a rejected share changes nothing.
    pub fn add(&mut self, share: &Share<R>) -> Result<(), CkksError> {
        let party = share.party;
        let slot = self
            .members
            .binary_search(&party)
            .map_err(|_| CkksError::UnknownParty { party })?;
        if share.session != self.session {
            return Err(CkksError::WrongSession {
                party,
                got: share.session,
                expected: self.session,
            });
        }
        if share.binding != self.binding {
            return Err(CkksError::WrongBinding {
                party,
                what: R::BINDING,
            });
        }
        if self.received[slot] {
            return Err(CkksError::DuplicateShare { party });
        }
        // A share of another ring (made by a party under other parameters) would not add.
        if share.poly.as_slice().len() != self.sum.as_slice().len() {
            return Err(CkksError::Mismatch(format!(
                "party {party}'s {} has another ring size",
                R::NAME
            )));
        }
        self.params.basis().add_assign(&mut self.sum, &share.poly);
        self.received[slot] = true;
        Ok(())
    }

    /// The members whose share has not arrived.
    pub fn missing(&self) -> Vec<PartyId> {
        self.members
            .iter()
            .zip(&self.received)
            .filter(|(_, r)| !**r)
            .map(|(p, _)| *p)
            .collect()
    }

    /// The sum of all members' shares; an error names the first missing member.
    pub fn finish(self) -> Result<Poly<Eval>, CkksError> {
        match self.missing().first() {
            Some(&party) => Err(CkksError::MissingShare { party }),
            None => Ok(self.sum),
        }
    }

    /// Collects a whole batch: `add` each share, then `finish`.
    pub fn aggregate(
        params: &Arc<CkksParams>,
        members: &[PartyId],
        session: u64,
        binding: [u8; 32],
        shares: &[Share<R>],
    ) -> Result<Poly<Eval>, CkksError> {
        let mut c = Self::new(params, members, session, binding)?;
        for s in shares {
            c.add(s)?;
        }
        c.finish()
    }
}
