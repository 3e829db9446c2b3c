//! The additive homomorphic backend of the pairwise protocol: real Paillier, or a transparent
//! backend doing the same integer arithmetic in the clear (for long experiments; a test shows
//! both give bit-identical trajectories).

use num_traits::ToPrimitive;
use privopt_math::StreamRng;
use privopt_paillier::{BigInt, Ciphertext, KeyPair, PublicKey};

use crate::error::{Error, Result};

/// Additively homomorphic encryption under per-agent keys.
pub trait Backend {
    /// A ciphertext under some agent's key.
    type Ct: Clone;
    /// `E_owner(m)`, by anyone.
    fn encrypt(&self, owner: usize, m: i64, rng: &mut StreamRng) -> Result<Self::Ct>;
    /// `E(a + b)`.
    fn add(&self, owner: usize, a: &Self::Ct, b: &Self::Ct) -> Self::Ct;
    /// `E(k·a)`.
    fn mul(&self, owner: usize, a: &Self::Ct, k: i64) -> Self::Ct;
    /// `D_owner(c)`, by the owner only.
    fn decrypt(&self, owner: usize, c: &Self::Ct) -> Result<i64>;
    /// Bytes on the wire of one ciphertext.
    fn ciphertext_bytes(&self, owner: usize) -> usize;
}

/// Real Paillier: one key pair per agent.
pub struct PaillierBackend {
    keys: Vec<KeyPair>,
}

impl PaillierBackend {
    /// Keys of `bits` bits for `agents` agents.
    pub fn generate(agents: usize, bits: u32, rng: &mut StreamRng) -> Result<Self> {
        let keys = (0..agents)
            .map(|_| KeyPair::generate(bits, rng).map_err(|e| Error::Protocol(e.to_string())))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { keys })
    }

    fn pk(&self, owner: usize) -> &PublicKey {
        &self.keys[owner].public
    }
}

impl Backend for PaillierBackend {
    type Ct = Ciphertext;
    fn encrypt(&self, owner: usize, m: i64, rng: &mut StreamRng) -> Result<Ciphertext> {
        self.pk(owner)
            .encrypt(&BigInt::from(m), rng)
            .map_err(|e| Error::Protocol(e.to_string()))
    }
    fn add(&self, owner: usize, a: &Ciphertext, b: &Ciphertext) -> Ciphertext {
        self.pk(owner).add(a, b)
    }
    fn mul(&self, owner: usize, a: &Ciphertext, k: i64) -> Ciphertext {
        self.pk(owner).mul_scalar(a, &BigInt::from(k))
    }
    fn decrypt(&self, owner: usize, c: &Ciphertext) -> Result<i64> {
        self.keys[owner]
            .decrypt(c)
            .to_i64()
            .ok_or_else(|| Error::Protocol("decrypted value does not fit in i64".into()))
    }
    fn ciphertext_bytes(&self, owner: usize) -> usize {
        self.pk(owner).ciphertext_bytes()
    }
}

/// The same integer arithmetic without encryption.
pub struct TransparentBackend {
    /// Bytes a real ciphertext would take (for communication accounting).
    pub ciphertext_bytes: usize,
}

impl Backend for TransparentBackend {
    type Ct = i64;
    fn encrypt(&self, _owner: usize, m: i64, _rng: &mut StreamRng) -> Result<i64> {
        Ok(m)
    }
    fn add(&self, _owner: usize, a: &i64, b: &i64) -> i64 {
        a + b
    }
    fn mul(&self, _owner: usize, a: &i64, k: i64) -> i64 {
        a * k
    }
    fn decrypt(&self, _owner: usize, c: &i64) -> Result<i64> {
        Ok(*c)
    }
    fn ciphertext_bytes(&self, _owner: usize) -> usize {
        self.ciphertext_bytes
    }
}
