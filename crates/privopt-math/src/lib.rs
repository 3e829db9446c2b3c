//! Arithmetic foundations of privopt.
//!
//! - [`prg`]: the one source of reproducible randomness — every random stream of an
//!   experiment is derived from one master seed by a domain-separated key.
//! - [`aes_ctr`]: AES-128-CTR on VAES-512, its keystream added to words as it is made (masks).
//! - [`chacha`]: the ChaCha20 keystream sixteen blocks at a time on AVX-512 (seed expansion).
//! - [`simd`]: AVX-512 row kernels (sums of rows times constants modulo a prime), with IFMA
//!   for primes below 2^51, where the CPU has them.
//! - [`modarith`]: word-size modular arithmetic and NTT-friendly prime generation.
//! - [`ntt`]: the negacyclic number-theoretic transform behind a small trait, with a fast
//!   backend (`tfhe-ntt`) and a plain reference used by differential tests.
//! - [`rns`]: RNS bases and polynomials of `Z_Q[X]/(X^n + 1)` in coefficient or evaluation
//!   form (the form is part of the type), CRT lifting, and a wide mode for exact integer
//!   polynomial arithmetic.
//! - [`sample`]: uniform, ternary, sign, discrete-Gaussian and wide-Gaussian samplers.
//! - [`progress`]: the trait long work reports progress and takes a stop request through.

pub mod aes_ctr;
pub mod chacha;
pub mod modarith;
pub mod ntt;
pub mod prg;
pub mod progress;
pub mod rns;
pub mod sample;
pub mod simd;
pub mod special;

pub use prg::{SeedTree, StreamRng};

/// Most worker threads any setting may ask for: far beyond a real machine's cores, and
/// refused before a pool is built (a pool of 10^5 threads took half a minute to fail).
pub const MAX_THREADS: usize = 256;

/// Most numbers one array of a run may hold: 2^28 (2 GiB of `f64`), so that the few such
/// arrays a run keeps fit the 24 GiB machines privopt is sized for; larger asks fail at
/// validation instead of aborting on allocation.
pub const MAX_ELEMENTS: u64 = 1 << 28;

/// Checks a setting against the bounds above and a caller's count bound; the `Err` is the
/// message naming the setting, for the caller's own configuration error.
pub mod limits {
    use super::MAX_ELEMENTS;

    /// `value` in `1..=max`.
    pub fn count(key: &str, value: u64, max: u64) -> Result<(), String> {
        if (1..=max).contains(&value) {
            Ok(())
        } else {
            Err(format!("{key} must be in 1..={max}, got {value}"))
        }
    }

    /// The product of `sizes` (the dimensions of one array) at most [`MAX_ELEMENTS`].
    pub fn elements(what: &str, sizes: &[u64]) -> Result<(), String> {
        let total = sizes
            .iter()
            .try_fold(1u64, |acc, &s| acc.checked_mul(s))
            .unwrap_or(u64::MAX);
        if total <= MAX_ELEMENTS {
            Ok(())
        } else {
            Err(format!(
                "{what} would hold {total} numbers, above the bound of {MAX_ELEMENTS}"
            ))
        }
    }
}

/// Errors of the arithmetic layer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum MathError {
    /// A ring degree that is not a power of two in the supported range.
    #[error("ring degree {0} is not a power of two in 2^4..=2^17")]
    RingDegree(usize),
    /// Not enough NTT-friendly primes of the requested size exist.
    #[error("found only {found} of {wanted} NTT-friendly primes below 2^{bits} for n = {n}")]
    NotEnoughPrimes {
        /// Ring degree.
        n: usize,
        /// Bit size asked for.
        bits: u32,
        /// Primes wanted.
        wanted: usize,
        /// Primes found.
        found: usize,
    },
    /// A modulus that is not an NTT-friendly prime for the ring degree.
    #[error("{q} is not a prime congruent to 1 mod 2n = {two_n}")]
    BadModulus {
        /// The modulus.
        q: u64,
        /// Twice the ring degree.
        two_n: usize,
    },
    /// A modulus listed twice in one basis.
    #[error("modulus {0} appears twice in the RNS basis")]
    DuplicateModulus(u64),
    /// A value that does not fit where it must go.
    #[error("value out of range: {0}")]
    OutOfRange(String),
}
