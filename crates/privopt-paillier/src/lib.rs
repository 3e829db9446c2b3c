//! Paillier encryption over `Z*_{n²}` with `g = n + 1`, built for speed and for use on its own.
//! Pure Rust: big integers are `num-bigint` for key generation and the rare operations, and
//! this crate's own Montgomery kernel ([`mont`](self)) for every exponentiation and product
//! mod `p²`, `q²`, `n²`; no system library is needed.
//!
//! - [`keys`]: key generation (equal-size primes, `p ≠ q`, `gcd(n, φ(n)) = 1`), CRT decryption.
//! - [`Ciphertext`]: validated elements of `Z*_{n²}`, homomorphic addition and signed scalar
//!   multiplication, byte encoding.
//! - Encryption in three flavours, each with its cost and assumption stated:
//!   textbook `r^n` with full-size `r`; **DJN** short exponents `h_s^α` with a fixed-base table
//!   (Damgård–Jurik–Nielsen: security additionally rests on the hardness of the
//!   short-exponent subgroup problem, with 2κ = 256-bit α for κ = 128); and CRT for the key
//!   owner. Obfuscators can be drawn ahead of time from an [`ObfuscatorPool`], leaving one
//!   multiplication online.
//! - [`encoding`]: signed integers in `(−n/2, n/2)` and signed fixed point.

mod cipher;
pub mod encoding;
pub mod keys;
mod mont;
mod primes;

pub use cipher::{Ciphertext, Obfuscator, ObfuscatorPool};
pub use keys::{KeyPair, PublicKey, SecretKey};
pub use num_bigint::{BigInt, BigUint};

/// Errors of the Paillier layer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum PaillierError {
    /// Unsupported key size.
    #[error(
        "modulus size {0} bits is not supported (use 1024, 2048, 3072 or 4096; 1024 for tests only)"
    )]
    KeySize(u32),
    /// A key size below the 2048-bit minimum, asked for without the explicit opt-in.
    #[error(
        "a {0}-bit modulus is below the 2048-bit minimum (about 112-bit security); use 2048 or \
         more, or generate_insecure_for_testing in tests"
    )]
    Insecure(u32),
    /// A value that is not a valid ciphertext for this key.
    #[error("invalid ciphertext: {0}")]
    InvalidCiphertext(String),
    /// A plaintext outside the encodable range.
    #[error("plaintext out of range: {0}")]
    OutOfRange(String),
    /// Bytes that do not decode.
    #[error("malformed bytes: {0}")]
    Malformed(String),
}
