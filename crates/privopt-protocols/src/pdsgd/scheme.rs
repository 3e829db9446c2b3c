//! The additively homomorphic encryption an agent uses: real Paillier, or a transparent
//! scheme with the same integer arithmetic in the clear (for long experiments; a test shows
//! both give bit-identical trajectories).

use num_traits::ToPrimitive;
use privopt_paillier::{BigInt, Ciphertext, KeyPair, PaillierError, PublicKey};
use rand::CryptoRng;

use crate::error::{ProtocolError, Result};
use crate::wire::{DecodeError, Reader, Writer};

/// Additively homomorphic encryption of `i64` plaintexts.
pub trait Scheme {
    /// What others encrypt to an agent with.
    type PublicKey: Clone;
    /// What only the agent holds.
    type SecretKey;
    /// A ciphertext.
    type Ct: Clone;

    /// `E_pk(m)`.
    fn encrypt(pk: &Self::PublicKey, m: i64, rng: &mut impl CryptoRng) -> Result<Self::Ct>;
    /// `E(a + b)`.
    fn add(pk: &Self::PublicKey, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct>;
    /// `E(k·a)`.
    fn mul(pk: &Self::PublicKey, a: &Self::Ct, k: i64) -> Result<Self::Ct>;
    /// `D_sk(c)`; an error if the plaintext does not fit `i64`.
    fn decrypt(sk: &Self::SecretKey, c: &Self::Ct) -> Result<i64>;
    /// Bytes of one ciphertext on the wire.
    fn ciphertext_bytes(pk: &Self::PublicKey) -> usize;
    /// Appends a ciphertext.
    fn write_ct(pk: &Self::PublicKey, c: &Self::Ct, w: &mut Writer);
    /// Reads and validates a ciphertext under `pk`.
    fn read_ct(
        pk: &Self::PublicKey,
        r: &mut Reader<'_>,
    ) -> std::result::Result<Self::Ct, DecodeError>;
    /// Appends a public key.
    fn write_public_key(pk: &Self::PublicKey, w: &mut Writer);
    /// Reads and validates a public key.
    fn read_public_key(r: &mut Reader<'_>) -> std::result::Result<Self::PublicKey, DecodeError>;
    /// Appends a secret key (for its owner's own storage, never the wire).
    fn write_secret_key(sk: &Self::SecretKey, w: &mut Writer);
    /// Reads a secret key, refusing one that does not belong to `pk`.
    fn read_secret_key(
        pk: &Self::PublicKey,
        r: &mut Reader<'_>,
    ) -> std::result::Result<Self::SecretKey, DecodeError>;
}

/// Paillier with `g = n + 1` (privopt-paillier); decryption is constant-time.
#[derive(Clone, Copy, Debug)]
pub enum Paillier {}

fn too_large(what: &str) -> ProtocolError {
    ProtocolError::Paillier(PaillierError::OutOfRange(format!(
        "{what} does not fit in i64"
    )))
}

impl Scheme for Paillier {
    type PublicKey = PublicKey;
    type SecretKey = KeyPair;
    type Ct = Ciphertext;

    fn encrypt(pk: &PublicKey, m: i64, rng: &mut impl CryptoRng) -> Result<Ciphertext> {
        Ok(pk.encrypt(&BigInt::from(m), rng)?)
    }
    fn add(pk: &PublicKey, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        Ok(pk.add(a, b))
    }
    fn mul(pk: &PublicKey, a: &Ciphertext, k: i64) -> Result<Ciphertext> {
        Ok(pk.mul_scalar(a, &BigInt::from(k)))
    }
    fn decrypt(sk: &KeyPair, c: &Ciphertext) -> Result<i64> {
        sk.decrypt(c)
            .to_i64()
            .ok_or_else(|| too_large("the decrypted value"))
    }
    fn ciphertext_bytes(pk: &PublicKey) -> usize {
        pk.ciphertext_bytes()
    }
    fn write_ct(pk: &PublicKey, c: &Ciphertext, w: &mut Writer) {
        w.raw(&c.to_bytes(pk));
    }
    fn read_ct(pk: &PublicKey, r: &mut Reader<'_>) -> std::result::Result<Ciphertext, DecodeError> {
        let bytes = r.fixed(pk.ciphertext_bytes())?;
        Ciphertext::from_bytes(pk, bytes).map_err(|e| r.invalid(e.to_string()))
    }
    fn write_public_key(pk: &PublicKey, w: &mut Writer) {
        w.bytes(&pk.to_bytes());
    }
    fn read_public_key(r: &mut Reader<'_>) -> std::result::Result<PublicKey, DecodeError> {
        let bytes = r.bytes()?;
        PublicKey::from_bytes(bytes).map_err(|e| r.invalid(e.to_string()))
    }
    fn write_secret_key(sk: &KeyPair, w: &mut Writer) {
        let mut bytes = sk.to_bytes();
        w.bytes(&bytes);
        zeroize::Zeroize::zeroize(&mut bytes);
    }
    fn read_secret_key(
        pk: &PublicKey,
        r: &mut Reader<'_>,
    ) -> std::result::Result<KeyPair, DecodeError> {
        let pair = KeyPair::from_bytes(r.bytes()?).map_err(|e| r.invalid(e.to_string()))?;
        if pair.public.to_bytes() != pk.to_bytes() {
            return Err(r.invalid("the key pair is not the agent's public key's"));
        }
        Ok(pair)
    }
}

/// The same arithmetic in the clear, with checked overflow (where Paillier would wrap mod n
/// and fail to decode, this fails at once).
#[derive(Clone, Copy, Debug)]
pub enum Transparent {}

/// A transparent "key": only the ciphertext size the real scheme would have, for accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransparentKey {
    /// Bytes a real ciphertext would take.
    pub ciphertext_bytes: usize,
}

impl Scheme for Transparent {
    type PublicKey = TransparentKey;
    type SecretKey = ();
    type Ct = i64;

    fn encrypt(_: &TransparentKey, m: i64, _: &mut impl CryptoRng) -> Result<i64> {
        Ok(m)
    }
    fn add(_: &TransparentKey, a: &i64, b: &i64) -> Result<i64> {
        a.checked_add(*b).ok_or_else(|| too_large("a sum"))
    }
    fn mul(_: &TransparentKey, a: &i64, k: i64) -> Result<i64> {
        a.checked_mul(k).ok_or_else(|| too_large("a product"))
    }
    fn decrypt(_: &(), c: &i64) -> Result<i64> {
        Ok(*c)
    }
    fn ciphertext_bytes(pk: &TransparentKey) -> usize {
        pk.ciphertext_bytes
    }
    fn write_ct(_: &TransparentKey, c: &i64, w: &mut Writer) {
        w.u64(*c as u64);
    }
    fn read_ct(_: &TransparentKey, r: &mut Reader<'_>) -> std::result::Result<i64, DecodeError> {
        Ok(r.u64()? as i64)
    }
    fn write_public_key(pk: &TransparentKey, w: &mut Writer) {
        w.len(pk.ciphertext_bytes);
    }
    fn read_public_key(r: &mut Reader<'_>) -> std::result::Result<TransparentKey, DecodeError> {
        Ok(TransparentKey {
            ciphertext_bytes: r.index()?,
        })
    }
    fn write_secret_key(_: &(), _: &mut Writer) {}
    fn read_secret_key(
        _: &TransparentKey,
        _: &mut Reader<'_>,
    ) -> std::result::Result<(), DecodeError> {
        Ok(())
    }
}
