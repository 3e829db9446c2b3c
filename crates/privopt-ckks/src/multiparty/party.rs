//! The common polynomial, secret keys, and the party (device) state machine.

use std::sync::Arc;

use privopt_math::rns::{Coeff, Eval, Poly};
use privopt_math::sample::{signs, sparse_ternary, ternary, uniform, wide_gaussian};
use rand::{CryptoRng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use zeroize::Zeroize;

use super::shares::{DecryptionShare, PublicKeyShare, Share};
use super::{Ciphertext, PartyId};
use crate::error::CkksError;
use crate::params::{CkksParams, SecretDistribution};

/// The common public polynomial `a`, expanded from a public 32-byte seed (the CRS), so that
/// every party derives the same `a` without sending it.
#[derive(Clone, Debug)]
pub struct CommonPoly {
    seed: [u8; 32],
    a: Poly<Eval>,
    digest: [u8; 32],
}

impl CommonPoly {
    /// `a` from `seed` under `params`.
    pub fn from_seed(params: &CkksParams, seed: [u8; 32]) -> Self {
        let mut rng = ChaCha20Rng::from_seed(seed);
        let a = uniform(params.basis(), &mut rng);
        let mut h = blake3::Hasher::new();
        h.update(b"privopt/mkckks/crs/v1");
        h.update(params.fingerprint());
        h.update(&seed);
        Self {
            seed,
            a,
            digest: h.finalize().into(),
        }
    }

    /// The public seed.
    pub fn seed(&self) -> &[u8; 32] {
        &self.seed
    }

    /// `a` in evaluation form.
    pub fn poly(&self) -> &Poly<Eval> {
        &self.a
    }

    /// Digest binding key shares to this `a` (and these parameters).
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }
}

/// A party's secret `s_i` (evaluation form). Wiped on drop; never printed.
pub struct SecretKey {
    pub(crate) s: Poly<Eval>,
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        self.s.wipe();
    }
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

/// `b = −s·a + e` (evaluation form) for a secret `s` and error coefficients `e`.
pub fn partial_public_key(
    params: &CkksParams,
    s: &Poly<Eval>,
    a: &Poly<Eval>,
    e: &[i64],
) -> Poly<Eval> {
    rlwe_sample(params, s, a, params.basis().from_signed(e))
}

/// `−s·a + e` (evaluation form) for `e` in coefficient form: a public-key share when `e` is
/// the error, a secret-key encryption when it is the error plus the message.
pub(crate) fn rlwe_sample(
    params: &CkksParams,
    s: &Poly<Eval>,
    a: &Poly<Eval>,
    e: Poly<Coeff>,
) -> Poly<Eval> {
    let basis = params.basis();
    let mut b = basis.to_eval(e);
    let mut sa = basis.mul(s, a);
    basis.sub_assign(&mut b, &sa);
    sa.wipe();
    b
}

/// `s·c1 + e*` with smudging noise `e* ~ N(0, σ*²)` of the parameters (evaluation form).
pub fn decryption_share(
    params: &CkksParams,
    s: &Poly<Eval>,
    c1: &Poly<Eval>,
    rng: &mut impl CryptoRng,
) -> Result<Poly<Eval>, CkksError> {
    let basis = params.basis();
    let noise = wide_gaussian(params.n(), 2f64.powf(params.smudging_log2()), rng)?;
    let mut d = basis.to_eval(basis.from_signed_wide(&noise));
    basis.mul_acc(&mut d, s, c1);
    Ok(d)
}

/// One device: its secret, its partial public key, and the operations it performs.
#[derive(Debug)]
pub struct Party {
    pub(crate) id: PartyId,
    pub(crate) params: Arc<CkksParams>,
    pub(crate) sk: SecretKey,
    pub(crate) b: Poly<Eval>,
    pub(crate) crs_digest: [u8; 32],
}

impl Party {
    /// Samples `s_i` and computes `b_i = −s_i·a + e_i`. Use an OS-seeded generator
    /// ([`privopt_math::sample::secret_rng`]`(None)`) outside tests.
    pub fn generate(
        id: PartyId,
        params: &Arc<CkksParams>,
        crs: &CommonPoly,
        rng: &mut impl CryptoRng,
    ) -> Self {
        let basis = params.basis();
        let n = params.n();
        let mut s_coeffs = match params.secret() {
            SecretDistribution::Signs => signs(n, rng),
            SecretDistribution::Ternary => ternary(n, rng),
            SecretDistribution::Sparse(h) => sparse_ternary(n, h, rng),
        };
        let s = basis.to_eval(basis.from_signed(&s_coeffs));
        s_coeffs.zeroize();
        let e = params.error().sample_vec(n, rng);
        let b = partial_public_key(params, &s, crs.poly(), &e);
        Self {
            id,
            params: Arc::clone(params),
            sk: SecretKey { s },
            b,
            crs_digest: *crs.digest(),
        }
    }

    /// This party's identifier.
    pub fn id(&self) -> PartyId {
        self.id
    }

    /// The parameters it was generated under.
    pub fn params(&self) -> &Arc<CkksParams> {
        &self.params
    }

    /// Phase 1: the partial public key `b_i`, stamped with `session`.
    pub fn public_key_share(&self, session: u64) -> PublicKeyShare {
        Share::new(self.id, session, self.crs_digest, self.b.clone())
    }

    /// Phase 3: the decryption share `D_i = s_i·C1 + e*_i` for the aggregated ciphertext `ct`.
    pub fn partial_decrypt(
        &self,
        ct: &Ciphertext,
        rng: &mut impl CryptoRng,
    ) -> Result<DecryptionShare, CkksError> {
        if ct.fingerprint() != self.params.fingerprint() {
            return Err(CkksError::Mismatch(
                "ciphertext was made under other parameters".into(),
            ));
        }
        if !ct.members().contains(&self.id) {
            return Err(CkksError::UnknownParty { party: self.id });
        }
        super::cipher::refuse_seeded(ct)?;
        let d = decryption_share(&self.params, &self.sk.s, ct.c1(), rng)?;
        Ok(Share::new(self.id, ct.session(), ct.digest(), d))
    }
}
