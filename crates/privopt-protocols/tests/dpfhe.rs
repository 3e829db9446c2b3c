//! DP training under FHE: the data owner and compute server, driven only through bytes, end
//! with the same weights as in memory (Algorithm 4 refreshes mid-step, so the resumable step is
//! exercised); the step is a state machine that refuses misuse; every decoder refuses damaged
//! and forged bytes with a typed error.
//!
//! Small insecure parameters (n = 2^12 with 12 levels) keep this fast; the shipped runs use
//! the 128-bit n = 2^15 set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use privopt_approx::Interval;
use privopt_approx::functions::{Method as Fit, approximate};
use privopt_ckks::SecretDistribution;
use privopt_ckks::eval::{BootstrapConfig, Bootstrapper, EvalContext, GaloisKeys, SecretKey};
use privopt_ckks::params::CkksParamsBuilder;
use privopt_math::sample::secret_rng;
use privopt_ml::data::Dataset;
use privopt_protocols::dpfhe::{
    Barrier, Bootstrappers, ClipCircuit, ComputeServer, DataOwner, EncryptedStep, Layout, Refresh,
    StepStatus, TrainingCircuit, Weights, encapsulation_keys_from_bytes,
    encapsulation_keys_to_bytes, galois_key_from_bytes, galois_keys_to_messages,
    relin_key_from_bytes, relin_key_to_bytes,
};
use privopt_protocols::wire::damage;
use privopt_protocols::{DecodeError, ProtocolError};

const D: usize = 4;
const BATCH: usize = 8;

fn ctx() -> Arc<EvalContext> {
    let params = CkksParamsBuilder::leveled(1 << 12, 50, 40, 12, &[50, 50])
        .insecure_for_testing(true)
        .build()
        .unwrap();
    EvalContext::new(&params).unwrap()
}

fn data() -> Dataset {
    let rows = 32;
    let x: Vec<f64> = (0..rows * D)
        .map(|k| (((k * 7919) % 200) as f64 / 100.0 - 1.0) * 0.9)
        .collect();
    let y: Vec<f64> = (0..rows)
        .map(|i| f64::from(x[i * D] + x[i * D + 1] > 0.0))
        .collect();
    Dataset::new(x, y, D, Some(2)).unwrap()
}

fn circuit(ctx: &EvalContext, alg4: bool) -> TrainingCircuit {
    let sigmoid = approximate(
        |z: f64| 1.0 / (1.0 + (-z).exp()),
        Interval::symmetric(8.0).unwrap(),
        7,
        Fit::LeastSquares,
    )
    .unwrap();
    let reciprocal = approximate(
        |x: f64| 1.0 / x,
        Interval::new(0.4, 4.0).unwrap(),
        4,
        Fit::LeastSquares,
    )
    .unwrap();
    TrainingCircuit {
        layout: Layout::new(D, BATCH, ctx.slots()).unwrap(),
        sigmoid,
        lr: 0.5,
        barrier: (!alg4).then_some(Barrier {
            lambda: 0.05,
            theta: 4.0,
            reciprocal,
        }),
        clip: alg4.then(|| ClipCircuit::new(1.0, 1.21 * D as f64).unwrap()),
        // ‖w‖² < Θ = 4 under the barrier.
        weight_bound: 2.0,
    }
}

/// Trains `steps` steps; with `bytes`, every message crosses as bytes. Returns the decrypted
/// weights and the number of refreshes.
fn train(alg4: bool, steps: u64, bytes: bool) -> (Vec<f64>, usize) {
    let ctx = ctx();
    let circuit = circuit(&ctx, alg4);
    let data = data();
    let mut owner = DataOwner::new(&ctx, circuit.layout, secret_rng(Some(4)));
    let (mut relin, mut galois) = owner.evaluation_keys();
    if bytes {
        relin = relin_key_from_bytes(&ctx, &relin_key_to_bytes(&relin, &ctx)).unwrap();
        let parts: Vec<GaloisKeys> = galois_keys_to_messages(galois, &ctx)
            .iter()
            .map(|m| galois_key_from_bytes(&ctx, m).unwrap())
            .collect();
        galois = GaloisKeys::merge(parts).unwrap();
    }
    let server = ComputeServer::new(&ctx, relin, galois, 1, circuit).unwrap();
    let mut w = owner.encrypt_replicated(&[0.0; D]).unwrap();
    let ask = |owner: &mut DataOwner, mut req: Refresh| {
        if bytes {
            req = Refresh::from_bytes(&ctx, &req.to_bytes(&ctx)).unwrap();
        }
        let reply = owner.refresh(&req).unwrap();
        if bytes {
            Refresh::from_bytes(&ctx, &reply.to_bytes(&ctx)).unwrap()
        } else {
            reply
        }
    };
    for t in 0..steps {
        if w.level() < 9 {
            w = ask(&mut owner, Refresh { step: t, ct: w }).ct;
        }
        let batch: Vec<usize> = (0..BATCH).map(|i| (i * 3 + t as usize * 5) % 32).collect();
        let mut inputs = owner.encrypt_step(t, &data, &batch, &[0.01; D]).unwrap();
        if bytes {
            inputs = EncryptedStep::from_bytes(&ctx, &inputs.to_bytes(&ctx)).unwrap();
        }
        let mut step = server.begin_step(w, inputs).unwrap();
        w = loop {
            match server.advance(&mut step).unwrap() {
                StepStatus::NeedsRefresh(req) => step.resume(ask(&mut owner, req)).unwrap(),
                StepStatus::Done { w, .. } => break w,
            }
        };
    }
    if bytes {
        let msg = Weights { step: steps, w };
        w = Weights::from_bytes(&ctx, &msg.to_bytes(&ctx)).unwrap().w;
    }
    (owner.decrypt_weights(&w).unwrap(), owner.refreshes())
}

#[test]
fn both_algorithms_through_bytes_equal_the_in_process_run() {
    for alg4 in [false, true] {
        let (w_mem, r_mem) = train(alg4, 2, false);
        let (w_wire, r_wire) = train(alg4, 2, true);
        assert_eq!(
            w_mem.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            w_wire.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "algorithm {}",
            if alg4 { 4 } else { 5 }
        );
        assert_eq!(r_mem, r_wire);
        assert!(w_mem.iter().all(|v| v.is_finite()));
        assert!(w_mem.iter().any(|v| v.abs() > 1e-3), "{w_mem:?}");
        if alg4 {
            // The clipping circuit outgrows 12 levels: the server had to ask mid-step.
            assert!(r_mem >= 2, "{r_mem} refreshes");
        }
    }
}

/// Trains `steps` steps on a server that bootstraps (n = 2^12, sparse secret, insecure; with
/// `sparse_weights`, the weights by sparse packing of the block width) and, from the same
/// keys' seed, on one that asks the owner; returns both decrypted weights, the refreshes the
/// bootstrapping run asked for and the bootstraps it ran. `stc_first`: both bootstrappers run
/// SlotsToCoeffs first (inputs at level 3, which the server keeps in reserve).
fn train_bootstrapping(
    alg4: bool,
    steps: u64,
    sparse_weights: bool,
    stc_first: bool,
) -> (Vec<f64>, Vec<f64>, usize, usize) {
    let params = CkksParamsBuilder::leveled(1 << 12, 60, 50, 26, &[60, 60, 60])
        .secret(SecretDistribution::Sparse(64))
        .insecure_for_testing(true)
        .build()
        .unwrap();
    let ctx = EvalContext::new(&params).unwrap();
    let circuit = circuit(&ctx, alg4);
    let order = BootstrapConfig {
        slots_to_coeffs_first: stc_first,
        ..BootstrapConfig::default()
    };
    let any = Arc::new(Bootstrapper::new(&ctx, &order).unwrap());
    assert_eq!(any.input_level(), if stc_first { 3 } else { 0 });
    // A period of 16 blocks (three FFT stages at least, one per transform level).
    let sparse = |period: usize, levels: usize| {
        let cfg = BootstrapConfig {
            slots: Some(period),
            cts_levels: levels,
            stc_levels: levels,
            ..order.clone()
        };
        Arc::new(Bootstrapper::new(&ctx, &cfg).unwrap())
    };
    let boot = Bootstrappers {
        any: Arc::clone(&any),
        weights: sparse_weights.then(|| sparse(16 * circuit.layout.block, 3)),
    };
    let data = data();
    let mut results = Vec::new();
    let (mut refreshes, mut bootstraps) = (0, 0);
    for bootstrapping in [true, false] {
        let mut owner = DataOwner::new(&ctx, circuit.layout, secret_rng(Some(8)));
        let server = if bootstrapping {
            owner = owner.with_level(any.output_level()).unwrap();
            let keys = owner.bootstrapping_keys(&boot).unwrap();
            // This bootstrapper runs under the sparse secret itself: no encapsulation keys.
            assert!(keys.encapsulation.is_none());
            if sparse_weights {
                // A period below the block width would average the weights' slots.
                let short = Bootstrappers {
                    any: Arc::clone(&any),
                    weights: Some(sparse(circuit.layout.block / 2, 1)),
                };
                let keys = owner.bootstrapping_keys(&short).unwrap();
                let e = ComputeServer::bootstrapping(&ctx, keys, short, 1, circuit.clone())
                    .unwrap_err();
                assert!(e.to_string().contains("would average"), "{e}");
                // Nor may the two bootstrappers want encapsulation keys of different weights.
                let cfg = BootstrapConfig {
                    slots: Some(16 * circuit.layout.block),
                    encapsulation: Some(32),
                    ..BootstrapConfig::default()
                };
                let mixed = Bootstrappers {
                    any: Arc::clone(&any),
                    weights: Some(Arc::new(Bootstrapper::new(&ctx, &cfg).unwrap())),
                };
                let keys = owner.bootstrapping_keys(&mixed).unwrap();
                let e = ComputeServer::bootstrapping(&ctx, keys, mixed, 1, circuit.clone())
                    .unwrap_err();
                assert!(e.to_string().contains("encapsulates"), "{e}");
            }
            ComputeServer::bootstrapping(&ctx, keys, boot.clone(), 1, circuit.clone()).unwrap()
        } else {
            let (relin, galois) = owner.evaluation_keys();
            ComputeServer::new(&ctx, relin, galois, 1, circuit.clone()).unwrap()
        };
        let mut w = owner.encrypt_replicated(&[0.0; D]).unwrap();
        for t in 0..steps {
            let batch: Vec<usize> = (0..BATCH).map(|i| (i * 3 + t as usize * 5) % 32).collect();
            let inputs = owner.encrypt_step(t, &data, &batch, &[0.01; D]).unwrap();
            let mut step = server.begin_step(w, inputs).unwrap();
            w = loop {
                match server.advance(&mut step).unwrap() {
                    StepStatus::NeedsRefresh(req) => {
                        step.resume(owner.refresh(&req).unwrap()).unwrap();
                    }
                    StepStatus::Done { w, .. } => break w,
                }
            };
            if bootstrapping {
                bootstraps += step.bootstraps();
            }
        }
        if bootstrapping {
            refreshes = owner.refreshes();
        }
        results.push(owner.decrypt_weights(&w).unwrap());
    }
    let refreshed = results.pop().unwrap();
    (results.pop().unwrap(), refreshed, refreshes, bootstraps)
}

#[test]
fn a_bootstrapping_server_trains_without_the_owner() {
    // Algorithm 5 also with its weights bootstrapped by sparse packing of the block width,
    // and with SlotsToCoeffs first.
    for (alg4, steps, sparse, stc_first) in [
        (false, 2, false, false),
        (false, 2, true, false),
        (true, 1, false, false),
        (false, 2, true, true),
    ] {
        let (boot, refreshed, refreshes, bootstraps) =
            train_bootstrapping(alg4, steps, sparse, stc_first);
        let diff = boot
            .iter()
            .zip(&refreshed)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        eprintln!(
            "algorithm {}{}{}: {bootstraps} bootstraps in {steps} steps, max |Δw| {diff:e} \
             against owner refreshes, w = {boot:?}",
            if alg4 { 4 } else { 5 },
            if sparse { " (sparse weights)" } else { "" },
            if stc_first { " (StC first)" } else { "" }
        );
        assert_eq!(refreshes, 0);
        // Algorithm 5 outgrows a bootstrap's levels every step from the second on (the
        // owner's fresh weights start there); Algorithm 4's clipping needs several per step.
        assert!(bootstraps >= if alg4 { 2 } else { steps as usize - 1 });
        assert!(boot.iter().any(|v| v.abs() > 1e-2), "{boot:?}");
        assert!(diff < 1e-3, "{diff:e}");
    }
}

#[test]
fn the_step_state_machine_refuses_misuse() {
    let ctx = ctx();
    let circuit = circuit(&ctx, true);
    let data = data();
    let mut owner = DataOwner::new(&ctx, circuit.layout, secret_rng(Some(5)));
    let (relin, galois) = owner.evaluation_keys();
    let server = ComputeServer::new(&ctx, relin, galois, 1, circuit).unwrap();
    let w = owner.encrypt_replicated(&[0.0; D]).unwrap();
    let batch: Vec<usize> = (0..BATCH).collect();
    let inputs = owner.encrypt_step(0, &data, &batch, &[0.0; D]).unwrap();
    let mut step = server.begin_step(w, inputs).unwrap();
    // Nothing to resume yet.
    let stray = Refresh {
        step: 0,
        ct: owner.encrypt_replicated(&[1.0; D]).unwrap(),
    };
    assert!(matches!(
        step.resume(stray.clone()),
        Err(ProtocolError::OutOfOrder(_))
    ));
    let StepStatus::NeedsRefresh(req) = server.advance(&mut step).unwrap() else {
        panic!("Algorithm 4 at 12 levels needs a refresh");
    };
    // While a refresh is pending the step does not advance, and a reply for another step
    // is the owner's misbehaviour.
    assert!(matches!(
        server.advance(&mut step),
        Err(ProtocolError::OutOfOrder(_))
    ));
    let mut wrong = owner.refresh(&req).unwrap();
    wrong.step = 7;
    assert!(matches!(
        step.resume(wrong),
        Err(ProtocolError::PeerMisbehaved { .. })
    ));
    step.resume(owner.refresh(&req).unwrap()).unwrap();
    assert!(server.advance(&mut step).is_ok());
    // A batch that does not fit the layout is refused.
    assert!(owner.encrypt_step(1, &data, &[0, 1], &[0.0; D]).is_err());
}

#[test]
fn the_compute_server_refuses_another_owners_ciphertexts_and_keys() {
    // Two data owners under the same parameters: the server holds the first one's keys.
    let ctx = ctx();
    let circuit = circuit(&ctx, true);
    let data = data();
    let mut owner = DataOwner::new(&ctx, circuit.layout, secret_rng(Some(6)));
    let mut stranger = DataOwner::new(&ctx, circuit.layout, secret_rng(Some(7)));
    let (relin, galois) = owner.evaluation_keys();
    let (foreign_relin, _) = stranger.evaluation_keys();
    // Keys of two secrets make no server.
    assert!(ComputeServer::new(&ctx, foreign_relin, galois.clone(), 1, circuit.clone()).is_err());
    let server = ComputeServer::new(&ctx, relin, galois, 1, circuit).unwrap();
    let batch: Vec<usize> = (0..BATCH).collect();
    let w = owner.encrypt_replicated(&[0.0; D]).unwrap();
    let inputs = owner.encrypt_step(0, &data, &batch, &[0.0; D]).unwrap();
    let foreign_w = stranger.encrypt_replicated(&[0.0; D]).unwrap();
    let foreign_inputs = stranger.encrypt_step(0, &data, &batch, &[0.0; D]).unwrap();
    let refused =
        |r: Result<_, ProtocolError>| matches!(r, Err(ProtocolError::PeerMisbehaved { .. }));
    assert!(refused(server.begin_step(foreign_w, inputs.clone())));
    let mut mixed = inputs.clone();
    mixed.noise = foreign_inputs.noise.clone();
    assert!(refused(server.begin_step(w.clone(), mixed)));
    // A refresh answered under another secret is refused; the owner's answer goes on.
    let mut step = server.begin_step(w, inputs).unwrap();
    let StepStatus::NeedsRefresh(req) = server.advance(&mut step).unwrap() else {
        panic!("Algorithm 4 at 12 levels needs a refresh");
    };
    let forged = Refresh {
        step: req.step,
        ct: stranger.encrypt_replicated(&[0.5; D]).unwrap(),
    };
    assert!(matches!(
        step.resume(forged),
        Err(ProtocolError::PeerMisbehaved { .. })
    ));
    step.resume(owner.refresh(&req).unwrap()).unwrap();
    assert!(server.advance(&mut step).is_ok());
}

#[test]
fn dpfhe_decoders_refuse_damaged_and_forged_bytes() {
    let ctx = ctx();
    let circuit = circuit(&ctx, false);
    let data = data();
    let mut owner = DataOwner::new(&ctx, circuit.layout, secret_rng(Some(6)));
    let (relin, galois) = owner.evaluation_keys();
    let batch: Vec<usize> = (0..BATCH).collect();
    let inputs = owner.encrypt_step(3, &data, &batch, &[0.0; D]).unwrap();
    let w = owner.encrypt_replicated(&[0.5; D]).unwrap();
    let galois_msg = galois_keys_to_messages(galois, &ctx).remove(0);
    let mut rng = secret_rng(Some(9));
    let encapsulation = SecretKey::generate(&ctx, &mut rng)
        .encapsulation_keys(32, &mut rng)
        .unwrap();
    let all: Vec<(&str, Vec<u8>)> = vec![
        ("step", inputs.to_bytes(&ctx)),
        (
            "refresh",
            Refresh {
                step: 3,
                ct: w.clone(),
            }
            .to_bytes(&ctx),
        ),
        ("weights", Weights { step: 3, w }.to_bytes(&ctx)),
        ("relin", relin_key_to_bytes(&relin, &ctx)),
        ("galois", galois_msg),
        (
            "encapsulation",
            encapsulation_keys_to_bytes(&encapsulation, &ctx),
        ),
    ];
    let decode_all = |b: &[u8]| -> Vec<Result<(), DecodeError>> {
        vec![
            EncryptedStep::from_bytes(&ctx, b).map(drop),
            Refresh::from_bytes(&ctx, b).map(drop),
            Weights::from_bytes(&ctx, b).map(drop),
            relin_key_from_bytes(&ctx, b).map(drop),
            galois_key_from_bytes(&ctx, b).map(drop),
            encapsulation_keys_from_bytes(&ctx, b).map(drop),
        ]
    };
    for (name, bytes) in &all {
        assert_eq!(
            decode_all(bytes).iter().filter(|r| r.is_ok()).count(),
            1,
            "{name}"
        );
        assert_eq!(
            damage::first_mishandled(bytes, 16, decode_all),
            None,
            "{name}"
        );
    }
    // Forged: a ciphertext under other parameters is refused by the inner check.
    let other = CkksParamsBuilder::leveled(1 << 12, 50, 40, 11, &[50, 50])
        .insecure_for_testing(true)
        .build()
        .unwrap();
    let other = EvalContext::new(&other).unwrap();
    let e = Weights::from_bytes(&other, &all[2].1).unwrap_err();
    assert!(matches!(e, DecodeError::Invalid { .. }), "{e}");
    // Two Galois keys in one message are refused.
    let (_, galois) = owner.evaluation_keys();
    let pair = GaloisKeys::merge(galois.split().into_iter().take(2)).unwrap();
    let inner = pair.to_bytes(ctx.params());
    let two = damage::forge(&all[4].1, |f| {
        f.clear();
        f.extend_from_slice(&(inner.len() as u32).to_le_bytes());
        f.extend_from_slice(&inner);
    });
    let e = galois_key_from_bytes(&ctx, &two).unwrap_err().to_string();
    assert!(e.contains("exactly one key"), "{e}");
}

#[test]
fn a_saved_data_owner_decrypts_and_refreshes_as_the_original() {
    let ctx = ctx();
    let circuit = circuit(&ctx, false);
    let mut owner = DataOwner::new(&ctx, circuit.layout, secret_rng(Some(8)));
    let w = owner.encrypt_replicated(&[0.5, -0.25, 0.125, 1.0]).unwrap();
    owner
        .refresh(&Refresh {
            step: 0,
            ct: w.clone(),
        })
        .unwrap();
    let saved = owner.save();
    let mut back = DataOwner::restore(&ctx, circuit.layout, &saved, secret_rng(Some(9))).unwrap();
    assert_eq!(back.refreshes(), 1);
    let got = back.decrypt_weights(&w).unwrap();
    for (g, want) in got.iter().zip([0.5, -0.25, 0.125, 1.0]) {
        assert!((g - want).abs() < 1e-6, "{g} vs {want}");
    }
    let fresh = back.refresh(&Refresh { step: 1, ct: w }).unwrap();
    assert!((owner.decrypt_weights(&fresh.ct).unwrap()[3] - 1.0).abs() < 1e-6);
    let decode =
        |b: &[u8]| vec![DataOwner::restore(&ctx, circuit.layout, b, secret_rng(Some(1))).map(drop)];
    assert_eq!(damage::first_mishandled(&saved, 64, decode), None);
}
