//! The dealing check: after setup, every dealer's Shamir shares are tested to lie on one
//! polynomial of degree `< t` whose constant is the secret of the dealer's public key share,
//! and a dealer whose shares do not is named.
//!
//! For dealer `i` and a set `S` of `t` members, member `j ∈ S` answers a few coefficients of
//! `λ_j^S·f_i(x_j)·(v·a) + e*_j`, with `v` a ternary polynomial expanded from the server's
//! fresh seed, `i` and `S`, and `a` the key's common polynomial. The server adds the first
//! coefficients of `v·b_i` (`b_i = −a·s_i + e_i`, the dealer's key share): the sum is
//! `(F_S(0) − s_i)·v·a + v·e_i + Σ e*`, small exactly when the interpolation through `S`'s
//! points has constant `s_i`, and a uniform residue otherwise. The sets are `T` (the first `t`
//! members present) and, for every other member `k` present, `T` without its last member plus
//! `k`: if all of them give `s_i`, every point lies on the polynomial through `T` (the
//! interpolant through `T_k` shares `t − 1` points and the constant with it, so `t` values of
//! a polynomial of degree `< t`).
//!
//! Why it is safe to answer:
//! - **Lagrange before noise.** A member answers `λ·y·c1 + e*` for each set, never `y·c1 + e`
//!   alone: with large public `λ`s, two noisy samples of `y` under one `c1` give the noise
//!   (a two-dimensional lattice problem per coefficient) and then `y`.
//! - **A fresh `c1` per dealer and set.** Each answer is for its own `v·a`, so no two answers
//!   share a `c1` (the single-use rule of decryption shares).
//! - **Once per setup**: the member records the check in its ledger and refuses a second one
//!   (a server with fresh seeds would collect samples of `v·e_i` with known `v`).
//! - **Not a real ciphertext.** `c1 = v·a` with `v` hashed from the seed: the server cannot
//!   make it any ciphertext's `c1`, so an answer decrypts nothing but the check's zero.
//! - **The dealer cannot tune its shares to the check**: the server draws the seed after
//!   every dealing has arrived, so `v` is unknown when the points are fixed; a wrong point
//!   leaves `(F_S(0) − s_i)·v·a`, uniform in the checked coefficients.
//!
//! Who is named: with honest answers, a failing dealer is a bad dealer. A member that answers
//! falsely makes its sets fail for every dealer; then the error names the set instead.

use privopt_math::modarith::add_mod;
use privopt_math::rns::{Eval, Poly};
use privopt_math::sample::{ternary, wide_gaussian};
use rand::{CryptoRng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::threshold::{lagrange, sorted_once};
use super::{Committee, CommonPoly, PartyId, PublicKeyShare, ThresholdParty};
use crate::error::CkksError;
use crate::params::CkksParams;

/// What the server asks of the members after setup: a fresh seed and the check sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DealingCheck {
    pub(crate) session: u64,
    pub(crate) seed: [u8; 32],
    pub(crate) sets: Vec<Vec<PartyId>>,
}

/// One member's answers: for every dealer in committee order and every check set it is in, in
/// set order, [`DealingCheck::coefficients`] coefficients in every prime (prime-major).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DealingAnswer {
    pub(crate) party: PartyId,
    pub(crate) check: [u8; 32],
    /// Coefficients per dealer and set.
    pub(crate) coefficients: usize,
    pub(crate) residues: Vec<u64>,
}

impl DealingAnswer {
    /// The answering member.
    pub fn party(&self) -> PartyId {
        self.party
    }
}

impl DealingCheck {
    /// The check of `committee`'s setup `session` among the members `present` (at least the
    /// threshold, all in the committee): `T` = the first `t` present, and `T` with its last
    /// member replaced by each other member present. `seed` must be drawn after every dealing
    /// has arrived (a dealer that knew it could tune its shares to pass).
    pub fn new(
        committee: &Committee,
        session: u64,
        seed: [u8; 32],
        present: &[PartyId],
    ) -> Result<Self, CkksError> {
        let present = sorted_once(present, "the members present for the dealing check")?;
        if let Some(&p) = present
            .iter()
            .find(|p| committee.members.binary_search(p).is_err())
        {
            return Err(CkksError::UnknownParty { party: p });
        }
        let t = committee.threshold;
        if present.len() < t {
            return Err(CkksError::InvalidParams(format!(
                "a dealing check needs {t} members present, got {}",
                present.len()
            )));
        }
        let sets = present[t - 1..]
            .iter()
            .map(|&last| {
                let mut set = present[..t - 1].to_vec();
                set.push(last);
                set
            })
            .collect();
        Ok(Self {
            session,
            seed,
            sets,
        })
    }

    /// The check sets, each sorted.
    pub fn sets(&self) -> &[Vec<PartyId>] {
        &self.sets
    }

    /// What answers are bound to.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(b"privopt/mkckks/dealing-check/v1");
        h.update(&self.session.to_le_bytes());
        h.update(&self.seed);
        for set in &self.sets {
            h.update(&(set.len() as u32).to_le_bytes());
            for m in set {
                h.update(&m.to_le_bytes());
            }
        }
        h.finalize().into()
    }

    /// Coefficients checked per dealer and set: enough that a uniform residue passes all of
    /// them with probability below 2^−128.
    pub fn coefficients(params: &CkksParams, committee: &Committee) -> usize {
        let room = params.basis().log_modulus() - bound_log2(params, committee) - 1.0;
        ((128.0 / room.max(1.0)).ceil() as usize).clamp(1, params.n())
    }

    /// `v` (evaluation form) for `dealer` and set `index`.
    fn challenge(
        &self,
        params: &CkksParams,
        crs: &CommonPoly,
        dealer: PartyId,
        index: usize,
    ) -> Poly<Eval> {
        let mut h = blake3::Hasher::new();
        h.update(b"privopt/mkckks/dealing-check/challenge/v1");
        h.update(params.fingerprint());
        h.update(crs.digest());
        h.update(&self.digest());
        h.update(&dealer.to_le_bytes());
        h.update(&(index as u64).to_le_bytes());
        let mut rng = ChaCha20Rng::from_seed(h.finalize().into());
        let basis = params.basis();
        basis.to_eval(basis.from_signed(&ternary(params.n(), &mut rng)))
    }

    /// The checked coefficients of `poly` (evaluation form), prime-major.
    fn head(params: &CkksParams, committee: &Committee, poly: Poly<Eval>) -> Vec<u64> {
        let (basis, n) = (params.basis(), params.n());
        let m = Self::coefficients(params, committee);
        let coeffs = basis.to_coeff(poly);
        let data = coeffs.as_slice();
        (0..basis.moduli().len())
            .flat_map(|i| data[i * n..i * n + m].iter().copied())
            .collect()
    }
}

/// `log2` of the bound a consistent dealing's sum stays below: `t` members' smudging at 13 σ
/// (`2^3.7`), with a bit for `v·e_i` (about 2^8 at n = 2^12) and rounding.
fn bound_log2(params: &CkksParams, committee: &Committee) -> f64 {
    params.smudging_log2() + 0.5 * (committee.threshold as f64).log2() + 5.0
}

/// The reserved ledger entry of the dealing check: one per member state, whatever the seed.
fn ledger_entry(crs: &CommonPoly) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(b"privopt/mkckks/dealing-check/answered/v1");
    h.update(crs.digest());
    h.finalize().into()
}

impl ThresholdParty {
    /// This member's answers to `check` (see the module docs), once per setup: a second check,
    /// whatever its seed, is refused (`DealingChecked`), also after a restore. `crs` is the
    /// key's common polynomial.
    pub fn answer_dealing_check(
        &mut self,
        check: &DealingCheck,
        crs: &CommonPoly,
        rng: &mut impl CryptoRng,
    ) -> Result<DealingAnswer, CkksError> {
        if *crs.digest() != self.crs_digest {
            return Err(CkksError::Mismatch(
                "the dealing check names another key's common polynomial".into(),
            ));
        }
        if !check.sets.iter().any(|s| s.contains(&self.id)) {
            return Err(CkksError::UnknownParty { party: self.id });
        }
        let t = self.committee.threshold;
        if let Some(set) = check.sets.iter().find(|s| {
            s.len() != t
                || s.windows(2).any(|w| w[0] >= w[1])
                || s.iter()
                    .any(|p| self.committee.members.binary_search(p).is_err())
        }) {
            return Err(CkksError::InvalidParams(format!(
                "dealing-check set {set:?}: {t} distinct members of the committee, sorted"
            )));
        }
        if check.sets.len() > self.committee.members.len() - t + 1 {
            return Err(CkksError::InvalidParams(format!(
                "{} dealing-check sets, at most N − t + 1 = {}",
                check.sets.len(),
                self.committee.members.len() - t + 1
            )));
        }
        // Recorded before anything is computed: a failed call spends the check too.
        if !self.answered.insert(ledger_entry(crs)) {
            return Err(CkksError::DealingChecked { party: self.id });
        }
        let params = std::sync::Arc::clone(&self.params);
        let basis = params.basis();
        let m = DealingCheck::coefficients(&params, &self.committee);
        let sigma = 2f64.powf(params.smudging_log2());
        let mut residues = Vec::new();
        for (d, &dealer) in self.committee.members.iter().enumerate() {
            for (index, set) in check.sets.iter().enumerate() {
                if !set.contains(&self.id) {
                    continue;
                }
                let c1 = basis.mul(&check.challenge(&params, crs, dealer, index), crs.poly());
                let mut weighted = basis.mul(&self.dealt[d], &c1);
                basis.mul_constants_assign(&mut weighted, &lagrange(&params, set, self.id));
                let mut head = DealingCheck::head(&params, &self.committee, weighted);
                let noise = wide_gaussian(m, sigma, rng)?;
                for (i, &q) in basis.moduli().iter().enumerate() {
                    for (r, &e) in head[i * m..(i + 1) * m].iter_mut().zip(&noise) {
                        *r = add_mod(*r, e.rem_euclid(i128::from(q)) as u64, q);
                    }
                }
                residues.extend(head);
            }
        }
        Ok(DealingAnswer {
            party: self.id,
            check: check.digest(),
            coefficients: m,
            residues,
        })
    }
}

/// Verifies every dealer's shares from the members' `answers` to `check` and the dealers'
/// public key shares `keys` (one per committee member). The first dealer whose checks fail is
/// named (`CkksError::BadDealing`); otherwise as [`failed_dealers`].
pub fn verify_dealing(
    params: &CkksParams,
    committee: &Committee,
    crs: &CommonPoly,
    keys: &[PublicKeyShare],
    check: &DealingCheck,
    answers: &[DealingAnswer],
) -> Result<(), CkksError> {
    match failed_dealers(params, committee, crs, keys, check, answers)?.first() {
        Some(&dealer) => Err(CkksError::BadDealing { dealer }),
        None => Ok(()),
    }
}

/// The dealers (sorted) whose shares fail `check`, from the members' `answers` and the
/// dealers' public key shares `keys`: a server leaves them out of every sum (the members
/// hold each dealer's shares apart, so the others' sums still decrypt). Refuses a missing,
/// duplicate, foreign or misshapen answer by party, and a set that fails for every dealer (a
/// member of it answered falsely: the set is named, no dealer is).
pub fn failed_dealers(
    params: &CkksParams,
    committee: &Committee,
    crs: &CommonPoly,
    keys: &[PublicKeyShare],
    check: &DealingCheck,
    answers: &[DealingAnswer],
) -> Result<Vec<PartyId>, CkksError> {
    let basis = params.basis();
    let (m, primes) = (
        DealingCheck::coefficients(params, committee),
        basis.moduli().len(),
    );
    let digest = check.digest();
    let mut answering: Vec<PartyId> = check.sets.iter().flatten().copied().collect();
    answering.sort_unstable();
    answering.dedup();
    // One answer per member of some set, bound to this check, of the right size.
    let mut by_party = Vec::with_capacity(answering.len());
    for &p in &answering {
        let mut found = answers.iter().filter(|a| a.party == p);
        let answer = found.next().ok_or(CkksError::MissingShare { party: p })?;
        if found.next().is_some() {
            return Err(CkksError::DuplicateShare { party: p });
        }
        if answer.check != digest {
            return Err(CkksError::WrongBinding {
                party: p,
                what: "dealing check",
            });
        }
        let sets_in = check.sets.iter().filter(|s| s.contains(&p)).count();
        let want = committee.members.len() * sets_in * m * primes;
        if answer.coefficients != m || answer.residues.len() != want {
            return Err(CkksError::Malformed {
                what: "dealing answer",
                reason: format!(
                    "party {p} sent {} residues of {} coefficients, expected {want} of {m}",
                    answer.residues.len(),
                    answer.coefficients
                ),
            });
        }
        by_party.push((p, answer, sets_in));
    }
    if let Some(a) = answers
        .iter()
        .find(|a| answering.binary_search(&a.party).is_err())
    {
        return Err(CkksError::UnknownParty { party: a.party });
    }
    let bound = 2f64.powf(bound_log2(params, committee));
    // failed[d][index]: dealer d's check on set `index` failed.
    let mut failed = vec![vec![false; check.sets.len()]; committee.members.len()];
    for (d, &dealer) in committee.members.iter().enumerate() {
        let key = keys
            .iter()
            .find(|k| k.party() == dealer)
            .ok_or(CkksError::MissingShare { party: dealer })?;
        for (index, set) in check.sets.iter().enumerate() {
            let v = check.challenge(params, crs, dealer, index);
            let mut sum = DealingCheck::head(params, committee, basis.mul(&v, &key.poly));
            for &member in set {
                let (_, answer, sets_in) = by_party
                    .iter()
                    .find(|(p, _, _)| *p == member)
                    .ok_or(CkksError::MissingShare { party: member })?;
                // Its answers run dealer-major, then over the sets it is in, in order.
                let position = check.sets[..index]
                    .iter()
                    .filter(|s| s.contains(&member))
                    .count();
                let start = (d * sets_in + position) * m * primes;
                let part = &answer.residues[start..start + m * primes];
                for (i, &q) in basis.moduli().iter().enumerate() {
                    for (s, &r) in sum[i * m..(i + 1) * m].iter_mut().zip(&part[i * m..]) {
                        if r >= q {
                            return Err(CkksError::Malformed {
                                what: "dealing answer",
                                reason: format!("party {member}: residue {r} is not below {q}"),
                            });
                        }
                        *s = add_mod(*s, r, q);
                    }
                }
            }
            failed[d][index] = (0..m).any(|j| {
                let column: Vec<u64> = (0..primes).map(|i| sum[i * m + j]).collect();
                basis.centered_f64(&column).abs() >= bound
            });
        }
    }
    if let Some(index) = (0..check.sets.len()).find(|&k| failed.iter().all(|f| f[k])) {
        return Err(CkksError::Mismatch(format!(
            "the dealing check on set {:?} fails for every dealer: a member of it answered \
             falsely",
            check.sets[index]
        )));
    }
    Ok(committee
        .members
        .iter()
        .zip(&failed)
        .filter(|(_, f)| f.iter().any(|&x| x))
        .map(|(&dealer, _)| dealer)
        .collect())
}
