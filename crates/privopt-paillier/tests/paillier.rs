//! Paillier: homomorphisms, CRT vs textbook decryption, every encryption path, rejections.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::OnceLock;

use privopt_paillier::BigInt as Integer;
use privopt_paillier::{Ciphertext, KeyPair, ObfuscatorPool, PaillierError};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn key() -> &'static KeyPair {
    static KEY: OnceLock<KeyPair> = OnceLock::new();
    KEY.get_or_init(|| {
        KeyPair::generate_insecure_for_testing(1024, &mut ChaCha20Rng::seed_from_u64(1)).unwrap()
    })
}

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn addition_is_homomorphic(a in any::<i64>(), b in any::<i64>(), seed in any::<u64>()) {
        let kp = key();
        let (a, b) = (Integer::from(a), Integer::from(b));
        let mut r = rng(seed);
        let ca = kp.public.encrypt(&a, &mut r).unwrap();
        let cb = kp.encrypt_owner(&b, &mut r).unwrap();
        prop_assert_eq!(kp.decrypt(&kp.public.add(&ca, &cb)), &a + &b);
    }

    #[test]
    fn scalar_multiplication_is_homomorphic(a in any::<i32>(), k in any::<i32>(), seed in any::<u64>()) {
        let kp = key();
        let (a, k) = (Integer::from(a), Integer::from(k));
        let c = kp.public.encrypt(&a, &mut rng(seed)).unwrap();
        prop_assert_eq!(kp.decrypt(&kp.public.mul_scalar(&c, &k)), &a * &k);
    }

    #[test]
    fn long_scalars_are_homomorphic(a in any::<i32>(), limbs in any::<[u32; 6]>(), seed in any::<u64>()) {
        // Up to 192-bit scalars: the windowed path of the exponentiation (short scalars go
        // bit by bit).
        let kp = key();
        let k = limbs.iter().fold(Integer::from(0), |acc, &l| (acc << 32) + Integer::from(l));
        let c = kp.public.encrypt(&Integer::from(a), &mut rng(seed)).unwrap();
        let n = Integer::from(kp.public.n().clone());
        let want = (Integer::from(a) * &k) % &n;
        let got = (kp.decrypt(&kp.public.mul_scalar(&c, &k)) % &n + &n) % &n;
        prop_assert_eq!(got, (want + &n) % &n);
    }

    #[test]
    fn negative_scalars_and_negation_are_homomorphic(a in any::<i64>(), k in 1i64..1 << 40, seed in any::<u64>()) {
        let kp = key();
        let c = kp.encrypt_owner(&Integer::from(a), &mut rng(seed)).unwrap();
        let neg_k = Integer::from(-k);
        prop_assert_eq!(kp.decrypt(&kp.public.mul_scalar(&c, &neg_k)), Integer::from(a) * neg_k);
        prop_assert_eq!(kp.decrypt(&kp.public.add(&c, &kp.public.neg(&c))), Integer::from(0));
    }

    #[test]
    fn crt_decryption_equals_textbook(a in any::<i64>(), seed in any::<u64>()) {
        let kp = key();
        let c = kp.public.encrypt_textbook(&Integer::from(a), &mut rng(seed)).unwrap();
        prop_assert_eq!(kp.decrypt(&c), kp.decrypt_textbook(&c));
        prop_assert_eq!(kp.decrypt_parallel(&c), kp.decrypt_textbook(&c));
        prop_assert_eq!(kp.decrypt(&c), Integer::from(a));
    }
}

#[test]
fn large_signed_values_wrap_correctly() {
    let kp = key();
    let quarter = Integer::from(kp.public.n() >> 2u32);
    let mut r = rng(2);
    let a = -&quarter + 12345;
    let b = &quarter - 999;
    let c = kp.public.add(
        &kp.public.encrypt(&a, &mut r).unwrap(),
        &kp.public.encrypt(&b, &mut r).unwrap(),
    );
    assert_eq!(kp.decrypt(&c), &a + &b);
    assert_eq!(kp.decrypt(&kp.public.neg(&c)), -(a + b));
    // Out of (−n/2, n/2]: refused, not silently wrapped.
    let half = Integer::from(kp.public.n() >> 1u32);
    assert!(matches!(
        kp.public.encrypt(&(half + 1), &mut r),
        Err(PaillierError::OutOfRange(_))
    ));
}

#[test]
fn every_encryption_path_decrypts() {
    let kp = key();
    let m = Integer::from(-4242);
    let mut r = rng(3);
    for c in [
        kp.public.encrypt(&m, &mut r).unwrap(),
        kp.public.encrypt_textbook(&m, &mut r).unwrap(),
        kp.encrypt_owner(&m, &mut r).unwrap(),
    ] {
        assert_eq!(kp.decrypt(&c), m);
    }
    let mut pool = ObfuscatorPool::fill_owner(kp, 3, &mut r);
    let c1 = pool.encrypt(&kp.public, &m).unwrap().unwrap();
    let c2 = pool.encrypt(&kp.public, &m).unwrap().unwrap();
    assert_ne!(c1, c2, "each obfuscator is used once");
    assert_eq!(kp.decrypt(&c1), m);
    assert_eq!(pool.len(), 1);
    let mut djn = ObfuscatorPool::fill_djn(&kp.public, 1, &mut r);
    assert_eq!(
        kp.decrypt(&djn.encrypt(&kp.public, &m).unwrap().unwrap()),
        m
    );
    assert!(djn.encrypt(&kp.public, &m).is_none());
}

#[test]
fn invalid_ciphertexts_are_rejected() {
    let kp = key();
    let pk = &kp.public;
    let n2 = pk.n_squared().clone();
    for bad in [0u8.into(), n2.clone(), n2 + 1u8] {
        assert!(matches!(
            pk.validate(&bad),
            Err(PaillierError::InvalidCiphertext(_))
        ));
    }
    // Multiples of p are tested in the crate's unit tests, which can see p.
    // Bytes: round trip, and wrong lengths.
    let c = pk.encrypt(&Integer::from(7), &mut rng(4)).unwrap();
    let bytes = c.to_bytes(pk);
    assert_eq!(bytes.len(), pk.ciphertext_bytes());
    assert_eq!(Ciphertext::from_bytes(pk, &bytes).unwrap(), c);
    assert!(matches!(
        Ciphertext::from_bytes(pk, &bytes[1..]),
        Err(PaillierError::Malformed(_))
    ));
    let mut long = bytes.clone();
    long.push(0);
    assert!(Ciphertext::from_bytes(pk, &long).is_err());
    assert!(Ciphertext::from_bytes(pk, &vec![0xff; pk.ciphertext_bytes()]).is_err());
}

#[test]
fn a_key_pair_survives_its_bytes_and_refuses_a_wrong_factorisation() {
    let kp = key();
    let bytes = kp.to_bytes();
    let loaded = KeyPair::from_bytes(&bytes).unwrap();
    assert_eq!(loaded.public.to_bytes(), kp.public.to_bytes());
    // A ciphertext under the original decrypts under the reloaded pair, and vice versa.
    let m = Integer::from(-123_456_789i64);
    let c = kp.public.encrypt(&m, &mut rng(40)).unwrap();
    assert_eq!(loaded.decrypt(&c), m);
    assert_eq!(
        kp.decrypt(&loaded.encrypt_owner(&m, &mut rng(41)).unwrap()),
        m
    );
    // Flip a bit of p: the product is no longer n.
    let mut bad = bytes.clone();
    let last = bad.len() - 1;
    bad[last] ^= 2;
    assert!(matches!(
        KeyPair::from_bytes(&bad),
        Err(PaillierError::Malformed(_))
    ));
    assert!(KeyPair::from_bytes(&bytes[..bytes.len() - 1]).is_err());
    // p and q swapped is still the same key (each prime is 64 bytes for a 1024-bit key).
    let (public, primes) = bytes.split_at(bytes.len() - 128);
    let swapped = [public, &primes[64..], &primes[..64]].concat();
    assert_eq!(KeyPair::from_bytes(&swapped).unwrap().decrypt(&c), m);
}

/// Finding 6 of the third adversarial pass: `E(a)·0` is the ciphertext 1 and `E(a)^k` is a
/// public function of `E(a)`; a re-randomized product decrypts to the same value under fresh
/// randomness, and factors that alias another one (|k| ≥ n/2) are refused.
#[test]
fn rerandomized_products_keep_the_plaintext_and_hide_the_operands() {
    let kp = key();
    let pk = &kp.public;
    let mut r = rng(31);
    let c = pk.encrypt(&Integer::from(-42), &mut r).unwrap();
    for k in [0i64, 1, 3, -5] {
        let product = pk.mul_scalar(&c, &Integer::from(k));
        let fresh = pk.rerandomize(&product, &mut r);
        assert_ne!(fresh, product);
        assert_ne!(fresh, pk.rerandomize(&product, &mut r));
        assert_eq!(kp.decrypt(&fresh), Integer::from(-42 * k));
    }
    let one = pk.mul_scalar(&c, &Integer::from(0)).to_bytes(pk);
    assert_eq!(
        one.last(),
        Some(&1),
        "the raw product by 0 is the ciphertext 1"
    );
    assert!(one[..one.len() - 1].iter().all(|&b| b == 0));
    let half: Integer = Integer::from(pk.n().clone()) / 2;
    let below: Integer = &half - 1;
    assert!(pk.check_factor(&below).is_ok());
    assert!(pk.check_factor(&-below).is_ok());
    assert!(matches!(
        pk.check_factor(&(&half + 1)),
        Err(PaillierError::OutOfRange(_))
    ));
    assert!(pk.check_factor(&-half).is_err());
}
