//! DOME (the DOME paper, Alg. 1): DP federated Adam on a learned low-rank sketch, summed with
//! SecAgg+.
//!
//! Each round `B` clients each take one unseen example (every example once per epoch), remove
//! the running mean `m̂`, project onto the sketch `S` (d × k), clip to `C`, add Gaussian noise
//! of variance `a² = n·E·σ²·C²/B` (σ from Thm 3.3, `n` examples per client) and submit the
//! k-vector to a real SecAgg+ round ([`privopt_secagg`]). The server decompresses
//! `ĝ = S·sum/B + m̂`, takes a bias-corrected Adam step whose second moment is debiased by the
//! known noise (Lemma 3.2), and updates the sketch (Alg. 2, `privopt_protocols::dome::Sketch`).
//!
//! Variants share all of this and differ only in the sketch: `dome`, `dome_noprobe` (the
//! streaming-PCA basis without probes), `random_sketch` (fixed random subspace), `dp_full`
//! (`S = I`: DP-FedAdam at full dimension) — and `nonprivate` (plain FedAdam on the same
//! examples, no clipping, noise or SecAgg).
//!
//! Departures from the paper's text, each for a stated reason:
//! - Line 19 subtracts `a²·Diag(S Sᵀ)`, but the noise in `ĝ` is the *average* of `B` clients'
//!   noises, of variance `a²/B` per sketch coordinate; we subtract `(a²/B)·Diag(S Sᵀ)`, which is
//!   what Lemma 3.2 gives for that noise.
//! - Line 17 decompresses with `S_t` and line 19 debiases with `S_{t−1}`; both must be the
//!   sketch the clients projected with, which we use for both.
//! - Alg. 2 keeps "the first r columns" of the QR factor; we order them by `Λ'` first, so they
//!   are the top-energy ones, as §3.1 describes.
//! - Clients are drawn among those with the most unseen examples left (random ties), so every
//!   round has exactly `B` participants and the noise sum keeps its variance.

pub mod privacy;

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use privopt_math::SeedTree;
use privopt_ml::data::Dataset;
use privopt_protocols::Message;
use privopt_protocols::dome::{
    DomeServer, RoundBroadcast, ServerSettings, Sketch, SketchKind, basis_wire_bytes, defaults,
    quantizer, release_many,
};
use privopt_secagg::simulation::{Dropouts, run_round};
use privopt_secagg::{
    Context as SecAggContext, Graph, SessionId, Stage, ThreatModel, find_parameters,
};
use rand::Rng;
use rand::seq::SliceRandom;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::context::RunContext;
use crate::error::{MAX_STEPS, Result, ensure, ensure_count};
use crate::methods::{Method, Report, Trained, check_lr};
use privopt_data::problem::Problem;

/// Which method runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// DOME with streaming PCA and probes.
    Dome,
    /// DOME without probes.
    DomeNoprobe,
    /// A fixed random orthonormal sketch.
    RandomSketch,
    /// No sketch: DP-FedAdam at full dimension.
    DpFull,
    /// FedAdam without privacy.
    Nonprivate,
}

impl Variant {
    /// The name used in result keys.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Dome => "dome",
            Variant::DomeNoprobe => "dome_noprobe",
            Variant::RandomSketch => "random_sketch",
            Variant::DpFull => "dp_full",
            Variant::Nonprivate => "nonprivate",
        }
    }

    /// Whether the method projects onto a k-dimensional sketch.
    pub fn sketched(self) -> bool {
        matches!(
            self,
            Variant::Dome | Variant::DomeNoprobe | Variant::RandomSketch
        )
    }
}

/// What SecAgg+ must withstand (picks the graph degree and threshold).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecAggSettings {
    /// Expected fraction of dropouts.
    pub dropout_rate: f64,
    /// Fraction of clients that may collude with the server.
    pub corrupt_rate: f64,
}

impl Default for SecAggSettings {
    fn default() -> Self {
        Self {
            dropout_rate: defaults::DROPOUT_RATE,
            corrupt_rate: defaults::CORRUPT_RATE,
        }
    }
}

/// Where a participant that drops stops answering in its round's SecAgg+ exchange.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropStage {
    /// Before advertising its keys: it takes no part at all.
    AdvertiseKeys,
    /// Before sharing its keys with its neighbours.
    ShareKeys,
    /// Before sending its masked vector: its noise share is not in the sum.
    #[default]
    MaskedInput,
    /// After sending its masked vector, before unmasking: its vector (and noise) is in the
    /// sum, and its neighbours' shares rebuild its self-mask.
    Unmask,
    /// One of the four at random.
    Any,
}

impl DropStage {
    const STAGES: [Stage; 4] = [
        Stage::AdvertiseKeys,
        Stage::ShareKeys,
        Stage::MaskedInput,
        Stage::Unmask,
    ];

    fn draw(self, rng: &mut impl Rng) -> Stage {
        match self {
            DropStage::AdvertiseKeys => Stage::AdvertiseKeys,
            DropStage::ShareKeys => Stage::ShareKeys,
            DropStage::MaskedInput => Stage::MaskedInput,
            DropStage::Unmask => Stage::Unmask,
            DropStage::Any => Self::STAGES[rng.random_range(0..Self::STAGES.len())],
        }
    }
}

/// Participants that drop out of training rounds: each independently with probability `rate`
/// per round, at `stage`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DropoutSettings {
    /// Probability that a participant drops in a round.
    pub rate: f64,
    /// Where it stops answering.
    #[serde(default)]
    pub stage: DropStage,
}

/// `[method] name = "dome"`: one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomeConfig {
    /// Which method.
    pub variant: Variant,
    /// Sketch dimension k (ignored by `dp_full` and `nonprivate`).
    pub k: usize,
    /// Target ε.
    pub epsilon: f64,
    /// Target δ.
    #[serde(default = "default_delta")]
    pub delta: f64,
    /// Epochs E (each example is used once per epoch).
    pub epochs: usize,
    /// Clients per round B (>= 3, for SecAgg).
    pub clients_per_round: usize,
    /// Clipping norm C of the sketched gradient.
    pub clip: f64,
    /// Adam step size η.
    pub lr: f64,
    /// Adam β1.
    #[serde(default = "default_beta1")]
    pub beta1: f64,
    /// Adam β2.
    #[serde(default = "default_beta2")]
    pub beta2: f64,
    /// Floor γ′ of the (debiased) second moment.
    pub gamma_prime: f64,
    /// Energy ratio q of Alg. 2.
    #[serde(default = "default_energy")]
    pub energy: f64,
    /// SecAgg+ threat model.
    #[serde(default)]
    pub secagg: SecAggSettings,
    /// Dropouts during training (none by default).
    #[serde(default)]
    pub dropouts: DropoutSettings,
    /// Unset: the paper's noise shares (`a² = n·E·σ²·C²/B`), so a participant that drops
    /// before masking takes its share away and the round's sum is less private than the
    /// accountant assumed (the run reports how much). `f` in (0, 1]: each participant adds
    /// noise for `⌈f·B⌉` contributors, and a round with fewer aborts before its sum is
    /// unmasked, so every used sum carries the full noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_floor: Option<f64>,
    /// Rounds between accuracy evaluations (0: about 20 per run).
    #[serde(default)]
    pub eval_every: u64,
    /// Test examples of the periodic evaluations (0: all); the final model uses all.
    #[serde(default)]
    pub eval_examples: usize,
}

fn default_delta() -> f64 {
    defaults::DELTA
}
fn default_beta1() -> f64 {
    defaults::BETA1
}
fn default_beta2() -> f64 {
    defaults::BETA2
}
fn default_energy() -> f64 {
    defaults::ENERGY
}

impl DomeConfig {
    /// Checks every parameter; errors name the key.
    pub fn check(&self) -> Result<()> {
        check_lr(self.lr)?;
        let positive = |v: f64| v > 0.0 && v.is_finite();
        ensure(
            self.variant == Variant::Nonprivate || positive(self.epsilon),
            || format!("method.epsilon must be > 0, got {}", self.epsilon),
        )?;
        ensure(self.delta > 0.0 && self.delta < 1.0, || {
            format!("method.delta must be in (0, 1), got {}", self.delta)
        })?;
        ensure_count("method.epochs", self.epochs as u64, MAX_STEPS)?;
        ensure_count(
            "method.clients_per_round",
            self.clients_per_round as u64,
            1 << 20,
        )?;
        ensure(self.k <= 1 << 16, || {
            format!("method.k must be at most 65536, got {}", self.k)
        })?;
        ensure(self.clients_per_round >= 3, || {
            format!(
                "method.clients_per_round must be >= 3 (SecAgg+ needs three clients), got {}",
                self.clients_per_round
            )
        })?;
        ensure(positive(self.clip), || {
            format!("method.clip must be > 0, got {}", self.clip)
        })?;
        ensure(positive(self.gamma_prime), || {
            format!("method.gamma_prime must be > 0, got {}", self.gamma_prime)
        })?;
        ensure(
            (0.0..1.0).contains(&self.beta1) && (0.0..1.0).contains(&self.beta2),
            || "method.beta1 and method.beta2 must be in [0, 1)".into(),
        )?;
        ensure(self.energy > 0.0 && self.energy <= 1.0, || {
            format!("method.energy must be in (0, 1], got {}", self.energy)
        })?;
        ensure(!self.variant.sketched() || self.k >= 1, || {
            "method.k must be >= 1".into()
        })?;
        ensure((0.0..1.0).contains(&self.dropouts.rate), || {
            format!(
                "method.dropouts.rate must be in [0, 1), got {}",
                self.dropouts.rate
            )
        })?;
        ensure(self.noise_floor.is_none_or(|f| f > 0.0 && f <= 1.0), || {
            format!(
                "method.noise_floor must be in (0, 1], got {}",
                self.noise_floor.unwrap_or(f64::NAN)
            )
        })?;
        Ok(())
    }

    fn sketch_kind(&self) -> SketchKind {
        match self.variant {
            Variant::Dome => SketchKind::Learned {
                energy: self.energy,
            },
            Variant::DomeNoprobe => SketchKind::LearnedNoProbes,
            Variant::RandomSketch => SketchKind::Random,
            Variant::DpFull | Variant::Nonprivate => SketchKind::Identity,
        }
    }
}

/// What one run produced.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DomeRun {
    /// Evaluation rounds.
    pub rounds: Vec<u64>,
    /// Test accuracy at those rounds (on `eval_examples`).
    pub test_acc: Vec<f64>,
    /// Accuracy of the final model on the whole test set.
    pub final_acc: f64,
    /// Mean over rounds of ‖ĝ − ḡ‖², ḡ the participants' mean (unclipped) gradient.
    pub grad_mse: f64,
    /// Mean over rounds of the noise part ‖S z̄‖² of ĝ.
    pub noise_mse: f64,
    /// Lemma 3.1's prediction of `noise_mse`: `dim · a²/B`.
    pub noise_mse_theory: f64,
    /// Bytes one client sends per round (SecAgg+ messages; plain f32 vector if non-private).
    pub uplink_bytes: f64,
    /// Bytes the server sends one participant per round: the model (f64), the round
    /// broadcast (with `m̂`), the sketch when the participant's copy is stale (a learned
    /// sketch changes every round; a random one is sent once per client) and SecAgg+'s
    /// relayed keys, shares and unmask request.
    pub downlink_bytes: f64,
    /// Of which the vector itself.
    pub uplink_vector_bytes: f64,
    /// Mean number of streaming-PCA components kept (Alg. 2's r; 0 without a learned sketch).
    pub kept_mean: f64,
    /// Rounds run.
    pub total_rounds: u64,
    /// Rounds abandoned (SecAgg+ below its threshold, or fewer contributors than the noise
    /// floor needs): nothing of them was applied or revealed.
    pub aborted_rounds: u64,
    /// Mean contributors (vectors in the sum) over completed rounds.
    pub contributors_mean: f64,
    /// Per completed round `(round, ratio)`: the noise variance actually summed over what the
    /// accountant assumed (`contributors / noise shares`); below 1 the round leaked more.
    pub noise_ratio: Vec<(u64, f64)>,
    /// The largest zCDP `ρ` any client accumulated over the rounds its vector was summed in,
    /// at the noise actually summed (`1/(2σ²)` without dropouts).
    pub rho_worst_client: f64,
    /// Accuracy of the final model on the validation split (NaN without one).
    pub final_val_acc: f64,
}

/// The clients of a round: `b` among those with the most unseen examples left (random ties).
fn draw_participants(remaining: &[Vec<usize>], b: usize, rng: &mut impl Rng) -> Vec<usize> {
    let mut order: Vec<usize> = (0..remaining.len())
        .filter(|&c| !remaining[c].is_empty())
        .collect();
    order.shuffle(rng);
    order.sort_by_key(|&c| std::cmp::Reverse(remaining[c].len()));
    order.truncate(b);
    order.sort_unstable();
    order
}

/// SecAgg+ sums of the participants' vectors, one real round per training round.
struct SecureSum {
    session: SessionId,
    threat: ThreatModel,
    /// Graph and threshold per number of participants.
    graphs: BTreeMap<usize, (Graph, usize)>,
}

impl SecureSum {
    fn new(settings: SecAggSettings, rng: &mut impl Rng) -> Self {
        let threat = ThreatModel {
            dropout_rate: settings.dropout_rate,
            corrupt_rate: settings.corrupt_rate,
        };
        Self {
            session: SessionId(rng.random()),
            threat,
            graphs: BTreeMap::new(),
        }
    }

    /// The graph and threshold for `n` clients (found once per `n`).
    fn graph(&mut self, n: usize, rng: &mut impl Rng) -> Result<&(Graph, usize)> {
        Ok(match self.graphs.entry(n) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let p = find_parameters(n, self.threat)?;
                let graph = Graph::harary(n, p.degree, rng.random())?;
                e.insert((graph, p.threshold))
            }
        })
    }

    /// One SecAgg+ round over the quantized `encoded` vectors with `dropouts`: the sum (of
    /// the contributors' vectors only) and its traffic, or `None` when too many dropped for
    /// SecAgg+ to finish (nothing is revealed then).
    fn sum(
        &mut self,
        round: u64,
        encoded: &[Vec<u32>],
        dropouts: &Dropouts,
        rng: &mut impl Rng,
    ) -> Result<Option<SecureSumOutcome>> {
        let n = encoded.len();
        let context = SecAggContext {
            session: self.session,
            round,
        };
        let (graph, threshold) = self.graph(n, rng)?;
        let inputs: Vec<&[u32]> = encoded.iter().map(Vec::as_slice).collect();
        match run_round(context, graph, *threshold, &inputs, dropouts, rng.random()) {
            Ok((aggregate, report)) => Ok(Some(SecureSumOutcome {
                sum: aggregate.sum,
                contributors: aggregate.contributors,
                upload_per_client: report.clients_upload_bytes as f64 / n as f64,
                download_per_client: report.clients_download_bytes as f64 / n as f64,
            })),
            Err(privopt_secagg::SecAggError::BelowThreshold { .. })
                if dropouts.iter().any(Option::is_some) =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// A completed SecAgg+ round.
struct SecureSumOutcome {
    sum: Vec<u32>,
    /// Round-local ids (0..B) of the clients whose vectors are in `sum`.
    contributors: Vec<u32>,
    upload_per_client: f64,
    download_per_client: f64,
}

/// Trains one DOME (or baseline) model; `on_eval(round, w)` is called at each evaluation.
pub fn train(
    cfg: &DomeConfig,
    problem: &Problem,
    seeds: &SeedTree,
    mut on_eval: impl FnMut(u64, &[f64]) -> Result<()>,
) -> Result<DomeRun> {
    cfg.check()?;
    let model = &problem.model;
    ensure(model.has_gradient(), || {
        format!(
            "DOME needs per-example gradients; model `{}` has none",
            model.name()
        )
    })?;
    let d = model.num_params();
    let n_clients = problem.clients.len();
    // More per round than exist would silently mean "all of them": say so instead.
    ensure(cfg.clients_per_round <= n_clients, || {
        format!(
            "method.clients_per_round = {} exceeds the {n_clients} clients of the data",
            cfg.clients_per_round
        )
    })?;
    let b = cfg.clients_per_round;
    let n_max = examples_per_client(problem);
    let private = cfg.variant != Variant::Nonprivate;
    let sigma = if private {
        privacy::thm33_sigma(cfg.epsilon, cfg.delta)
    } else {
        0.0
    };
    let mut rng = seeds.stream("dome/run", &[]);
    let w0 = model.init_params(&mut rng);
    let sketch = Sketch::new(cfg.sketch_kind(), d, cfg.k, &mut rng)?;
    let dim = sketch.dim();
    let eval_test = eval_subset(&problem.test, cfg.eval_examples);
    let rounds_per_epoch = problem
        .clients
        .iter()
        .map(Vec::len)
        .sum::<usize>()
        .div_ceil(b);
    let total = (rounds_per_epoch * cfg.epochs) as u64;
    let every = if cfg.eval_every > 0 {
        cfg.eval_every
    } else {
        (total / 20).max(1)
    };
    let settings = ServerSettings {
        lr: cfg.lr,
        beta1: cfg.beta1,
        beta2: cfg.beta2,
        gamma_prime: cfg.gamma_prime,
        clip: cfg.clip,
        noise_total: if private {
            (n_max * cfg.epochs) as f64 * sigma * sigma * cfg.clip * cfg.clip
        } else {
            0.0
        },
        noise_floor: cfg.noise_floor,
        learned_sketch: matches!(cfg.variant, Variant::Dome | Variant::DomeNoprobe),
    };
    let mut server = DomeServer::new(settings, w0, sketch)?;
    let mut secure_sum = SecureSum::new(cfg.secagg, &mut rng);
    // Dropouts draw from their own stream, so a run without them is unchanged by the option.
    let mut drop_rng = seeds.stream("dome/dropouts", &[]);
    let mut run = DomeRun {
        total_rounds: total,
        ..DomeRun::default()
    };
    // zCDP ρ of one release at the full noise: sensitivity C against `noise_total`.
    let rho_full = if private {
        cfg.clip * cfg.clip / (2.0 * settings.noise_total)
    } else {
        0.0
    };
    let mut rho = vec![0.0; n_clients];
    let traffic = Downlink::new(cfg.variant, d, dim);
    let mut sketch_seen = vec![false; n_clients];
    let mut grads = vec![0.0; d * b];
    let mut kept_sum = 0.0;
    let mut t = 0u64;
    let mut completed = 0u64;
    let evaluate = |round: u64, w: &[f64], run: &mut DomeRun| {
        run.rounds.push(round);
        run.test_acc
            .push(model.accuracy(w, &eval_test).unwrap_or(f64::NAN));
    };
    evaluate(0, server.model(), &mut run);
    on_eval(0, server.model())?;
    for _epoch in 0..cfg.epochs {
        let mut remaining: Vec<Vec<usize>> = problem.clients.clone();
        for r in &mut remaining {
            r.shuffle(&mut rng);
        }
        loop {
            let participants = draw_participants(&remaining, b, &mut rng);
            if participants.is_empty() {
                break;
            }
            t += 1;
            let bp = participants.len();
            let examples: Vec<usize> = participants
                .iter()
                .filter_map(|&c| remaining[c].pop())
                .collect();
            let dropouts: Dropouts = participants
                .iter()
                .map(|_| {
                    (cfg.dropouts.rate > 0.0 && drop_rng.random_bool(cfg.dropouts.rate))
                        .then(|| cfg.dropouts.stage.draw(&mut drop_rng))
                })
                .collect();
            let broadcast = server.open_round(t, bp)?;
            let mut downlink = traffic.per_round(&broadcast);
            // Per-example gradients at the broadcast model, one column each.
            let w = server.model();
            let cols = &mut grads[..d * bp];
            cols.par_chunks_mut(d).zip(&examples).for_each(|(g, &i)| {
                g.iter_mut().for_each(|x| *x = 0.0);
                model.example_loss(w, problem.train.row(i), problem.train.label(i), Some(g));
            });
            let mut mean = vec![0.0; d];
            for g in cols.chunks(d) {
                mean.iter_mut()
                    .zip(g)
                    .for_each(|(m, x)| *m += x / bp as f64);
            }
            let g_hat = if private {
                // Each participant privatizes and quantizes its own gradient.
                let q = quantizer(&broadcast)?;
                let mut encoded = Vec::with_capacity(bp);
                let mut noises = Vec::with_capacity(bp);
                for r in release_many(cols, &broadcast, server.basis(), &mut rng)? {
                    encoded.push(q.encode(&r.vector)?);
                    noises.push(r.noise);
                }
                // A driver knows who sent a masked vector before it asks SecAgg+ to unmask;
                // below the noise floor it aborts there, and the sum is never revealed.
                let masked = dropouts
                    .iter()
                    .filter(|s| s.is_none_or(|s| s > Stage::MaskedInput))
                    .count();
                let required = server.required_contributors().unwrap_or(1);
                let outcome = if masked < required {
                    None
                } else {
                    secure_sum.sum(t, &encoded, &dropouts, &mut rng)?
                };
                let Some(outcome) = outcome else {
                    server.abort_round();
                    run.aborted_rounds += 1;
                    continue;
                };
                let contributors = outcome.contributors.len();
                run.uplink_bytes += outcome.upload_per_client;
                downlink += outcome.download_per_client;
                run.uplink_vector_bytes += (4 * dim) as f64;
                let mut noise_mean = vec![0.0; dim];
                for &c in &outcome.contributors {
                    for (m, z) in noise_mean.iter_mut().zip(&noises[c as usize]) {
                        *m += z / contributors as f64;
                    }
                }
                let noise_part = server.decompress(&noise_mean);
                run.noise_mse += noise_part.iter().map(|x| x * x).sum::<f64>();
                let shares = settings.noise_shares(bp);
                let a2 = settings.noise().share_variance(bp);
                run.noise_mse_theory += dim as f64 * a2 / contributors as f64;
                // The sum carries `contributors · a²` of noise, the accountant assumed
                // `noise_total = shares · a²`: each contributor's ρ scales by the inverse.
                let ratio = contributors as f64 / shares as f64;
                run.noise_ratio.push((t, ratio));
                for &c in &outcome.contributors {
                    rho[participants[c as usize]] += rho_full / ratio;
                }
                run.contributors_mean += contributors as f64;
                server.close_round(&outcome.sum, contributors, &mut rng)?
            } else {
                run.uplink_bytes += (4 * d) as f64;
                run.uplink_vector_bytes += (4 * d) as f64;
                run.contributors_mean += bp as f64;
                server.close_round_plain(&mean, &mut rng)?
            };
            completed += 1;
            // The sketch the participants projected with: stale copies are refreshed.
            let sketches: f64 = participants
                .iter()
                .map(|&c| traffic.sketch_for(&mut sketch_seen[c]))
                .sum();
            run.downlink_bytes += downlink + sketches / bp as f64;
            run.grad_mse += g_hat
                .iter()
                .zip(&mean)
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f64>();
            if matches!(cfg.variant, Variant::Dome | Variant::DomeNoprobe) {
                kept_sum += server.kept() as f64;
            }
            if t.is_multiple_of(every) || t == total {
                evaluate(t, server.model(), &mut run);
                on_eval(t, server.model())?;
            }
        }
    }
    let rounds = completed.max(1) as f64;
    for v in [
        &mut run.grad_mse,
        &mut run.noise_mse,
        &mut run.noise_mse_theory,
        &mut run.uplink_bytes,
        &mut run.uplink_vector_bytes,
        &mut run.downlink_bytes,
        &mut run.contributors_mean,
    ] {
        *v /= rounds;
    }
    run.kept_mean = kept_sum / rounds;
    run.total_rounds = t;
    run.rho_worst_client = rho.iter().copied().fold(0.0, f64::max);
    run.final_acc = model
        .accuracy(server.model(), &problem.test)
        .unwrap_or(f64::NAN);
    run.final_val_acc = problem
        .validation
        .as_ref()
        .and_then(|v| model.accuracy(server.model(), v))
        .unwrap_or(f64::NAN);
    Ok(run)
}

/// What the server sends participants, by size (`RoundBroadcast` and sketch encodings).
struct Downlink {
    /// The model as f64.
    model: f64,
    /// The whole sketch as [`basis_chunks`] messages (0 for the identity).
    sketch: f64,
    /// Whether the sketch changes every round (learned), so every participant needs it anew.
    changes: bool,
}

impl Downlink {
    fn new(variant: Variant, d: usize, dim: usize) -> Self {
        Self {
            model: (8 * d) as f64,
            sketch: if variant.sketched() {
                basis_wire_bytes(d, dim) as f64
            } else {
                0.0
            },
            changes: matches!(variant, Variant::Dome | Variant::DomeNoprobe),
        }
    }

    /// The model and the broadcast, to every participant.
    fn per_round(&self, broadcast: &RoundBroadcast) -> f64 {
        self.model + broadcast.to_bytes().len() as f64
    }

    /// The sketch for a participant, if its copy (`seen`) is stale.
    fn sketch_for(&self, seen: &mut bool) -> f64 {
        let stale = self.changes || !*seen;
        *seen = true;
        if stale { self.sketch } else { 0.0 }
    }
}

/// The privacy unit's size: the most examples any client holds.
pub fn examples_per_client(problem: &Problem) -> usize {
    problem.clients.iter().map(Vec::len).max().unwrap_or(0)
}

/// The first `n` test examples (all when `n` is 0 or too large).
fn eval_subset(test: &Dataset, n: usize) -> Dataset {
    if n == 0 || n >= test.len() {
        return test.clone();
    }
    test.select(&(0..n).collect::<Vec<_>>())
}

impl Method for DomeConfig {
    fn validate(&self) -> Result<()> {
        self.check()
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Trained> {
        let problem = ctx.problem()?;
        let seeds = ctx.seeds;
        let mut last = Vec::new();
        let outcome = train(self, problem, &seeds, |round, w| {
            last = w.to_vec();
            ctx.evaluate(round, w, &[])
        })?;
        let (privacy, realised) = match self.variant {
            Variant::Nonprivate => (None, None),
            _ => (
                Some(privacy::report(
                    self.epsilon,
                    self.delta,
                    examples_per_client(problem),
                    self.epochs,
                )?),
                Some(privacy::realised(&outcome, self.delta)?),
            ),
        };
        let report = DomeReport {
            privacy,
            realised,
            final_acc_full_test: outcome.final_acc,
            final_val_acc: outcome.final_val_acc,
            downlink_bytes_per_client_round: outcome.downlink_bytes,
            aborted_rounds: outcome.aborted_rounds,
            contributors_mean: outcome.contributors_mean,
            grad_mse: outcome.grad_mse,
            grad_noise_mse: outcome.noise_mse,
            grad_noise_mse_theory: outcome.noise_mse_theory,
            uplink_bytes_per_client_round: outcome.uplink_bytes,
            uplink_vector_bytes_per_client_round: outcome.uplink_vector_bytes,
            kept_mean: outcome.kept_mean,
        };
        Ok(Trained {
            params: last,
            report: Report::Dome(Box::new(report)),
        })
    }
}

/// What a DOME run reports beyond its metrics rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DomeReport {
    /// σ and the accountants' ε (private variants only).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub privacy: Option<privacy::PrivacyReport>,
    /// The ε the run actually spent, with dropouts (private variants only).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub realised: Option<privacy::RealisedPrivacy>,
    /// Accuracy of the final model on the whole test set.
    pub final_acc_full_test: f64,
    /// Accuracy of the final model on the validation split (NaN without one).
    pub final_val_acc: f64,
    /// Bytes the server sends one participant per round (model, broadcast, stale sketch,
    /// SecAgg+ relays).
    pub downlink_bytes_per_client_round: f64,
    /// Rounds abandoned for too few survivors.
    pub aborted_rounds: u64,
    /// Mean contributors per completed round.
    pub contributors_mean: f64,
    /// Mean over rounds of ‖ĝ − ḡ‖².
    pub grad_mse: f64,
    /// Mean over rounds of the noise part of ĝ.
    pub grad_noise_mse: f64,
    /// Lemma 3.1's prediction of `grad_noise_mse`.
    pub grad_noise_mse_theory: f64,
    /// Bytes one client sends per round (SecAgg+ messages; the plain vector if non-private).
    pub uplink_bytes_per_client_round: f64,
    /// Of which the vector itself.
    pub uplink_vector_bytes_per_client_round: f64,
    /// Mean number of streaming-PCA components kept (0 without a learned sketch).
    pub kept_mean: f64,
}
