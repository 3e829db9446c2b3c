//! Plaintexts and ciphertexts of the leveled scheme. Both live in evaluation form over the
//! first `level + 1` ciphertext primes and carry their scale; a ciphertext also carries the
//! identifier of the secret it decrypts under.

use rand::CryptoRng;

/// Identifies a secret key and everything made from it: its public key, its switching keys and
/// every ciphertext encrypted or computed under it. Drawn at random when the secret is made
/// (64 bits, so two secrets share one with probability about `2^-64` per pair). It catches
/// mixing, not forgery: anyone can copy an identifier, and what it stops is a ciphertext of one
/// secret combined with a key or ciphertext of another, which would otherwise give a wrong
/// answer with no error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub(crate) u64);

impl KeyId {
    /// A fresh identifier.
    pub(crate) fn random(rng: &mut impl CryptoRng) -> Self {
        Self(rng.next_u64())
    }

    /// The identifier as a number (what the wire carries).
    pub fn get(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for KeyId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// An encoded message: evaluation form over `q_0 … q_level`, at scale `scale`.
#[derive(Clone, Debug, PartialEq)]
pub struct Plaintext {
    pub(crate) data: Vec<u64>,
    pub(crate) level: usize,
    pub(crate) scale: f64,
    /// Fingerprint of the parameters it was encoded under (checked by every operation).
    pub(crate) params: [u8; 32],
}

impl Plaintext {
    /// Level (number of primes minus one).
    pub fn level(&self) -> usize {
        self.level
    }

    /// Scale.
    pub fn scale(&self) -> f64 {
        self.scale
    }
}

/// A CKKS ciphertext `(c0, c1)` with `c0 + c1·s ≈ Δ·m`.
#[derive(Clone, Debug, PartialEq)]
pub struct Ciphertext {
    pub(crate) c0: Vec<u64>,
    pub(crate) c1: Vec<u64>,
    pub(crate) level: usize,
    pub(crate) scale: f64,
    /// Fingerprint of the parameters it was made under: every operation checks it, so a
    /// ciphertext of another parameter set is an error, not a panic or a wrong result.
    pub(crate) params: [u8; 32],
    /// The secret it decrypts under: decryption, key switching and operations with another
    /// ciphertext check it.
    pub(crate) key: KeyId,
}

impl Ciphertext {
    /// Level: how many rescalings it can still take.
    pub fn level(&self) -> usize {
        self.level
    }

    /// Scale `Δ` of the encoded message.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The identifier of the secret it decrypts under.
    pub fn key_id(&self) -> KeyId {
        self.key
    }

    /// Size in bytes of the residues (what a transfer costs, before any compression).
    pub fn byte_len(&self) -> usize {
        8 * (self.c0.len() + self.c1.len())
    }
}

/// The tensor product of two ciphertexts, `(d0, d1, d2)` decrypting under `(1, s, s²)`;
/// relinearization turns it back into a [`Ciphertext`].
#[derive(Clone, Debug)]
pub struct Product {
    pub(crate) d0: Vec<u64>,
    pub(crate) d1: Vec<u64>,
    pub(crate) d2: Vec<u64>,
    pub(crate) level: usize,
    pub(crate) scale: f64,
    pub(crate) params: [u8; 32],
    pub(crate) key: KeyId,
}

/// Refuses `tag` unless it is `ctx`'s parameter fingerprint; `what` names the operand.
pub(crate) fn check_params(
    ctx: &super::EvalContext,
    tag: &[u8; 32],
    what: &str,
) -> Result<(), crate::CkksError> {
    if tag == ctx.params().fingerprint() {
        Ok(())
    } else {
        Err(crate::CkksError::Mismatch(format!(
            "{what} made under other parameters"
        )))
    }
}

/// Refuses `found` unless it is `expected`; `what` names the operation.
pub(crate) fn check_key(expected: KeyId, found: KeyId, what: &str) -> Result<(), crate::CkksError> {
    if expected == found {
        Ok(())
    } else {
        Err(crate::CkksError::Mismatch(format!(
            "{what}: a ciphertext under key {found} where key {expected} was expected \
             (made from another secret key)"
        )))
    }
}
