//! Full-dimension baselines: FedAvg (local SGD), FedAdam, FedYogi and FedAdagrad (FedAvg
//! clients, an adaptive server optimizer on the averaged change, Reddi et al. 2021) and FedZO
//! (local zeroth-order SGD). Each round the sampled clients
//! download the model and upload their model change; both are `d` floats.

use privopt_math::SeedTree;
use privopt_ml::zo::gaussian_fill;
use rayon::prelude::*;

use privopt_protocols::scalar_fl::{local_batch, plan_rng};

use super::{Algorithm, ScalarFlConfig, Trajectory, eval_set, evaluate};
use crate::context::Progress;
use crate::error::Result;
use privopt_data::problem::Problem;

/// Bytes of one parameter of a full-model exchange (`f32`).
pub const PARAM_BYTES: u64 = 4;
/// The adaptive servers' moment decay rates and adaptivity floor (Reddi et al.'s defaults).
const ADAM_BETA1: f64 = 0.9;
const ADAM_BETA2: f64 = 0.99;
const ADAM_TAU: f64 = 1e-3;

/// Runs a baseline and returns its trajectory.
pub fn simulate(
    cfg: &ScalarFlConfig,
    problem: &Problem,
    seeds: &SeedTree,
    progress: &dyn Progress,
) -> Result<Trajectory> {
    let model = &problem.model;
    if cfg.algorithm != Algorithm::Fedzo && !model.has_gradient() {
        return Err(crate::SimError::Config(format!(
            "method.algorithm = \"{}\" needs gradients, and model `{}` has none (use a zeroth-order method)",
            cfg.algorithm.name(),
            model.name()
        )));
    }
    let mut x = model.init_params(&mut seeds.stream("scalar_fl/init", &[]));
    let d = x.len();
    let n = problem.clients.len();
    let test = eval_set(problem, cfg.eval_examples);
    let every = cfg.eval_every();
    let mut t = Trajectory::default();
    let (mut up, mut down) = (0u64, 0u64);
    let (mut m, mut v) = (vec![0.0; d], vec![0.0; d]);
    evaluate(&mut t, problem, &test, 0, &x, 0, 0)?;
    progress.start(cfg.algorithm.name(), cfg.rounds);
    for r in 0..cfg.rounds {
        // The same client sampling stream as the scalar-only server.
        let mut rng = plan_rng(seeds, r);
        let mut clients = rand::seq::index::sample(&mut rng, n, cfg.clients_per_round).into_vec();
        clients.sort_unstable();
        let deltas: Vec<Vec<f64>> = clients
            .par_iter()
            .map(|&c| local_delta(cfg, problem, seeds, r, c, &x))
            .collect();
        let k = deltas.len() as u64;
        down += PARAM_BYTES * d as u64 * k;
        up += PARAM_BYTES * d as u64 * k;
        t.participations += k;
        t.uploads += k;
        let mut avg = vec![0.0; d];
        for delta in &deltas {
            for (a, dj) in avg.iter_mut().zip(delta) {
                *a += dj / k as f64;
            }
        }
        match cfg.algorithm {
            Algorithm::Fedadam | Algorithm::Fedyogi | Algorithm::Fedadagrad => {
                for j in 0..d {
                    let sq = avg[j] * avg[j];
                    m[j] = ADAM_BETA1 * m[j] + (1.0 - ADAM_BETA1) * avg[j];
                    v[j] = second_moment(cfg.algorithm, v[j], sq);
                    x[j] += cfg.server_lr * m[j] / (v[j].sqrt() + ADAM_TAU);
                }
            }
            _ => x.iter_mut().zip(&avg).for_each(|(xj, a)| *xj += a),
        }
        if (r + 1) % every == 0 || r + 1 == cfg.rounds {
            evaluate(&mut t, problem, &test, r + 1, &x, up, down)?;
        }
        progress.advance(1);
    }
    progress.finish();
    t.params = x;
    Ok(t)
}

/// The adaptive servers differ only in the second moment `v` of the averaged change
/// (Reddi et al. 2021, Alg. 2): Adagrad sums `Δ²`, Adam averages it, Yogi moves `v` towards
/// `Δ²` by an additive `(1 − β₂)Δ²`.
fn second_moment(algorithm: Algorithm, v: f64, sq: f64) -> f64 {
    match algorithm {
        Algorithm::Fedadagrad => v + sq,
        Algorithm::Fedyogi => v - (1.0 - ADAM_BETA2) * sq * (v - sq).signum(),
        _ => ADAM_BETA2 * v + (1.0 - ADAM_BETA2) * sq,
    }
}

/// One client's model change after `τ` local steps from `x`.
fn local_delta(
    cfg: &ScalarFlConfig,
    problem: &Problem,
    seeds: &SeedTree,
    round: u64,
    client: usize,
    x: &[f64],
) -> Vec<f64> {
    let model = &problem.model;
    let d = x.len();
    let mut xi = x.to_vec();
    let mut g = vec![0.0; d];
    let mut u = vec![0.0; d];
    let mut point = vec![0.0; d];
    // FedZO probes along plain `u`: the shared probe with a unit preconditioner.
    let ones = vec![1.0; d];
    let probe = cfg.probe();
    let spec = cfg.replay_spec();
    for k in 0..cfg.local_steps {
        let batch = local_batch(
            &problem.clients[client],
            cfg.batch_size,
            seeds,
            round,
            client,
            k,
        );
        let f = |w: &[f64]| model.loss(w, &problem.train, Some(&batch));
        if cfg.algorithm == Algorithm::Fedzo {
            // ĝ = (1/P) Σ_p s_p u_p with the client's own directions.
            g.fill(0.0);
            let base = probe.base(f, &xi);
            let tree = SeedTree::new(seeds.child_seed("scalar_fl/fedzo", &[round, client as u64]));
            for p in 0..cfg.perturbations {
                gaussian_fill(&tree.key("direction", &[k as u64, p as u64]), &mut u);
                let s = probe.derivative(f, &xi, base, &ones, &u, &mut point);
                for (gj, uj) in g.iter_mut().zip(&u) {
                    *gj += s * uj / cfg.perturbations as f64;
                }
            }
        } else {
            model.loss_grad(&xi, &problem.train, Some(&batch), &mut g);
        }
        spec.step(&mut xi, &g);
    }
    xi.iter().zip(x).map(|(a, b)| a - b).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_servers_second_moments_follow_reddi_et_al() {
        // From v = 1 with Δ² = 4: Adagrad 5, Adam 0.99 + 0.04, Yogi 1 + 0.01·4 (up, v < Δ²).
        assert_eq!(second_moment(Algorithm::Fedadagrad, 1.0, 4.0), 5.0);
        assert!((second_moment(Algorithm::Fedadam, 1.0, 4.0) - 1.03).abs() < 1e-12);
        assert!((second_moment(Algorithm::Fedyogi, 1.0, 4.0) - 1.04).abs() < 1e-12);
        // Yogi moves down by the same additive step when v > Δ²; Adam shrinks v by β₂.
        assert!((second_moment(Algorithm::Fedyogi, 9.0, 4.0) - 8.96).abs() < 1e-12);
        assert!((second_moment(Algorithm::Fedadam, 9.0, 4.0) - 8.95).abs() < 1e-12);
    }
}
