//! Keys: generation, the public operations' constants, and CRT decryption.

use rand::CryptoRng;
use rug::integer::{IsPrime, Order};
use rug::{Assign, Integer};

use crate::PaillierError;

/// Bits of the short DJN exponent α (2κ for κ = 128).
pub const DJN_EXPONENT_BITS: u32 = 256;

/// A uniformly random integer of exactly `bits` bits drawn from `rng`.
pub(crate) fn random_bits(bits: u32, rng: &mut impl CryptoRng) -> Integer {
    let mut bytes = vec![0u8; bits.div_ceil(8) as usize];
    rng.fill_bytes(&mut bytes);
    let mut x = Integer::from_digits(&bytes, Order::Msf);
    x.keep_bits_mut(bits);
    x
}

/// A uniformly random integer in `[1, bound)` coprime to `bound`.
pub(crate) fn random_unit(bound: &Integer, rng: &mut impl CryptoRng) -> Integer {
    let bits = bound.significant_bits();
    loop {
        let x = random_bits(bits, rng);
        if x > 0 && x < *bound && Integer::from(x.gcd_ref(bound)) == 1 {
            return x;
        }
    }
}

/// A random prime of exactly `bits` bits with its top two bits set (so that a product of two
/// has exactly `2·bits` bits).
fn random_prime(bits: u32, rng: &mut impl CryptoRng) -> Integer {
    loop {
        let mut x = random_bits(bits, rng);
        x.set_bit(bits - 1, true);
        x.set_bit(bits - 2, true);
        x.set_bit(0, true);
        let p = x.next_prime();
        if p.significant_bits() == bits && p.is_probably_prime(40) != IsPrime::No {
            return p;
        }
    }
}

/// `L(x) = (x − 1) / d`.
fn l_function(x: &Integer, d: &Integer) -> Integer {
    Integer::from(x - 1u32) / d
}

/// A fixed-base exponentiation table for `h_s` mod `n²`: `table[i][j] = h_s^{j · 2^{w·i}}`, so
/// `h_s^α` costs one multiplication per w-bit window of α.
#[derive(Clone, Debug)]
pub(crate) struct FixedBase {
    window: u32,
    table: Vec<Vec<Integer>>,
}

impl FixedBase {
    fn new(base: &Integer, modulus: &Integer, exponent_bits: u32, window: u32) -> Self {
        let windows = exponent_bits.div_ceil(window);
        let mut table = Vec::with_capacity(windows as usize);
        let mut g = base.clone();
        for _ in 0..windows {
            let mut row = Vec::with_capacity(1 << window);
            let mut acc = Integer::from(1);
            for _ in 0..(1u32 << window) {
                row.push(acc.clone());
                acc = Integer::from(&acc * &g) % modulus;
            }
            // g ← g^(2^w)
            g = acc;
            table.push(row);
        }
        Self { window, table }
    }

    /// `base^e mod modulus` for `e < 2^{window · rows}`.
    pub(crate) fn pow(&self, e: &Integer, modulus: &Integer) -> Integer {
        let mut acc = Integer::from(1);
        let mask = (1u32 << self.window) - 1;
        for (i, row) in self.table.iter().enumerate() {
            let mut digit = 0u32;
            for b in 0..self.window {
                if e.get_bit(i as u32 * self.window + b) {
                    digit |= 1 << b;
                }
            }
            let digit = digit & mask;
            if digit != 0 {
                acc *= &row[digit as usize];
                acc %= modulus;
            }
        }
        acc
    }
}

/// The public key `n` (with `g = n + 1`).
#[derive(Clone, Debug)]
pub struct PublicKey {
    pub(crate) n: Integer,
    pub(crate) n2: Integer,
    pub(crate) half_n: Integer,
    pub(crate) bits: u32,
    /// DJN: `h_s = (−x²)^n mod n²` and its fixed-base table.
    pub(crate) djn: FixedBase,
}

impl PublicKey {
    /// The modulus `n`.
    pub fn n(&self) -> &Integer {
        &self.n
    }

    /// `n²`.
    pub fn n_squared(&self) -> &Integer {
        &self.n2
    }

    /// Size of `n` in bits.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// Bytes of an encoded ciphertext (`n²` in big-endian, fixed width).
    pub fn ciphertext_bytes(&self) -> usize {
        (2 * self.bits as usize).div_ceil(8)
    }
}

/// The secret key: `p`, `q` and the CRT decryption constants. Wiped on drop.
pub struct SecretKey {
    pub(crate) p: Integer,
    pub(crate) q: Integer,
    pub(crate) p2: Integer,
    pub(crate) q2: Integer,
    pub(crate) p_minus_1: Integer,
    pub(crate) q_minus_1: Integer,
    /// `h_p = L_p(g^{p−1} mod p²)^{-1} mod p`, likewise `h_q`.
    pub(crate) hp: Integer,
    pub(crate) hq: Integer,
    /// `q^{-1} mod p`, for recombination.
    pub(crate) q_inv_p: Integer,
    /// `n mod p(p−1)` and `n mod q(q−1)`: exponents of `r^n` reduced by the group orders.
    pub(crate) n_mod_pp: Integer,
    pub(crate) n_mod_qq: Integer,
    /// `(p²)^{-1} mod q²`, for recombining obfuscators computed mod p² and q².
    pub(crate) p2_inv_q2: Integer,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

/// Overwrites the limbs of `x` in place (an all-ones value of the same size reuses `x`'s
/// buffer), then sets it to zero. Best effort: copies GMP made earlier are not reachable.
fn wipe(x: &mut Integer) {
    let bits = x.significant_bits().max(1);
    let mask = (Integer::from(1) << bits) - 1u32;
    *x |= &mask;
    x.assign(0);
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        for x in [
            &mut self.p,
            &mut self.q,
            &mut self.p2,
            &mut self.q2,
            &mut self.p_minus_1,
            &mut self.q_minus_1,
            &mut self.hp,
            &mut self.hq,
            &mut self.q_inv_p,
            &mut self.n_mod_pp,
            &mut self.n_mod_qq,
            &mut self.p2_inv_q2,
        ] {
            wipe(x);
        }
    }
}

/// A key pair.
#[derive(Debug)]
pub struct KeyPair {
    /// Public part.
    pub public: PublicKey,
    /// Secret part.
    pub secret: SecretKey,
}

impl KeyPair {
    /// Generates a key with an `bits`-bit modulus (1024 is accepted for tests only).
    pub fn generate(bits: u32, rng: &mut impl CryptoRng) -> Result<Self, PaillierError> {
        if !matches!(bits, 1024 | 2048 | 3072 | 4096) {
            return Err(PaillierError::KeySize(bits));
        }
        loop {
            let p = random_prime(bits / 2, rng);
            let q = random_prime(bits / 2, rng);
            if p == q {
                continue;
            }
            let n = Integer::from(&p * &q);
            let phi = Integer::from(&p - 1u32) * Integer::from(&q - 1u32);
            if n.significant_bits() != bits || Integer::from(n.gcd_ref(&phi)) != 1 {
                continue;
            }
            if let Some(kp) = Self::from_primes(p, q, rng) {
                return Ok(kp);
            }
        }
    }

    /// The key pair of primes `p ≠ q` (checked by [`KeyPair::generate`]); `None` only if a
    /// constant is not invertible, which the checks rule out.
    fn from_primes(p: Integer, q: Integer, rng: &mut impl CryptoRng) -> Option<Self> {
        let n = Integer::from(&p * &q);
        let n2 = Integer::from(&n * &n);
        let g = Integer::from(&n + 1u32);
        let p2 = Integer::from(&p * &p);
        let q2 = Integer::from(&q * &q);
        let pm1 = Integer::from(&p - 1u32);
        let qm1 = Integer::from(&q - 1u32);
        let h = |prime: &Integer, prime2: &Integer, e: &Integer| -> Option<Integer> {
            let gp = Integer::from(g.pow_mod_ref(e, prime2)?);
            Some(Integer::from(l_function(&gp, prime).invert_ref(prime)?))
        };
        let hp = h(&p, &p2, &pm1)?;
        let hq = h(&q, &q2, &qm1)?;
        let q_inv_p = Integer::from(q.invert_ref(&p)?);
        let p2_inv_q2 = Integer::from(p2.invert_ref(&q2)?);
        let n_mod_pp = &n % Integer::from(&p * &pm1);
        let n_mod_qq = &n % Integer::from(&q * &qm1);
        // DJN: h = −x² mod n for random x, h_s = h^n mod n².
        let x = random_unit(&n, rng);
        let h_base = &n - Integer::from(&x * &x) % &n;
        let hs = Integer::from(h_base.pow_mod_ref(&n, &n2)?);
        let djn = FixedBase::new(&hs, &n2, DJN_EXPONENT_BITS, 6);
        let bits = n.significant_bits();
        let half_n = Integer::from(&n >> 1u32);
        Some(Self {
            public: PublicKey {
                n,
                n2,
                half_n,
                bits,
                djn,
            },
            secret: SecretKey {
                p,
                q,
                p2,
                q2,
                p_minus_1: pm1,
                q_minus_1: qm1,
                hp,
                hq,
                q_inv_p,
                n_mod_pp,
                n_mod_qq,
                p2_inv_q2,
            },
        })
    }
}
