//! One full-slot bootstrap, timed:
//! `cargo run --release -p privopt-ckks --example bootstrap -- LOG_N Q0_BITS SCALES
//! [ARCSINE_DEGREE [CTS_LEVELS STC_LEVELS [SPECIAL_PRIMES [ENCAPSULATION]]]]`, with `SCALES` either `55x20` (20 levels at a
//! uniform scale 2^55) or a profile `40,40,48,…` (target `log2 Δ_l` for levels 0, 1, …).
//! Prints the key-generation, setup and bootstrap times (one thread), the precision over
//! every slot, the levels left, the modulus and the peak RSS. `ENCAPSULATION` 0 (default)
//! uses a sparse secret (h = 64) throughout; a weight `w > 0` uses a dense secret with
//! sparse-secret encapsulation to `w` non-zeros. Sets are built with `insecure_for_testing`
//! (the modulus is over the 128-bit bound here; the encapsulation key's sparse secret is not
//! certified either).
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: bootstrap LOG_N Q0_BITS SCALES [ARCSINE_DEGREE [CTS_LEVELS STC_LEVELS [SPECIAL_PRIMES [ENCAPSULATION]]]]";
    let int = |i: usize, default: Option<usize>| -> usize {
        match args.get(i).map(|a| a.parse::<usize>()) {
            Some(Ok(v)) => v,
            None if default.is_some() => default.unwrap_or_default(),
            _ => {
                eprintln!("{usage}");
                std::process::exit(2)
            }
        }
    };
    let (log_n, q0_bits) = (int(0, None), int(1, None) as u32);
    let Some(scales) = args.get(2).cloned() else {
        eprintln!("{usage}");
        std::process::exit(2)
    };
    let arcsine_degree = int(3, Some(0));
    let defaults = BootstrapConfig::default();
    let (cts_levels, stc_levels) = (
        int(4, Some(defaults.cts_levels)),
        int(5, Some(defaults.stc_levels)),
    );
    let n = 1usize << log_n;
    // Key-switching primes of 60 bits (default 4).
    let special = vec![60; int(6, Some(4))];
    let builder = match scales.split_once('x') {
        Some((scale, levels)) => CkksParamsBuilder::leveled(
            n,
            q0_bits,
            scale.parse().expect(usage),
            levels.parse().expect(usage),
            &special,
        ),
        None => {
            let profile: Vec<u32> = scales.split(',').map(|x| x.parse().expect(usage)).collect();
            CkksParamsBuilder::profiled(n, q0_bits, &profile, &special)
        }
    };
    let encapsulation = Some(int(7, Some(0))).filter(|&w| w > 0);
    let secret = match encapsulation {
        None => SecretDistribution::Sparse(64),
        Some(_) => SecretDistribution::Signs,
    };
    let params = builder
        .secret(secret)
        .insecure_for_testing(true)
        .build()
        .expect("parameters");
    let ctx = EvalContext::new(&params).expect("context");
    let cfg = BootstrapConfig {
        arcsine_degree,
        cts_levels,
        stc_levels,
        encapsulation,
        ..defaults
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
    let mut ev = Evaluator::new(&ctx, Some(relin), galois)
        .with_threads(1)
        .expect("one thread");
    if let Some(w) = encapsulation {
        ev = ev.with_encapsulation(sk.encapsulation_keys(w, &mut rng).expect("weight"));
    }
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
        "n = 2^{log_n}, {} slots, log QP = {:.0}, q0 2^{q0_bits}, scales {scales}, arcsine {arcsine_degree}, encapsulation {encapsulation:?}: \
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
