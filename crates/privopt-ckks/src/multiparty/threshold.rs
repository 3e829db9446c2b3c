//! t-out-of-N xMK-CKKS: any `t` of the `N` parties decrypt a ciphertext under the collective
//! key, so a round survives up to `N − t` dropouts without re-keying.
//!
//! 1. **Re-sharing** (once, at setup): party `i` draws `f_i(X) = s_i + a_1·X + … + a_{t−1}·X^{t−1}`
//!    with `a_k` uniform in `R_Q` and sends `f_i(x_j)` to each member `j` (`x_j = j + 1`), over
//!    a channel only `j` can read (the transport's job: the roles layer encrypts each
//!    [`SecretShare`] to its recipient as SecAgg+ does). Member `j` keeps every `f_i(x_j)`:
//!    `S_j = Σ_i f_i(x_j) = F(x_j)` is its Shamir share of `s = Σ s_i`, and a sum over some
//!    members `C`, its share of `s_C = Σ_{i∈C} s_i` ([`ThresholdParty::from_shares`]), which
//!    decrypts a sum of those members' secret-key encryptions
//!    ([`crate::multiparty::ModelCodec::encrypt_secret`]: `c1 = a` is expanded from a seed, so
//!    an upload is one polynomial per chunk).
//! 2. **Active set**: before any share is asked for, the server fixes which members decrypt
//!    ([`ActiveSet`]: the ciphertext's digest and at least `t` members). The decryption shares
//!    are bound to it.
//! 3. **Decryption share**: member `j` of active set `A` returns
//!    `D_j = λ_j·S_j·C1 + e*_j` (`S_j` of `s_C` for a sum of `C`'s secret-key encryptions, at
//!    least `t` of them, so the server never decrypts a smaller group's sum) with the
//!    Lagrange coefficient `λ_j = Π_{k∈A, k≠j} x_k/(x_k − x_j)` (modulo each prime) and smudging noise `e*_j` ([`ThresholdParty::partial_decrypt`]), so
//!    `Σ_{j∈A} D_j = s·C1 + Σ e*_j` and [`fuse_threshold`] recovers `C0 + s·C1 + Σ e*`.
//! 4. **Single use**: a member answers at most one decryption request per ciphertext, whatever
//!    the active set or the session asking. Two shares of one ciphertext for two active sets
//!    differ by `(λ_j − λ'_j)·S_j·C1` plus noise, and repeated shares of the same secret are
//!    what key-recovery attacks on multiparty HE feed on; a failed round is retried on a fresh
//!    encryption (new randomness, new digest), never by asking again.

use std::collections::HashSet;
use std::sync::Arc;

use privopt_math::modarith::{inv_mod, mul_mod, sub_mod};
use privopt_math::rns::{Eval, Poly};
use privopt_math::sample::uniform;
use rand::CryptoRng;

use super::shares::{DecryptionShare, Share, ShareCollector, SharingRound};
use super::{Ciphertext, Decrypted, Party, PartyId};
use crate::error::CkksError;
use crate::params::CkksParams;

/// Most ciphertexts one member answers for (the single-use ledger's bound: 32 bytes each).
pub const MAX_ANSWERED: usize = 1 << 20;

/// The members of a threshold key and how many of them decrypt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committee {
    pub(crate) threshold: usize,
    pub(crate) members: Vec<PartyId>,
}

impl Committee {
    /// `threshold` of `members` (distinct; sorted here) decrypt. Wants `2 ≤ threshold ≤ N`: a
    /// threshold of 1 would let any single member decrypt alone.
    pub fn new(threshold: usize, members: &[PartyId]) -> Result<Self, CkksError> {
        let sorted = sorted_once(members, "a committee")?;
        if !(2..=sorted.len()).contains(&threshold) {
            return Err(CkksError::InvalidParams(format!(
                "threshold {threshold} of {} members: it must be in 2..={}",
                sorted.len(),
                sorted.len()
            )));
        }
        if sorted.last().is_some_and(|&p| p == PartyId::MAX) {
            return Err(CkksError::InvalidParams(format!(
                "party id {} has no Shamir point (x = id + 1 overflows)",
                PartyId::MAX
            )));
        }
        Ok(Self {
            threshold,
            members: sorted,
        })
    }

    /// How many members decrypt.
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// The members, sorted.
    pub fn members(&self) -> &[PartyId] {
        &self.members
    }

    fn contains(&self, party: PartyId) -> bool {
        self.members.binary_search(&party).is_ok()
    }

    /// Binds re-sharing messages to this committee (and the parameters and common polynomial).
    fn digest(&self, params: &CkksParams, crs_digest: &[u8; 32], session: u64) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(b"privopt/mkckks/threshold/committee/v1");
        h.update(params.fingerprint());
        h.update(crs_digest);
        h.update(&session.to_le_bytes());
        h.update(&(self.threshold as u64).to_le_bytes());
        for m in &self.members {
            h.update(&m.to_le_bytes());
        }
        h.finalize().into()
    }

    /// Refuses a decryption of `ct` by `members` (sorted) unless `ct` is under this
    /// committee's key and `members` are at least the threshold, all of the committee: other
    /// Lagrange weights would not sum to the collective secret.
    fn check_set(&self, ct: &Ciphertext, members: &[PartyId]) -> Result<(), CkksError> {
        if ct.members() != self.members() {
            return Err(CkksError::Mismatch(
                "the ciphertext is not under this committee's key".into(),
            ));
        }
        if let Some(&party) = members.iter().find(|&&p| !self.contains(p)) {
            return Err(CkksError::UnknownParty { party });
        }
        if members.len() < self.threshold {
            return Err(CkksError::InvalidParams(format!(
                "{} active members, the threshold is {}",
                members.len(),
                self.threshold
            )));
        }
        if let Some(contributors) = ct.contributors() {
            if let Some(&party) = contributors.iter().find(|&&p| !self.contains(p)) {
                return Err(CkksError::UnknownParty { party });
            }
            // Fewer would let the server decrypt a few members' updates, down to one.
            if contributors.len() < self.threshold {
                return Err(CkksError::InvalidParams(format!(
                    "a sum of {} members' encryptions, the threshold is {}",
                    contributors.len(),
                    self.threshold
                )));
            }
        }
        Ok(())
    }
}

/// `members` sorted, refused if one appears twice (`what` names the list).
pub(crate) fn sorted_once(members: &[PartyId], what: &str) -> Result<Vec<PartyId>, CkksError> {
    let mut sorted = members.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != members.len() {
        return Err(CkksError::InvalidParams(format!(
            "{what} lists each member once"
        )));
    }
    Ok(sorted)
}

/// The Shamir point of a party.
fn point(party: PartyId) -> u64 {
    u64::from(party) + 1
}

/// One party's share of its secret for one member: `f_i(x_j)`, a [`Share`] of the sharing
/// round from dealer `i` and its recipient. Secret (every copy wiped on drop, never
/// printed); the transport must encrypt it to `to`.
#[derive(Clone)]
pub struct SecretShare {
    pub(crate) to: PartyId,
    pub(crate) share: Share<SharingRound>,
}

impl SecretShare {
    /// The dealer.
    pub fn from(&self) -> PartyId {
        self.share.party
    }

    /// The recipient.
    pub fn to(&self) -> PartyId {
        self.to
    }
}

impl Drop for SecretShare {
    fn drop(&mut self) {
        self.share.poly.wipe();
    }
}

impl std::fmt::Debug for SecretShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretShare({} → {}, <redacted>)", self.from(), self.to)
    }
}

impl Party {
    /// Setup: this party's Shamir shares of its secret, one for each member of `committee`
    /// (itself included), for the key of `session`.
    pub fn deal(
        &self,
        committee: &Committee,
        session: u64,
        rng: &mut impl CryptoRng,
    ) -> Result<Vec<SecretShare>, CkksError> {
        if !committee.contains(self.id) {
            return Err(CkksError::UnknownParty { party: self.id });
        }
        let basis = self.params.basis();
        let binding = committee.digest(&self.params, &self.crs_digest, session);
        // f(X) = s + a_1·X + … + a_{t−1}·X^{t−1}, evaluated by Horner at each member's point.
        let mut coefficients: Vec<Poly<Eval>> = (1..committee.threshold)
            .map(|_| uniform(basis, rng))
            .collect();
        let shares = committee
            .members
            .iter()
            .map(|&to| {
                let x: Vec<u64> = basis.moduli().iter().map(|&q| point(to) % q).collect();
                let mut value = basis.zero();
                for a in coefficients.iter().rev() {
                    basis.add_assign(&mut value, a);
                    basis.mul_constants_assign(&mut value, &x);
                }
                basis.add_assign(&mut value, &self.sk.s);
                SecretShare {
                    to,
                    share: Share::new(self.id, session, binding, value),
                }
            })
            .collect();
        for a in &mut coefficients {
            a.wipe();
        }
        Ok(shares)
    }
}

/// Which members decrypt one ciphertext: fixed by the server before any share is asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveSet {
    pub(crate) session: u64,
    pub(crate) ciphertext: [u8; 32],
    pub(crate) members: Vec<PartyId>,
}

impl ActiveSet {
    /// `members` (at least the threshold, all in `committee`) decrypt `ct`.
    pub fn new(
        committee: &Committee,
        ct: &Ciphertext,
        members: &[PartyId],
    ) -> Result<Self, CkksError> {
        let sorted = sorted_once(members, "an active set")?;
        committee.check_set(ct, &sorted)?;
        Ok(Self {
            session: ct.session(),
            ciphertext: ct.digest(),
            members: sorted,
        })
    }

    /// `members` decrypt every ciphertext of `batch` (one model's chunks, say): one set and
    /// one request for them all, each member's shares bound to their place in the batch.
    pub fn for_batch(
        committee: &Committee,
        batch: &[Ciphertext],
        members: &[PartyId],
    ) -> Result<Self, CkksError> {
        let (session, digest) = batch_digest(batch)?;
        let sorted = sorted_once(members, "an active set")?;
        for ct in batch {
            committee.check_set(ct, &sorted)?;
        }
        Ok(Self {
            session,
            ciphertext: digest,
            members: sorted,
        })
    }

    /// The members asked for shares, sorted.
    pub fn members(&self) -> &[PartyId] {
        &self.members
    }

    /// Refuses a set made for another ciphertext than the one of `session` and `digest`.
    fn check_for(&self, session: u64, digest: &[u8; 32]) -> Result<(), CkksError> {
        if self.ciphertext != *digest || self.session != session {
            return Err(CkksError::Mismatch(
                "the active set was made for another ciphertext".into(),
            ));
        }
        Ok(())
    }

    /// What decryption shares for this set are bound to: the ciphertext and the members.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(b"privopt/mkckks/threshold/active-set/v1");
        h.update(&self.session.to_le_bytes());
        h.update(&self.ciphertext);
        for m in &self.members {
            h.update(&m.to_le_bytes());
        }
        h.finalize().into()
    }

    /// `λ_j` modulo each prime for this set.
    fn lagrange(&self, params: &CkksParams, party: PartyId) -> Vec<u64> {
        lagrange(params, &self.members, party)
    }
}

/// `λ_j` of `party` in `members` modulo each prime: `Π_{k≠j} x_k / (x_k − x_j)`.
pub(crate) fn lagrange(params: &CkksParams, members: &[PartyId], party: PartyId) -> Vec<u64> {
    let xj = point(party);
    params
        .basis()
        .moduli()
        .iter()
        .map(|&q| {
            let (mut num, mut den) = (1u64, 1u64);
            for &k in members.iter().filter(|&&k| k != party) {
                let xk = point(k) % q;
                num = mul_mod(num, xk, q);
                den = mul_mod(den, sub_mod(xk, xj % q, q), q);
            }
            mul_mod(num, inv_mod(den, q), q)
        })
        .collect()
}

/// What a batch of ciphertexts is known by: their session and a digest of every
/// ciphertext's digest in order (and of the contributors of secret-key encryptions). A batch
/// of one public-key ciphertext is known by its own digest, so a single ciphertext and a
/// batch of it are the same request. Refuses an empty batch and one that mixes sessions,
/// parameters or contributors.
pub fn batch_digest(batch: &[Ciphertext]) -> Result<(u64, [u8; 32]), CkksError> {
    let first = batch
        .first()
        .ok_or_else(|| CkksError::InvalidParams("an empty batch of ciphertexts".into()))?;
    if batch
        .iter()
        .any(|ct| ct.session() != first.session() || ct.fingerprint() != first.fingerprint())
    {
        return Err(CkksError::Mismatch(
            "a batch mixes sessions or parameters".into(),
        ));
    }
    if batch
        .iter()
        .any(|ct| ct.contributors() != first.contributors())
    {
        return Err(CkksError::Mismatch(
            "a batch mixes sums of different members' encryptions".into(),
        ));
    }
    let contributors = first.contributors();
    if batch.len() == 1 && contributors.is_none() {
        return Ok((first.session(), first.digest()));
    }
    let mut h = blake3::Hasher::new();
    h.update(b"privopt/mkckks/threshold/batch/v1");
    h.update(&(batch.len() as u64).to_le_bytes());
    for ct in batch {
        h.update(&ct.digest());
    }
    // A seeded chunk's digest is the same whoever contributed: the set binds them.
    if let Some(contributors) = contributors {
        h.update(&(contributors.len() as u64).to_le_bytes());
        for p in contributors {
            h.update(&p.to_le_bytes());
        }
    }
    Ok((first.session(), h.finalize().into()))
}

/// What the `k`-th share of a batch answered for `active` is bound to (the set's digest for
/// a batch of one).
fn chunk_binding(active: &ActiveSet, k: usize, len: usize) -> [u8; 32] {
    if len == 1 {
        return active.digest();
    }
    let mut h = blake3::Hasher::new();
    h.update(b"privopt/mkckks/threshold/chunk/v1");
    h.update(&active.digest());
    h.update(&(k as u64).to_le_bytes());
    h.finalize().into()
}

/// The smudging a threshold decryption needs for a stated statistical distance, and the
/// precision it leaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmudgingBound {
    /// `log2` of the standard deviation, per coefficient, of the decryption error the shares
    /// must hide.
    pub error_sd_log2: f64,
    /// `log2` of the per-member smudging σ* that puts what the server sees within `2^−λ`
    /// statistical distance of what it would see without that error, **from one honest
    /// member's noise alone** (the server with `t − 1` colluders may face a set of `t` with
    /// one honest member; the colluders' shares carry whatever noise they like).
    pub smudging_log2: f64,
    /// `log2` of the fused noise's standard deviation over the scale, with `answering`
    /// members' smudging: a decrypted value's error is about `2^precision_log2`.
    pub precision_log2: f64,
}

/// σ* for a threshold decryption of **one** sum of `encryptions` fresh public-key
/// encryptions under the key of `parties`, `answering` members answering: the error to hide
/// is the product rule of `docs/mkckks.md`, `V·ΣE + ΣE0 + S·ΣE1`, over the `n` coefficients
/// of the fused plaintext (which the fusing server sees). See [`flooding`] for the bound.
pub fn smudging_for_distance(
    params: &CkksParams,
    parties: usize,
    encryptions: usize,
    answering: usize,
    log2_distance: f64,
) -> SmudgingBound {
    let n = params.n() as f64;
    let sigma_e2 = params.error().sigma().powi(2);
    let secret_var = params.secret().variance(params.n());
    let (k, p) = (encryptions as f64, parties as f64);
    // V = Σ v (k ternary), ΣE over the parties' key errors, E0/E1 over the encryptions.
    let variance =
        n * (k * 2.0 / 3.0) * (p * sigma_e2) + k * sigma_e2 + n * (p * secret_var) * (k * sigma_e2);
    flooding(params, variance.sqrt(), n, answering, log2_distance)
}

/// σ* for a threshold decryption of one sum of `uploads` secret-key model uploads
/// ([`super::ModelCodec::encrypt_secret`]) of `values` values, decrypted as one batch: the
/// error to hide is the uploads' `Σe` (independent, σ·√uploads per coefficient) over every
/// coefficient of the batch.
pub fn model_smudging_for_distance(
    params: &CkksParams,
    values: usize,
    uploads: usize,
    answering: usize,
    log2_distance: f64,
) -> SmudgingBound {
    let coefficients = values.div_ceil(params.n()) * params.n();
    let sd = params.error().sigma() * (uploads as f64).sqrt();
    flooding(params, sd, coefficients as f64, answering, log2_distance)
}

/// Noise flooding for an error vector of `coefficients` coefficients of standard deviation
/// `error_sd`. Each coefficient is below `B = 13·sd` except with probability `< 2^−120` (a
/// sum of many independent terms, treated as Gaussian), so the vector's norm is below
/// `√coefficients·B`, and adding `N(0, σ²·I)` to a shift `v` moves the law by
/// `2Φ(‖v‖/2σ) − 1 ≤ ‖v‖/(√(2π)·σ)` in total variation (rounding to integers only lowers it).
/// Hence `σ* = √coefficients·B·2^λ/√(2π)`, required of every member's own noise.
fn flooding(
    params: &CkksParams,
    error_sd: f64,
    coefficients: f64,
    answering: usize,
    log2_distance: f64,
) -> SmudgingBound {
    let error_sd_log2 = error_sd.log2();
    let smudging_log2 = 0.5 * coefficients.log2() + error_sd_log2 + 13f64.log2() + log2_distance
        - (2.0 * std::f64::consts::PI).sqrt().log2();
    SmudgingBound {
        error_sd_log2,
        smudging_log2,
        precision_log2: smudging_log2 + 0.5 * (answering as f64).log2()
            - f64::from(params.scale_log2()),
    }
}

/// A member after setup: the Shamir share `f_i(x_j)` each member dealt it (their sum `S_j`
/// is its share of the collective secret; a partial sum, its share of some members' secrets),
/// and the ledger of ciphertexts it has answered for.
pub struct ThresholdParty {
    pub(crate) id: PartyId,
    pub(crate) params: Arc<CkksParams>,
    pub(crate) committee: Committee,
    pub(crate) crs_digest: [u8; 32],
    /// One share per dealer, in committee order.
    pub(crate) dealt: Vec<Poly<Eval>>,
    pub(crate) answered: HashSet<[u8; 32]>,
}

impl Drop for ThresholdParty {
    fn drop(&mut self) {
        for share in &mut self.dealt {
            share.wipe();
        }
    }
}

impl std::fmt::Debug for ThresholdParty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThresholdParty")
            .field("id", &self.id)
            .field("committee", &self.committee)
            .field("answered", &self.answered.len())
            .finish_non_exhaustive()
    }
}

impl ThresholdParty {
    /// Setup's end for `party`: one share from every member of `committee` (itself
    /// included), all addressed to it, for `session`. A missing, duplicate, misaddressed or
    /// foreign share is refused by name and nothing is kept.
    pub fn from_shares(
        party: &Party,
        committee: &Committee,
        session: u64,
        shares: &[SecretShare],
    ) -> Result<Self, CkksError> {
        let binding = committee.digest(&party.params, &party.crs_digest, session);
        let mut collector =
            ShareCollector::new(&party.params, committee.members(), session, binding)?;
        for s in shares {
            if s.to != party.id {
                return Err(CkksError::WrongBinding {
                    party: s.from(),
                    what: "recipient",
                });
            }
            // The collector checks member, session, binding and duplicates.
            collector.add(&s.share)?;
        }
        collector.finish()?.wipe();
        // Every member dealt exactly once (the collector saw to it): keep them by dealer.
        let dealt = committee
            .members()
            .iter()
            .map(|&dealer| {
                shares
                    .iter()
                    .find(|s| s.from() == dealer)
                    .map(|s| s.share.poly.clone())
                    .ok_or(CkksError::MissingShare { party: dealer })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            id: party.id,
            params: Arc::clone(&party.params),
            committee: committee.clone(),
            crs_digest: party.crs_digest,
            dealt,
            answered: HashSet::new(),
        })
    }

    /// This member's Shamir share of the secret a ciphertext is under: of every member's
    /// (a public-key encryption) or of its contributors' (secret-key encryptions). Refuses a
    /// seeded ciphertext of another key.
    fn share_for(&self, ct: &Ciphertext) -> Result<Poly<Eval>, CkksError> {
        let basis = self.params.basis();
        let mut share = basis.zero();
        let dealers: Vec<usize> = match &ct.seeded {
            None => (0..self.dealt.len()).collect(),
            Some(seeded) => {
                if seeded.crs != self.crs_digest {
                    return Err(CkksError::Mismatch(
                        "secret-key encryptions under another key's common polynomial".into(),
                    ));
                }
                seeded
                    .contributors
                    .iter()
                    .map(|p| {
                        self.committee
                            .members
                            .binary_search(p)
                            .map_err(|_| CkksError::UnknownParty { party: *p })
                    })
                    .collect::<Result<_, _>>()?
            }
        };
        for k in dealers {
            basis.add_assign(&mut share, &self.dealt[k]);
        }
        Ok(share)
    }

    /// This member's identifier.
    pub fn id(&self) -> PartyId {
        self.id
    }

    /// The committee it belongs to.
    pub fn committee(&self) -> &Committee {
        &self.committee
    }

    /// Whether this member has answered for `ct` (the single-use ledger).
    pub fn has_answered(&self, ct: &Ciphertext) -> bool {
        self.answered.contains(&ct.digest())
    }

    /// The decryption share `D_j = λ_j·S_j·C1 + e*_j` for `ct` as a member of `active`.
    /// Refuses a second request for the same ciphertext (for any active set), a set this
    /// member is not in, and a set made for another ciphertext.
    pub fn partial_decrypt(
        &mut self,
        ct: &Ciphertext,
        active: &ActiveSet,
        rng: &mut impl CryptoRng,
    ) -> Result<DecryptionShare, CkksError> {
        let mut shares = self.partial_decrypt_batch(std::slice::from_ref(ct), active, rng)?;
        shares
            .pop()
            .ok_or_else(|| CkksError::InvalidParams("an empty batch of ciphertexts".into()))
    }

    /// This member's shares of every ciphertext of `batch` (an [`ActiveSet::for_batch`] set),
    /// in order, under the rules of [`ThresholdParty::partial_decrypt`]: refused whole if any
    /// ciphertext of the batch was answered before, in this batch or another.
    pub fn partial_decrypt_batch(
        &mut self,
        batch: &[Ciphertext],
        active: &ActiveSet,
        rng: &mut impl CryptoRng,
    ) -> Result<Vec<DecryptionShare>, CkksError> {
        let (session, digest) = batch_digest(batch)?;
        if batch[0].fingerprint() != self.params.fingerprint() {
            return Err(CkksError::Mismatch(
                "ciphertext was made under other parameters".into(),
            ));
        }
        active.check_for(session, &digest)?;
        if active.members.binary_search(&self.id).is_err() {
            return Err(CkksError::UnknownParty { party: self.id });
        }
        // A set that came as bytes is checked as `ActiveSet::new` checks one.
        for ct in batch {
            self.committee.check_set(ct, &active.members)?;
        }
        let digests: Vec<[u8; 32]> = batch.iter().map(Ciphertext::digest).collect();
        if digests.iter().any(|d| self.answered.contains(d)) {
            return Err(CkksError::AlreadyAnswered { party: self.id });
        }
        if self.answered.len() + digests.len() > MAX_ANSWERED {
            return Err(CkksError::InvalidParams(format!(
                "party {} would answer for more than {MAX_ANSWERED} ciphertexts: re-key",
                self.id
            )));
        }
        // The batch has one contributor set (`batch_digest` saw to it): one secret for all.
        let mut weighted = self.share_for(&batch[0])?;
        // Recorded before any share exists: an error below still spends the ciphertexts.
        self.answered.extend(digests);
        let lambda = active.lagrange(&self.params, self.id);
        self.params
            .basis()
            .mul_constants_assign(&mut weighted, &lambda);
        let shares = batch
            .iter()
            .enumerate()
            .map(|(k, ct)| {
                let d = super::decryption_share(&self.params, &weighted, ct.c1(), rng)?;
                Ok(Share::new(
                    self.id,
                    session,
                    chunk_binding(active, k, batch.len()),
                    d,
                ))
            })
            .collect();
        weighted.wipe();
        shares
    }
}

/// `C0 + Σ_{j∈A} D_j`: the plaintext once every member of `active` has answered. Shares
/// outside the set, for another set or ciphertext, duplicates and missing members are refused
/// by name.
pub fn fuse_threshold(
    ct: &Ciphertext,
    active: &ActiveSet,
    shares: &[DecryptionShare],
) -> Result<Decrypted, CkksError> {
    active.check_for(ct.session(), &ct.digest())?;
    fuse_column(ct, active, active.digest(), shares.iter())
}

/// Every ciphertext of `batch` decrypted from the active members' shares: one list per member,
/// in batch order (as [`ThresholdParty::partial_decrypt_batch`] returns them). A list of the
/// wrong length, or a share out of its place, is refused by name.
pub fn fuse_threshold_batch(
    batch: &[Ciphertext],
    active: &ActiveSet,
    shares: &[Vec<DecryptionShare>],
) -> Result<Vec<Decrypted>, CkksError> {
    let (session, digest) = batch_digest(batch)?;
    active.check_for(session, &digest)?;
    if let Some(list) = shares.iter().find(|l| l.len() != batch.len()) {
        return Err(CkksError::Mismatch(format!(
            "party {} sent {} shares for a batch of {}",
            list.first().map_or(0, Share::party),
            list.len(),
            batch.len()
        )));
    }
    batch
        .iter()
        .enumerate()
        .map(|(k, ct)| {
            let binding = chunk_binding(active, k, batch.len());
            fuse_column(ct, active, binding, shares.iter().map(|l| &l[k]))
        })
        .collect()
}

/// `C0 + Σ D_j` of one ciphertext from one share per active member, each bound to `binding`.
fn fuse_column<'a>(
    ct: &Ciphertext,
    active: &ActiveSet,
    binding: [u8; 32],
    shares: impl Iterator<Item = &'a DecryptionShare>,
) -> Result<Decrypted, CkksError> {
    let mut column = ShareCollector::new(&ct.params, &active.members, ct.session(), binding)?;
    for share in shares {
        column.add(share)?;
    }
    let mut m = column.finish()?;
    ct.params.basis().add_assign(&mut m, ct.c0());
    Ok(Decrypted::new(Arc::clone(&ct.params), m))
}
