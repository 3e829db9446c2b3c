//! Bootstrapping against the clear: the transforms against their plaintext matrices, and a
//! level-0 ciphertext refreshed to a higher level with its slots kept to a stated precision,
//! also along a chain of bootstraps.
//!
//! Test parameters are small and insecure (n = 2^12 with a sparse secret, opted in): they
//! exercise the algorithm, not the 128-bit sets.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use privopt_ckks::SecretDistribution;
use privopt_ckks::encoding::Complex;
use privopt_ckks::eval::bootstrap::dft;
use privopt_ckks::eval::{
    BabySteps, BootstrapConfig, Bootstrapper, Ciphertext, EncapsulationKeys, EvalContext,
    Evaluator, GaloisKeys, LinearTransform, SecretKey, decode_complex, encode_at,
    encode_complex_at,
};
use privopt_ckks::params::CkksParamsBuilder;
use privopt_math::sample::secret_rng;
use rand_chacha::ChaCha20Rng;

const N: usize = 1 << 12;

/// q_0 of 60 bits, 19 levels of 50 bits (scale 2^50, so the message ratio q_0/Δ_0 is 2^10),
/// three 60-bit key-switching primes; secret of weight 64.
fn context() -> Arc<EvalContext> {
    context_with(60, 50, 19)
}

/// `levels` levels at scale `2^scale_bits` over a `q0_bits` q_0, three 60-bit key-switching
/// primes, secret of weight 64.
fn context_with(q0_bits: u32, scale_bits: u32, levels: usize) -> Arc<EvalContext> {
    let params = CkksParamsBuilder::leveled(N, q0_bits, scale_bits, levels, &[60, 60, 60])
        .secret(SecretDistribution::Sparse(64))
        .insecure_for_testing(true)
        .build()
        .unwrap();
    EvalContext::new(&params).unwrap()
}

struct Keys {
    sk: SecretKey,
    ev: Evaluator,
    rng: ChaCha20Rng,
}

fn keys(ctx: &Arc<EvalContext>, rotations: &[i64]) -> Keys {
    let mut rng = secret_rng(Some(11));
    let sk = SecretKey::generate(ctx, &mut rng);
    let relin = sk.relin_key(&mut rng);
    let galois = sk.galois_keys(rotations, true, &mut rng);
    let ev = Evaluator::new(ctx, Some(relin), galois);
    Keys { sk, ev, rng }
}

fn values(slots: usize, seed: f64) -> Vec<f64> {
    (0..slots)
        .map(|i| ((i as f64 + seed) * 0.731).sin())
        .collect()
}

fn worst(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// Encrypts real values at level 0 (where a computation leaves them).
fn at_level_zero(ctx: &Arc<EvalContext>, k: &mut Keys, v: &[f64]) -> Ciphertext {
    let pt = encode_at(ctx, v, 0, ctx.level_scale(0)).unwrap();
    k.sk.encrypt(&pt, &mut k.rng).unwrap()
}

#[test]
fn each_transform_factor_matches_its_matrix_on_complex_slots() {
    let ctx = context();
    let slots = ctx.slots();
    let factors = dft::coeffs_to_slots(slots, 3);
    let plain = Evaluator::new(&ctx, None, GaloisKeys::default());
    let top = ctx.max_level();
    let prepared: Vec<LinearTransform> = factors
        .iter()
        .enumerate()
        .map(|(i, f)| LinearTransform::new_complex(&plain, f, top - i).unwrap())
        .collect();
    let rotations: Vec<i64> = prepared.iter().flat_map(|t| t.rotations()).collect();
    let mut k = keys(&ctx, &rotations);
    let x: Vec<Complex> = (0..slots)
        .map(|j| Complex::new((j as f64 * 0.37).sin(), (j as f64 * 0.11).cos()))
        .collect();
    let pt = encode_complex_at(&ctx, &x, top, ctx.level_scale(top)).unwrap();
    let mut ct = k.sk.encrypt(&pt, &mut k.rng).unwrap();
    let mut want = x;
    for (t, f) in prepared.iter().zip(&factors) {
        ct = t.apply(&k.ev, &ct).unwrap();
        want = dft::apply(f, &want);
        let got = decode_complex(&ctx, &k.sk.decrypt(&ct).unwrap()).unwrap();
        let err = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (*g - *w).abs())
            .fold(0.0, f64::max);
        assert!(err < 1e-9, "level {}: error {err:e}", t.level());
    }
}

#[test]
fn bootstrapping_restores_levels_and_keeps_the_slots() {
    let ctx = context();
    let boot = Bootstrapper::new(&ctx, &BootstrapConfig::default()).unwrap();
    let mut k = keys(&ctx, &boot.rotations());
    let slots = ctx.slots();
    let v = values(slots, 0.0);
    let ct = at_level_zero(&ctx, &mut k, &v);
    let fresh = boot.bootstrap(&k.ev, &ct).unwrap();
    let got = k.sk.decrypt_values(&fresh).unwrap();
    let err = worst(&got, &v);
    let bits = -err.log2();
    eprintln!(
        "n = {N}: level {} out (predicted {}), max error {err:e} ({bits:.1} bits), \
         EvalMod degree {}",
        fresh.level(),
        boot.output_level(),
        boot.eval_mod().poly.degree()
    );
    assert_eq!(fresh.level(), boot.output_level());
    assert!(boot.output_level() >= 1);
    assert!(bits >= 14.0, "precision {bits:.1} bits");
    // The refreshed ciphertext computes: a product at the new level.
    let sq = k.ev.square(&fresh).unwrap();
    let want: Vec<f64> = v.iter().map(|x| x * x).collect();
    assert!(worst(&k.sk.decrypt_values(&sq).unwrap(), &want) < 4.0 * err);
}

/// Two threads run EvalMod's halves as two tasks and the row kernels in parallel; the
/// ciphertext must be the one a single thread makes, to the bit.
#[test]
fn two_threads_bootstrap_to_the_same_bits_as_one() {
    let ctx = context();
    let boot = Bootstrapper::new(&ctx, &BootstrapConfig::default()).unwrap();
    let mut rng = secret_rng(Some(12));
    let sk = SecretKey::generate(&ctx, &mut rng);
    let relin = sk.relin_key(&mut rng);
    let galois = sk.galois_keys(&boot.rotations(), true, &mut rng);
    let one = Evaluator::new(&ctx, Some(relin.clone()), galois.clone())
        .with_threads(1)
        .unwrap();
    let two = Evaluator::new(&ctx, Some(relin), galois)
        .with_threads(2)
        .unwrap();
    let v = values(ctx.slots(), 0.3);
    let pt = encode_at(&ctx, &v, 0, ctx.level_scale(0)).unwrap();
    let ct = sk.encrypt(&pt, &mut rng).unwrap();
    let (a, b) = (
        boot.bootstrap(&one, &ct).unwrap(),
        boot.bootstrap(&two, &ct).unwrap(),
    );
    assert!(a == b, "one thread and two gave different ciphertexts");
    let err = worst(&sk.decrypt_values(&b).unwrap(), &v);
    assert!(err < 2f64.powi(-14), "max error {err:e}");
}

#[test]
fn slots_beyond_one_bootstrap_when_divided_by_their_bound_first() {
    // Scale 2^56 under q_0 = 2^60: a message ratio of 2^4, the N16 preset's. The sine's
    // cubic term costs about (2π·m/16)²/6 of a message m: undivided slots of 7.5 lose 64
    // times what they lose divided by 8 (m³ against 8·(m/8)³; measured 7.9e-3 against 1.2e-4).
    let ctx = context_with(60, 56, 20);
    let boot = Bootstrapper::new(&ctx, &BootstrapConfig::default()).unwrap();
    let mut k = keys(&ctx, &boot.rotations());
    let big: Vec<f64> = values(ctx.slots(), 1.0).iter().map(|x| 7.5 * x).collect();
    let pt = encode_at(&ctx, &big, 2, ctx.level_scale(2)).unwrap();
    let ct = k.sk.encrypt(&pt, &mut k.rng).unwrap();
    let bounded = boot.bootstrap_bounded(&k.ev, &ct, 3).unwrap();
    let plain = boot.bootstrap(&k.ev, &ct).unwrap();
    let err = |c: &Ciphertext| worst(&k.sk.decrypt_values(c).unwrap(), &big);
    let (with, without) = (err(&bounded), err(&plain));
    eprintln!("|slots| ≤ 7.5: {with:e} divided by 8 first, {without:e} as they are");
    assert_eq!(bounded.level(), boot.output_level());
    assert!(with < 8.0 * 2f64.powi(-14), "{with:e}");
    assert!(without > 16.0 * with, "{without:e} against {with:e}");
    let at_zero = at_level_zero(&ctx, &mut k, &big);
    let e = boot.bootstrap_bounded(&k.ev, &at_zero, 3).unwrap_err();
    assert!(e.to_string().contains("level above 0"), "{e}");
}

#[test]
fn eval_mod_on_ciphertexts_matches_its_clear_reference() {
    let ctx = context();
    let boot = Bootstrapper::new(&ctx, &BootstrapConfig::default()).unwrap();
    let mut k = keys(&ctx, &[]);
    let m = boot.eval_mod();
    let slots = ctx.slots();
    // t = integer + small offset over the whole interval.
    let t: Vec<f64> = (0..slots)
        .map(|j| ((j % 27) as f64 - 13.0) + 1e-3 * ((j as f64) * 0.7).sin())
        .collect();
    let s: Vec<f64> = t.iter().map(|x| x / m.k).collect();
    let level = ctx.max_level() - 3;
    let pt = encode_at(&ctx, &s, level, ctx.level_scale(level)).unwrap();
    let ct = k.sk.encrypt(&pt, &mut k.rng).unwrap();
    let out = m.apply(&k.ev, &ct).unwrap();
    let got = k.sk.decrypt_values(&out).unwrap();
    let want: Vec<f64> = t.iter().map(|&x| m.reference(x)).collect();
    let exact: Vec<f64> = t
        .iter()
        .map(|&x| (2.0 * std::f64::consts::PI * x).sin())
        .collect();
    eprintln!(
        "EvalMod: {} levels, vs reference {:e}, reference vs sin {:e}",
        level - out.level(),
        worst(&got, &want),
        worst(&want, &exact)
    );
    assert!(worst(&got, &want) < 1e-7);
}

#[test]
fn a_chain_of_twenty_bootstraps_keeps_the_slots() {
    let ctx = context();
    let boot = Bootstrapper::new(&ctx, &BootstrapConfig::default()).unwrap();
    let mut k = keys(&ctx, &boot.rotations());
    let v = values(ctx.slots(), 3.0);
    let mut ct = at_level_zero(&ctx, &mut k, &v);
    let mut errors = Vec::new();
    for _ in 0..20 {
        // Spend the refreshed levels (as a computation would), then refresh again.
        ct = boot.bootstrap(&k.ev, &ct).unwrap();
        errors.push(worst(&k.sk.decrypt_values(&ct).unwrap(), &v));
        ct = k.ev.drop_to_level(&ct, 0).unwrap();
    }
    let shown: Vec<String> = errors.iter().map(|e| format!("{e:.1e}")).collect();
    eprintln!("errors along the chain: {}", shown.join(" "));
    // Each bootstrap adds its own independent error: the drift grows like the number of
    // bootstraps at most, never geometrically.
    let first = errors[0];
    assert!(first < 2f64.powi(-14), "first bootstrap: {first:e}");
    assert!(errors[19] < 20.0 * first, "after 20: {:e}", errors[19]);
}

/// Complex slots repeating with period `s`: encrypted at level 0, with the values.
fn periodic_at_level_zero(
    ctx: &Arc<EvalContext>,
    k: &mut Keys,
    s: usize,
) -> (Ciphertext, Vec<Complex>) {
    let base: Vec<Complex> = (0..s)
        .map(|j| {
            Complex::new(
                (j as f64 * 0.731).sin(),
                0.5 * (j as f64 * 0.29 + 1.0).cos(),
            )
        })
        .collect();
    let v: Vec<Complex> = (0..ctx.slots()).map(|j| base[j % s]).collect();
    let pt = encode_complex_at(ctx, &v, 0, ctx.level_scale(0)).unwrap();
    (k.sk.encrypt(&pt, &mut k.rng).unwrap(), v)
}

fn worst_complex(ctx: &Arc<EvalContext>, k: &Keys, ct: &Ciphertext, want: &[Complex]) -> f64 {
    let got = decode_complex(ctx, &k.sk.decrypt(ct).unwrap()).unwrap();
    got.iter()
        .zip(want)
        .map(|(g, w)| (*g - *w).abs())
        .fold(0.0, f64::max)
}

#[test]
fn sparse_packing_bootstraps_repeated_complex_slots_with_one_eval_mod() {
    let ctx = context();
    let full = Bootstrapper::new(&ctx, &BootstrapConfig::default()).unwrap();
    // Periods of 64 slots (32 copies, five sub-sum rotations) and n/4 (2s = n/2: the packed
    // real and imaginary parts fill every slot).
    for s in [64, ctx.slots() / 2] {
        let cfg = BootstrapConfig {
            slots: Some(s),
            ..BootstrapConfig::default()
        };
        let boot = Bootstrapper::new(&ctx, &cfg).unwrap();
        assert_eq!(boot.slots(), Some(s));
        // The same level budget, so the same output level.
        assert_eq!(boot.output_level(), full.output_level());
        let mut k = keys(&ctx, &boot.rotations());
        let (ct, v) = periodic_at_level_zero(&ctx, &mut k, s);
        let (out, phases) = boot.bootstrap_timed(&k.ev, &ct).unwrap();
        let bits = -worst_complex(&ctx, &k, &out, &v).log2();
        eprintln!(
            "period {s}: {bits:.1} bits, CtS {:.2} s, EvalMod {:.2} s, StC {:.2} s",
            phases.coeffs_to_slots, phases.eval_mod, phases.slots_to_coeffs
        );
        assert_eq!(out.level(), boot.output_level());
        assert!(bits >= 14.0, "period {s}: {bits:.1} bits");
        // The full bootstrap, for scale: same precision class on the same input.
        let mut kf = keys(&ctx, &full.rotations());
        let (ctf, vf) = periodic_at_level_zero(&ctx, &mut kf, s);
        let full_bits =
            -worst_complex(&ctx, &kf, &full.bootstrap(&kf.ev, &ctf).unwrap(), &vf).log2();
        assert!(
            bits >= full_bits - 2.0,
            "{bits:.1} against full {full_bits:.1}"
        );
    }
    // Slots that do not repeat come out as their mean over the period.
    let s = 64;
    let cfg = BootstrapConfig {
        slots: Some(s),
        ..BootstrapConfig::default()
    };
    let boot = Bootstrapper::new(&ctx, &cfg).unwrap();
    let mut k = keys(&ctx, &boot.rotations());
    let v = values(ctx.slots(), 5.0);
    let ct = at_level_zero(&ctx, &mut k, &v);
    let copies = ctx.slots() / s;
    let mean: Vec<f64> = (0..ctx.slots())
        .map(|j| (0..copies).map(|c| v[j % s + c * s]).sum::<f64>() / copies as f64)
        .collect();
    let out = boot.bootstrap(&k.ev, &ct).unwrap();
    let err = worst(&k.sk.decrypt_values(&out).unwrap(), &mean);
    assert!(err < 2f64.powi(-14), "{err:e}");
    // Periods that are not powers of two from 2 to n/2 are refused.
    for bad in [0, 1, 48, 2 * ctx.slots()] {
        let cfg = BootstrapConfig {
            slots: Some(bad),
            ..BootstrapConfig::default()
        };
        let e = Bootstrapper::new(&ctx, &cfg).unwrap_err();
        assert!(e.to_string().contains("power of two"), "{bad}: {e}");
    }
}

#[test]
fn a_second_bootstrap_of_the_error_adds_precision() {
    // Scale 2^50 under q_0 = 2^56 (message ratio 2^6): one bootstrap gives
    // about 17 bits; META-BTS with a lift of 2^12 removes most of its error.
    let ctx = context_with(56, 50, 20);
    let boot = Bootstrapper::new(&ctx, &BootstrapConfig::default()).unwrap();
    let mut k = keys(&ctx, &boot.rotations());
    let v = values(ctx.slots(), 6.0);
    let ct = at_level_zero(&ctx, &mut k, &v);
    let bits = |c: &Ciphertext| -worst(&k.sk.decrypt_values(c).unwrap(), &v).log2();
    let once = bits(&boot.bootstrap(&k.ev, &ct).unwrap());
    let precise = boot.bootstrap_precise(&k.ev, &ct, 12).unwrap();
    let twice = bits(&precise);
    eprintln!("META-BTS: {once:.1} bits with one bootstrap, {twice:.1} with two");
    assert_eq!(precise.level() + 1, boot.output_level());
    assert!(twice >= once + 6.0, "{once:.1} → {twice:.1}");
    // Lifts outside 2^1..2^40 are refused.
    for bad in [0, 41] {
        assert!(boot.bootstrap_precise(&k.ev, &ct, bad).is_err());
    }
}

#[test]
fn too_few_levels_are_refused_with_the_count() {
    let params = CkksParamsBuilder::leveled(N, 60, 50, 11, &[60, 60])
        .secret(SecretDistribution::Sparse(64))
        .insecure_for_testing(true)
        .build()
        .unwrap();
    let ctx = EvalContext::new(&params).unwrap();
    let e = Bootstrapper::new(&ctx, &BootstrapConfig::default()).unwrap_err();
    assert!(e.to_string().contains("levels"), "{e}");
    let shallow = BootstrapConfig {
        cts_levels: 2,
        stc_levels: 2,
        ..BootstrapConfig::default()
    };
    // 2 + 9 + 2 = 13 levels: still more than 11.
    assert!(Bootstrapper::new(&ctx, &shallow).is_err());
    for (cts, stc, per_level) in [(0, 3, 1), (3, 12, 1), (3, 6, 2)] {
        let bad = BootstrapConfig {
            cts_levels: cts,
            stc_levels: stc,
            stc_factors_per_level: per_level,
            ..BootstrapConfig::default()
        };
        let e = Bootstrapper::new(&ctx, &bad).unwrap_err();
        assert!(e.to_string().contains("1 to 11 factors"), "{e}");
    }
}

#[test]
fn the_arcsine_correction_lifts_precision_at_a_small_message_ratio() {
    // Scale 2^55 under q_0 = 2^60: message ratio 2^5, so the sine's cubic error dominates
    // unless the arcsine removes it (measured: 17.7 bits without, 27.9 with, at 2 levels).
    let ctx = context_with(60, 55, 20);
    let plain = Bootstrapper::new(&ctx, &BootstrapConfig::default()).unwrap();
    let corrected = BootstrapConfig {
        arcsine_degree: 3,
        ..BootstrapConfig::default()
    };
    let arcsine = Bootstrapper::new(&ctx, &corrected).unwrap();
    assert_eq!(arcsine.output_level() + 2, plain.output_level());
    let mut k = keys(&ctx, &plain.rotations());
    let v = values(ctx.slots(), 1.0);
    let ct = at_level_zero(&ctx, &mut k, &v);
    let bits = |b: &Bootstrapper| {
        let out = b.bootstrap(&k.ev, &ct).unwrap();
        -worst(&k.sk.decrypt_values(&out).unwrap(), &v).log2()
    };
    let (without, with) = (bits(&plain), bits(&arcsine));
    eprintln!("scale 2^55: {without:.1} bits without the arcsine, {with:.1} with");
    assert!(
        with >= 26.0 && with >= without + 8.0,
        "{without:.1} → {with:.1}"
    );
}

#[test]
fn a_dense_secret_bootstraps_through_sparse_encapsulation() {
    // The parameters' own secret is dense (±1 everywhere): ModRaise's overflow would reach
    // 6·√(4097/12) ≈ 111. Encapsulated to 32 non-zeros around ModRaise it stays below 10.
    let params = CkksParamsBuilder::leveled(N, 60, 50, 19, &[60, 60, 60])
        .insecure_for_testing(true)
        .build()
        .unwrap();
    assert_eq!(params.secret(), SecretDistribution::Signs);
    let ctx = EvalContext::new(&params).unwrap();
    let cfg = BootstrapConfig {
        encapsulation: Some(32),
        ..BootstrapConfig::default()
    };
    let boot = Bootstrapper::new(&ctx, &cfg).unwrap();
    assert!(boot.eval_mod().k <= 10.0, "K = {}", boot.eval_mod().k);
    let mut k = keys(&ctx, &boot.rotations());
    let v = values(ctx.slots(), 2.0);
    let ct = at_level_zero(&ctx, &mut k, &v);
    let missing = boot.bootstrap(&k.ev, &ct).unwrap_err();
    assert!(missing.to_string().contains("encapsulation"), "{missing}");
    let enc = k.sk.encapsulation_keys(32, &mut k.rng).unwrap();
    assert_eq!(enc.weight(), 32);
    // The keys cross to the server as bytes; a truncated copy is refused.
    let bytes = enc.to_bytes(&params);
    assert!(EncapsulationKeys::from_bytes(&params, &bytes[..bytes.len() - 8]).is_err());
    let enc = EncapsulationKeys::from_bytes(&params, &bytes).unwrap();
    assert_eq!(enc.weight(), 32);
    let ev = k.ev.with_encapsulation(enc);
    let out = boot.bootstrap(&ev, &ct).unwrap();
    let bits = -worst(&k.sk.decrypt_values(&out).unwrap(), &v).log2();
    eprintln!("dense secret, encapsulated to h = 32: {bits:.1} bits");
    // 15.6 measured against 18.0 for a sparse secret throughout: every rescale's rounding
    // noise scales with ‖s‖ (√n against √h), which costs the dense secret about 2.5 bits.
    assert!(bits >= 15.0, "{bits:.1} bits");
    assert!(k.sk.encapsulation_keys(0, &mut k.rng).is_err());
    // The bootstrapper's own key set: each Galois key at the highest level a transform uses
    // it (CtS and StC share most rotations, so most stay at the top; the conjugation and
    // StC-only rotations drop) bootstraps as precisely with fewer bytes (measured: 89%).
    let sized = boot
        .evaluator(&k.sk, &[], &mut secret_rng(Some(11)))
        .unwrap();
    let (small, full) = (sized.galois_keys().byte_len(), ev.galois_keys().byte_len());
    let out = boot.bootstrap(&sized, &ct).unwrap();
    let sized_bits = -worst(&k.sk.decrypt_values(&out).unwrap(), &v).log2();
    eprintln!("level-sized keys: {small} of {full} bytes, {sized_bits:.1} bits");
    assert!(
        sized_bits >= bits - 0.5,
        "{sized_bits:.1} against {bits:.1}"
    );
    assert!(small < full, "{small} of {full} bytes");
    // Compact keys and transforms (rebuilt where used) from the same key seed: half the key
    // bytes but for the giant-step keys (one per transform, kept whole), and the same
    // bootstrap to the bit.
    let compact = Bootstrapper::new(
        &ctx,
        &BootstrapConfig {
            compact: true,
            ..cfg.clone()
        },
    )
    .unwrap();
    let lean = compact
        .evaluator(&k.sk, &[], &mut secret_rng(Some(11)))
        .unwrap();
    let lean_bytes = lean.galois_keys().byte_len();
    assert!(
        small / 2 < lean_bytes && lean_bytes < small * 6 / 10,
        "{lean_bytes} of {small} bytes"
    );
    let lean_out = compact.bootstrap(&lean, &ct).unwrap();
    assert!(lean_out.to_bytes(&params) == out.to_bytes(&params));
    // Compact transforms alone (N16's default): whole keys, the dense diagonals kept as
    // coefficients, and again the same bootstrap to the bit.
    let lean_transforms = Bootstrapper::new(
        &ctx,
        &BootstrapConfig {
            compact_transforms: true,
            ..cfg.clone()
        },
    )
    .unwrap();
    let (whole, kept) = (boot.transform_bytes(), lean_transforms.transform_bytes());
    assert!(kept < whole / 2, "{kept} of {whole} transform bytes");
    assert_eq!(compact.transform_bytes(), kept);
    let out_lean_transforms = lean_transforms.bootstrap(&sized, &ct).unwrap();
    assert!(out_lean_transforms.to_bytes(&params) == out.to_bytes(&params));
    // Baby steps one at a time (each transform's keys: the first baby, the stride and the
    // giant step): about half the key bytes here, for a little
    // precision, as each baby adds its key switch's noise to the next (measured 15.9 → 15.4
    // bits; 16.9 → 16.8 at the N15 preset).
    let grouped = Bootstrapper::new(
        &ctx,
        &BootstrapConfig {
            cts_babies: BabySteps::Grouped(1),
            stc_babies: BabySteps::Grouped(1),
            ..cfg
        },
    )
    .unwrap();
    let chained = grouped
        .evaluator(&k.sk, &[], &mut secret_rng(Some(11)))
        .unwrap();
    let chained_bytes = chained.galois_keys().byte_len();
    let chained_out = grouped.bootstrap(&chained, &ct).unwrap();
    let chained_bits = -worst(&k.sk.decrypt_values(&chained_out).unwrap(), &v).log2();
    eprintln!("grouped baby steps: {chained_bytes} of {small} bytes, {chained_bits:.1} bits");
    assert!(
        chained_bytes < small * 6 / 10,
        "{chained_bytes} of {small} bytes"
    );
    assert!(
        chained_bits >= sized_bits - 1.0,
        "{chained_bits:.1} against {sized_bits:.1}"
    );
}

/// The sparse ephemeral secret exists only in the dense-to-sparse key, modulo `q_0·p_0`:
/// encapsulation is certified there (`SPARSE_128`: weight ≥ 32 and at most 96 bits at 2^15)
/// and refused beyond, for 128-bit parameters that themselves pass the dense table.
#[test]
fn encapsulation_is_certified_at_q0_times_pe_and_refused_beyond() {
    let dense = |q0: u32, p0: u32| {
        let params = CkksParamsBuilder::new(1 << 15, &[q0, 50, 50])
            .special_primes(&[p0, 60])
            .build()
            .unwrap();
        let ctx = EvalContext::new(&params).unwrap();
        let mut rng = secret_rng(Some(3));
        (SecretKey::generate(&ctx, &mut rng), rng)
    };
    // q_0·p_0 within the 96 bits certified for weight 32 at 2^15; then q_0·p_0 beyond them
    // but q_0 times a 50-bit ciphertext prime within (the key takes that prime instead).
    for (q0, p0) in [(40, 56), (42, 56), (40, 58)] {
        let (sk, mut rng) = dense(q0, p0);
        let keys = sk.encapsulation_keys(32, &mut rng).unwrap();
        assert_eq!(keys.weight(), 32);
    }
    // No certificate below weight 32; no prime that keeps q_0·p_e within 96 bits.
    for (weight, q0, p0) in [(31, 40, 56), (32, 47, 56), (64, 47, 58)] {
        let (sk, mut rng) = dense(q0, p0);
        let e = sk.encapsulation_keys(weight, &mut rng).unwrap_err();
        assert!(
            e.to_string().contains("insecure"),
            "weight {weight}, {q0} + {p0} bits: {e}"
        );
    }
}

/// The presets build with the security check on, and their encapsulation key's `q_0·p_e` is
/// within the sparse-secret certificate for their weight. (Running them takes minutes and
/// ~10 GB: `privopt bench ckks` and `examples/bootstrap` do.)
#[test]
fn presets_are_128_bit_including_the_encapsulation_key() {
    use privopt_ckks::eval::bootstrap::BootstrapPreset;
    use privopt_ckks::eval::keys::encapsulation_prime;
    use privopt_ckks::params::{HE_STANDARD_128, sparse_max_log_q};
    for preset in BootstrapPreset::ALL {
        let params = preset.params().build().unwrap();
        assert!(!params.is_insecure());
        let bound = HE_STANDARD_128
            .iter()
            .find(|(n, _)| *n == preset.n())
            .unwrap()
            .1;
        assert!(params.key_basis().log_modulus() <= f64::from(bound));
        let weight = preset.config().encapsulation.unwrap();
        let moduli = params.key_basis().moduli();
        let pe = moduli[encapsulation_prime(&params, weight)];
        let q0_pe = (moduli[0] as f64).log2() + (pe as f64).log2();
        assert!(
            q0_pe <= f64::from(sparse_max_log_q(preset.n(), weight).unwrap()),
            "{}: q0·p_e = 2^{q0_pe:.1}",
            preset.name()
        );
        // p_e large enough that the key's noise d·e/p_e stays small against q_0.
        assert!(pe > moduli[0], "{}: p_e below q_0", preset.name());
    }
}

/// SlotsToCoeffs first: StC on the input at the bottom levels, then ModRaise, CtS and
/// EvalMod, whose two halves are the slots' real and imaginary parts. Same chain, same
/// levels between input and output as the usual order; complex slots kept.
#[test]
fn slots_to_coeffs_first_keeps_complex_slots_with_the_same_levels_between_bootstraps() {
    let ctx = context();
    // With an arcsine (as the presets have) the output factor q_0/(2πΔ_0) folds into its
    // coefficients; without one it is a product of its own, one level.
    let with_arcsine = BootstrapConfig {
        arcsine_degree: 3,
        ..BootstrapConfig::default()
    };
    let usual = Bootstrapper::new(&ctx, &with_arcsine).unwrap();
    let cfg = BootstrapConfig {
        slots_to_coeffs_first: true,
        ..with_arcsine
    };
    let boot = Bootstrapper::new(&ctx, &cfg).unwrap();
    assert_eq!(boot.input_level(), cfg.stc_levels);
    assert_eq!(usual.input_level(), 0);
    assert_eq!(
        boot.output_level() - boot.input_level(),
        usual.output_level()
    );
    let no_arcsine = BootstrapConfig {
        slots_to_coeffs_first: true,
        ..BootstrapConfig::default()
    };
    let plain = Bootstrapper::new(&ctx, &BootstrapConfig::default()).unwrap();
    let first = Bootstrapper::new(&ctx, &no_arcsine).unwrap();
    assert_eq!(
        first.output_level() - first.input_level() + 1,
        plain.output_level()
    );
    let mut k = keys(&ctx, &boot.rotations());
    let v: Vec<Complex> = (0..ctx.slots())
        .map(|j| Complex::new((j as f64 * 0.731).sin(), 0.8 * (j as f64 * 0.29).cos()))
        .collect();
    let level = boot.input_level();
    let pt = encode_complex_at(&ctx, &v, level, ctx.level_scale(level)).unwrap();
    let ct = k.sk.encrypt(&pt, &mut k.rng).unwrap();
    let (out, phases) = boot.bootstrap_timed(&k.ev, &ct).unwrap();
    let bits = -worst_complex(&ctx, &k, &out, &v).log2();
    eprintln!(
        "StC first: {bits:.1} bits, level {} out; StC {:.2} s, CtS {:.2} s, EvalMod {:.2} s",
        out.level(),
        phases.slots_to_coeffs,
        phases.coeffs_to_slots,
        phases.eval_mod
    );
    assert_eq!(out.level(), boot.output_level());
    assert!(bits >= 14.0, "{bits:.1} bits");
    // From higher up it drops to the input level first; the same result as from there.
    let above = encode_complex_at(&ctx, &v, level + 2, ctx.level_scale(level + 2)).unwrap();
    let above = k.sk.encrypt(&above, &mut k.rng).unwrap();
    let bits_above = -worst_complex(&ctx, &k, &boot.bootstrap(&k.ev, &above).unwrap(), &v).log2();
    assert!(bits_above >= 14.0, "{bits_above:.1} bits");
    // Slots bounded by 2 are divided on the way down to the input level, which needs a level
    // above it; META-BTS subtracts at the input level.
    let doubled: Vec<Complex> = v.iter().map(|z| z.scale(2.0)).collect();
    let pt = encode_complex_at(&ctx, &doubled, level + 2, ctx.level_scale(level + 2)).unwrap();
    let big = k.sk.encrypt(&pt, &mut k.rng).unwrap();
    let bounded = boot.bootstrap_bounded(&k.ev, &big, 1).unwrap();
    let bits_bounded = -worst_complex(&ctx, &k, &bounded, &doubled).log2();
    assert!(bits_bounded >= 13.0, "{bits_bounded:.1} bits");
    let e = boot.bootstrap_bounded(&k.ev, &ct, 1).unwrap_err();
    assert!(
        e.to_string().contains(&format!("level above {level}")),
        "{e}"
    );
    let precise = boot.bootstrap_precise(&k.ev, &ct, 8).unwrap();
    assert_eq!(precise.level() + 1, boot.output_level());
    let bits_precise = -worst_complex(&ctx, &k, &precise, &v).log2();
    assert!(
        bits_precise >= bits - 1.0,
        "{bits_precise:.1} against {bits:.1} bits"
    );
    // Below the input level StC has no room: a one-line error naming the level.
    let low = encode_complex_at(&ctx, &v, level - 1, ctx.level_scale(level - 1)).unwrap();
    let low = k.sk.encrypt(&low, &mut k.rng).unwrap();
    let e = boot.bootstrap(&k.ev, &low).unwrap_err();
    assert!(
        e.to_string().contains(&format!("level {level} or above")),
        "{e}"
    );
    // StC is not run on EvalMod's outputs in this order.
    let parts = boot.coeffs_to_slots(&k.ev, &ct).unwrap_or_default();
    assert!(boot.slots_to_coeffs(&k.ev, &parts).is_err());
}

/// Sparse packing with StC first: one EvalMod on `Re z | Im z`, the mask `D_0` folded into
/// its last polynomial, then `q + rot(q, s)`; with an arcsine (the mask in its two
/// coefficients) and without (in the output factor's degree-1 polynomial). The same levels
/// as full packing in the same order.
#[test]
fn slots_to_coeffs_first_bootstraps_repeated_complex_slots() {
    let ctx = context();
    for arcsine_degree in [3, 0] {
        let full = BootstrapConfig {
            slots_to_coeffs_first: true,
            arcsine_degree,
            ..BootstrapConfig::default()
        };
        let full_boot = Bootstrapper::new(&ctx, &full).unwrap();
        for s in [64, ctx.slots() / 4] {
            let cfg = BootstrapConfig {
                slots: Some(s),
                ..full.clone()
            };
            let boot = Bootstrapper::new(&ctx, &cfg).unwrap();
            assert_eq!(boot.output_level(), full_boot.output_level());
            assert_eq!(boot.input_level(), full_boot.input_level());
            let mut k = keys(&ctx, &boot.rotations());
            let base: Vec<Complex> = (0..s)
                .map(|j| Complex::new((j as f64 * 0.731).sin(), 0.6 * (j as f64 * 0.3).cos()))
                .collect();
            let v: Vec<Complex> = (0..ctx.slots()).map(|j| base[j % s]).collect();
            let level = boot.input_level();
            let pt = encode_complex_at(&ctx, &v, level, ctx.level_scale(level)).unwrap();
            let ct = k.sk.encrypt(&pt, &mut k.rng).unwrap();
            let out = boot.bootstrap(&k.ev, &ct).unwrap();
            let bits = -worst_complex(&ctx, &k, &out, &v).log2();
            eprintln!("StC first, period {s}, arcsine {arcsine_degree}: {bits:.1} bits");
            assert_eq!(out.level(), boot.output_level());
            assert!(bits >= 14.0, "period {s}: {bits:.1} bits");
        }
    }
    // Arcsines of degree 5 or 7 have no masked form (yet): refused when bootstrapping.
    let deep = BootstrapConfig {
        slots_to_coeffs_first: true,
        arcsine_degree: 5,
        slots: Some(64),
        ..BootstrapConfig::default()
    };
    if let Ok(boot) = Bootstrapper::new(&ctx, &deep) {
        let mut k = keys(&ctx, &boot.rotations());
        let v = values(ctx.slots(), 0.0);
        let level = boot.input_level();
        let ct =
            k.sk.encrypt(
                &encode_at(&ctx, &v, level, ctx.level_scale(level)).unwrap(),
                &mut k.rng,
            )
            .unwrap();
        let e = boot.bootstrap(&k.ev, &ct).unwrap_err();
        assert!(e.to_string().contains("masked"), "{e}");
    }
}
