//! Federated zeroth-order SGD with shared perturbations: the plain baseline under EEZOFL and
//! DeComFL/HiSo.
//!
//! Round `r`: the server picks participating clients; each evaluates its local loss at
//! `w ± μu_p` for perturbations `u_p` regenerated from `(seed, r, 0, p)`, and uploads the
//! `P` scalars; the server averages them (weighted by local data size) and broadcasts the
//! averages; everyone applies `w ← w − η (1/P) Σ_p s̄_p u_p`. Only scalars and the round seed
//! travel: `8P` bytes up per participant, `8P + 8` bytes down per client. Nothing protects
//! the scalars here — the private methods replace this aggregation.

use privopt_ml::data::minibatch;
use privopt_ml::zo::{ZoAddress, ZoEstimator};
use serde::{Deserialize, Serialize};

use super::{LrSchedule, Method, Trained, check_lr, descend};
use crate::context::RunContext;
use crate::error::{MAX_STEPS, Result, ensure, ensure_count};

/// Bytes of one transmitted scalar (an `f64`).
const SCALAR_BYTES: u64 = 8;
/// Bytes of the broadcast round seed.
const SEED_BYTES: u64 = 8;

/// `[method] name = "zo_sgd"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoSgdConfig {
    /// Communication rounds (>= 1).
    pub rounds: u64,
    /// Base learning rate (> 0).
    pub lr: f64,
    /// The estimator (`[method.zo]`: `mu`, `perturbations`, `direction`, `difference`).
    pub zo: ZoEstimator,
    /// Local minibatch per round (0: all local data).
    #[serde(default)]
    pub batch_size: usize,
    /// Fraction of clients participating each round, in (0, 1].
    #[serde(default = "full")]
    pub participation: f64,
    /// Learning-rate schedule.
    #[serde(default)]
    pub lr_schedule: LrSchedule,
    /// Evaluate every this many rounds (0: about 50 evaluations).
    #[serde(default)]
    pub eval_every: u64,
}

fn full() -> f64 {
    1.0
}

impl Method for ZoSgdConfig {
    fn validate(&self) -> Result<()> {
        ensure_count("method.rounds", self.rounds, MAX_STEPS)?;
        ensure(
            self.participation > 0.0 && self.participation <= 1.0,
            || {
                format!(
                    "method.participation must be in (0, 1], got {}",
                    self.participation
                )
            },
        )?;
        self.zo.validate("method.zo")?;
        check_lr(self.lr)
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Trained> {
        let p = ctx.problem()?;
        let model = &p.model;
        let n_clients = p.clients.len();
        let everyone: Vec<usize> = (0..n_clients).collect();
        let per_round =
            ((self.participation * n_clients as f64).round() as usize).clamp(1, n_clients);
        let perturbations = self.zo.perturbations as u64;
        let mut w = model.init_params(&mut ctx.seeds.stream("model/init", &[]));
        ctx.train_loop(
            "zo_sgd",
            self.rounds,
            self.eval_every,
            &mut w,
            |ctx, r, w| {
                let at = ZoAddress { round: r, step: 0 };
                let chosen = minibatch(
                    &everyone,
                    per_round,
                    &mut ctx.seeds.stream("zo_sgd/clients", &[r]),
                );
                let mut sum = vec![0.0; self.zo.perturbations];
                let mut weight = 0.0;
                for &c in &chosen {
                    let mut rng = ctx.seeds.stream("zo_sgd/batch", &[r, c as u64]);
                    let batch = minibatch(&p.clients[c], self.batch_size, &mut rng);
                    let mut f = |x: &[f64]| model.loss(x, &p.train, Some(&batch));
                    let s = self.zo.scalars(&mut f, w, &ctx.seeds, at);
                    let n_c = batch.len() as f64;
                    for (acc, v) in sum.iter_mut().zip(&s) {
                        *acc += n_c * v;
                    }
                    weight += n_c;
                    ctx.send_up(SCALAR_BYTES * perturbations);
                }
                let avg: Vec<f64> = sum.iter().map(|v| v / weight).collect();
                ctx.send_down((SCALAR_BYTES * perturbations + SEED_BYTES) * n_clients as u64);
                let g = self.zo.gradient_from_scalars(&avg, &ctx.seeds, at, w.len());
                descend(w, &g, self.lr_schedule.at(self.lr, r));
                Ok(())
            },
        )?;
        Ok(Trained::plain(w))
    }
}
