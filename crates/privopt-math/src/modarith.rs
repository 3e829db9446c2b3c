//! Word-size modular arithmetic and NTT-friendly primes.

use crate::MathError;

/// `a + b mod q` for `a, b < q`.
#[inline]
pub fn add_mod(a: u64, b: u64, q: u64) -> u64 {
    let s = a + b;
    if s >= q { s - q } else { s }
}

/// `a − b mod q` for `a, b < q`.
#[inline]
pub fn sub_mod(a: u64, b: u64, q: u64) -> u64 {
    if a >= b { a - b } else { a + q - b }
}

/// `a · b mod q` through a 128-bit product (used off the hot paths).
#[inline]
pub fn mul_mod(a: u64, b: u64, q: u64) -> u64 {
    ((a as u128 * b as u128) % q as u128) as u64
}

/// `b^e mod q`.
pub fn pow_mod(mut b: u64, mut e: u64, q: u64) -> u64 {
    let mut r = 1 % q;
    b %= q;
    while e > 0 {
        if e & 1 == 1 {
            r = mul_mod(r, b, q);
        }
        b = mul_mod(b, b, q);
        e >>= 1;
    }
    r
}

/// `a^{-1} mod q` for prime `q` and `a ≢ 0`.
pub fn inv_mod(a: u64, q: u64) -> u64 {
    pow_mod(a, q - 2, q)
}

/// `x mod q` for a signed `x`, in `[0, q)`.
#[inline]
pub fn reduce_i64(x: i64, q: u64) -> u64 {
    let r = x.rem_euclid(q as i64);
    r as u64
}

/// The centered representative of `x mod q`, in `(−q/2, q/2]`.
#[inline]
pub fn center(x: u64, q: u64) -> i64 {
    if x > q / 2 {
        x as i64 - q as i64
    } else {
        x as i64
    }
}

/// Deterministic Miller–Rabin for all `u64` (the first twelve primes are a complete witness set).
pub fn is_prime(n: u64) -> bool {
    const WITNESSES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    if n < 2 {
        return false;
    }
    for &p in &WITNESSES {
        if n.is_multiple_of(p) {
            return n == p;
        }
    }
    let (mut d, mut s) = (n - 1, 0);
    while d.is_multiple_of(2) {
        d /= 2;
        s += 1;
    }
    'witness: for &a in &WITNESSES {
        let mut x = pow_mod(a, d, n);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mul_mod(x, x, n);
            if x == n - 1 {
                continue 'witness;
            }
        }
        return false;
    }
    true
}

/// The `count` largest primes `p < 2^bits` with `p ≡ 1 (mod 2n)` (so `Z_p` has a primitive
/// 2n-th root of unity and supports the negacyclic NTT of size n), excluding `avoid`.
pub fn ntt_primes(n: usize, bits: u32, count: usize, avoid: &[u64]) -> Result<Vec<u64>, MathError> {
    let two_n = 2 * n as u64;
    if !(2..=62).contains(&bits) || two_n >= (1u64 << bits) {
        return Err(MathError::OutOfRange(format!(
            "prime size {bits} bits for n = {n}"
        )));
    }
    let mut primes = Vec::with_capacity(count);
    // Largest candidate below 2^bits that is 1 mod 2n.
    let mut c = ((1u64 << bits) - 1) / two_n * two_n + 1;
    let floor = 1u64 << (bits - 1);
    while primes.len() < count && c > floor {
        if is_prime(c) && !avoid.contains(&c) {
            primes.push(c);
        }
        c -= two_n;
    }
    if primes.len() < count {
        return Err(MathError::NotEnoughPrimes {
            n,
            bits,
            wanted: count,
            found: primes.len(),
        });
    }
    Ok(primes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primality_matches_trial_division() {
        let trial = |n: u64| {
            n >= 2
                && (2..)
                    .take_while(|d| d * d <= n)
                    .all(|d| !n.is_multiple_of(d))
        };
        for n in 0..5000u64 {
            assert_eq!(is_prime(n), trial(n), "{n}");
        }
        assert!(is_prime(0xffff_ffff_ffff_ffc5)); // largest 64-bit prime
        assert!(!is_prime(3_215_031_751)); // strong pseudoprime to bases 2, 3, 5, 7
    }

    #[test]
    fn ntt_primes_are_ntt_friendly_and_distinct() {
        let ps = ntt_primes(8192, 44, 5, &[]).unwrap();
        assert_eq!(ps.len(), 5);
        for w in ps.windows(2) {
            assert!(w[0] > w[1]);
        }
        for &p in &ps {
            assert!(is_prime(p) && p % 16384 == 1 && p < 1 << 44 && p > 1 << 43);
        }
        let more = ntt_primes(8192, 44, 1, &ps).unwrap();
        assert!(!ps.contains(&more[0]));
        assert!(ntt_primes(1 << 17, 18, 1, &[]).is_err());
    }

    #[test]
    fn modular_identities() {
        let q = ntt_primes(1024, 60, 1, &[]).unwrap()[0];
        for a in [1u64, 2, 12345, q - 1, q / 3] {
            assert_eq!(mul_mod(a, inv_mod(a, q), q), 1);
            assert_eq!(add_mod(a, sub_mod(0, a, q), q), 0);
        }
        assert_eq!(reduce_i64(-1, 17), 16);
        assert_eq!(center(16, 17), -1);
        assert_eq!(center(8, 17), 8);
        assert_eq!(center(9, 17), -8);
    }
}
