//! One full-slot bootstrap, timed: `cargo run --release -p privopt-ckks --example bootstrap --
//! LOG_N SCALE_LOG2 LEVELS [ARCSINE_DEGREE [Q0_BITS]]`. Prints the key-generation, setup and bootstrap
//! times, the precision over every slot, the levels left and the peak RSS. The parameters
//! use a sparse secret (h = 64) and are built with `insecure_for_testing`: the 128-bit sets
//! need sparse-secret encapsulation, which is not built yet.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use privopt_ckks::SecretDistribution;
use privopt_ckks::eval::{
    BootstrapConfig, Bootstrapper, EvalContext, Evaluator, SecretKey, encode_at,
};
use privopt_ckks::params::CkksParamsBuilder;
use privopt_math::sample::secret_rng;

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("arguments are integers"))
        .collect();
    let [log_n, scale, levels, rest @ ..] = args.as_slice() else {
        eprintln!("usage: bootstrap LOG_N SCALE_LOG2 LEVELS [ARCSINE_DEGREE [Q0_BITS]]");
        std::process::exit(2);
    };
    let arcsine_degree = rest.first().copied().unwrap_or(0);
    let q0_bits = rest.get(1).copied().unwrap_or(60) as u32;
    let n = 1usize << log_n;
    let params = CkksParamsBuilder::leveled(n, q0_bits, *scale as u32, *levels, &[60, 60, 60, 60])
        .secret(SecretDistribution::Sparse(64))
        .insecure_for_testing(true)
        .build()
        .expect("parameters");
    let ctx = EvalContext::new(&params).expect("context");
    let cfg = BootstrapConfig {
        arcsine_degree,
        ..BootstrapConfig::default()
    };
    let t = Instant::now();
    let boot = Bootstrapper::new(&ctx, &cfg).expect("bootstrapper");
    let setup = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut rng = secret_rng(Some(1));
    let sk = SecretKey::generate(&ctx, &mut rng);
    let relin = sk.relin_key(&mut rng);
    let rotations = boot.rotations();
    let galois = sk.galois_keys(&rotations, true, &mut rng);
    let key_bytes = galois.byte_len();
    let ev = Evaluator::new(&ctx, Some(relin), galois)
        .with_threads(1)
        .expect("one thread");
    let keygen = t.elapsed().as_secs_f64();
    let v: Vec<f64> = (0..ctx.slots())
        .map(|i| ((i as f64) * 0.731).sin())
        .collect();
    let ct = sk
        .encrypt(
            &encode_at(&ctx, &v, 0, ctx.level_scale(0)).unwrap(),
            &mut rng,
        )
        .unwrap();
    let t = Instant::now();
    let (out, phases) = boot.bootstrap_timed(&ev, &ct).expect("bootstrap");
    let time = t.elapsed().as_secs_f64();
    let got = sk.decrypt_values(&out).unwrap();
    let err = got
        .iter()
        .zip(&v)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!(
        "n = 2^{log_n}, {} slots, log QP = {:.0}, q0 2^{q0_bits}, scale 2^{scale}, arcsine {arcsine_degree}: \
         bootstrap {time:.2} s (1 thread), {:.1} bits (max error {err:.2e}), {} levels left; \
         setup {setup:.1} s, keygen {keygen:.1} s ({} rotation keys, {:.0} MB), peak RSS {:.0} MB",
        ctx.slots(),
        params.key_basis().log_modulus(),
        -err.log2(),
        out.level(),
        rotations.len(),
        key_bytes as f64 / 1e6,
        peak_rss_mb()
    );
    println!(
        "phases: ModRaise {:.2} s, CoeffsToSlots {:.2} s, EvalMod {:.2} s, SlotsToCoeffs {:.2} s",
        phases.mod_raise, phases.coeffs_to_slots, phases.eval_mod, phases.slots_to_coeffs
    );
}
