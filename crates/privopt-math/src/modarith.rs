//! Word-size modular arithmetic and NTT-friendly primes.

use crate::MathError;

/// `x mod q` for `x < 2q` (and `q < 2^63`), without a branch: `x − q` wraps to a value above
/// `x` exactly when `x < q`. Branch-free matters twice here: residues of secret and random
/// polynomials are unpredictable (a branch would mispredict half the time and leak timing),
/// and `min` on `u64` lanes vectorizes.
#[inline]
pub fn reduce_once(x: u64, q: u64) -> u64 {
    x.min(x.wrapping_sub(q))
}

/// `a + b mod q` for `a, b < q < 2^63`.
#[inline]
pub fn add_mod(a: u64, b: u64, q: u64) -> u64 {
    reduce_once(a + b, q)
}

/// `a − b mod q` for `a, b < q < 2^63`.
#[inline]
pub fn sub_mod(a: u64, b: u64, q: u64) -> u64 {
    // `a − b` wraps when `a < b`; adding `q` then wraps back into `[0, q)`.
    let d = a.wrapping_sub(b);
    d.min(d.wrapping_add(q))
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

/// A prime modulus `q < 2^62` with precomputed Barrett constants: products and reductions
/// without a 128-bit division (the hot paths of the CKKS evaluator).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Modulus {
    q: u64,
    /// Bit length `k` of `q`.
    k: u32,
    /// `floor(2^{2k} / q)`, below `2^{k+1}`.
    mu: u64,
    /// `floor(2^64 / q)`: one-multiplication Barrett reduction of a `u64`.
    mu64: u64,
}

impl Modulus {
    /// Constants for `q` (`2 ≤ q < 2^62`).
    pub fn new(q: u64) -> Result<Self, MathError> {
        if !(2..1 << 62).contains(&q) {
            return Err(MathError::OutOfRange(format!(
                "modulus {q} is not in 2..2^62"
            )));
        }
        let k = 64 - q.leading_zeros();
        let mu = ((1u128 << (2 * k)) / q as u128) as u64;
        let mu64 = ((1u128 << 64) / q as u128) as u64;
        Ok(Self { q, k, mu, mu64 })
    }

    /// The modulus.
    #[inline]
    pub fn value(&self) -> u64 {
        self.q
    }

    /// `x mod q` for `x < q^2` (or any `x < 2^{2k}`).
    #[inline]
    pub fn reduce_u128(&self, x: u128) -> u64 {
        // Barrett: the quotient estimate is at most 2 below the true one.
        let q1 = (x >> (self.k - 1)) as u64;
        let q3 = ((q1 as u128 * self.mu as u128) >> (self.k + 1)) as u64;
        let r = (x as u64).wrapping_sub(q3.wrapping_mul(self.q));
        reduce_once(reduce_once(r, 2 * self.q), self.q)
    }

    /// `a · b mod q` for `a, b < q`.
    #[inline]
    pub fn mul(&self, a: u64, b: u64) -> u64 {
        self.reduce_u128(a as u128 * b as u128)
    }

    /// `x mod q` for any `u64`.
    #[inline]
    pub fn reduce(&self, x: u64) -> u64 {
        // The quotient estimate `⌊x·mu64 / 2^64⌋` is at most one below the true quotient, so
        // one correction suffices (`2q < 2^63`: no overflow).
        let estimate = ((x as u128 * self.mu64 as u128) >> 64) as u64;
        reduce_once(x.wrapping_sub(estimate.wrapping_mul(self.q)), self.q)
    }

    /// `x mod q` for a signed 128-bit `x`.
    #[inline]
    pub fn reduce_i128(&self, x: i128) -> u64 {
        let r = (x.unsigned_abs() % self.q as u128) as u64;
        if x < 0 && r != 0 { self.q - r } else { r }
    }

    /// Precomputes `w` for repeated products by the constant `w < q` ([`Modulus::mul_shoup`]).
    #[inline]
    pub fn shoup(&self, w: u64) -> ShoupConst {
        ShoupConst {
            w,
            w_shoup: (((w as u128) << 64) / self.q as u128) as u64,
        }
    }

    /// `a · w mod q` for any `a < 2^64` and a precomputed constant `w` (Shoup's trick).
    #[inline]
    pub fn mul_shoup(&self, a: u64, w: ShoupConst) -> u64 {
        let hi = ((a as u128 * w.w_shoup as u128) >> 64) as u64;
        reduce_once(
            a.wrapping_mul(w.w).wrapping_sub(hi.wrapping_mul(self.q)),
            self.q,
        )
    }
}

impl Modulus {
    /// [`Modulus::mul_shoup`] without the final correction: the result is in `[0, 2q)` and
    /// congruent to `a · w`. Sums of such terms are reduced once at the end.
    #[inline]
    pub fn mul_shoup_lazy(&self, a: u64, w: ShoupConst) -> u64 {
        let hi = ((a as u128 * w.w_shoup as u128) >> 64) as u64;
        a.wrapping_mul(w.w).wrapping_sub(hi.wrapping_mul(self.q))
    }
}

/// A constant prepared for Shoup multiplication modulo one prime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShoupConst {
    w: u64,
    w_shoup: u64,
}

impl ShoupConst {
    /// The constant itself.
    pub fn value(&self) -> u64 {
        self.w
    }
}

/// The NTT-friendly prime `p ≡ 1 (mod 2n)` nearest to `target` (searching both ways), not in
/// `avoid`. Used to pick rescaling primes that keep every level's scale close to the
/// nominal one.
pub fn ntt_prime_near(n: usize, target: f64, avoid: &[u64]) -> Result<u64, MathError> {
    let two_n = 2 * n as u64;
    if !(target.is_finite() && target > (4 * two_n) as f64 && target < 2f64.powi(62)) {
        return Err(MathError::OutOfRange(format!(
            "no prime search near {target} for n = {n}"
        )));
    }
    let centre = (target / two_n as f64).round() as u64;
    let ok = |k: u64| {
        let p = k * two_n + 1;
        (is_prime(p) && !avoid.contains(&p)).then_some(p)
    };
    for step in 0..1_000_000u64 {
        let above = ok(centre + step);
        let below = if step > 0 && centre > step {
            ok(centre - step)
        } else {
            None
        };
        match (above, below) {
            (Some(a), Some(b)) => {
                let da = (a as f64 - target).abs();
                let db = (b as f64 - target).abs();
                return Ok(if db < da { b } else { a });
            }
            (Some(p), None) | (None, Some(p)) => return Ok(p),
            (None, None) => {}
        }
    }
    Err(MathError::OutOfRange(format!(
        "no NTT-friendly prime near {target} for n = {n}"
    )))
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
    fn barrett_and_shoup_agree_with_division() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for q in [
            2u64,
            3,
            65537,
            (1 << 40) - 87,
            ntt_primes(1024, 50, 1, &[]).unwrap()[0],
            ntt_primes(1024, 61, 1, &[]).unwrap()[0],
            (1 << 62) - 57,
        ] {
            let m = Modulus::new(q).unwrap();
            for _ in 0..20_000 {
                let (a, b) = (next() % q, next() % q);
                assert_eq!(m.mul(a, b), mul_mod(a, b, q), "q={q}");
                let raw = next();
                assert_eq!(m.reduce(raw), raw % q);
                let w = m.shoup(b);
                assert_eq!(
                    m.mul_shoup(raw, w),
                    ((raw as u128 * b as u128) % q as u128) as u64
                );
                let s = (next() as i128) * if raw & 1 == 0 { 1 } else { -1 };
                assert_eq!(m.reduce_i128(s) as i128, s.rem_euclid(q as i128));
            }
            // Edge values.
            assert_eq!(m.mul(q - 1, q - 1), 1 % q);
            for x in [0, q - 1, q, 2 * q - 1, u64::MAX - 1, u64::MAX] {
                assert_eq!(m.reduce(x), x % q, "q={q} x={x}");
            }
        }
        assert!(Modulus::new(1 << 62).is_err());
    }

    #[test]
    fn prime_near_target_is_nearest() {
        let n = 1024;
        let target = 2f64.powi(40);
        let p = ntt_prime_near(n, target, &[]).unwrap();
        assert!(is_prime(p) && p % 2048 == 1);
        let dist = (p as f64 - target).abs();
        // No NTT prime is strictly closer.
        let k0 = ((target - dist) / 2048.0).ceil() as u64;
        let k1 = ((target + dist) / 2048.0).floor() as u64;
        for k in k0..=k1 {
            let c = k * 2048 + 1;
            if is_prime(c) {
                assert!((c as f64 - target).abs() >= dist);
            }
        }
        let q = ntt_prime_near(n, target, &[p]).unwrap();
        assert_ne!(p, q);
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
