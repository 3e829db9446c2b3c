//! The collective key, ciphertexts and their sum, and fusion of decryption shares.

use std::sync::Arc;

use privopt_math::rns::{Coeff, Eval, Poly};
use privopt_math::sample::{ternary, uniform};
use rand::{CryptoRng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::shares::{DecryptionShare, PublicKeyShare, ShareCollector};
use super::{CommonPoly, PartyId};
use crate::encoding::{SlotEncoder, encode_scalar};
use crate::error::CkksError;
use crate::params::{CkksParams, DEFAULT_SMUDGING_LOG2};

/// The collective public key `(b̃, a)` of a set of members for one session.
#[derive(Clone, Debug)]
pub struct CollectivePublicKey {
    params: Arc<CkksParams>,
    session: u64,
    members: Vec<PartyId>,
    b: Poly<Eval>,
    a: Poly<Eval>,
}

impl CollectivePublicKey {
    /// `b̃ = Σ b_i` over every member's key share for `session`.
    pub fn aggregate(
        params: &Arc<CkksParams>,
        crs: &CommonPoly,
        members: &[PartyId],
        session: u64,
        shares: &[PublicKeyShare],
    ) -> Result<Self, CkksError> {
        let b = ShareCollector::aggregate(params, members, session, *crs.digest(), shares)?;
        let mut members = members.to_vec();
        members.sort_unstable();
        members.dedup();
        Ok(Self {
            params: Arc::clone(params),
            session,
            members,
            b,
            a: crs.poly().clone(),
        })
    }

    /// The parameters the key is under.
    pub fn params(&self) -> &Arc<CkksParams> {
        &self.params
    }

    /// The members whose secrets the key combines.
    pub fn members(&self) -> &[PartyId] {
        &self.members
    }

    /// Encrypts the integer coefficients `m` (an encoded message):
    /// `(c0, c1) = (v·b̃ + m + e0, v·a + e1)`.
    pub fn encrypt(&self, m: &[i64], rng: &mut impl CryptoRng) -> Result<Ciphertext, CkksError> {
        self.encrypt_lifted(m, 0, rng)
    }

    /// Encrypts `m·2^lift_log2` ([`lift_log2`]: what smudging sized for a statistical
    /// distance needs to leave the message its precision).
    pub fn encrypt_lifted(
        &self,
        m: &[i64],
        lift_log2: u32,
        rng: &mut impl CryptoRng,
    ) -> Result<Ciphertext, CkksError> {
        let n = self.params.n();
        if m.len() != n {
            return Err(CkksError::Encoding(format!(
                "{} coefficients for ring degree {n}",
                m.len()
            )));
        }
        let (c0, c1) = encrypt_lifted_with_key(&self.params, &self.b, &self.a, m, lift_log2, rng)?;
        Ok(Ciphertext {
            params: Arc::clone(&self.params),
            session: self.session,
            members: self.members.clone(),
            count: 1,
            c0,
            c1,
            seeded: None,
        })
    }

    /// Encrypts one scalar in the constant coefficient (coefficient encoding).
    pub fn encrypt_scalar(
        &self,
        x: f64,
        rng: &mut impl CryptoRng,
    ) -> Result<Ciphertext, CkksError> {
        self.encrypt(
            &encode_scalar(x, self.params.n(), self.params.scale_log2())?,
            rng,
        )
    }

    /// Encrypts up to `n/2` reals in the slots (canonical embedding).
    pub fn encrypt_vector(
        &self,
        encoder: &SlotEncoder,
        values: &[f64],
        rng: &mut impl CryptoRng,
    ) -> Result<Ciphertext, CkksError> {
        self.encrypt(&encoder.encode(values, self.params.scale_log2())?, rng)
    }
}

/// The ring arithmetic of encryption under any key `b` and common polynomial `a` (evaluation
/// form): `(v·b + m + e0, v·a + e1)` with fresh ternary `v` and Gaussian `e0`, `e1`.
/// [`CollectivePublicKey::encrypt`] wraps it; models that aggregate keys differently (EEZOFL's
/// modular over-the-air model) call it directly.
pub fn encrypt_with_key(
    params: &CkksParams,
    b: &Poly<Eval>,
    a: &Poly<Eval>,
    m: &[i64],
    rng: &mut impl CryptoRng,
) -> Result<(Poly<Eval>, Poly<Eval>), CkksError> {
    encrypt_lifted_with_key(params, b, a, m, 0, rng)
}

/// [`encrypt_with_key`] of `m·2^lift_log2` ([`lifted_plus_error`]).
fn encrypt_lifted_with_key(
    params: &CkksParams,
    b: &Poly<Eval>,
    a: &Poly<Eval>,
    m: &[i64],
    lift_log2: u32,
    rng: &mut impl CryptoRng,
) -> Result<(Poly<Eval>, Poly<Eval>), CkksError> {
    let (basis, n) = (params.basis(), params.n());
    let v = basis.to_eval(basis.from_signed(&ternary(n, rng)));
    let message = lifted_plus_error(params, m, lift_log2, rng)?;
    let mut c0 = basis.to_eval(message);
    let mut c1 = basis.to_eval(basis.from_signed(&params.error().sample_vec(n, rng)));
    basis.mul_acc(&mut c0, &v, b);
    basis.mul_acc(&mut c1, &v, a);
    Ok((c0, c1))
}

/// `m·2^lift_log2 + e` in coefficient form, `e` fresh error: the message part of an encryption
/// (public-key or secret-key), the lift applied before the error is added.
pub(crate) fn lifted_plus_error(
    params: &CkksParams,
    m: &[i64],
    lift_log2: u32,
    rng: &mut impl CryptoRng,
) -> Result<Poly<Coeff>, CkksError> {
    let basis = params.basis();
    let mut e = params.error().sample_vec(params.n(), rng);
    if lift_log2 == 0 {
        // The common case stays in 64 bits, without a wide buffer.
        for (e, x) in e.iter_mut().zip(m) {
            *e = e
                .checked_add(*x)
                .ok_or_else(|| CkksError::Encoding("message coefficient overflows".into()))?;
        }
        return Ok(basis.from_signed(&e));
    }
    let lift = 1i128
        .checked_shl(lift_log2)
        .filter(|_| lift_log2 < 64)
        .ok_or_else(|| CkksError::Encoding(format!("a lift of 2^{lift_log2}")))?;
    // |m| < 2^63 and lift ≤ 2^63: the product and sum stay inside i128.
    let coeffs: Vec<i128> = e
        .iter()
        .zip(m.iter().chain(std::iter::repeat(&0)))
        .map(|(&e, &x)| i128::from(x) * lift + i128::from(e))
        .collect();
    Ok(basis.from_signed_wide(&coeffs))
}

/// `log2` of the factor coefficient-encoded messages are lifted by (`m·2^lift` encrypted, the
/// lift undone on decoding): the bits by which the parameters' smudging exceeds the default
/// σ* = 2^20, so that smudging sized for a statistical distance leaves a decrypted value the
/// precision the default gives it (0 at the default; 37–40 bits at 2^57–2^60).
pub fn lift_log2(params: &CkksParams) -> u32 {
    (params.smudging_log2() - DEFAULT_SMUDGING_LOG2)
        .ceil()
        .max(0.0) as u32
}

/// `a` of a secret-key encryption of chunk `chunk` in `session` under the key whose common
/// polynomial has digest `crs`: every member encrypting that chunk derives the same `a`, so
/// their ciphertexts `(−a·s_i + m_i + e_i, a)` add up to one under `Σ s_i` with `c1 = a`, and
/// `a` never travels.
pub(crate) fn seeded_a(
    params: &CkksParams,
    crs: &[u8; 32],
    session: u64,
    chunk: u32,
) -> Poly<Eval> {
    let mut h = blake3::Hasher::new();
    h.update(b"privopt/mkckks/seeded-a/v1");
    h.update(params.fingerprint());
    h.update(crs);
    h.update(&session.to_le_bytes());
    h.update(&chunk.to_le_bytes());
    uniform(
        params.basis(),
        &mut ChaCha20Rng::from_seed(h.finalize().into()),
    )
}

/// What marks a sum of secret-key (seeded) encryptions: the common polynomial's digest and the
/// chunk its `c1 = a` is expanded from, and the parties whose secrets it is under (sorted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seeded {
    pub(crate) crs: [u8; 32],
    pub(crate) chunk: u32,
    pub(crate) contributors: Vec<PartyId>,
}

impl Seeded {
    /// The sum these mark, from its `c0`: `c1` is expanded again from the seed, and the
    /// count is the number of contributors.
    pub(crate) fn ciphertext(
        self,
        params: &Arc<CkksParams>,
        session: u64,
        members: Vec<PartyId>,
        c0: Poly<Eval>,
    ) -> Ciphertext {
        Ciphertext {
            params: Arc::clone(params),
            session,
            members,
            count: self.contributors.len() as u32, // at most a committee's size
            c0,
            c1: seeded_a(params, &self.crs, session, self.chunk),
            seeded: Some(self),
        }
    }
}

/// A (possibly summed) ciphertext under a collective key: a public-key encryption (under the
/// members' whole secret), or secret-key encryptions of some members (under their secrets
/// only; see [`crate::multiparty::ModelCodec::encrypt_secret`]), which only a threshold key
/// decrypts.
#[derive(Clone, Debug)]
pub struct Ciphertext {
    pub(crate) params: Arc<CkksParams>,
    pub(crate) session: u64,
    pub(crate) members: Vec<PartyId>,
    pub(crate) count: u32,
    pub(crate) c0: Poly<Eval>,
    pub(crate) c1: Poly<Eval>,
    pub(crate) seeded: Option<Seeded>,
}

impl Ciphertext {
    /// The homomorphic sum of ciphertexts under the same key and session.
    pub fn sum<'a>(cts: impl IntoIterator<Item = &'a Ciphertext>) -> Result<Ciphertext, CkksError> {
        let mut cts = cts.into_iter();
        let first = cts
            .next()
            .ok_or_else(|| CkksError::Mismatch("nothing to sum".into()))?;
        let rest = cts;
        let mut acc = first.clone();
        let basis = first.params.basis();
        for ct in rest {
            if ct.params.fingerprint() != first.params.fingerprint() {
                return Err(CkksError::Mismatch(
                    "ciphertexts under different parameters".into(),
                ));
            }
            if ct.session != first.session || ct.members != first.members {
                return Err(CkksError::Mismatch(format!(
                    "session {} / {} members vs session {} / {} members",
                    ct.session,
                    ct.members.len(),
                    first.session,
                    first.members.len()
                )));
            }
            basis.add_assign(&mut acc.c0, &ct.c0);
            match (&mut acc.seeded, &ct.seeded) {
                (None, None) => basis.add_assign(&mut acc.c1, &ct.c1),
                (Some(acc_seed), Some(seed)) => {
                    // Secret-key encryptions share `c1 = a`: the secrets add, `a` stays.
                    if acc_seed.crs != seed.crs || acc_seed.chunk != seed.chunk {
                        return Err(CkksError::Mismatch(format!(
                            "chunk {} of one key summed with chunk {} of another",
                            seed.chunk, acc_seed.chunk
                        )));
                    }
                    acc_seed.contributors =
                        merge_disjoint(&acc_seed.contributors, &seed.contributors)?;
                }
                _ => {
                    return Err(CkksError::Mismatch(
                        "a secret-key encryption summed with a public-key one".into(),
                    ));
                }
            }
            acc.count = acc
                .count
                .checked_add(ct.count)
                .ok_or_else(|| CkksError::Mismatch("too many ciphertexts in one sum".into()))?;
        }
        Ok(acc)
    }

    /// The parties whose secret-key encryptions this sums (sorted), or `None` for a
    /// public-key encryption (and sums of them).
    pub fn contributors(&self) -> Option<&[PartyId]> {
        self.seeded.as_ref().map(|s| s.contributors.as_slice())
    }

    /// Session the key was aggregated for.
    pub fn session(&self) -> u64 {
        self.session
    }

    /// Members whose shares decryption needs.
    pub fn members(&self) -> &[PartyId] {
        &self.members
    }

    /// Number of encryptions summed into this ciphertext.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// `c1` in evaluation form.
    pub fn c1(&self) -> &Poly<Eval> {
        &self.c1
    }

    /// `c0` in evaluation form.
    pub fn c0(&self) -> &Poly<Eval> {
        &self.c0
    }

    /// Fingerprint of the parameters.
    pub fn fingerprint(&self) -> &[u8; 32] {
        self.params.fingerprint()
    }

    /// Digest binding decryption shares to this ciphertext. A share `s_i·C1 + e*` depends on
    /// `C1` only, so the digest covers the parameters, the session and `C1`: every sum of
    /// secret-key encryptions of one chunk has the same digest whoever contributed, so a
    /// member answers for one of them only.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(b"privopt/mkckks/ciphertext/v1");
        h.update(self.params.fingerprint());
        h.update(&self.session.to_le_bytes());
        for x in self.c1.as_slice() {
            h.update(&x.to_le_bytes());
        }
        h.finalize().into()
    }
}

/// `a ∪ b` (both sorted), refused if a party is in both: its encryption would count twice.
fn merge_disjoint(a: &[PartyId], b: &[PartyId]) -> Result<Vec<PartyId>, CkksError> {
    let mut out: Vec<PartyId> = a.iter().chain(b).copied().collect();
    out.sort_unstable();
    if let Some(w) = out.windows(2).find(|w| w[0] == w[1]) {
        return Err(CkksError::Mismatch(format!(
            "party {}'s encryption is in both sums",
            w[0]
        )));
    }
    Ok(out)
}

/// Fusion: `C0 + Σ D_i` over every member's decryption share of `ct`.
pub fn fuse(ct: &Ciphertext, shares: &[DecryptionShare]) -> Result<Decrypted, CkksError> {
    refuse_seeded(ct)?;
    let mut m =
        ShareCollector::aggregate(&ct.params, &ct.members, ct.session, ct.digest(), shares)?;
    ct.params.basis().add_assign(&mut m, &ct.c0);
    Ok(Decrypted::new(Arc::clone(&ct.params), m))
}

/// Refuses a sum of secret-key encryptions where the N-of-N key would decrypt it: its `C1`
/// pairs with its contributors' secrets, not with every member's.
pub(crate) fn refuse_seeded(ct: &Ciphertext) -> Result<(), CkksError> {
    if ct.seeded.is_some() {
        return Err(CkksError::Mismatch(
            "a sum of secret-key encryptions is decrypted by a threshold key's members".into(),
        ));
    }
    Ok(())
}

/// A fused decryption: the message polynomial plus noise, not yet decoded.
#[derive(Clone, Debug)]
pub struct Decrypted {
    params: Arc<CkksParams>,
    m: Poly<Eval>,
}

impl Decrypted {
    pub(crate) fn new(params: Arc<CkksParams>, m: Poly<Eval>) -> Self {
        Self { params, m }
    }

    /// The integer coefficients (message times Λ, plus noise).
    pub fn integer_coefficients(&self) -> Result<Vec<i128>, CkksError> {
        let basis = self.params.basis();
        let coeffs = basis.to_coeff(self.m.clone());
        (0..self.params.n())
            .map(|j| {
                basis
                    .lift_small(&coeffs, j)
                    .ok_or(CkksError::DecodeOverflow { index: j })
            })
            .collect()
    }

    /// The scalar in the constant coefficient (coefficient encoding), read without an inverse NTT.
    pub fn scalar(&self) -> Result<f64, CkksError> {
        let basis = self.params.basis();
        // A lifted message (smudging sized for a distance) may exceed the first two primes.
        let v = basis.centered_f64(&basis.constant_coefficient(&self.m));
        if !v.is_finite() {
            return Err(CkksError::DecodeOverflow { index: 0 });
        }
        Ok(v / self.params.scale())
    }

    /// The slot values (slot encoding).
    pub fn vector(&self, encoder: &SlotEncoder) -> Result<Vec<f64>, CkksError> {
        let scale = self.params.scale();
        let coeffs: Vec<f64> = self
            .integer_coefficients()?
            .iter()
            .map(|&c| c as f64 / scale)
            .collect();
        Ok(encoder.decode(&coeffs))
    }
}
