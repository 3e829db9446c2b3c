//! Ciphertexts, encryption (textbook, DJN, key-owner CRT, pooled), decryption and the
//! homomorphic operations.

use num_bigint::{BigInt, BigUint, Sign};
use num_integer::Integer as _;
use num_traits::{One, Signed, Zero};
use rand::CryptoRng;
use zeroize::Zeroize;

use crate::PaillierError;
use crate::keys::{DJN_EXPONENT_BITS, KeyPair, PublicKey, random_unit};
use crate::mont::{Wiped, from_limbs, limbs};
use crate::primes::random_bits;

/// A validated ciphertext: an element of `Z*_{n²}` for its key, held in the Montgomery form of
/// that key's `n²` (so that homomorphic addition is one Montgomery product).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ciphertext {
    c: Vec<u64>,
}

/// A precomputed obfuscator (a random `n`-th residue `r` mod `n²`, held as `r·R²` so that
/// [`PublicKey::encrypt_with`] is one Montgomery product), used once. Wiped on drop: with the
/// ciphertext it reveals the plaintext.
#[derive(Clone)]
pub struct Obfuscator(Vec<u64>);

impl PublicKey {
    /// The obfuscator of `r` given in Montgomery form `r·R`.
    fn obfuscator(&self, mut r_mont: Vec<u64>) -> Obfuscator {
        let lifted = self.n2.lift(&r_mont);
        r_mont.zeroize();
        Obfuscator(lifted)
    }
}

impl std::fmt::Debug for Obfuscator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Obfuscator(<redacted>)")
    }
}

impl Drop for Obfuscator {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl Ciphertext {
    /// Fixed-width big-endian bytes (`pk.ciphertext_bytes()` long).
    pub fn to_bytes(&self, pk: &PublicKey) -> Vec<u8> {
        let digits = pk.value(self).to_bytes_be();
        let mut out = vec![0u8; pk.ciphertext_bytes().saturating_sub(digits.len())];
        out.extend_from_slice(&digits);
        out
    }

    /// Parses and validates bytes produced by [`Ciphertext::to_bytes`].
    pub fn from_bytes(pk: &PublicKey, bytes: &[u8]) -> Result<Self, PaillierError> {
        if bytes.len() != pk.ciphertext_bytes() {
            return Err(PaillierError::Malformed(format!(
                "{} bytes, a ciphertext under this key has {}",
                bytes.len(),
                pk.ciphertext_bytes()
            )));
        }
        pk.validate(&BigUint::from_bytes_be(bytes))
    }
}

impl PublicKey {
    /// Accepts `c` only if `0 < c < n²` and `gcd(c, n) = 1` (i.e. `c ∈ Z*_{n²}`).
    pub fn validate(&self, c: &BigUint) -> Result<Ciphertext, PaillierError> {
        if c.is_zero() || c >= self.n_squared() {
            return Err(PaillierError::InvalidCiphertext("not in (0, n²)".into()));
        }
        if !c.gcd(&self.n).is_one() {
            return Err(PaillierError::InvalidCiphertext(
                "shares a factor with n".into(),
            ));
        }
        Ok(Ciphertext {
            c: self.n2.to_mont(c),
        })
    }

    /// The integer `c ∈ (0, n²)` of a ciphertext under this key.
    pub fn value(&self, c: &Ciphertext) -> BigUint {
        self.n2.out_of_mont(&c.c)
    }

    /// The signed representative in `(−n/2, n/2]` of `m ∈ [0, n)`.
    fn signed(&self, m: BigUint) -> BigInt {
        if m > self.half_n {
            BigInt::from(m) - BigInt::from(self.n.clone())
        } else {
            BigInt::from(m)
        }
    }

    /// `m mod n` for a signed plaintext in `(−n/2, n/2]`.
    fn plaintext(&self, m: &BigInt) -> Result<BigUint, PaillierError> {
        let (sign, magnitude) = (m.sign(), m.magnitude());
        let in_range = match sign {
            Sign::Minus => *magnitude < self.half_n,
            _ => *magnitude <= self.half_n,
        };
        if !in_range {
            return Err(PaillierError::OutOfRange(format!(
                "|m| must be below n/2 ({} bits)",
                self.bits - 1
            )));
        }
        Ok(match sign {
            Sign::Minus => &self.n - magnitude,
            _ => magnitude.clone(),
        })
    }

    /// `(1 + m·n) · obfuscator mod n²`: the online part of every encryption.
    pub fn encrypt_with(
        &self,
        m: &BigInt,
        obfuscator: &Obfuscator,
    ) -> Result<Ciphertext, PaillierError> {
        let gm = self.plaintext(m)? * &self.n + 1u8;
        // The obfuscator is stored as r·R², so one product gives (1 + mn)·r·R, the
        // ciphertext's Montgomery form.
        let gm = limbs(&gm, self.n2.len());
        Ok(Ciphertext {
            c: self.n2.mul_new(&gm, &obfuscator.0),
        })
    }

    /// Textbook obfuscator `r^n mod n²`, `r` uniform in `Z*_n`.
    pub fn obfuscator_textbook(&self, rng: &mut impl CryptoRng) -> Obfuscator {
        let r = random_unit(&self.n, rng);
        let n = limbs(&self.n, self.n2.len());
        self.obfuscator(self.n2.pow_secret(&self.n2.to_mont(&r), &n, self.bits))
    }

    /// DJN obfuscator `h_s^α mod n²` with a 256-bit α, by a fixed-base table (security
    /// additionally assumes the short-exponent variant of the DCR problem is hard).
    pub fn obfuscator_djn(&self, rng: &mut impl CryptoRng) -> Obfuscator {
        let alpha = random_bits(DJN_EXPONENT_BITS, rng);
        self.obfuscator(self.djn.pow(&alpha, &self.n2))
    }

    /// Encryption by anyone holding the public key (DJN obfuscator).
    pub fn encrypt(
        &self,
        m: &BigInt,
        rng: &mut impl CryptoRng,
    ) -> Result<Ciphertext, PaillierError> {
        let r = self.obfuscator_djn(rng);
        self.encrypt_with(m, &r)
    }

    /// Encryption with a full-size random `r` (no extra assumption; slowest).
    pub fn encrypt_textbook(
        &self,
        m: &BigInt,
        rng: &mut impl CryptoRng,
    ) -> Result<Ciphertext, PaillierError> {
        let r = self.obfuscator_textbook(rng);
        self.encrypt_with(m, &r)
    }

    /// `E(a + b) = E(a) · E(b)`.
    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Ciphertext {
        Ciphertext {
            c: self.n2.mul_new(&a.c, &b.c),
        }
    }

    /// `a · obfuscator`: the same plaintext under fresh randomness (a DJN obfuscator), so that
    /// a product, a negation or a sum reveals nothing of the ciphertexts it came from (`E(a)·0`
    /// is otherwise the ciphertext 1, which shows the zero).
    pub fn rerandomize(&self, a: &Ciphertext, rng: &mut impl CryptoRng) -> Ciphertext {
        let r = self.obfuscator_djn(rng);
        // The obfuscator is r·R²: times the plain c (out of Montgomery form) it gives c·r·R,
        // the product's Montgomery form, as `encrypt_with` does with 1 + m·n.
        let plain = limbs(&self.n2.out_of_mont(&a.c), self.n2.len());
        Ciphertext {
            c: self.n2.mul_new(&plain, &r.0),
        }
    }

    /// Refuses a factor `k` with `|k| ≥ n/2`: plaintexts live in `(−n/2, n/2]`, so such a
    /// factor aliases another one and the product decrypts to a wrapped value.
    pub fn check_factor(&self, k: &BigInt) -> Result<(), PaillierError> {
        self.plaintext(k).map(drop).map_err(|_| {
            PaillierError::OutOfRange(format!(
                "a factor of {} bits; factors must be below n/2 ({} bits) in magnitude",
                k.bits(),
                self.bits - 1
            ))
        })
    }

    /// `E(k · a) = E(a)^k` for a signed integer `k` (a negative `k` inverts first). Not
    /// re-randomized (see [`PublicKey::rerandomize`]); `k` should pass
    /// [`PublicKey::check_factor`].
    pub fn mul_scalar(&self, a: &Ciphertext, k: &BigInt) -> Ciphertext {
        let base = if k.is_negative() {
            self.n2.to_mont(&self.inverse(&self.value(a)))
        } else {
            a.c.clone()
        };
        Ciphertext {
            c: self.n2.pow_public(&base, k.magnitude()),
        }
    }

    /// `c⁻¹ mod n²` for `c ∈ Z*_{n²}`: the inverse mod `n` (a Euclid of half the size), lifted
    /// by one Newton step `y·(2 − c·y)`, which squares the modulus. `1` stands in for a
    /// non-unit, which validation rules out.
    fn inverse(&self, c: &BigUint) -> BigUint {
        let n2 = self.n_squared();
        let Some(y) = (c % &self.n).modinv(&self.n) else {
            return BigUint::one();
        };
        let cy = (c * &y) % n2;
        let two_minus = (n2 + 2u8 - cy) % n2;
        (y * two_minus) % n2
    }

    /// `E(−a)`.
    pub fn neg(&self, a: &Ciphertext) -> Ciphertext {
        self.mul_scalar(a, &BigInt::from(-1))
    }
}

impl KeyPair {
    /// The key owner's obfuscator: uniform `n`-th residues mod `p²` and `q²` (`r_p^p`,
    /// `r_q^q`: exponents of half the size of `n`), recombined by CRT. The same distribution as
    /// `r^n mod n²` with no extra assumption, at about a quarter of its cost.
    pub fn obfuscator_owner(&self, rng: &mut impl CryptoRng) -> Obfuscator {
        let (pk, sk) = (&self.public, &self.secret);
        let xp = sk.hp.p2.out_of_mont(&sk.hp.random_residue(rng));
        let xq = sk.hq.p2.out_of_mont(&sk.hq.random_residue(rng));
        let x = crt(
            &xp,
            sk.hp.p2.value(),
            &xq,
            sk.hq.p2.value(),
            &from_limbs(&sk.p2_inv_q2),
        );
        pk.obfuscator(pk.n2.to_mont(&x))
    }

    /// Encryption by the key owner (CRT obfuscator).
    pub fn encrypt_owner(
        &self,
        m: &BigInt,
        rng: &mut impl CryptoRng,
    ) -> Result<Ciphertext, PaillierError> {
        let r = self.obfuscator_owner(rng);
        self.public.encrypt_with(m, &r)
    }

    /// CRT decryption to the signed representative in `(−n/2, n/2]`. The exponentiations by
    /// the secret `p − 1`, `q − 1` run in constant time (fixed window, masked table reads).
    pub fn decrypt(&self, c: &Ciphertext) -> BigInt {
        let (pk, sk) = (&self.public, &self.secret);
        let value = limbs(&pk.value(c), pk.n2.len());
        let mp = sk.hp.decrypt(&value);
        let mq = sk.hq.decrypt(&value);
        self.recombine(mp, mq)
    }

    /// [`KeyPair::decrypt`] with the two prime halves on two threads: about half the latency
    /// of one decryption where a second core is free.
    pub fn decrypt_parallel(&self, c: &Ciphertext) -> BigInt {
        let (pk, sk) = (&self.public, &self.secret);
        let value = limbs(&pk.value(c), pk.n2.len());
        let (mp, mq) = std::thread::scope(|s| {
            let q_half = s.spawn(|| sk.hq.decrypt(&value));
            let mp = sk.hp.decrypt(&value);
            (mp, q_half.join())
        });
        match mq {
            Ok(mq) => self.recombine(mp, mq),
            // The closure cannot panic on a valid key; fall back to computing it here.
            Err(_) => self.recombine(mp, sk.hq.decrypt(&value)),
        }
    }

    /// `m mod n` from `m mod p` and `m mod q`, as the signed representative.
    fn recombine(&self, mp: BigUint, mq: BigUint) -> BigInt {
        let sk = &self.secret;
        // The primes, the inverse and the halves are secret: wiped after use.
        let (p, q) = (Wiped(from_limbs(&sk.hp.p)), Wiped(from_limbs(&sk.hq.p)));
        let (mp, mq) = (Wiped(mp), Wiped(mq));
        let q_inv_p = Wiped(from_limbs(&sk.q_inv_p));
        self.public.signed(crt(&mq, &q, &mp, &p, &q_inv_p))
    }

    /// Textbook decryption `L(c^λ mod n²)·μ mod n` (for differential tests).
    pub fn decrypt_textbook(&self, c: &Ciphertext) -> BigInt {
        let (pk, sk) = (&self.public, &self.secret);
        let (p, q) = (from_limbs(&sk.hp.p), from_limbs(&sk.hq.p));
        let lambda = (&p - 1u8).lcm(&(&q - 1u8));
        let n2 = pk.n_squared();
        let l = |x: BigUint| (x - 1u8) / &pk.n;
        let g = &pk.n + 1u8;
        let mu = l(g.modpow(&lambda, n2)).modinv(&pk.n).unwrap_or_default();
        pk.signed((l(pk.value(c).modpow(&lambda, n2)) * mu) % &pk.n)
    }
}

/// Garner's recombination of `x mod m1` and `x mod m2` (coprime) into `x mod m1·m2`:
/// `x = a1 + m1 · ((a2 − a1) · m1⁻¹ mod m2)`, given `m1_inv = m1⁻¹ mod m2`.
fn crt(a1: &BigUint, m1: &BigUint, a2: &BigUint, m2: &BigUint, m1_inv: &BigUint) -> BigUint {
    let diff = (a2 + m2 - (a1 % m2)) % m2;
    a1 + m1 * ((diff * m1_inv) % m2)
}

/// Obfuscators computed ahead of time (offline), so that an encryption online costs one
/// Montgomery product mod `n²`.
#[derive(Debug, Default)]
pub struct ObfuscatorPool {
    items: Vec<Obfuscator>,
}

impl ObfuscatorPool {
    /// `count` DJN obfuscators for `pk`.
    pub fn fill_djn(pk: &PublicKey, count: usize, rng: &mut impl CryptoRng) -> Self {
        Self {
            items: (0..count).map(|_| pk.obfuscator_djn(rng)).collect(),
        }
    }

    /// `count` key-owner (CRT) obfuscators.
    pub fn fill_owner(kp: &KeyPair, count: usize, rng: &mut impl CryptoRng) -> Self {
        Self {
            items: (0..count).map(|_| kp.obfuscator_owner(rng)).collect(),
        }
    }

    /// Obfuscators left.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the pool is used up.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Encrypts with the next obfuscator (each is used once), or `None` when empty.
    pub fn encrypt(
        &mut self,
        pk: &PublicKey,
        m: &BigInt,
    ) -> Option<Result<Ciphertext, PaillierError>> {
        let r = self.items.pop()?;
        Some(pk.encrypt_with(m, &r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn multiples_of_a_prime_factor_are_not_ciphertexts() {
        let kp = KeyPair::generate_insecure_for_testing(
            1024,
            &mut rand_chacha::ChaCha20Rng::seed_from_u64(9),
        )
        .unwrap();
        let pk = &kp.public;
        let p = from_limbs(&kp.secret.hp.p);
        let q = from_limbs(&kp.secret.hq.p);
        for bad in [p.clone(), &p * 3u8, &q * &q] {
            assert!(matches!(
                pk.validate(&bad),
                Err(PaillierError::InvalidCiphertext(_))
            ));
        }
        assert!(pk.validate(&(&p + 1u8)).is_ok());
        assert_eq!(format!("{:?}", kp.secret), "SecretKey(<redacted>)");
        assert_eq!(
            format!(
                "{:?}",
                pk.obfuscator_djn(&mut rand_chacha::ChaCha20Rng::seed_from_u64(1))
            ),
            "Obfuscator(<redacted>)"
        );
    }

    #[test]
    fn key_sizes() {
        let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(10);
        assert_eq!(
            KeyPair::generate(1000, &mut r).unwrap_err(),
            PaillierError::KeySize(1000)
        );
        // 1024 bits only with the explicit opt-in (it was accepted by `generate`).
        assert_eq!(
            KeyPair::generate(1024, &mut r).unwrap_err(),
            PaillierError::Insecure(1024)
        );
        let kp = KeyPair::generate(2048, &mut r).unwrap();
        let (p, q) = (from_limbs(&kp.secret.hp.p), from_limbs(&kp.secret.hq.p));
        assert_eq!(kp.public.n().bits(), 2048);
        assert_ne!(p, q);
        assert_eq!(p.bits(), 1024);
        assert_eq!(&p * &q, *kp.public.n());
    }

    #[test]
    fn owner_obfuscators_are_nth_residues() {
        // x is an n-th residue mod n² iff x^φ(n) = 1 mod n².
        let kp = KeyPair::generate_insecure_for_testing(
            1024,
            &mut rand_chacha::ChaCha20Rng::seed_from_u64(11),
        )
        .unwrap();
        let (p, q) = (from_limbs(&kp.secret.hp.p), from_limbs(&kp.secret.hq.p));
        let phi = (&p - 1u8) * (&q - 1u8);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(12);
        let pk = &kp.public;
        for r in [
            kp.obfuscator_owner(&mut rng),
            pk.obfuscator_textbook(&mut rng),
            pk.obfuscator_djn(&mut rng),
        ] {
            // r.0 = x·R²: one product by plain 1 and the conversion out give x.
            let x = pk
                .n2
                .out_of_mont(&pk.n2.mul_new(&r.0, &limbs(&BigUint::one(), pk.n2.len())));
            assert!(x.modpow(&phi, pk.n_squared()).is_one());
            assert!(!x.is_one());
        }
    }
}
