//! The leveled CKKS engine against plaintext arithmetic: every operation's decryption must
//! match the same operation on the clear vectors to the precision the scale allows.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use privopt_ckks::CkksError;
use privopt_ckks::eval::{
    Ciphertext, EvalContext, Evaluator, LinearTransform, PolyBasis, SecretKey, encode,
};
use privopt_ckks::params::CkksParamsBuilder;
use privopt_math::sample::secret_rng;
use rand_chacha::ChaCha20Rng;

struct Fixture {
    ctx: Arc<EvalContext>,
    sk: SecretKey,
    ev: Evaluator,
    rng: ChaCha20Rng,
}

/// n = 8192, log QP ≤ 218 (within the standard), 3 levels at scale 2^40, hybrid key switching
/// with one special prime and 4 one-prime digits.
fn fixture(rotations: &[i64]) -> Fixture {
    let params = CkksParamsBuilder::leveled(8192, 50, 40, 3, &[47])
        .build()
        .unwrap();
    let ctx = EvalContext::new(&params).unwrap();
    let mut rng = secret_rng(Some(7));
    let sk = SecretKey::generate(&ctx, &mut rng);
    let relin = sk.relin_key(&mut rng);
    let galois = sk.galois_keys(rotations, true, &mut rng);
    let ev = Evaluator::new(&ctx, Some(relin), galois);
    Fixture { ctx, sk, ev, rng }
}

fn vector(len: usize, seed: f64) -> Vec<f64> {
    (0..len)
        .map(|i| ((i as f64 + seed) * 0.731).sin() * 2.0)
        .collect()
}

impl Fixture {
    fn encrypt(&mut self, v: &[f64]) -> Ciphertext {
        let pt = encode(&self.ctx, v, self.ctx.max_level()).unwrap();
        let pk = self.sk.public_key(&mut self.rng);
        pk.encrypt(&pt, &mut self.rng).unwrap()
    }

    fn max_err(&self, ct: &Ciphertext, want: &[f64]) -> f64 {
        let got = self.sk.decrypt_values(ct).unwrap();
        want.iter()
            .zip(&got)
            .map(|(w, g)| (w - g).abs())
            .fold(0.0, f64::max)
    }
}

#[test]
fn parameters_are_within_the_standard_and_oversized_sets_are_not() {
    let p = CkksParamsBuilder::leveled(8192, 50, 40, 3, &[47])
        .build()
        .unwrap();
    assert!(p.key_basis().log_modulus() <= 218.0);
    assert_eq!(p.special_count(), 1);
    assert_eq!(p.digits(), 4);
    // One more 40-bit level breaks the 218-bit bound of n = 8192 once P is counted.
    assert!(matches!(
        CkksParamsBuilder::leveled(8192, 50, 40, 4, &[47]).build(),
        Err(CkksError::Insecure { .. })
    ));
    // Digits wider than P are refused (they would amplify key-switching noise).
    assert!(matches!(
        CkksParamsBuilder::leveled(8192, 50, 40, 3, &[47])
            .digits(2)
            .build(),
        Err(CkksError::InvalidParams(_))
    ));
}

#[test]
fn encryption_round_trips_at_every_level() {
    let mut f = fixture(&[]);
    let v = vector(f.ctx.slots(), 0.0);
    let ct = f.encrypt(&v);
    assert!(f.max_err(&ct, &v) < 1e-6, "{}", f.max_err(&ct, &v));
    // Symmetric encryption too.
    let pt = encode(&f.ctx, &v, 1).unwrap();
    let ct = f.sk.encrypt(&pt, &mut f.rng).unwrap();
    assert_eq!(ct.level(), 1);
    assert!(f.max_err(&ct, &v) < 1e-6);
    for l in (0..f.ctx.max_level()).rev() {
        let fresh = f.encrypt(&v);
        let d = f.ev.drop_to_level(&fresh, l).unwrap();
        assert_eq!(d.level(), l);
        assert!(f.max_err(&d, &v) < 1e-6, "level {l}");
    }
}

#[test]
fn products_down_the_whole_chain() {
    let mut f = fixture(&[]);
    let slots = f.ctx.slots();
    let a = vector(slots, 0.0);
    let b = vector(slots, 3.0);
    let (ca, cb) = (f.encrypt(&a), f.encrypt(&b));
    let ab = f.ev.multiply(&ca, &cb).unwrap();
    assert_eq!(ab.level(), f.ctx.max_level() - 1);
    let want: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
    let e1 = f.max_err(&ab, &want);
    assert!(e1 < 1e-6, "a*b error {e1}");
    // (a*b)^2, then times a fresh a: levels 1 and 0, with automatic alignment of a.
    let sq = f.ev.square(&ab).unwrap();
    let want_sq: Vec<f64> = want.iter().map(|x| x * x).collect();
    assert!(f.max_err(&sq, &want_sq) < 1e-5);
    let last = f.ev.multiply(&sq, &ca).unwrap();
    assert_eq!(last.level(), 0);
    let want_last: Vec<f64> = want_sq.iter().zip(&a).map(|(x, y)| x * y).collect();
    assert!(
        f.max_err(&last, &want_last) < 1e-4,
        "{}",
        f.max_err(&last, &want_last)
    );
    assert!(matches!(
        f.ev.multiply(&last, &last),
        Err(CkksError::LevelExhausted(_))
    ));
}

#[test]
fn constants_plaintexts_and_sums() {
    let mut f = fixture(&[]);
    let slots = f.ctx.slots();
    let a = vector(slots, 1.0);
    let b = vector(slots, 2.0);
    let (ca, cb) = (f.encrypt(&a), f.encrypt(&b));
    let s = f.ev.sub(&f.ev.add(&ca, &cb).unwrap(), &cb).unwrap();
    assert!(f.max_err(&s, &a) < 1e-6);
    let neg: Vec<f64> = a.iter().map(|x| -x).collect();
    assert!(f.max_err(&f.ev.negate(&ca).unwrap(), &neg) < 1e-6);
    let c =
        f.ev.add_const(&f.ev.mul_const(&ca, -0.37).unwrap(), 1.5)
            .unwrap();
    let want: Vec<f64> = a.iter().map(|x| -0.37 * x + 1.5).collect();
    assert!(f.max_err(&c, &want) < 1e-6);
    let tripled: Vec<f64> = a.iter().map(|x| 3.0 * x).collect();
    assert!(f.max_err(&f.ev.mul_int(&ca, 3).unwrap(), &tripled) < 1e-6);
    let pt = f.ev.encode_for_product(&b, ca.level()).unwrap();
    let prod = f.ev.mul_plain(&ca, &pt).unwrap();
    let want: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
    assert!(f.max_err(&prod, &want) < 1e-6);
    // Adding a level-L ciphertext to a level-(L−1) one aligns them.
    let mixed = f.ev.add(&prod, &ca).unwrap();
    let want: Vec<f64> = want.iter().zip(&a).map(|(x, y)| x + y).collect();
    assert!(f.max_err(&mixed, &want) < 1e-6);
    // Same level, different scale: refused, not silently wrong.
    let raw = f.ev.relinearize(f.ev.tensor(&ca, &cb).unwrap()).unwrap();
    // `multiply` divides by q_l·P at once; it is the relinearization then the rescale, to
    // a rounding of each (exact base conversions: no stray multiple of q_l·P).
    let fused = f.ev.multiply(&ca, &cb).unwrap();
    let steps = f.ev.rescale(&raw).unwrap();
    assert_eq!(
        (fused.level(), fused.scale()),
        (steps.level(), steps.scale())
    );
    let gap = f.max_err(&fused, &f.sk.decrypt_values(&steps).unwrap());
    assert!(gap < 1e-9, "{gap:e}");
    assert!(matches!(
        f.ev.add(&raw, &ca),
        Err(CkksError::ScaleMismatch(_))
    ));
}

#[test]
fn rotations_conjugation_and_slot_sums() {
    let mut f = fixture(&[1, 2, 4, 8, -3, 100]);
    let slots = f.ctx.slots();
    let a = vector(slots, 5.0);
    let ca = f.encrypt(&a);
    for k in [1i64, 2, -3, 100] {
        let r = f.ev.rotate(&ca, k).unwrap();
        let want: Vec<f64> = (0..slots)
            .map(|i| a[(i as i64 + k).rem_euclid(slots as i64) as usize])
            .collect();
        let e = f.max_err(&r, &want);
        // Key switching adds ~q_0/P · n σ per coefficient (q_0 is 3 bits wider than P here).
        assert!(e < 3e-6, "rotate {k}: {e}");
    }
    // Rotation after a rescale uses the same key at a lower level.
    let low = f.ev.mul_const(&ca, 0.5).unwrap();
    let r = f.ev.rotate(&low, 1).unwrap();
    let want: Vec<f64> = (0..slots).map(|i| 0.5 * a[(i + 1) % slots]).collect();
    assert!(f.max_err(&r, &want) < 3e-6);
    assert!(f.max_err(&f.ev.conjugate(&ca).unwrap(), &a) < 3e-6);
    // Window sums of 16 slots and an inner product.
    let s = f.ev.sum_slots(&ca, 16).unwrap();
    let want: Vec<f64> = (0..slots)
        .map(|i| (0..16).map(|j| a[(i + j) % slots]).sum())
        .collect();
    assert!(f.max_err(&s, &want) < 1e-4);
    let ip = f.ev.inner_product(&ca, &ca, 8).unwrap();
    let got = f.sk.decrypt_values(&ip).unwrap();
    let want0: f64 = a[..8].iter().map(|x| x * x).sum();
    assert!((got[0] - want0).abs() < 1e-4);
    assert!(matches!(f.ev.rotate(&ca, 5), Err(CkksError::MissingKey(_))));
}

#[test]
fn key_switching_with_several_digits_and_special_primes() {
    // n = 2^14: 6 ciphertext primes in 3 digits of 2, two special primes.
    let params = CkksParamsBuilder::leveled(1 << 14, 50, 40, 5, &[50, 50])
        .build()
        .unwrap();
    assert_eq!(params.digits(), 3);
    let ctx = EvalContext::new(&params).unwrap();
    let mut rng = secret_rng(Some(9));
    let sk = SecretKey::generate(&ctx, &mut rng);
    let ev = Evaluator::new(
        &ctx,
        Some(sk.relin_key(&mut rng)),
        sk.galois_keys(&[3], false, &mut rng),
    )
    .with_threads(2)
    .unwrap();
    let a = vector(ctx.slots(), 0.5);
    let pk = sk.public_key(&mut rng);
    let mut ct = pk
        .encrypt(&encode(&ctx, &a, ctx.max_level()).unwrap(), &mut rng)
        .unwrap();
    let mut want = a.clone();
    // Square repeatedly with a rotation in between: every level, including partial digits.
    for _ in 0..5 {
        ct = ev
            .rotate(&ev.mul_const(&ev.square(&ct).unwrap(), 0.5).unwrap(), 3)
            .unwrap();
        let sq: Vec<f64> = want.iter().map(|x| 0.5 * x * x).collect();
        want = (0..sq.len()).map(|i| sq[(i + 3) % sq.len()]).collect();
        if ct.level() < 2 {
            break;
        }
    }
    let got = sk.decrypt_values(&ct).unwrap();
    let err = want
        .iter()
        .zip(&got)
        .map(|(w, g)| (w - g).abs())
        .fold(0.0, f64::max);
    assert!(err < 1e-5, "{err}");
}

/// A deeper chain for polynomial tests: n = 2^14, 7 levels, log QP ≈ 420 ≤ 438.
fn deep_fixture() -> Fixture {
    let params = CkksParamsBuilder::leveled(1 << 14, 50, 40, 7, &[45, 45])
        .build()
        .unwrap();
    let ctx = EvalContext::new(&params).unwrap();
    let mut rng = secret_rng(Some(11));
    let sk = SecretKey::generate(&ctx, &mut rng);
    let relin = sk.relin_key(&mut rng);
    let ev = Evaluator::new(&ctx, Some(relin), Default::default());
    Fixture { ctx, sk, ev, rng }
}

fn power_eval(c: &[f64], x: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, &ci| acc * x + ci)
}

fn chebyshev_eval(c: &[f64], lo: f64, hi: f64, x: f64) -> f64 {
    let t = (2.0 * x - lo - hi) / (hi - lo);
    let (mut t0, mut t1) = (1.0, t);
    let mut sum = c[0] + c.get(1).copied().unwrap_or(0.0) * t;
    for &ci in c.iter().skip(2) {
        let t2 = 2.0 * t * t1 - t0;
        sum += ci * t2;
        (t0, t1) = (t1, t2);
    }
    sum
}

#[test]
fn paterson_stockmeyer_in_both_bases() {
    let mut f = deep_fixture();
    let slots = f.ctx.slots();
    let top = f.ctx.max_level();
    let x: Vec<f64> = (0..slots)
        .map(|i| -7.0 + 14.0 * i as f64 / slots as f64)
        .collect();
    let ct = f.encrypt(&x);
    // Degree 7 in the power basis on [-1, 1] (on [-7, 7] the rescale noise of the small
    // leaves, ~1e-8, is multiplied by x^4 = 2401: that is what the Chebyshev basis avoids).
    let unit: Vec<f64> = x.iter().map(|v| v / 7.0).collect();
    let cu = f.encrypt(&unit);
    let power = [0.5, 0.25, 0.0, -0.02, 0.0, 0.001, 0.3, -0.1];
    let out =
        f.ev.evaluate_polynomial(&cu, &power, PolyBasis::Power)
            .unwrap();
    let want: Vec<f64> = unit.iter().map(|&v| power_eval(&power, v)).collect();
    let e = f.max_err(&out, &want);
    assert!(e < 1e-6, "power basis error {e}");
    let used = top - out.level();
    assert!(used <= 4, "degree 7 used {used} levels");
    // Degree 15 and 31 in the Chebyshev basis of [-7, 7].
    for degree in [15usize, 31] {
        let cheb: Vec<f64> = (0..=degree)
            .map(|i| 1.0 / (1.0 + i as f64).powi(2))
            .collect();
        let basis = PolyBasis::Chebyshev { lo: -7.0, hi: 7.0 };
        let out = f.ev.evaluate_polynomial(&ct, &cheb, basis).unwrap();
        let want: Vec<f64> = x
            .iter()
            .map(|&v| chebyshev_eval(&cheb, -7.0, 7.0, v))
            .collect();
        let e = f.max_err(&out, &want);
        assert!(e < 1e-4, "degree {degree}: error {e}");
        let used = top - out.level();
        let log = (degree + 1).next_power_of_two().trailing_zeros() as usize;
        // ceil(log2(d+1)) for the products, + 1 for the affine map, + at most 1 for constants.
        assert!(used <= log + 2, "degree {degree} used {used} levels");
    }
    // Too deep for the remaining levels: a clear error, not garbage.
    let low = f.ev.drop_to_level(&ct, 2).unwrap();
    let cheb = vec![0.1; 32];
    assert!(matches!(
        f.ev.evaluate_polynomial(&low, &cheb, PolyBasis::Chebyshev { lo: -1.0, hi: 1.0 }),
        Err(CkksError::LevelExhausted(_))
    ));
}

#[test]
fn baby_step_giant_step_linear_transform_matches_the_matrix_product() {
    let params = CkksParamsBuilder::leveled(8192, 50, 40, 3, &[47])
        .build()
        .unwrap();
    let ctx = EvalContext::new(&params).unwrap();
    let slots = ctx.slots();
    let mut rng = secret_rng(Some(21));
    let sk = SecretKey::generate(&ctx, &mut rng);
    // A banded matrix with 20 diagonals (0..16 and a few far ones).
    let mut diagonals = std::collections::BTreeMap::new();
    for i in (0..16).chain([100, 101, 1000, slots - 1]) {
        let d: Vec<f64> = (0..slots)
            .map(|j| ((i * 31 + j * 7) % 17) as f64 / 17.0 - 0.5)
            .collect();
        diagonals.insert(i, d);
    }
    // Keys for exactly the rotations the transform reports.
    let probe = Evaluator::new(&ctx, None, Default::default());
    let top = ctx.max_level();
    let needed = LinearTransform::new(&probe, &diagonals, top)
        .unwrap()
        .rotations();
    assert!(needed.len() < diagonals.len() + 10);
    let ev = Evaluator::new(&ctx, None, sk.galois_keys(&needed, false, &mut rng));
    let lt = LinearTransform::new(&ev, &diagonals, top).unwrap();
    let v = vector(slots, 2.0);
    let pk = sk.public_key(&mut rng);
    let ct = pk
        .encrypt(&encode(&ctx, &v, top).unwrap(), &mut rng)
        .unwrap();
    let out = lt.apply(&ev, &ct).unwrap();
    assert_eq!(out.level(), top - 1);
    let got = sk.decrypt_values(&out).unwrap();
    let mut worst: f64 = 0.0;
    for j in 0..slots {
        let want: f64 = diagonals
            .iter()
            .map(|(&i, d)| d[j] * v[(j + i) % slots])
            .sum();
        worst = worst.max((want - got[j]).abs());
    }
    assert!(worst < 1e-4, "{worst}");
    // Missing keys are reported, not silently skipped.
    let bare = Evaluator::new(&ctx, None, Default::default());
    assert!(matches!(
        lt.apply(&bare, &ct),
        Err(CkksError::MissingKey(_))
    ));
}

/// Key switching must not bias the result: an uncentred base conversion gives every
/// coefficient a positive mean, which the canonical embedding piles into slot 0 (a spike 20×
/// the fresh noise, once seen here). A rotated zero must look like a fresh zero.
#[test]
fn key_switching_noise_has_no_structured_spike() {
    let mut f = fixture(&[1]);
    let zeros = vec![0.0; f.ctx.slots()];
    let fresh = f.encrypt(&zeros);
    let rotated = f.ev.rotate(&fresh, 1).unwrap();
    let worst = |c: &Ciphertext| {
        f.sk.decrypt_values(c)
            .unwrap()
            .iter()
            .map(|x| x.abs())
            .fold(0.0, f64::max)
    };
    let (a, b) = (worst(&fresh), worst(&rotated));
    assert!(b < 3.0 * a, "rotated zero: max {b:e} vs fresh {a:e}");
    let slot0 = f.sk.decrypt_values(&rotated).unwrap()[0].abs();
    assert!(slot0 < 2.0 * a, "slot 0 carries {slot0:e}");
}

#[test]
fn leveled_ciphertexts_round_trip_through_bytes_and_bad_bytes_are_refused() {
    let mut f = fixture(&[]);
    let v = vector(f.ctx.slots(), 4.0);
    let fresh = f.encrypt(&v);
    let ct = f.ev.mul_const(&fresh, 0.5).unwrap();
    let params = f.ctx.params().clone();
    let bytes = ct.to_bytes(&params);
    assert_eq!(bytes.len(), Ciphertext::encoded_len(&params, ct.level()));
    let back = Ciphertext::from_bytes(&params, &bytes).unwrap();
    assert_eq!(back, ct);
    let half: Vec<f64> = v.iter().map(|x| 0.5 * x).collect();
    assert!(f.max_err(&back, &half) < 1e-6);
    let malformed = |b: &[u8]| {
        matches!(
            Ciphertext::from_bytes(&params, b),
            Err(CkksError::Malformed { .. })
        )
    };
    assert!(malformed(&bytes[..bytes.len() - 1]), "truncated");
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(malformed(&longer), "oversized");
    let mut bad = bytes.clone();
    bad[0] ^= 1;
    assert!(malformed(&bad), "magic");
    // Level field (after the 48-byte header) beyond the chain.
    let mut bad = bytes.clone();
    bad[48..52].copy_from_slice(&99u32.to_le_bytes());
    assert!(malformed(&bad), "level");
    let mut bad = bytes.clone();
    bad[52..60].copy_from_slice(&f64::NAN.to_le_bytes());
    assert!(malformed(&bad), "scale");
    // First residue set to its prime: out of range.
    let mut bad = bytes.clone();
    let q0 = params.basis().moduli()[0];
    bad[60..68].copy_from_slice(&q0.to_le_bytes());
    assert!(malformed(&bad), "residue");
    // Another parameter set's fingerprint.
    let other = CkksParamsBuilder::leveled(8192, 50, 40, 2, &[50])
        .build()
        .unwrap();
    assert!(matches!(
        Ciphertext::from_bytes(&other, &bytes),
        Err(CkksError::Malformed { .. })
    ));
}

#[test]
fn evaluation_keys_round_trip_through_bytes_and_bad_bytes_are_refused() {
    use privopt_ckks::eval::{GaloisKeys, PublicKey, RelinKey};
    let ctx = fixture(&[]).ctx;
    let params = ctx.params().clone();
    let mut rng = secret_rng(Some(31));
    let sk = SecretKey::generate(&ctx, &mut rng);
    let pk = PublicKey::from_bytes(&ctx, &sk.public_key(&mut rng).to_bytes()).unwrap();
    // The secret key survives its owner's storage: everything below encrypts under the
    // original's public key and decrypts and evaluates with the reloaded key; a truncated key
    // is refused.
    let sk_bytes = sk.to_bytes();
    assert!(SecretKey::from_bytes(&ctx, &sk_bytes[..sk_bytes.len() - 1]).is_err());
    let sk = SecretKey::from_bytes(&ctx, &sk_bytes).unwrap();
    let relin = RelinKey::from_bytes(&params, &sk.relin_key(&mut rng).to_bytes(&params)).unwrap();
    let galois_bytes = sk.galois_keys(&[1, -2], true, &mut rng).to_bytes(&params);
    let galois = GaloisKeys::from_bytes(&ctx, &galois_bytes).unwrap();
    assert_eq!(galois.elements().count(), 3);
    // The loaded keys work: encrypt under the loaded public key, multiply and rotate with
    // the loaded evaluation keys, decrypt with the secret.
    let ev = Evaluator::new(&ctx, Some(relin), galois);
    let v = vector(ctx.slots(), 1.0);
    let ct = pk
        .encrypt(&encode(&ctx, &v, ctx.max_level()).unwrap(), &mut rng)
        .unwrap();
    let out = ev.rotate(&ev.square(&ct).unwrap(), -2).unwrap();
    let got = sk.decrypt_values(&out).unwrap();
    let s = v.len();
    let worst = (0..s)
        .map(|i| (got[i] - v[(i + s - 2) % s].powi(2)).abs())
        .fold(0.0, f64::max);
    assert!(worst < 1e-5, "{worst}");
    let malformed =
        |e: Result<GaloisKeys, CkksError>| matches!(e, Err(CkksError::Malformed { .. }));
    assert!(malformed(GaloisKeys::from_bytes(
        &ctx,
        &galois_bytes[..galois_bytes.len() - 8]
    )));
    // First element (after the header and the count) made even.
    let mut bad = galois_bytes.clone();
    bad[52..60].copy_from_slice(&4u64.to_le_bytes());
    assert!(malformed(GaloisKeys::from_bytes(&ctx, &bad)));
    // A public key is not a relinearization key.
    let pk_bytes = sk.public_key(&mut rng).to_bytes();
    assert!(matches!(
        RelinKey::from_bytes(&params, &pk_bytes),
        Err(CkksError::Malformed { .. })
    ));
    let mut bad = pk_bytes.clone();
    let last = bad.len() - 8;
    bad[last..].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        PublicKey::from_bytes(&ctx, &bad),
        Err(CkksError::Malformed { .. })
    ));
}

#[test]
fn key_switching_with_wide_digits_of_60_bit_primes_stays_exact() {
    // One digit of sixteen 60-bit primes and sixteen special primes: ModUp and ModDown sum 16
    // lazy terms below 2q < 2^61 each, which in the worst case exceed a u64 unless reduced in
    // batches (typical terms are below q, so this checks the batched path end to end rather
    // than forcing the overflow).
    let params = CkksParamsBuilder::new(4096, &[60; 16])
        .special_primes(&[60; 16])
        .digits(1)
        .scale_log2(40)
        .insecure_for_testing(true)
        .build()
        .unwrap();
    let ctx = EvalContext::new(&params).unwrap();
    let mut rng = secret_rng(Some(3));
    let sk = SecretKey::generate(&ctx, &mut rng);
    let ev = Evaluator::new(
        &ctx,
        Some(sk.relin_key(&mut rng)),
        sk.galois_keys(&[1], false, &mut rng),
    );
    let mut f = Fixture { ctx, sk, ev, rng };
    let a = vector(2048, 0.0);
    let b = vector(2048, 1.0);
    let (ca, cb) = (f.encrypt(&a), f.encrypt(&b));
    // Key switching alone (no rescale by a 60-bit prime, which would leave a 2^20 scale).
    let rot = f.ev.rotate(&ca, 1).unwrap();
    let want: Vec<f64> = (0..2048).map(|i| a[(i + 1) % 2048]).collect();
    assert!(
        f.max_err(&rot, &want) < 1e-6,
        "rotation: {}",
        f.max_err(&rot, &want)
    );
    let relin = f.ev.relinearize(f.ev.tensor(&ca, &cb).unwrap()).unwrap();
    let got = f.sk.decrypt_values(&relin).unwrap();
    let worst = a
        .iter()
        .zip(&b)
        .zip(&got)
        .map(|((x, y), g)| (x * y - g).abs())
        .fold(0.0, f64::max);
    assert!(worst < 1e-6, "relinearization: {worst}");
}

/// Ciphertexts and plaintexts carry their parameters' fingerprint: using one with an
/// evaluator or key of another parameter set is an error (it panicked on a different ring,
/// and `add` returned garbage on the same ring with other primes).
#[test]
fn operands_of_other_parameters_are_refused() {
    let mut f = fixture(&[1]);
    let a = f.encrypt(&vector(8, 0.0));
    for other_params in [
        // Another ring degree.
        CkksParamsBuilder::leveled(4096, 50, 40, 1, &[47])
            .insecure_for_testing(true)
            .build()
            .unwrap(),
        // The same ring and shape, other primes.
        CkksParamsBuilder::leveled(8192, 49, 40, 3, &[47])
            .build()
            .unwrap(),
    ] {
        let ctx = EvalContext::new(&other_params).unwrap();
        let mut rng = secret_rng(Some(3));
        let sk = SecretKey::generate(&ctx, &mut rng);
        let galois = sk.galois_keys(&[1], false, &mut rng);
        let ev = Evaluator::new(&ctx, Some(sk.relin_key(&mut rng)), galois);
        let pt = encode(&ctx, &vector(8, 1.0), ctx.max_level()).unwrap();
        let b = sk.public_key(&mut rng).encrypt(&pt, &mut rng).unwrap();
        let mismatch = |r: Result<Ciphertext, CkksError>| {
            assert!(matches!(r, Err(CkksError::Mismatch(_))), "{r:?}")
        };
        mismatch(ev.add(&a, &b));
        mismatch(ev.add(&b, &a));
        mismatch(f.ev.add(&a, &b));
        mismatch(ev.multiply(&a, &a));
        mismatch(ev.rotate(&a, 1));
        mismatch(ev.negate(&a));
        mismatch(ev.mul_int(&a, 2));
        mismatch(ev.add_const(&a, 1.0));
        mismatch(ev.rescale(&a));
        mismatch(f.ev.add_plain(&a, &pt));
        mismatch(f.sk.encrypt(&pt, &mut f.rng));
        assert!(matches!(sk.decrypt(&a), Err(CkksError::Mismatch(_))));
        assert!(matches!(
            f.sk.decrypt_values(&b),
            Err(CkksError::Mismatch(_))
        ));
    }
}

#[test]
fn ciphertexts_and_keys_of_another_secret_are_refused_not_evaluated_to_noise() {
    use privopt_ckks::eval::{EncapsulationKeys, GaloisKeys, PublicKey, RelinKey};
    // Two secrets under the same parameters: nothing in the residues tells their
    // ciphertexts apart, so without the key id every line below would give noise or a
    // wrong answer with no error.
    let mut f = fixture(&[1]);
    let params = f.ctx.params().clone();
    let other = SecretKey::generate(&f.ctx, &mut f.rng);
    assert_ne!(other.key_id(), f.sk.key_id());
    let v = vector(f.ctx.slots(), 2.0);
    let pt = encode(&f.ctx, &v, f.ctx.max_level()).unwrap();
    let mine = f.encrypt(&v);
    assert_eq!(mine.key_id(), f.sk.key_id());
    let foreign = other.encrypt(&pt, &mut f.rng).unwrap();
    let mismatch = |r: Result<Ciphertext, CkksError>| {
        assert!(matches!(r, Err(CkksError::Mismatch(_))), "{r:?}")
    };
    // An evaluator over one secret's keys refuses the other's ciphertexts, alone or mixed.
    mismatch(f.ev.add(&mine, &foreign));
    mismatch(f.ev.multiply(&foreign, &foreign));
    mismatch(f.ev.rotate(&foreign, 1));
    mismatch(f.ev.mul_const(&foreign, 2.0));
    mismatch(f.ev.linear_combination_to(&[(&mine, 1.0), (&foreign, 1.0)], 1));
    // An evaluator without keys still refuses operands of two secrets.
    let keyless = Evaluator::new(&f.ctx, None, GaloisKeys::default());
    assert_eq!(keyless.key_id(), None);
    mismatch(keyless.add(&mine, &foreign));
    assert!(keyless.add(&foreign, &foreign).is_ok());
    // Decryption under the other secret is refused.
    assert!(matches!(other.decrypt(&mine), Err(CkksError::Mismatch(_))));
    // A foreign relinearization key next to the owner's Galois keys: refused up front by
    // `check_keys` and where it is used; the owner's rotations still work.
    let owner_galois = f.sk.galois_keys(&[1], false, &mut f.rng);
    let mixed = Evaluator::new(
        &f.ctx,
        Some(other.relin_key(&mut f.rng)),
        owner_galois.clone(),
    );
    assert!(matches!(mixed.check_keys(), Err(CkksError::Mismatch(_))));
    assert!(f.ev.check_keys().is_ok());
    let relin_only = Evaluator::new(&f.ctx, Some(other.relin_key(&mut f.rng)), owner_galois);
    let galois_user = Evaluator::new(&f.ctx, None, f.sk.galois_keys(&[1], false, &mut f.rng));
    mismatch(relin_only.multiply(&mine, &mine));
    assert!(galois_user.rotate(&mine, 1).is_ok());
    // Galois keys of two secrets do not merge.
    let merged = GaloisKeys::merge([
        f.sk.galois_keys(&[1], false, &mut f.rng),
        other.galois_keys(&[2], false, &mut f.rng),
    ]);
    assert!(matches!(merged, Err(CkksError::Mismatch(_))));
    // The id survives every encoding, so a key or ciphertext loaded from bytes keeps it.
    let id = f.sk.key_id();
    let back = Ciphertext::from_bytes(&params, &mine.to_bytes(&params)).unwrap();
    assert_eq!(back.key_id(), id);
    assert_eq!(
        SecretKey::from_bytes(&f.ctx, &f.sk.to_bytes())
            .unwrap()
            .key_id(),
        id
    );
    let pk = f.sk.public_key(&mut f.rng);
    assert_eq!(
        PublicKey::from_bytes(&f.ctx, &pk.to_bytes())
            .unwrap()
            .key_id(),
        id
    );
    let relin = f.sk.relin_key(&mut f.rng);
    assert_eq!(
        RelinKey::from_bytes(&params, &relin.to_bytes(&params))
            .unwrap()
            .key_id(),
        id
    );
    let galois = f.sk.galois_keys(&[1, 3], false, &mut f.rng);
    let galois = GaloisKeys::from_bytes(&f.ctx, &galois.to_bytes(&params)).unwrap();
    assert_eq!(galois.key_id(), Some(id));
    // Encapsulation keys (certified only at bootstrapping sizes: a small insecure set here)
    // keep the dense secret's id, and an evaluator holding another secret's is refused.
    let small = CkksParamsBuilder::leveled(1 << 12, 60, 50, 3, &[60, 60])
        .insecure_for_testing(true)
        .build()
        .unwrap();
    let small_ctx = EvalContext::new(&small).unwrap();
    let dense = SecretKey::generate(&small_ctx, &mut f.rng);
    let stranger = SecretKey::generate(&small_ctx, &mut f.rng);
    let keys = dense.encapsulation_keys(32, &mut f.rng).unwrap();
    let keys = EncapsulationKeys::from_bytes(&small, &keys.to_bytes(&small)).unwrap();
    assert_eq!(keys.key_id(), dense.key_id());
    let mixed = Evaluator::new(
        &small_ctx,
        Some(stranger.relin_key(&mut f.rng)),
        GaloisKeys::default(),
    )
    .with_encapsulation(keys);
    assert!(matches!(mixed.check_keys(), Err(CkksError::Mismatch(_))));
    // A foreign ciphertext relabelled with the owner's id passes the check but is not
    // forged into a right answer: the id catches mistakes, not an adversary (documented).
    let mut bytes = foreign.to_bytes(&params);
    bytes[40..48].copy_from_slice(&id.get().to_le_bytes());
    let relabelled = Ciphertext::from_bytes(&params, &bytes).unwrap();
    assert!(f.max_err(&relabelled, &v) > 1.0);
}

#[test]
fn hoisted_rotations_equal_one_by_one_rotations() {
    let steps = [1i64, 2, 5, -3, 0, 1000];
    let mut f = fixture(&steps);
    let slots = f.ctx.slots();
    let v = vector(slots, 0.5);
    let ct = f.encrypt(&v);
    let hoisted = f.ev.rotate_hoisted(&ct, &steps).unwrap();
    assert_eq!(hoisted.len(), steps.len());
    for (&k, h) in steps.iter().zip(&hoisted) {
        let want: Vec<f64> = (0..slots)
            .map(|j| v[(j as i64 + k).rem_euclid(slots as i64) as usize])
            .collect();
        let plain = f.ev.rotate(&ct, k).unwrap();
        assert!(
            f.max_err(h, &want) < 1e-6,
            "step {k}: {:e}",
            f.max_err(h, &want)
        );
        // Same decryption as the plain rotation up to key-switching noise.
        let (a, b) = (
            f.sk.decrypt_values(h).unwrap(),
            f.sk.decrypt_values(&plain).unwrap(),
        );
        let gap = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        assert!(gap < 1e-7, "step {k}: hoisted vs plain {gap:e}");
    }
    assert!(f.ev.rotate_hoisted(&ct, &[7]).is_err()); // no key for 7
}

#[test]
fn keys_made_for_a_level_switch_there_and_below_and_refuse_above() {
    use privopt_ckks::eval::{GaloisKeys, KeyRequest, RelinKey};
    let mut f = fixture(&[1]);
    let (ctx, params) = (Arc::clone(&f.ctx), f.ctx.params().clone());
    let low = 1;
    let requests = [
        KeyRequest::Rotation {
            steps: 1,
            level: low,
        },
        // The higher of two requests for one element wins.
        KeyRequest::Rotation {
            steps: -2,
            level: 0,
        },
        KeyRequest::Rotation {
            steps: -2,
            level: low,
        },
    ];
    let galois = f.sk.galois_keys_for(&requests, &mut f.rng);
    assert_eq!(galois.elements().count(), 2);
    // One-prime digits: a level-1 key has 2 of 4 digits over 2 + 1 of 4 + 1 rows, 6/20 of a
    // top-level key (the fixture's three: two rotations and the conjugation).
    let top_each = fixture(&[1, -2]).ev.galois_keys().byte_len() / 3;
    assert_eq!(galois.byte_len() * 20, 2 * 6 * top_each);
    // Through bytes, then used at its level and below; refused above in one line.
    let galois = GaloisKeys::from_bytes(&ctx, &galois.to_bytes(&params)).unwrap();
    let relin = f.sk.relin_key_at(low, &mut f.rng);
    let relin = RelinKey::from_bytes(&params, &relin.to_bytes(&params)).unwrap();
    let ev = Evaluator::new(&ctx, Some(relin), galois);
    let v = vector(ctx.slots(), 3.0);
    let s = v.len();
    let ct = f.encrypt(&v);
    for level in [low, 0] {
        let at = ev.drop_to_level(&ct, level).unwrap();
        let rot = ev.rotate(&at, -2).unwrap();
        let want: Vec<f64> = (0..s).map(|i| v[(i + s - 2) % s]).collect();
        assert!(f.max_err(&rot, &want) < 1e-6, "level {level}");
        let hoisted = ev.rotate_hoisted(&at, &[1, -2]).unwrap();
        assert!(f.max_err(&hoisted[1], &want) < 1e-6, "hoisted at {level}");
    }
    let sq = ev.square(&ev.drop_to_level(&ct, low).unwrap()).unwrap();
    let want: Vec<f64> = v.iter().map(|x| x * x).collect();
    assert!(f.max_err(&sq, &want) < 1e-5);
    for e in [
        ev.rotate(&ct, 1).unwrap_err(),
        ev.rotate_hoisted(&ct, &[1]).unwrap_err(),
        ev.square(&ct).unwrap_err(),
    ] {
        let msg = e.to_string();
        assert!(matches!(e, CkksError::MissingKey(_)), "{msg}");
        assert!(msg.contains("level 3") && !msg.contains('\n'), "{msg}");
    }
    // A key whose level field exceeds the parameters' is refused.
    let mut bytes = f.sk.relin_key_at(low, &mut f.rng).to_bytes(&params);
    bytes[48..52].copy_from_slice(&9u32.to_le_bytes());
    assert!(matches!(
        RelinKey::from_bytes(&params, &bytes),
        Err(CkksError::Malformed { .. })
    ));
}

#[test]
fn compact_keys_switch_bit_for_bit_like_full_ones_and_cross_as_half_the_bytes() {
    use privopt_ckks::eval::{GaloisKeys, RelinKey};
    let mut f = fixture(&[1]);
    let (ctx, params) = (Arc::clone(&f.ctx), f.ctx.params().clone());
    let relin = f.sk.relin_key(&mut f.rng);
    let galois = f.sk.galois_keys(&[1, -3], false, &mut f.rng);
    let full_bytes = galois.byte_len();
    // On the wire each key is its level, seed and `b` halves: half its in-memory pairs.
    let wire = galois.to_bytes(&params);
    assert!(
        wire.len() < full_bytes / 2 + 200,
        "{} of {full_bytes}",
        wire.len()
    );
    let (mut small_relin, mut small_galois) = (relin.clone(), galois.clone());
    small_relin.compact();
    small_galois.compact();
    assert_eq!(2 * small_galois.byte_len(), full_bytes);
    let decoded = GaloisKeys::from_bytes(&ctx, &wire).unwrap();
    let decoded_relin = RelinKey::from_bytes(&params, &relin.to_bytes(&params)).unwrap();
    let evs = [
        Evaluator::new(&ctx, Some(relin), galois),
        Evaluator::new(&ctx, Some(small_relin), small_galois),
        Evaluator::new(&ctx, Some(decoded_relin), decoded),
    ];
    let v = vector(ctx.slots(), 5.0);
    let ct = f.encrypt(&v);
    // Key switching is deterministic: the regenerated (or decoded) `a` halves must be the
    // very ones the keys were made with, so every output is the same to the bit.
    let run = |ev: &Evaluator| {
        let rot = ev.rotate(&ct, -3).unwrap();
        let hoisted = ev.rotate_hoisted(&ct, &[1, -3]).unwrap();
        let sq = ev.square(&ct).unwrap();
        [rot, hoisted[0].clone(), sq].map(|c| c.to_bytes(&params))
    };
    let want = run(&evs[0]);
    for ev in &evs[1..] {
        assert!(run(ev) == want);
    }
    let s = v.len();
    let rotated: Vec<f64> = (0..s).map(|i| v[(i + s - 3) % s]).collect();
    assert!(f.max_err(&evs[1].rotate(&ct, -3).unwrap(), &rotated) < 1e-6);
    // A damaged seed decodes to other `a` halves: the key no longer switches.
    let mut bad = evs[0].galois_keys().to_bytes(&params);
    // The last key's seed precedes its `b` halves: 4 one-prime digits over 4 + 1 rows.
    let seed_at = bad.len() - 8 * 5 * 8192 * 4 - 32;
    bad[seed_at] ^= 1;
    let bad = Evaluator::new(&ctx, None, GaloisKeys::from_bytes(&ctx, &bad).unwrap());
    assert!(f.max_err(&bad.rotate(&ct, -3).unwrap(), &rotated) > 1.0);
}
