//! Prime generation: the smallest probable prime above a random start, by a sieve of small
//! primes and Miller–Rabin on the Montgomery kernel.

use num_bigint::BigUint;
use num_traits::ToPrimitive;
use rand::CryptoRng;

use zeroize::Zeroize;

use crate::mont::Modulus;

/// A uniformly random integer below `2^bits` drawn from `rng`.
pub(crate) fn random_bits(bits: u32, rng: &mut impl CryptoRng) -> BigUint {
    let mut bytes = vec![0u8; bits.div_ceil(8) as usize];
    rng.fill_bytes(&mut bytes);
    let excess = (bytes.len() * 8) as u32 - bits;
    if let Some(top) = bytes.first_mut() {
        *top &= 0xffu8.checked_shr(excess).unwrap_or(0);
    }
    let x = BigUint::from_bytes_be(&bytes);
    bytes.zeroize();
    x
}

/// Odd primes below 2000, for trial division.
fn small_primes() -> Vec<u32> {
    let mut out = Vec::new();
    for c in (3u32..2000).step_by(2) {
        if out
            .iter()
            .take_while(|&&p| p * p <= c)
            .all(|&p| !c.is_multiple_of(p))
        {
            out.push(c);
        }
    }
    out
}

/// Miller–Rabin rounds. The candidates are random, not adversarial, so the error bound for
/// random candidates applies (Damgård–Landrock–Pomerance: far below 2^-128 at 512+ bits);
/// 40 rounds with fixed prime bases leave a margin.
const MILLER_RABIN_ROUNDS: usize = 40;

/// Whether odd `n > 2000` passes Miller–Rabin to the first [`MILLER_RABIN_ROUNDS`] prime
/// bases.
fn miller_rabin(n: &BigUint, bases: &[u32]) -> bool {
    let Some(ctx) = Modulus::new(n) else {
        return false;
    };
    let n_minus_1 = n - 1u8;
    let s = n_minus_1.trailing_zeros().unwrap_or(0);
    let d = &n_minus_1 >> s;
    let one = ctx.one();
    let minus_one = ctx.to_mont(&n_minus_1);
    let mut tmp = vec![0u64; ctx.len()];
    'bases: for &a in bases.iter().take(MILLER_RABIN_ROUNDS) {
        let mut x = ctx.pow_public(&ctx.to_mont(&BigUint::from(a)), &d);
        if x == one || x == minus_one {
            continue;
        }
        for _ in 1..s {
            ctx.sqr(&x, &mut tmp);
            std::mem::swap(&mut x, &mut tmp);
            if x == minus_one {
                continue 'bases;
            }
        }
        return false;
    }
    true
}

/// The smallest probable prime greater than odd `start` (which is above 2000).
fn next_prime(start: &BigUint, primes: &[u32]) -> BigUint {
    let residues: Vec<u32> = primes
        .iter()
        .map(|&p| (start % p).to_u32().unwrap_or(0))
        .collect();
    let mut offset = 2u32;
    loop {
        let sieved = primes
            .iter()
            .zip(&residues)
            .all(|(&p, &r)| !(r + offset % p).is_multiple_of(p));
        if sieved {
            let candidate = start + offset;
            if miller_rabin(&candidate, primes) {
                return candidate;
            }
        }
        offset += 2;
    }
}

/// A random prime of exactly `bits` bits (at least 16) with its top two bits set, so that a
/// product of two has exactly `2·bits` bits.
pub(crate) fn random_prime(bits: u32, rng: &mut impl CryptoRng) -> BigUint {
    let primes = small_primes();
    let one = BigUint::from(1u8);
    loop {
        let mut x = random_bits(bits, rng);
        x |= &one << (bits - 1);
        x |= &one << (bits - 2);
        x |= &one;
        let p = next_prime(&x, &primes);
        if p.bits() == u64::from(bits) {
            return p;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn random_bits_stay_below_the_bound() {
        let mut rng = <rand_chacha::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(1);
        for bits in [1u32, 7, 8, 9, 63, 64, 65, 1024] {
            for _ in 0..50 {
                assert!(random_bits(bits, &mut rng).bits() <= u64::from(bits));
            }
        }
    }

    #[test]
    fn known_primes_and_composites() {
        let primes = small_primes();
        assert_eq!(&primes[..5], &[3, 5, 7, 11, 13]);
        // 2^127 − 1 (Mersenne prime), 2^521 − 1; the Carmichael number 561·k products and a
        // strong pseudoprime to bases 2 and 3 (25326001) are caught.
        let one = BigUint::from(1u8);
        assert!(miller_rabin(&((&one << 127) - 1u8), &primes));
        assert!(miller_rabin(&((&one << 521) - 1u8), &primes));
        assert!(!miller_rabin(&((&one << 127) + 1u8), &primes));
        assert!(!miller_rabin(&BigUint::from(25_326_001u32), &primes));
        assert!(!miller_rabin(&BigUint::from(3_215_031_751u64), &primes));
        // The next prime after 2^64 + 1 is 2^64 + 13.
        assert_eq!(
            next_prime(&((&one << 64) + 1u8), &primes),
            (&one << 64) + 13u8
        );
    }

    #[test]
    fn random_primes_have_the_requested_shape() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        for bits in [64u32, 512] {
            let p = random_prime(bits, &mut rng);
            assert_eq!(p.bits(), u64::from(bits));
            assert!(p.bit(u64::from(bits) - 2));
            assert!(miller_rabin(&p, &small_primes()));
        }
    }
}
