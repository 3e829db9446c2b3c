//! Plaintexts and ciphertexts of the leveled scheme. Both live in evaluation form over the
//! first `level + 1` ciphertext primes and carry their scale.

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
