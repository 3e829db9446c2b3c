//! The model suites: gradients, zeroth-order directions and a replayed HiSo round.

use std::hint::black_box;

use anyhow::Result;
use privopt_math::SeedTree;
use privopt_ml::data::Dataset;
use privopt_ml::model::{Logistic, Mlp, Model};
use privopt_ml::zo::{Difference, Direction, ZoAddress, ZoEstimator};
use rand::RngCore;

use super::{Case, bench_weights};

/// Random features in [0, 1) and labels in `0..classes` (for timing only).
fn random_data(n: usize, d: usize, classes: usize) -> Result<Dataset> {
    let mut r = SeedTree::new(0).stream("bench/data", &[]);
    let x = (0..n * d)
        .map(|_| (r.next_u32() as f64) / (u32::MAX as f64 + 1.0))
        .collect();
    let y = (0..n)
        .map(|_| (r.next_u32() as usize % classes) as f64)
        .collect();
    Ok(Dataset::new(x, y, d, Some(classes))?)
}

fn grad_case(name: &str, model: Box<dyn Model>, data: Dataset, batch: usize) -> Case {
    let w = bench_weights(model.num_params(), 0.01);
    let idx: Vec<usize> = (0..batch.min(data.len())).collect();
    let mut g = vec![0.0; w.len()];
    Case::new(name, move || {
        black_box(model.loss_grad(black_box(&w), &data, Some(&idx), &mut g));
    })
}

fn zo_case(name: &str, direction: Direction, d: usize) -> Case {
    let e = ZoEstimator {
        direction,
        difference: Difference::TwoPoint,
        mu: 1e-3,
        perturbations: 1,
    };
    let seeds = SeedTree::new(1);
    let mut u = vec![0.0; d];
    let mut k = 0u64;
    Case::new(name, move || {
        k += 1;
        e.perturbation(&seeds, ZoAddress { round: k, step: 0 }, 0, &mut u);
        black_box(&u);
    })
}

pub(super) fn ml_suite() -> Result<Vec<Case>> {
    Ok(vec![
        grad_case(
            "ml/logistic-d784-b256/loss_grad",
            Box::new(Logistic::new(784, 0.0)),
            random_data(256, 784, 2)?,
            256,
        ),
        grad_case(
            "ml/mlp-d784-h64-c10-b64/loss_grad",
            Box::new(Mlp::new(784, 64, 10, 0.0)),
            random_data(64, 784, 10)?,
            64,
        ),
        zo_case(
            "ml/gaussian-d100000/zo_perturbation",
            Direction::Gaussian,
            100_000,
        ),
        zo_case(
            "ml/rademacher-d100000/zo_perturbation",
            Direction::Rademacher,
            100_000,
        ),
        zo_case(
            "ml/sphere-d100000/zo_perturbation",
            Direction::Sphere,
            100_000,
        ),
    ])
}

/// Perturbation directions and replayed rounds at `d = 10^6` and `10^7`; a plain memory write
/// of the same size is the bandwidth yardstick (GB/s = 8·d bytes / time).
pub(super) fn zo_suite() -> Result<Vec<Case>> {
    use privopt_ml::zo::gaussian_fill;
    use privopt_protocols::scalar_fl::{ModelState, ReplaySpec, RoundRecord, Rule, Scratch};
    let mut cases = Vec::new();
    for d in [1_000_000usize, 10_000_000] {
        let mut u = vec![0.0; d];
        let mut k = 0u64;
        cases.push(Case::new(format!("zo/d{d}/direction"), move || {
            k += 1;
            gaussian_fill(&SeedTree::new(k).key("bench/zo", &[]), &mut u);
            black_box(&u);
        }));
        let mut w = vec![0.0; d];
        let mut v = 0.0;
        cases.push(Case::new(format!("zo/d{d}/memory_write"), move || {
            v += 1.0;
            w.fill(v);
            black_box(&w);
        }));
        for (label, rule) in [
            (
                "replay_round",
                Rule::Hiso {
                    nu: 0.01,
                    eps: 1e-8,
                },
            ),
            ("replay_round_decomfl", Rule::Decomfl),
        ] {
            let spec = ReplaySpec {
                lr: 1e-3,
                local_steps: 1,
                perturbations: 1,
                weight_decay: 0.0,
                rule,
            };
            let mut state = ModelState::initial(vec![0.0; d], rule);
            let mut scratch = Scratch::default();
            cases.push(Case::new(format!("zo/d{d}/{label}"), move || {
                let rec = RoundRecord {
                    round: state.round,
                    seeds: vec![state.round],
                    scalars: vec![0.5],
                };
                // The record always continues the state, so this cannot fail.
                let _ = state.apply(&rec, &spec, &mut scratch);
                black_box(&state.x);
            }));
        }
    }
    cases.push(grad_free_case(
        "zo/cnn-mnist-b64/batch_loss",
        Box::new(privopt_ml::model::Cnn::mnist(0.0)?),
        random_data(64, 784, 10)?,
    ));
    Ok(cases)
}

/// The loss of one minibatch (what a zeroth-order client evaluates per probe).
fn grad_free_case(name: &str, model: Box<dyn Model>, data: Dataset) -> Case {
    let w = bench_weights(model.num_params(), 0.1);
    let idx: Vec<usize> = (0..data.len()).collect();
    Case::new(name, move || {
        black_box(model.loss(black_box(&w), &data, Some(&idx)));
    })
}
