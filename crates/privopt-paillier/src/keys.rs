//! Keys: generation, the public operations' constants, and the secret CRT constants.

use num_bigint::BigUint;
use num_integer::Integer;
use num_traits::{One, Zero};
use rand::CryptoRng;
use zeroize::Zeroize;

use crate::PaillierError;
use crate::mont::{Modulus, Wiped, from_limbs, limbs};
use crate::primes::{random_bits, random_prime};

/// Bits of the short DJN exponent α (2κ for κ = 128).
pub const DJN_EXPONENT_BITS: u32 = 256;

/// A uniformly random integer in `[1, bound)` coprime to `bound`.
pub(crate) fn random_unit(bound: &BigUint, rng: &mut impl CryptoRng) -> BigUint {
    let bits = bound.bits() as u32;
    loop {
        let x = random_bits(bits, rng);
        if !x.is_zero() && x < *bound && x.gcd(bound).is_one() {
            return x;
        }
    }
}

/// A fixed-base exponentiation table for `h_s` mod `n²` in Montgomery form:
/// `table[i][j] = h_s^{j · 2^{w·i}}`, so `h_s^α` costs one product per w-bit window of α.
#[derive(Clone, Debug)]
pub(crate) struct FixedBase {
    window: u32,
    table: Vec<Vec<Vec<u64>>>,
}

impl FixedBase {
    fn new(base: &[u64], ctx: &Modulus, exponent_bits: u32, window: u32) -> Self {
        let windows = exponent_bits.div_ceil(window);
        let mut table = Vec::with_capacity(windows as usize);
        let mut g = base.to_vec();
        for _ in 0..windows {
            let mut row = Vec::with_capacity(1 << window);
            let mut acc = ctx.one();
            for _ in 0..(1u32 << window) {
                let next = ctx.mul_new(&acc, &g);
                row.push(acc);
                acc = next;
            }
            // g ← g^(2^w)
            g = acc;
            table.push(row);
        }
        Self { window, table }
    }

    /// `base^e` (Montgomery form) for `e < 2^{window · rows}`.
    pub(crate) fn pow(&self, e: &BigUint, ctx: &Modulus) -> Vec<u64> {
        let mut acc = ctx.one();
        let mut tmp = vec![0u64; ctx.len()];
        for (i, row) in self.table.iter().enumerate() {
            let mut digit = 0usize;
            for b in 0..self.window {
                if e.bit(u64::from(i as u32 * self.window + b)) {
                    digit |= 1 << b;
                }
            }
            if digit != 0 {
                ctx.mul(&acc, &row[digit], &mut tmp);
                std::mem::swap(&mut acc, &mut tmp);
            }
        }
        acc
    }
}

/// The public key `n` (with `g = n + 1`).
#[derive(Clone, Debug)]
pub struct PublicKey {
    pub(crate) n: BigUint,
    pub(crate) half_n: BigUint,
    pub(crate) bits: u32,
    /// Montgomery arithmetic mod `n²` (ciphertexts live in its Montgomery form).
    pub(crate) n2: Modulus,
    /// DJN: `h_s = (−x²)^n mod n²` (what the key's bytes carry) and its fixed-base table.
    pub(crate) hs: BigUint,
    pub(crate) djn: FixedBase,
}

impl PublicKey {
    /// The modulus `n`.
    pub fn n(&self) -> &BigUint {
        &self.n
    }

    /// `n²`.
    pub fn n_squared(&self) -> &BigUint {
        self.n2.value()
    }

    /// Size of `n` in bits.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// Bytes of an encoded ciphertext (`n²` in big-endian, fixed width).
    pub fn ciphertext_bytes(&self) -> usize {
        (2 * self.bits as usize).div_ceil(8)
    }

    /// The key from `n` and the DJN base `h_s`; `None` if `n²` has no Montgomery form (even).
    fn from_parts(n: BigUint, hs: BigUint) -> Option<Self> {
        let n2 = Modulus::new(&(&n * &n))?;
        let djn = FixedBase::new(&n2.to_mont(&hs), &n2, DJN_EXPONENT_BITS, 6);
        Some(Self {
            bits: n.bits() as u32,
            half_n: &n >> 1u32,
            n,
            n2,
            hs,
            djn,
        })
    }

    /// Bytes of [`PublicKey::to_bytes`] for a `bits`-bit key.
    pub fn encoded_len(bits: u32) -> usize {
        4 + (bits as usize).div_ceil(8) + (2 * bits as usize).div_ceil(8)
    }

    /// `bits` (4 bytes, little-endian), then `n` and `h_s` big-endian at fixed width.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.bits.to_le_bytes().to_vec();
        for (v, width) in [
            (&self.n, (self.bits as usize).div_ceil(8)),
            (&self.hs, self.ciphertext_bytes()),
        ] {
            let digits = v.to_bytes_be();
            out.resize(out.len() + width.saturating_sub(digits.len()), 0);
            out.extend_from_slice(&digits);
        }
        out
    }

    /// Parses [`PublicKey::to_bytes`], refusing an unsupported size, an `n` that is even or
    /// not exactly `bits` long, and an `h_s` outside `Z*_{n²}`. (That `n` is a product of two
    /// primes cannot be checked here; a malformed key only hurts its owner's own privacy.)
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, PaillierError> {
        let bits = bytes
            .get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| PaillierError::Malformed("public key shorter than 4 bytes".into()))?;
        if !matches!(bits, 1024 | 2048 | 3072 | 4096) {
            return Err(PaillierError::KeySize(bits));
        }
        if bytes.len() != Self::encoded_len(bits) {
            return Err(PaillierError::Malformed(format!(
                "public key of {} bytes, a {bits}-bit key has {}",
                bytes.len(),
                Self::encoded_len(bits)
            )));
        }
        let (n_bytes, hs_bytes) = bytes[4..].split_at((bits as usize).div_ceil(8));
        let n = BigUint::from_bytes_be(n_bytes);
        if n.bits() != u64::from(bits) || n.is_even() {
            return Err(PaillierError::Malformed(format!(
                "n is even or not {bits} bits long"
            )));
        }
        let hs = BigUint::from_bytes_be(hs_bytes);
        let key = Self::from_parts(n, hs.clone())
            .ok_or_else(|| PaillierError::Malformed("n² has no Montgomery form".into()))?;
        key.validate(&hs)?;
        Ok(key)
    }
}

/// One prime's half of the secret key: `p`, arithmetic mod `p²`, and the constants of
/// `m_p = L_p(c^{p−1} mod p²) · h_p mod p`. Limb vectors are wiped on drop.
pub(crate) struct PrimeHalf {
    pub(crate) p: Vec<u64>,
    /// `h_p = L_p(g^{p−1} mod p²)⁻¹ mod p`.
    pub(crate) h: Vec<u64>,
    pub(crate) p2: Modulus,
    /// Bits of `p` (public: half the modulus size).
    pub(crate) bits: u32,
}

impl PrimeHalf {
    fn new(p: &BigUint, g: &BigUint) -> Option<Self> {
        let k = p.to_u64_digits().len();
        let p2 = Modulus::new(&(p * p))?;
        let pm1 = p - 1u8;
        let gp = p2.out_of_mont(&p2.pow_public(&p2.to_mont(g), &pm1));
        let h = ((gp - 1u8) / p).modinv(p)?;
        Some(Self {
            p: limbs(p, k),
            h: limbs(&h, k),
            p2,
            bits: p.bits() as u32,
        })
    }

    /// `m mod p` from the ciphertext `c < n²` (little-endian limbs), with the exponentiation
    /// by the secret `p − 1` in constant time.
    pub(crate) fn decrypt(&self, c: &[u64]) -> BigUint {
        let base = self.p2.to_mont_wide(c);
        // p is odd: p − 1 is p with its lowest bit cleared.
        let mut p_minus_1 = self.p.clone();
        p_minus_1[0] &= !1;
        let mut x = self.p2.pow_secret(&base, &p_minus_1, self.bits);
        p_minus_1.zeroize();
        let p = from_limbs(&self.p);
        let value = self.p2.out_of_mont(&x);
        x.zeroize();
        ((value - 1u8) / &p * from_limbs(&self.h)) % &p
    }

    /// `r^p mod p²` for `r` uniform in `[1, p)`: a uniform element of the order-`(p−1)`
    /// subgroup of `Z*_{p²}` (the `n`-th residues mod `p²`), in Montgomery form.
    pub(crate) fn random_residue(&self, rng: &mut impl CryptoRng) -> Vec<u64> {
        let p = from_limbs(&self.p);
        let r = random_unit(&p, rng);
        self.p2.pow_secret(&self.p2.to_mont(&r), &self.p, self.bits)
    }
}

impl Drop for PrimeHalf {
    fn drop(&mut self) {
        self.p.zeroize();
        self.h.zeroize();
    }
}

/// The secret key: both prime halves and the recombination constants. Wiped on drop (best
/// effort: transient big integers of key generation and decryption are not tracked).
pub struct SecretKey {
    pub(crate) hp: PrimeHalf,
    pub(crate) hq: PrimeHalf,
    /// `q⁻¹ mod p`, for recombining plaintexts.
    pub(crate) q_inv_p: Vec<u64>,
    /// `(p²)⁻¹ mod q²` in plain limbs, for recombining obfuscators.
    pub(crate) p2_inv_q2: Vec<u64>,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        self.q_inv_p.zeroize();
        self.p2_inv_q2.zeroize();
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
    /// Generates a key with a `bits`-bit modulus: 2048, 3072 or 4096.
    pub fn generate(bits: u32, rng: &mut impl CryptoRng) -> Result<Self, PaillierError> {
        if bits == 1024 {
            return Err(PaillierError::Insecure(bits));
        }
        Self::generate_insecure_for_testing(bits, rng)
    }

    /// [`KeyPair::generate`] that also accepts 1024-bit moduli, far below 128-bit security:
    /// for tests and quick experiments only.
    pub fn generate_insecure_for_testing(
        bits: u32,
        rng: &mut impl CryptoRng,
    ) -> Result<Self, PaillierError> {
        if !matches!(bits, 1024 | 2048 | 3072 | 4096) {
            return Err(PaillierError::KeySize(bits));
        }
        loop {
            let p = Wiped(random_prime(bits / 2, rng));
            let q = Wiped(random_prime(bits / 2, rng));
            if *p == *q {
                continue;
            }
            let n = &*p * &*q;
            let phi = Wiped((&*p - 1u8) * (&*q - 1u8));
            if n.bits() != u64::from(bits) || !n.gcd(&*phi).is_one() {
                continue;
            }
            if let Some(kp) = Self::from_primes(&p, &q, rng) {
                return Ok(kp);
            }
        }
    }

    /// The key pair of primes `p ≠ q` (checked by [`KeyPair::generate`]); `None` only if a
    /// constant is not invertible, which the checks rule out.
    fn from_primes(p: &BigUint, q: &BigUint, rng: &mut impl CryptoRng) -> Option<Self> {
        let n = p * q;
        let n2 = Modulus::new(&(&n * &n))?;
        // DJN: h = −x² mod n for random x, h_s = h^n mod n².
        let x = random_unit(&n, rng);
        let h_base = &n - (&x * &x) % &n;
        let hs = n2.out_of_mont(&n2.pow_public(&n2.to_mont(&h_base), &n));
        Self::with_public(p, q, PublicKey::from_parts(n, hs)?)
    }

    /// The public key's bytes ([`PublicKey::to_bytes`]) followed by `p` and `q`, big-endian at
    /// half the key's width: for its owner's own storage. The buffer holds the secret: wipe it
    /// (e.g. with `zeroize`) when done.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.public.to_bytes();
        let width = (self.public.bits as usize / 2).div_ceil(8);
        for half in [&self.secret.hp, &self.secret.hq] {
            let mut digits = from_limbs(&half.p).to_bytes_be();
            out.resize(out.len() + width.saturating_sub(digits.len()), 0);
            out.extend_from_slice(&digits);
            digits.zeroize();
        }
        out
    }

    /// Parses [`KeyPair::to_bytes`], refusing a public part [`PublicKey::from_bytes`] refuses
    /// and primes whose product is not `n`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, PaillierError> {
        let bits = bytes
            .get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| PaillierError::Malformed("key pair shorter than 4 bytes".into()))?;
        if !matches!(bits, 1024 | 2048 | 3072 | 4096) {
            return Err(PaillierError::KeySize(bits));
        }
        let public_len = PublicKey::encoded_len(bits);
        let width = (bits as usize / 2).div_ceil(8);
        if bytes.len() != public_len + 2 * width {
            return Err(PaillierError::Malformed(format!(
                "key pair of {} bytes, a {bits}-bit key pair has {}",
                bytes.len(),
                public_len + 2 * width
            )));
        }
        let (public, primes) = bytes.split_at(public_len);
        let public = PublicKey::from_bytes(public)?;
        let p = BigUint::from_bytes_be(&primes[..width]);
        let q = BigUint::from_bytes_be(&primes[width..]);
        let wrong = || PaillierError::Malformed("the primes do not factor n".into());
        if p == q || p <= BigUint::one() || q <= BigUint::one() || &p * &q != public.n {
            return Err(wrong());
        }
        Self::with_public(&p, &q, public).ok_or_else(wrong)
    }

    /// The secret constants of `public = p·q`.
    fn with_public(p: &BigUint, q: &BigUint, public: PublicKey) -> Option<Self> {
        let g = &public.n + 1u8;
        let hp = PrimeHalf::new(p, &g)?;
        let hq = PrimeHalf::new(q, &g)?;
        let q_inv_p = q.modinv(p)?;
        let p2_inv_q2 = (p * p).modinv(&(q * q))?;
        let k = hp.p.len();
        Some(Self {
            public,
            secret: SecretKey {
                q_inv_p: limbs(&q_inv_p, k),
                p2_inv_q2: limbs(&p2_inv_q2, 2 * hq.p.len()),
                hp,
                hq,
            },
        })
    }
}
