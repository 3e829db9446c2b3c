//! Shamir secret sharing of 32-byte secrets over the prime field GF(2^61 − 1).
//!
//! A secret is split into eight 32-bit limbs; each limb is shared with its own random polynomial
//! of degree `threshold − 1`, evaluated at `x = holder + 1` (never 0, where the secret sits). Any
//! `threshold` shares recover the secret by Lagrange interpolation at 0; fewer reveal nothing
//! about it, limb by limb, because every limb is smaller than the field.

use rand::{CryptoRng, Rng};

use crate::{ClientId, SecAggError};

/// The Mersenne prime 2^61 − 1.
pub const PRIME: u64 = (1 << 61) - 1;
/// Field elements per shared 32-byte secret.
pub const LIMBS: usize = 8;

/// One holder's share of a 32-byte secret. Not `Copy` (no silent copies of secret material),
/// wiped on drop, and printed without its limbs.
#[derive(Clone, PartialEq, Eq)]
pub struct Share {
    /// The holder whose evaluation point `holder + 1` this share belongs to.
    pub holder: ClientId,
    /// The eight limb polynomials evaluated at `holder + 1`.
    pub limbs: [u64; LIMBS],
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Share")
            .field("holder", &self.holder)
            .field("limbs", &"<redacted>")
            .finish()
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.limbs);
    }
}

fn reduce(x: u128) -> u64 {
    // 2^61 ≡ 1 (mod p): fold the high bits onto the low ones twice.
    let folded = (x & PRIME as u128) + (x >> 61);
    let folded = (folded & PRIME as u128) + (folded >> 61);
    let r = folded as u64;
    if r >= PRIME { r - PRIME } else { r }
}

fn add(a: u64, b: u64) -> u64 {
    let s = a + b;
    if s >= PRIME { s - PRIME } else { s }
}

fn sub(a: u64, b: u64) -> u64 {
    if a >= b { a - b } else { a + PRIME - b }
}

fn mul(a: u64, b: u64) -> u64 {
    reduce(a as u128 * b as u128)
}

fn pow(mut base: u64, mut exp: u64) -> u64 {
    let mut acc = 1;
    while exp > 0 {
        if exp & 1 == 1 {
            acc = mul(acc, base);
        }
        base = mul(base, base);
        exp >>= 1;
    }
    acc
}

fn inverse(a: u64) -> u64 {
    // Fermat: a^(p−2) = a^−1 for a ≠ 0.
    pow(a, PRIME - 2)
}

fn uniform_element<R: Rng + CryptoRng + ?Sized>(rng: &mut R) -> u64 {
    loop {
        let x = rng.random::<u64>() >> 3;
        if x < PRIME {
            return x;
        }
    }
}

/// Splits `secret` into one share per holder; any `threshold` of them recover it.
pub fn split<R: Rng + CryptoRng + ?Sized>(
    secret: &[u8; 32],
    holders: &[ClientId],
    threshold: usize,
    rng: &mut R,
) -> Result<Vec<Share>, SecAggError> {
    if threshold == 0 || threshold > holders.len() {
        return Err(SecAggError::Parameters(format!(
            "cannot split a secret {threshold}-out-of-{} (the threshold must be in 1..=holders)",
            holders.len()
        )));
    }
    let mut coefficients = vec![[0u64; LIMBS]; threshold];
    for (limb, chunk) in secret.chunks_exact(4).enumerate() {
        coefficients[0][limb] =
            u64::from(u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]));
        for c in coefficients.iter_mut().skip(1) {
            c[limb] = uniform_element(rng);
        }
    }
    Ok(holders
        .iter()
        .map(|&holder| {
            let x = u64::from(holder) + 1;
            let mut limbs = [0u64; LIMBS];
            // Horner from the top coefficient down.
            for c in coefficients.iter().rev() {
                for (l, &cl) in limbs.iter_mut().zip(c) {
                    *l = add(mul(*l, x), cl);
                }
            }
            Share { holder, limbs }
        })
        .collect())
}

/// Recovers a secret from at least `threshold` shares with distinct holders (only the first
/// `threshold` are used). Shares that were not produced by one polynomial of that degree give
/// a wrong secret or a limb outside 32 bits, which is reported as an error.
pub fn combine(shares: &[Share], threshold: usize) -> Result<[u8; 32], SecAggError> {
    if threshold == 0 || shares.len() < threshold {
        return Err(SecAggError::Parameters(format!(
            "{} shares cannot recover a {threshold}-threshold secret",
            shares.len()
        )));
    }
    let used = &shares[..threshold];
    let xs: Vec<u64> = used.iter().map(|s| u64::from(s.holder) + 1).collect();
    let mut secret = [0u64; LIMBS];
    for (i, share) in used.iter().enumerate() {
        // Lagrange basis at 0: Π_{j≠i} x_j / (x_j − x_i).
        let (mut num, mut den) = (1u64, 1u64);
        for (j, &xj) in xs.iter().enumerate() {
            if j != i {
                if xj == xs[i] {
                    return Err(SecAggError::Parameters(format!(
                        "two shares held by client {}",
                        share.holder
                    )));
                }
                num = mul(num, xj);
                den = mul(den, sub(xj, xs[i]));
            }
        }
        let basis = mul(num, inverse(den));
        for (s, &l) in secret.iter_mut().zip(&share.limbs) {
            *s = add(*s, mul(basis, l));
        }
    }
    let mut out = [0u8; 32];
    for (chunk, &limb) in out.chunks_exact_mut(4).zip(&secret) {
        let limb = u32::try_from(limb).map_err(|_| {
            SecAggError::Reconstruction("the shares do not lie on one polynomial".into())
        })?;
        chunk.copy_from_slice(&limb.to_le_bytes());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::{ProptestConfig, any, prop_assert_eq, proptest};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn field_inverse_and_reduction() {
        for a in [1u64, 2, 12345, PRIME - 1, 1 << 60] {
            assert_eq!(mul(a, inverse(a)), 1);
        }
        assert_eq!(reduce(u128::from(PRIME) * u128::from(PRIME)), 0);
        assert_eq!(mul(PRIME - 1, PRIME - 1), 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn any_threshold_subset_recovers(seed in any::<u64>(), n in 2usize..12, t_frac in 0.0f64..1.0, pick in any::<u64>()) {
            let mut rng = ChaCha20Rng::seed_from_u64(seed);
            let threshold = 1 + ((n - 1) as f64 * t_frac) as usize;
            let mut secret = [0u8; 32];
            rng.fill(&mut secret);
            let holders: Vec<ClientId> = (0..n as u32).map(|h| h * 3 + 1).collect();
            let mut shares = split(&secret, &holders, threshold, &mut rng).unwrap();
            // Any subset: rotate and reverse by the picked amount.
            shares.rotate_left(pick as usize % n);
            if pick & 1 == 1 { shares.reverse(); }
            prop_assert_eq!(combine(&shares[..threshold], threshold).unwrap(), secret);
        }
    }

    #[test]
    fn fewer_than_threshold_shares_do_not_recover() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let secret = [9u8; 32];
        let shares = split(&secret, &[0, 1, 2, 3, 4], 3, &mut rng).unwrap();
        assert!(combine(&shares[..2], 3).is_err());
        // Interpolating two shares as if the threshold were 2 gives a different secret.
        assert_ne!(combine(&shares[..2], 2).ok(), Some(secret));
    }
}
