//! Ciphertexts, encryption (textbook, DJN, key-owner CRT, pooled), decryption and the
//! homomorphic operations.

use rand::CryptoRng;
use rug::Integer;
use rug::integer::Order;
use rug::ops::RemRounding;

use crate::PaillierError;
use crate::keys::{DJN_EXPONENT_BITS, KeyPair, PublicKey, random_bits, random_unit};

/// `b^e mod m`. GMP returns no value only for a negative `e` with a base not invertible mod
/// `m`; every base here is a unit (a validated ciphertext or a sampled unit), so the `1` that
/// stands in for that case is never produced.
fn pow_mod(b: &Integer, e: &Integer, m: &Integer) -> Integer {
    b.pow_mod_ref(e, m)
        .map_or_else(|| Integer::from(1), Integer::from)
}

/// A validated ciphertext: an element of `Z*_{n²}` for its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ciphertext {
    c: Integer,
}

impl Ciphertext {
    /// The raw value.
    pub fn value(&self) -> &Integer {
        &self.c
    }

    /// Fixed-width big-endian bytes (`pk.ciphertext_bytes()` long).
    pub fn to_bytes(&self, pk: &PublicKey) -> Vec<u8> {
        let digits = self.c.to_digits::<u8>(Order::Msf);
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
        pk.validate(Integer::from_digits(bytes, Order::Msf))
    }
}

impl PublicKey {
    /// Accepts `c` only if `0 < c < n²` and `gcd(c, n) = 1` (i.e. `c ∈ Z*_{n²}`).
    pub fn validate(&self, c: Integer) -> Result<Ciphertext, PaillierError> {
        if c <= 0 || c >= self.n2 {
            return Err(PaillierError::InvalidCiphertext("not in (0, n²)".into()));
        }
        if Integer::from(c.gcd_ref(&self.n)) != 1 {
            return Err(PaillierError::InvalidCiphertext(
                "shares a factor with n".into(),
            ));
        }
        Ok(Ciphertext { c })
    }

    /// `m mod n` for a signed plaintext in `(−n/2, n/2]`.
    fn plaintext(&self, m: &Integer) -> Result<Integer, PaillierError> {
        let neg_half = Integer::from(-&self.half_n);
        if *m > self.half_n || *m <= neg_half {
            return Err(PaillierError::OutOfRange(format!(
                "|m| must be below n/2 ({} bits)",
                self.bits - 1
            )));
        }
        Ok(Integer::from(m.rem_euc(&self.n)))
    }

    /// `(1 + m·n) · obfuscator mod n²`: the online part of every encryption.
    pub fn encrypt_with(
        &self,
        m: &Integer,
        obfuscator: &Integer,
    ) -> Result<Ciphertext, PaillierError> {
        let mut c = self.plaintext(m)? * &self.n;
        c += 1u32;
        c *= obfuscator;
        c %= &self.n2;
        Ok(Ciphertext { c })
    }

    /// Textbook obfuscator `r^n mod n²`, `r` uniform in `Z*_n`.
    pub fn obfuscator_textbook(&self, rng: &mut impl CryptoRng) -> Integer {
        let r = random_unit(&self.n, rng);
        pow_mod(&r, &self.n, &self.n2)
    }

    /// DJN obfuscator `h_s^α mod n²` with a 256-bit α, by a fixed-base table (security
    /// additionally assumes the short-exponent variant of the DCR problem is hard).
    pub fn obfuscator_djn(&self, rng: &mut impl CryptoRng) -> Integer {
        let alpha = random_bits(DJN_EXPONENT_BITS, rng);
        self.djn.pow(&alpha, &self.n2)
    }

    /// Encryption by anyone holding the public key (DJN obfuscator).
    pub fn encrypt(
        &self,
        m: &Integer,
        rng: &mut impl CryptoRng,
    ) -> Result<Ciphertext, PaillierError> {
        let r = self.obfuscator_djn(rng);
        self.encrypt_with(m, &r)
    }

    /// Encryption with a full-size random `r` (no extra assumption; slowest).
    pub fn encrypt_textbook(
        &self,
        m: &Integer,
        rng: &mut impl CryptoRng,
    ) -> Result<Ciphertext, PaillierError> {
        let r = self.obfuscator_textbook(rng);
        self.encrypt_with(m, &r)
    }

    /// `E(a + b) = E(a) · E(b)`.
    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Ciphertext {
        Ciphertext {
            c: Integer::from(&a.c * &b.c) % &self.n2,
        }
    }

    /// `E(k · a) = E(a)^k` for a signed integer `k` (a negative `k` inverts first).
    pub fn mul_scalar(&self, a: &Ciphertext, k: &Integer) -> Ciphertext {
        // c ∈ Z*_{n²}, so c^k exists for negative k too; pow_mod handles the inversion.
        let c = pow_mod(&a.c, k, &self.n2);
        Ciphertext { c }
    }

    /// `E(−a)`.
    pub fn neg(&self, a: &Ciphertext) -> Ciphertext {
        self.mul_scalar(a, &Integer::from(-1))
    }
}

impl KeyPair {
    /// The key owner's obfuscator: `r^n` computed mod `p²` and `q²` with exponents reduced by
    /// the group orders, recombined by CRT (no extra assumption; ~3–4× cheaper than textbook).
    pub fn obfuscator_owner(&self, rng: &mut impl CryptoRng) -> Integer {
        let (pk, sk) = (&self.public, &self.secret);
        let r = random_unit(&pk.n, rng);
        let xp = pow_mod(&r, &sk.n_mod_pp, &sk.p2);
        let xq = pow_mod(&r, &sk.n_mod_qq, &sk.q2);
        // x = xp + p² · ((xq − xp) · (p²)^{-1} mod q²)
        let t = (Integer::from(&xq - &xp) * &sk.p2_inv_q2).rem_euc(&sk.q2);
        (xp + t * &sk.p2) % &pk.n2
    }

    /// Encryption by the key owner (CRT obfuscator).
    pub fn encrypt_owner(
        &self,
        m: &Integer,
        rng: &mut impl CryptoRng,
    ) -> Result<Ciphertext, PaillierError> {
        let r = self.obfuscator_owner(rng);
        self.public.encrypt_with(m, &r)
    }

    /// CRT decryption to the signed representative in `(−n/2, n/2]`. The exponentiations by
    /// the secret `p − 1`, `q − 1` use GMP's side-channel-resistant `powm_sec`.
    pub fn decrypt(&self, c: &Ciphertext) -> Integer {
        self.decrypt_crt(c, true)
    }

    /// [`KeyPair::decrypt`] with GMP's ordinary (variable-time) `powm`, as python-paillier
    /// does: faster, but its timing depends on the secret exponent. Use only where decryption
    /// timings are not observable.
    pub fn decrypt_variable_time(&self, c: &Ciphertext) -> Integer {
        self.decrypt_crt(c, false)
    }

    fn decrypt_crt(&self, c: &Ciphertext, constant_time: bool) -> Integer {
        let (pk, sk) = (&self.public, &self.secret);
        let half = |prime: &Integer, prime2: &Integer, e: &Integer, h: &Integer| -> Integer {
            let cp = Integer::from((&c.c).rem_euc(prime2));
            let x = if constant_time {
                Integer::from(cp.secure_pow_mod_ref(e, prime2))
            } else {
                pow_mod(&cp, e, prime2)
            };
            ((x - 1u32) / prime * h).rem_euc(prime)
        };
        let mp = half(&sk.p, &sk.p2, &sk.p_minus_1, &sk.hp);
        let mq = half(&sk.q, &sk.q2, &sk.q_minus_1, &sk.hq);
        // m = mq + q · ((mp − mq) · q^{-1} mod p)
        let t = (Integer::from(&mp - &mq) * &sk.q_inv_p).rem_euc(&sk.p);
        let m = mq + t * &sk.q;
        if m > pk.half_n { m - &pk.n } else { m }
    }

    /// Textbook decryption `L(c^λ mod n²)·μ mod n` (for differential tests).
    pub fn decrypt_textbook(&self, c: &Ciphertext) -> Integer {
        let (pk, sk) = (&self.public, &self.secret);
        let lambda = Integer::from(sk.p_minus_1.lcm_ref(&sk.q_minus_1));
        let l = |x: Integer| (x - 1u32) / &pk.n;
        let g = Integer::from(&pk.n + 1u32);
        let gl = pow_mod(&g, &lambda, &pk.n2);
        let mu = l(gl).invert(&pk.n).unwrap_or_default();
        let cl = pow_mod(&c.c, &lambda, &pk.n2);
        let m = (l(cl) * mu).rem_euc(&pk.n);
        if m > pk.half_n { m - &pk.n } else { m }
    }
}

/// Obfuscators computed ahead of time (offline), so that an encryption online costs one
/// multiplication mod `n²`.
#[derive(Debug, Default)]
pub struct ObfuscatorPool {
    items: Vec<Integer>,
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
        m: &Integer,
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
        let kp = KeyPair::generate(1024, &mut rand_chacha::ChaCha20Rng::seed_from_u64(9)).unwrap();
        let pk = &kp.public;
        for bad in [
            kp.secret.p.clone(),
            Integer::from(&kp.secret.p * 3u32),
            Integer::from(&kp.secret.q * &kp.secret.q),
        ] {
            assert!(matches!(
                pk.validate(bad),
                Err(PaillierError::InvalidCiphertext(_))
            ));
        }
        assert!(pk.validate(Integer::from(&kp.secret.p + 1u32)).is_ok());
        assert_eq!(format!("{:?}", kp.secret), "SecretKey(<redacted>)");
    }

    #[test]
    fn key_sizes() {
        let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(10);
        assert_eq!(
            KeyPair::generate(1000, &mut r).unwrap_err(),
            PaillierError::KeySize(1000)
        );
        let kp = KeyPair::generate(2048, &mut r).unwrap();
        assert_eq!(kp.public.n().significant_bits(), 2048);
        assert_ne!(kp.secret.p, kp.secret.q);
        assert_eq!(kp.secret.p.significant_bits(), 1024);
        assert_eq!(Integer::from(&kp.secret.p * &kp.secret.q), *kp.public.n());
    }
}
