//! Scalar-only federated learning (the HiSo paper): DeComFL and HiSo, with exact state
//! reconstruction, and the full-dimension baselines FedAvg, FedAdam and FedZO.
//!
//! **Framework (Alg. 1/2).** Each round `r` the server samples clients and one seed per local
//! step. A participant first catches up — it replays the `(seeds, averaged scalars)` records
//! of the rounds it missed ([`ModelState::apply`], the same function the server runs,
//! so its model and Hessian are bit-identical to the server's), or receives the full state if
//! it is staler than `staleness_bound` — then takes `τ` local steps and uploads `τ·P` scalars.
//! The server averages them (in client order), advances the global state, and drops history
//! no client within the staleness bound still needs.
//!
//! **Directions.** Perturbation `p` of step `k` of round `r` is `u ~ N(0, I_d)` from the
//! counter-based stream keyed by `(seed_{r,k}, r, k, p)`
//! ([`privopt_ml::zo::gaussian_fill`]). DeComFL probes along `u`; HiSo along
//! `z = H_r^{-1/2} u ~ N(0, H_r^{-1})`.
//!
//! **HiSo, one rule for every `P` and `τ`** (the paper's eq. 12 and Alg. 2a; public code has
//! variants that update `H` once per perturbation, or from directional second differences):
//!
//! ```text
//! Δx_{r,k} = (1/P) Σ_p ḡ_{r,k,p} · H_r^{-1/2} u_{r,k,p}        (the model moves by −η Δx_{r,k})
//! H ← (1 − ν) H + ν (Δx_{r,k}² + ε)   after each step k;   H_{r+1} = H after step τ − 1
//! ```
//!
//! `H` is updated from the same averaged `Δx` that moves the model — one update per local
//! step, never per perturbation — and all directions of round `r` use `H_r` (the clients
//! sample them before any of the round's updates exist). `H_0 = I`.
//!
//! **Wire sizes.** Seeds are 8 bytes, scalars `f32` (4 bytes; the client rounds before
//! sending and everyone uses the rounded value, so replay stays exact), full-state catch-ups
//! `f64` (8 bytes per entry, model and Hessian). The baselines send full vectors, counted at
//! 4 bytes per parameter (`f32`, as deployed frameworks send them).

pub mod baselines;

use privopt_math::SeedTree;
use privopt_ml::data::Dataset;
use privopt_ml::zo::Difference;
use rand::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{Method, Report, Trained, check_lr};
use crate::context::{Progress, RunContext};
use crate::error::{MAX_STEPS, Result, ensure, ensure_count};
use crate::metrics::Quantiles;
use privopt_data::problem::Problem;
use privopt_protocols::scalar_fl::{
    Client, ModelState, Probe, ReplaySpec, Reply, Rule, SEED_BYTES, Server, defaults, local_batch,
    plan_rng,
};

/// Which algorithm a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// Scalar-only ZO-SGD.
    Decomfl,
    /// Scalar-only Hessian-informed ZO.
    Hiso,
    /// First-order local SGD, full-model exchange.
    Fedavg,
    /// FedAvg's clients with an Adam server optimizer (Reddi et al. 2021).
    Fedadam,
    /// FedAvg's clients with a Yogi server optimizer (Reddi et al. 2021).
    Fedyogi,
    /// FedAvg's clients with an Adagrad server optimizer (Reddi et al. 2021).
    Fedadagrad,
    /// Zeroth-order local SGD, full-model exchange (Fang et al. 2022).
    Fedzo,
}

impl Algorithm {
    /// Lower-case name, as in configs and summary keys.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Decomfl => "decomfl",
            Algorithm::Hiso => "hiso",
            Algorithm::Fedavg => "fedavg",
            Algorithm::Fedadam => "fedadam",
            Algorithm::Fedyogi => "fedyogi",
            Algorithm::Fedadagrad => "fedadagrad",
            Algorithm::Fedzo => "fedzo",
        }
    }

    /// Whether only seeds and scalars travel (DeComFL and HiSo, not the full-model baselines).
    pub fn is_scalar_only(self) -> bool {
        matches!(self, Algorithm::Decomfl | Algorithm::Hiso)
    }
}

/// `[method] name = "scalar_fl"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalarFlConfig {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Communication rounds (>= 1).
    pub rounds: u64,
    /// Client learning rate η (> 0).
    pub lr: f64,
    /// Clients sampled per round (1..=clients).
    pub clients_per_round: usize,
    /// Local steps per round, τ (>= 1).
    #[serde(default = "one")]
    pub local_steps: usize,
    /// Perturbations per local step, P (>= 1; zeroth-order algorithms).
    #[serde(default = "one")]
    pub perturbations: usize,
    /// Smoothing radius μ (> 0).
    #[serde(default = "default_mu")]
    pub mu: f64,
    /// `one_sided` (forward, the paper's) or `two_point` (central) differences.
    #[serde(default = "forward")]
    pub difference: Difference,
    /// Minibatch per local step (0: all local data).
    #[serde(default = "default_batch")]
    pub batch_size: usize,
    /// HiSo's EMA weight ν.
    #[serde(default = "default_nu")]
    pub nu: f64,
    /// HiSo's floor ε.
    #[serde(default = "default_hessian_eps")]
    pub hessian_eps: f64,
    /// Weight decay λ of every local and replayed step, `x ← x − η (Δx + λ x)`, as SGD's
    /// `weight_decay` (0: none; the public DeComFL code uses 1e-5).
    #[serde(default)]
    pub weight_decay: f64,
    /// Rounds a client may fall behind and still catch up by replay (none: unbounded).
    #[serde(default)]
    pub staleness_bound: Option<u64>,
    /// Probability that a sampled client drops out after its catch-up (scalar-only methods).
    #[serde(default)]
    pub dropout: f64,
    /// FedAdam's server learning rate.
    #[serde(default = "default_server_lr")]
    pub server_lr: f64,
    /// Evaluate every this many rounds (0: about 50 evaluations).
    #[serde(default)]
    pub eval_every: u64,
    /// Test examples used by evaluations (0: the whole test set).
    #[serde(default)]
    pub eval_examples: usize,
}

fn one() -> usize {
    1
}
fn default_mu() -> f64 {
    defaults::MU
}
fn forward() -> Difference {
    Difference::OneSided
}
fn default_batch() -> usize {
    64
}
fn default_nu() -> f64 {
    defaults::NU
}
fn default_hessian_eps() -> f64 {
    defaults::HESSIAN_EPS
}
fn default_server_lr() -> f64 {
    0.01
}

impl ScalarFlConfig {
    /// The replay parameters every party shares.
    pub fn replay_spec(&self) -> ReplaySpec {
        ReplaySpec {
            lr: self.lr,
            local_steps: self.local_steps,
            perturbations: self.perturbations,
            weight_decay: self.weight_decay,
            rule: match self.algorithm {
                Algorithm::Hiso => Rule::Hiso {
                    nu: self.nu,
                    eps: self.hessian_eps,
                },
                _ => Rule::Decomfl,
            },
        }
    }

    fn probe(&self) -> Probe {
        Probe {
            mu: self.mu,
            difference: self.difference,
        }
    }

    fn eval_every(&self) -> u64 {
        if self.eval_every > 0 {
            self.eval_every
        } else {
            (self.rounds / 50).max(1)
        }
    }

    /// Checks the settings against a federation of `clients` clients.
    pub fn validate_for(&self, clients: usize) -> Result<()> {
        self.validate()?;
        ensure(self.clients_per_round <= clients, || {
            format!(
                "method.clients_per_round = {} exceeds the {clients} clients",
                self.clients_per_round
            )
        })
    }
}

impl Method for ScalarFlConfig {
    fn validate(&self) -> Result<()> {
        ensure_count("method.rounds", self.rounds, MAX_STEPS)?;
        ensure(self.clients_per_round >= 1, || {
            "method.clients_per_round must be >= 1".into()
        })?;
        ensure_count("method.local_steps", self.local_steps as u64, 1 << 16)?;
        ensure_count("method.perturbations", self.perturbations as u64, 1 << 16)?;
        ensure(self.mu > 0.0 && self.mu.is_finite(), || {
            format!("method.mu must be > 0, got {}", self.mu)
        })?;
        ensure((0.0..1.0).contains(&self.dropout), || {
            format!("method.dropout must be in [0, 1), got {}", self.dropout)
        })?;
        ensure(self.server_lr > 0.0 && self.server_lr.is_finite(), || {
            format!("method.server_lr must be > 0, got {}", self.server_lr)
        })?;
        check_lr(self.lr)?;
        // The roles' own bounds (steps, perturbations, the HiSo rule), named as config keys.
        self.replay_spec().validate().map_err(|e| {
            let keys = [("rule.nu", "method.nu"), ("rule.eps", "method.hessian_eps")];
            let text = e.to_string().replace("invalid parameters: ", "method.");
            crate::SimError::Config(
                keys.iter()
                    .fold(text, |t, (a, b)| t.replace(&format!("method.{a}"), b)),
            )
        })
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Trained> {
        let t = simulate(self, ctx.problem()?, &ctx.seeds, ctx.progress)?;
        for (i, &round) in t.rounds.iter().enumerate() {
            ctx.record(&[
                ("round", round as f64),
                ("test_loss", t.test_loss[i]),
                ("test_accuracy", t.test_acc[i]),
                ("bytes_up", t.up_at[i] as f64),
                ("bytes_down", t.down_at[i] as f64),
            ])?;
        }
        ctx.send_up(t.up_bytes());
        ctx.send_down(t.down_bytes());
        let report = ScalarFlReport {
            best_test_accuracy: t.best_acc(),
            bytes_per_round_up: t.up_per_participant_round(),
            bytes_per_round_down: t.down_per_participant_round(),
            full_state_downloads: t.full_downloads,
            hessian: t.hessian.as_deref().map(Quantiles::of),
        };
        Ok(Trained {
            params: t.params,
            report: Report::ScalarFl(report),
        })
    }
}

/// What a scalar-only FL run (or a baseline) reports beyond its metrics rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScalarFlReport {
    /// Best test accuracy over the evaluations.
    pub best_test_accuracy: f64,
    /// Mean bytes one participant sends per round.
    pub bytes_per_round_up: f64,
    /// Mean bytes one participant receives per round.
    pub bytes_per_round_down: f64,
    /// Full-state catch-ups (a client too stale to replay).
    pub full_state_downloads: u64,
    /// Quantiles of HiSo's final Hessian diagonal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hessian: Option<Quantiles>,
}

/// The evaluation record of one run.
#[derive(Clone, Debug, Default)]
pub struct Trajectory {
    /// Rounds at which the model was evaluated (0 = before training).
    pub rounds: Vec<u64>,
    /// Test accuracy at those rounds.
    pub test_acc: Vec<f64>,
    /// Test loss at those rounds.
    pub test_loss: Vec<f64>,
    /// Cumulative bytes up at those rounds.
    pub up_at: Vec<u64>,
    /// Cumulative bytes down at those rounds.
    pub down_at: Vec<u64>,
    /// Client-rounds that uploaded (participations that did not drop).
    pub uploads: u64,
    /// Client-rounds that were sent the round (participations).
    pub participations: u64,
    /// Full-state catch-ups (scalar-only methods).
    pub full_downloads: u64,
    /// Final parameters.
    pub params: Vec<f64>,
    /// Final Hessian diagonal (HiSo).
    pub hessian: Option<Vec<f64>>,
}

impl Trajectory {
    fn push_eval(&mut self, round: u64, acc: f64, loss: f64, up: u64, down: u64) {
        self.rounds.push(round);
        self.test_acc.push(acc);
        self.test_loss.push(loss);
        self.up_at.push(up);
        self.down_at.push(down);
    }

    /// Total bytes up.
    pub fn up_bytes(&self) -> u64 {
        self.up_at.last().copied().unwrap_or(0)
    }

    /// Total bytes down.
    pub fn down_bytes(&self) -> u64 {
        self.down_at.last().copied().unwrap_or(0)
    }

    /// Best test accuracy over the evaluations.
    pub fn best_acc(&self) -> f64 {
        self.test_acc.iter().copied().fold(f64::NAN, f64::max)
    }

    /// The first evaluated round with test accuracy at least `target`.
    pub fn first_round_reaching(&self, target: f64) -> Option<u64> {
        self.rounds
            .iter()
            .zip(&self.test_acc)
            .find(|(_, a)| **a >= target)
            .map(|(r, _)| *r)
    }

    /// Mean uplink bytes per uploading client per round.
    pub fn up_per_participant_round(&self) -> f64 {
        self.up_bytes() as f64 / self.uploads.max(1) as f64
    }

    /// Mean downlink bytes per participating client per round.
    pub fn down_per_participant_round(&self) -> f64 {
        self.down_bytes() as f64 / self.participations.max(1) as f64
    }
}

/// The test examples evaluations use.
fn eval_set(problem: &Problem, examples: usize) -> Dataset {
    let n = problem.test.len();
    if examples == 0 || examples >= n {
        problem.test.clone()
    } else {
        let idx: Vec<usize> = (0..examples).collect();
        problem.test.select(&idx)
    }
}

/// Runs `cfg` on `problem` and returns its trajectory.
pub fn simulate(
    cfg: &ScalarFlConfig,
    problem: &Problem,
    seeds: &SeedTree,
    progress: &dyn Progress,
) -> Result<Trajectory> {
    cfg.validate_for(problem.clients.len())?;
    if cfg.algorithm.is_scalar_only() {
        simulate_scalar(cfg, problem, seeds, progress)
    } else {
        baselines::simulate(cfg, problem, seeds, progress)
    }
}

/// Evaluates `x` on `test` and appends the result.
fn evaluate(
    t: &mut Trajectory,
    problem: &Problem,
    test: &Dataset,
    round: u64,
    x: &[f64],
    up: u64,
    down: u64,
) -> Result<()> {
    let model = &problem.model;
    let loss = model.loss(x, test, None);
    if !loss.is_finite() {
        return Err(crate::SimError::Diverged {
            round,
            what: "test loss".into(),
        });
    }
    let acc = model.accuracy(x, test).unwrap_or(f64::NAN);
    t.push_eval(round, acc, loss, up, down);
    Ok(())
}

fn simulate_scalar(
    cfg: &ScalarFlConfig,
    problem: &Problem,
    seeds: &SeedTree,
    progress: &dyn Progress,
) -> Result<Trajectory> {
    let spec = cfg.replay_spec();
    let model = &problem.model;
    let x0 = model.init_params(&mut seeds.stream("scalar_fl/init", &[]));
    let initial = ModelState::initial(x0, spec.rule);
    let n = problem.clients.len();
    let mut server = Server::new(spec, initial.clone(), n, cfg.staleness_bound)?;
    let mut clients: Vec<Client> = (0..n).map(|i| Client::new(i, initial.clone())).collect();
    let test = eval_set(problem, cfg.eval_examples);
    let every = cfg.eval_every();
    let probe = cfg.probe();
    let mut t = Trajectory::default();
    let (mut up, mut down) = (0u64, 0u64);
    evaluate(&mut t, problem, &test, 0, &server.state().x, 0, 0)?;
    progress.start(cfg.algorithm.name(), cfg.rounds);
    for r in 0..cfg.rounds {
        let plan = server.begin_round(cfg.clients_per_round, &mut plan_rng(seeds, r))?;
        let mut drop_rng = seeds.stream("scalar_fl/dropout", &[r]);
        let mut jobs = Vec::with_capacity(plan.clients.len());
        for &c in &plan.clients {
            let msg = server.catch_up(c)?;
            down += SEED_BYTES * plan.seeds.len() as u64 + msg.bytes();
            let dropped = cfg.dropout > 0.0 && drop_rng.random::<f64>() < cfg.dropout;
            jobs.push((c, msg, dropped));
        }
        t.participations += jobs.len() as u64;
        // Each participant's catch-up and local steps, in parallel; results in client order.
        let mut chosen: Vec<&mut Client> = clients
            .iter_mut()
            .filter(|c| plan.clients.binary_search(&c.id()).is_ok())
            .collect();
        let replies: Vec<Option<Reply>> = chosen
            .par_iter_mut()
            .zip(jobs.into_par_iter())
            .map(|(client, (c, msg, dropped))| -> Result<Option<Reply>> {
                client.receive(msg, &spec)?;
                if dropped {
                    return Ok(None);
                }
                let batches: Vec<Vec<usize>> = (0..cfg.local_steps)
                    .map(|k| local_batch(&problem.clients[c], cfg.batch_size, seeds, r, c, k))
                    .collect();
                let loss = |k: usize, x: &[f64]| model.loss(x, &problem.train, Some(&batches[k]));
                Ok(Some(client.local_update(&plan, &spec, probe, &loss)?))
            })
            .collect::<Result<_>>()?;
        let replies: Vec<Reply> = replies.into_iter().flatten().collect();
        up += replies.iter().map(Reply::bytes).sum::<u64>();
        t.uploads += replies.len() as u64;
        server.finish_round(&replies)?;
        if (r + 1) % every == 0 || r + 1 == cfg.rounds {
            evaluate(&mut t, problem, &test, r + 1, &server.state().x, up, down)?;
        }
        progress.advance(1);
    }
    progress.finish();
    t.full_downloads = server.full_downloads();
    t.params = server.state().x.clone();
    t.hessian = server.state().h.clone();
    Ok(t)
}
