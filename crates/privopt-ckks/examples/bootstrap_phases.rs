//! Where a bootstrap loses its precision, phase by phase: decrypts after CoeffsToSlots,
//! EvalMod and SlotsToCoeffs and compares each with the same step in the clear (from the
//! decrypted ModRaise). It runs with a sparse secret of weight 32 throughout (insecure,
//! opted in): the ModRaise under encapsulation is internal, and the same weight gives the
//! same `K`. With a dense secret every rounding noise is about `√(2n/3)/√33` times larger.
//!
//! `cargo run --release -p privopt-ckks --example bootstrap_phases -- LOG_N Q0_BITS SCALES
//! SPECIAL DIGITS [LINEAR_STC_LEVEL]`, e.g. `15 39 35,35,35,35,44,47,48,49,50,50,50,50,50,50,50
//! 50,50,50 8 4` (the N15 preset's layout: two CtS levels, StC's two factors on the linear level).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use privopt_ckks::SecretDistribution;
use privopt_ckks::eval::bootstrap::{dft, mod_raise};
use privopt_ckks::eval::{
    BootstrapConfig, Bootstrapper, EvalContext, SecretKey, decode_complex, encode_at,
};
use privopt_ckks::params::CkksParamsBuilder;
use privopt_math::sample::secret_rng;

fn worst(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

fn list(s: &str) -> Vec<u32> {
    s.split(',')
        .map(|x| x.parse().expect("a list of numbers"))
        .collect()
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 5 {
        eprintln!("usage: bootstrap_phases LOG_N Q0_BITS SCALES SPECIAL DIGITS [LINEAR_STC_LEVEL]");
        std::process::exit(2);
    }
    let log_n: usize = a[0].parse().expect("LOG_N");
    let q0: u32 = a[1].parse().expect("Q0_BITS");
    let mut builder = CkksParamsBuilder::profiled(1 << log_n, q0, &list(&a[2]), &list(&a[3]))
        .digits(a[4].parse().expect("DIGITS"))
        .secret(SecretDistribution::Sparse(32))
        .insecure_for_testing(true);
    let mut per_level = 1;
    if let Some(level) = a.get(5) {
        builder = builder.linear_level(level.parse().expect("LINEAR_STC_LEVEL"), 60);
        per_level = 2;
    }
    let params = builder.build().expect("parameters");
    let ctx = EvalContext::new(&params).unwrap();
    let cfg = BootstrapConfig {
        cts_levels: 2,
        stc_levels: 2 / per_level,
        stc_factors_per_level: per_level,
        ..BootstrapConfig::default()
    };
    let boot = Bootstrapper::new(&ctx, &cfg).expect("bootstrapper");
    let mut rng = secret_rng(Some(1));
    let sk = SecretKey::generate(&ctx, &mut rng);
    let ev = boot.evaluator(&sk, &[], &mut rng).expect("keys");
    let slots = ctx.slots();
    let v: Vec<f64> = (0..slots).map(|i| ((i as f64) * 0.731).sin()).collect();
    let pt = encode_at(&ctx, &v, 0, ctx.level_scale(0)).unwrap();
    let ct = sk.encrypt(&pt, &mut rng).unwrap();
    // The clear reference: CtS's factors (with the same scaling) on the decrypted ModRaise.
    let raised = mod_raise(&ev, &ct);
    let z = decode_complex(&ctx, &sk.decrypt(&raised).unwrap()).unwrap();
    let m = boot.eval_mod();
    let top = ctx.max_level();
    let q0f = params.basis().moduli()[0] as f64;
    let into = (ctx.level_scale(top) / (m.k * q0f)).powf(1.0 / cfg.cts_levels as f64);
    let mut w = z;
    for (i, f) in dft::coeffs_to_slots(slots, cfg.cts_levels)
        .iter()
        .enumerate()
    {
        let c = into * if i == 0 { 0.5 } else { 1.0 };
        w = dft::apply(&dft::scaled(f, c), &w);
    }
    let re_clear: Vec<f64> = w.iter().map(|c| 2.0 * c.re).collect();
    let parts = boot.coeffs_to_slots(&ev, &raised).unwrap();
    let re = &parts[0];
    let re_got = sk.decrypt_values(re).unwrap();
    let signal = re_clear
        .iter()
        .map(|&s| (s * m.k - (s * m.k).round()).abs())
        .fold(0.0, f64::max);
    println!(
        "CtS: error {:.2e} in t/K (the message part of t is at most {signal:.2e}); level {}, scale 2^{:.1}",
        worst(&re_got, &re_clear),
        re.level(),
        re.scale().log2()
    );
    let ys: Vec<_> = parts.iter().map(|p| m.apply(&ev, p).unwrap()).collect();
    let y_re = &ys[0];
    let y_got = sk.decrypt_values(y_re).unwrap();
    let y_on_got: Vec<f64> = re_got.iter().map(|&s| m.reference(s * m.k)).collect();
    let y_max = y_on_got.iter().fold(0.0f64, |acc, y| acc.max(y.abs()));
    println!(
        "EvalMod: error {:.2e} against its clear map on CtS's output (|y| up to {y_max:.2e}); \
         level {}, scale 2^{:.1}",
        worst(&y_got, &y_on_got),
        y_re.level(),
        y_re.scale().log2()
    );
    let out = boot.slots_to_coeffs(&ev, &ys).unwrap();
    let got = sk.decrypt_values(&out).unwrap();
    let err = worst(&got, &v);
    println!(
        "end to end: error {err:.2e} ({:.1} bits), level {}",
        -err.log2(),
        out.level()
    );
}
