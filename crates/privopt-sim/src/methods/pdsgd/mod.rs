//! Privacy-preserving decentralized SGD with Paillier-encrypted pairwise exchanges and
//! heterogeneous random stepsizes (the Paillier D-SGD paper, Alg. 1, eq. (3)–(9), §4).
//!
//! Agent i keeps `x_i`; each iteration it quantizes its state with the stochastic quantizer
//! (4), runs the encrypted pairwise exchange ([`privopt_protocols::pdsgd::Agent`], which owns
//! its key pair and holds only its neighbours' public keys) with every neighbour to obtain
//! `w̃_{i→j} w̃_{j→i}(x̃_j − x̃_i)`, and updates by (7):
//! `x_i ← x_i + γ^k Σ_j (…) − Λ_i^k g_i^k`, with a private random diagonal stepsize `Λ_i^k`.
//! The conventional algorithm (6) and the variant without attenuation (`γ^k = 1`) are the
//! paper's comparisons.
//!
//! The problem (§4) is distributed estimation: agent i holds `n_i` noisy measurements
//! `z_ij = M_i x + ν_ij` and `f_i(x) = (1/n_i) Σ_j ‖z_ij − M_i x‖² + ω‖x‖²`. The paper gives
//! neither `M_i` nor ω nor the graph (its Fig. 2 is an image): privopt draws `M_i` with
//! standard normal entries, the true `x` and `x_i^0` from `N(0, I)`, uses ω = 0.01, and by
//! default the 5-agent graph of [`EDGES`] (a ring 0–1–2–3–4–0 with the chord 0–2); any
//! connected graph can be given as `method.edges`. All are per-trial random draws from the
//! seed.

pub mod privacy;
pub mod theorem;

use std::time::Instant;

use privopt_math::SeedTree;
use privopt_paillier::KeyPair;
use privopt_protocols::pdsgd::{
    Agent, Graph, Paillier, Schedule, Scheme, Transparent, TransparentKey,
};
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use super::{Method, Report, Trained};
use crate::context::{RunContext, parallel_map};
use crate::error::{
    MAX_ELEMENTS, MAX_STEPS, Result, SimError, ensure, ensure_count, ensure_elements, method_param,
};

/// Most independent trials of one run.
const MAX_TRIALS: u64 = 100_000;

/// Smallest quantization step δ: 2^-40.
const MIN_DELTA: f64 = 1.0 / (1u64 << 40) as f64;
use crate::metrics::mean_variance;

/// The undirected graph of §4: a 5-ring with one chord (connected, degrees 3, 2, 3, 2, 2).
pub const EDGES: &[(usize, usize)] = &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 2)];

/// Redraws of the private weights before giving up on a stable set (see [`PdsgdConfig::trial`]).
const WEIGHT_DRAWS: usize = 10_000;

/// Which algorithm runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Algorithm 1: encrypted quantized exchange, attenuation γ^k, random stepsizes.
    Proposed,
    /// Algorithm 1 with γ^k = 1.
    NoAttenuation,
    /// Eq. (6): exact states, no quantization or encryption, stepsize α^k.
    Conventional,
}

/// `[method] name = "pdsgd"`; defaults are the paper's §4.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PdsgdConfig {
    /// Independent trials (mean and variance over them).
    #[serde(default = "d_trials")]
    pub trials: u64,
    /// Iterations per trial.
    #[serde(default = "d_iterations")]
    pub iterations: u64,
    /// Quantization precision δ (weights are multiples of δ in (0, 1]).
    #[serde(default = "d_delta")]
    pub delta: f64,
    /// Regularization ω.
    #[serde(default = "d_omega")]
    pub omega: f64,
    /// Measurements per agent n_i.
    #[serde(default = "d_measurements")]
    pub measurements: usize,
    /// Measurement dimension p.
    #[serde(default = "d_p")]
    pub p: usize,
    /// Parameter dimension d.
    #[serde(default = "d_d")]
    pub d: usize,
    /// `λ^k = lambda0 / k^lambda_decay · (1 + ζ / k^zeta_decay)`.
    #[serde(default = "d_lambda0")]
    pub lambda0: f64,
    /// See `lambda0`.
    #[serde(default = "d_lambda_decay")]
    pub lambda_decay: f64,
    /// See `lambda0`.
    #[serde(default = "d_zeta_decay")]
    pub zeta_decay: f64,
    /// `γ^k = 1 / (1 + attenuation_a · k^attenuation_b)`.
    #[serde(default = "d_att_a")]
    pub attenuation_a: f64,
    /// See `attenuation_a`.
    #[serde(default = "d_att_b")]
    pub attenuation_b: f64,
    /// Record the error every this many iterations.
    #[serde(default = "d_eval")]
    pub eval_every: u64,
    /// Iterations of the real-Paillier timing run (0: skip).
    #[serde(default = "d_timing")]
    pub paillier_timing_iterations: u64,
    /// Paillier modulus size of the timing run.
    #[serde(default = "d_bits")]
    pub paillier_bits: u32,
    /// Iterations of Theorem 2's eavesdropper experiment (two real-Paillier runs on different
    /// data, every message tapped; [`privacy::eavesdropper`]); 0: skip.
    #[serde(default)]
    pub eavesdropper_iterations: u64,
    /// Explicit opt-in to parameters below privopt's security policy (here a 1024-bit
    /// Paillier modulus); for tests and quick experiments only.
    #[serde(default)]
    pub insecure: bool,
    /// Worker threads for the trials.
    #[serde(default = "d_threads")]
    pub threads: usize,
    /// Quantize afresh for every message (each transmission draws its own stochastic
    /// rounding; default). With `false`, each agent quantizes once per iteration and the two
    /// directions of an edge reuse the same values, so quantization errors cancel pairwise in
    /// the network average.
    #[serde(default = "d_per_message")]
    pub quantize_per_message: bool,
    /// The undirected communication graph as an edge list `[[a, b], …]` on agents `0..n`
    /// (connected, no self-loops or repeats); the paper's 5-agent graph by default.
    #[serde(default = "d_edges")]
    pub edges: Vec<(usize, usize)>,
}

fn d_edges() -> Vec<(usize, usize)> {
    EDGES.to_vec()
}

fn d_per_message() -> bool {
    true
}

fn d_trials() -> u64 {
    1000
}
fn d_iterations() -> u64 {
    1000
}
fn d_delta() -> f64 {
    0.1
}
fn d_omega() -> f64 {
    0.01
}
fn d_measurements() -> usize {
    50
}
fn d_p() -> usize {
    3
}
fn d_d() -> usize {
    2
}
fn d_lambda0() -> f64 {
    Schedule::default().lambda0
}
fn d_lambda_decay() -> f64 {
    Schedule::default().lambda_decay
}
fn d_zeta_decay() -> f64 {
    Schedule::default().zeta_decay
}
fn d_att_a() -> f64 {
    Schedule::default().attenuation_a
}
fn d_att_b() -> f64 {
    Schedule::default().attenuation_b
}
fn d_eval() -> u64 {
    10
}
fn d_timing() -> u64 {
    5
}
fn d_bits() -> u32 {
    2048
}
fn d_threads() -> usize {
    2
}

/// One trial's problem: measurements, optimum, weights and initial states.
#[derive(Debug)]
pub struct Trial {
    m: Vec<Vec<f64>>,
    z: Vec<Vec<Vec<f64>>>,
    /// The minimizer of `Σ_i f_i`.
    pub x_star: Vec<f64>,
    /// `k_{i→j}`: agent i's private weight integer towards j (`w_{i→j} = k δ`).
    k: Vec<Vec<i64>>,
    x0: Vec<Vec<f64>>,
}

impl Trial {
    /// The coupling matrix `W` of (8), row-major `n × n`: `w_ij = w_{i→j}w_{j→i}` on edges
    /// (`k_{i→j}k_{j→i}δ²`), `w_ii = −Σ_j w_ij`.
    pub fn coupling_matrix(&self, graph: &Graph, delta: f64) -> Vec<f64> {
        let n = graph.len();
        let mut w = vec![0.0; n * n];
        for i in 0..n {
            for &j in graph.neighbours(i) {
                let wij = (self.k[i][j] * self.k[j][i]) as f64 * delta * delta;
                w[i * n + j] = wij;
                w[i * n + i] -= wij;
            }
        }
        w
    }
}

/// One trial's run.
#[derive(Clone, Debug)]
pub struct TrialRun {
    /// `Σ_i ‖x_i − x*‖²` at every evaluation point.
    pub errors: Vec<f64>,
    /// The final states.
    pub x: Vec<Vec<f64>>,
    /// `Σ ‖ξ_i^k‖²` over every agent and iteration, and how many terms: the quantization
    /// error of the exchanges against the exact coupling (zero for the conventional run).
    pub xi_sq_sum: f64,
    /// See `xi_sq_sum`.
    pub xi_terms: u64,
    /// The largest single `‖ξ_i^k‖²`.
    pub xi_sq_max: f64,
}

/// Solves the small dense system `A x = b` by Gaussian elimination with partial pivoting.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for c in 0..n {
        let piv = (c..n)
            .max_by(|&r, &s| a[r][c].abs().total_cmp(&a[s][c].abs()))
            .unwrap_or(c);
        a.swap(c, piv);
        b.swap(c, piv);
        for r in c + 1..n {
            let f = a[r][c] / a[c][c];
            let (top, bottom) = a.split_at_mut(r);
            for (x, y) in bottom[0][c..].iter_mut().zip(&top[c][c..]) {
                *x -= f * y;
            }
            b[r] -= f * b[c];
        }
    }
    let mut x = vec![0.0; n];
    for c in (0..n).rev() {
        x[c] = (b[c] - (c + 1..n).map(|k| a[c][k] * x[k]).sum::<f64>()) / a[c][c];
    }
    x
}

impl PdsgdConfig {
    /// The communication graph.
    pub fn graph(&self) -> Result<Graph> {
        Graph::from_edges(&self.edges).map_err(|e| SimError::Config(format!("method.edges: {e}")))
    }

    /// The problem of trial `t` on `graph`.
    pub fn trial(&self, graph: &Graph, seeds: &SeedTree, t: u64) -> Result<Trial> {
        let agents = graph.len();
        let mut r = seeds.stream("pdsgd/problem", &[t]);
        let (p, d, n) = (self.p, self.d, self.measurements);
        let normal = |r: &mut privopt_math::StreamRng| -> f64 { StandardNormal.sample(r) };
        let x_true: Vec<f64> = (0..d).map(|_| normal(&mut r)).collect();
        let m: Vec<Vec<f64>> = (0..agents)
            .map(|_| (0..p * d).map(|_| normal(&mut r)).collect())
            .collect();
        let z: Vec<Vec<Vec<f64>>> = m
            .iter()
            .map(|mi| {
                (0..n)
                    .map(|_| {
                        (0..p)
                            .map(|a| {
                                (0..d).map(|b| mi[a * d + b] * x_true[b]).sum::<f64>()
                                    + r.random_range(-0.5..0.5)
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        // Σ_i [M_iᵀM_i + ω I] x = Σ_i M_iᵀ z̄_i.
        let mut a = vec![vec![0.0; d]; d];
        let mut b = vec![0.0; d];
        for (mi, zi) in m.iter().zip(&z) {
            let zbar: Vec<f64> = (0..p)
                .map(|k| zi.iter().map(|v| v[k]).sum::<f64>() / n as f64)
                .collect();
            for u in 0..d {
                for v in 0..d {
                    a[u][v] += (0..p).map(|k| mi[k * d + u] * mi[k * d + v]).sum::<f64>();
                }
                a[u][u] += self.omega;
                b[u] += (0..p).map(|k| mi[k * d + u] * zbar[k]).sum::<f64>();
            }
        }
        let x_star = solve(a, b);
        // Weights w_{i→j} = k δ with k uniform in 1..=⌊1/δ⌋, redrawn until every agent's
        // coupling sum Σ_j w_ij is below 1: by Gershgorin the eigenvalues of W then lie in
        // (−2, 0], so I + W is stable and the un-attenuated comparisons can converge (the
        // paper's Assumption 1 asks only for a connected graph, which does not ensure this).
        let kmax = (1.0 / self.delta).floor() as i64;
        let coupling = |k: &[Vec<i64>], i: usize| -> f64 {
            graph
                .neighbours(i)
                .iter()
                .map(|&j| (k[i][j] * k[j][i]) as f64 * self.delta * self.delta)
                .sum()
        };
        let mut draws = 0;
        let k: Vec<Vec<i64>> = loop {
            let k: Vec<Vec<i64>> = (0..agents)
                .map(|_| (0..agents).map(|_| r.random_range(1..=kmax)).collect())
                .collect();
            if (0..agents).all(|i| coupling(&k, i) < 1.0) {
                break k;
            }
            draws += 1;
            if draws == WEIGHT_DRAWS {
                return Err(SimError::Config(format!(
                    "method.delta = {}: no stable weights in {WEIGHT_DRAWS} draws (an agent of \
                     degree {} needs degree·δ² well below 1; lower delta)",
                    self.delta,
                    graph.max_degree()
                )));
            }
        };
        let x0 = (0..agents)
            .map(|_| (0..d).map(|_| normal(&mut r)).collect())
            .collect();
        Ok(Trial {
            m,
            z,
            x_star,
            k,
            x0,
        })
    }

    /// The agents of `trial`, agent i with key pair `keys[i]` and its private weights
    /// `k_{i→j}` towards its neighbours (whose public keys it is given, nothing more).
    pub fn agents<S: Scheme>(
        &self,
        graph: &Graph,
        trial: &Trial,
        keys: Vec<(S::PublicKey, S::SecretKey)>,
    ) -> Result<Vec<Agent<S>>> {
        let mut agents: Vec<Agent<S>> = keys
            .into_iter()
            .enumerate()
            .map(|(i, (pk, sk))| Agent::new(i, pk, sk))
            .collect();
        let announcements: Vec<_> = agents.iter().map(Agent::announcement).collect();
        for (i, agent) in agents.iter_mut().enumerate() {
            for &j in graph.neighbours(i) {
                agent.add_neighbour(announcements[j].clone(), trial.k[i][j])?;
            }
        }
        Ok(agents)
    }

    /// Algorithm 1's attenuation and stepsize schedules.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            lambda0: self.lambda0,
            lambda_decay: self.lambda_decay,
            zeta_decay: self.zeta_decay,
            attenuation_a: self.attenuation_a,
            attenuation_b: self.attenuation_b,
        }
    }

    /// `γ^k` of Algorithm 1 (iterations count from k = 1).
    pub fn attenuation(&self, k: f64) -> f64 {
        self.schedule().attenuation(k)
    }

    /// One stepsize entry at iteration `k ≥ 1` for the private draw `ζ ∈ [0, 1]`.
    pub fn stepsize(&self, k: f64, zeta: f64) -> f64 {
        self.schedule().stepsize(k, zeta)
    }

    /// Theorem 1's conditions (37) on the schedule, Lemma 1 on trial 0's `W`, and the measured
    /// quantization error of the proposed runs (`runs[t][0]`) against the paper's bound.
    fn theorem_checks(
        &self,
        graph: &Graph,
        seeds: &SeedTree,
        runs: &[Vec<TrialRun>],
    ) -> Result<theorem::TheoremReport> {
        let conditions: std::collections::BTreeMap<_, _> =
            theorem::conditions_37(self, self.iterations)
                .into_iter()
                .map(|c| (c.name, c))
                .collect();
        let w = self
            .trial(graph, seeds, 0)?
            .coupling_matrix(graph, self.delta);
        let lemma1 = theorem::lemma1(&w, graph.len(), self, self.iterations)?;
        let proposed = runs.iter().filter_map(|r| r.first());
        let (sum, terms, max) = proposed.fold((0.0, 0u64, 0.0_f64), |(s, n, m), r| {
            (s + r.xi_sq_sum, n + r.xi_terms, m.max(r.xi_sq_max))
        });
        Ok(theorem::TheoremReport {
            conditions_hold: conditions.values().all(|c| c.holds),
            conditions,
            lemma1,
            quantization: theorem::QuantizationCheck {
                bound: theorem::quantization_bound(self, graph.len()),
                mean: if terms > 0 { sum / terms as f64 } else { 0.0 },
                max,
            },
        })
    }

    /// Stochastic gradient of `f_i` at `x` from one uniformly sampled measurement.
    pub fn gradient(&self, trial: &Trial, i: usize, x: &[f64], r: &mut impl Rng) -> Vec<f64> {
        let (p, d) = (self.p, self.d);
        let zj = &trial.z[i][r.random_range(0..self.measurements)];
        let mi = &trial.m[i];
        let resid: Vec<f64> = (0..p)
            .map(|a| (0..d).map(|b| mi[a * d + b] * x[b]).sum::<f64>() - zj[a])
            .collect();
        (0..d)
            .map(|b| {
                2.0 * (0..p).map(|a| mi[a * d + b] * resid[a]).sum::<f64>()
                    + 2.0 * self.omega * x[b]
            })
            .collect()
    }

    /// The stochastic quantizer (4): `⌊x/δ⌋ + Bernoulli(frac)`, in units of δ.
    fn quantize(&self, x: &[f64], r: &mut impl Rng) -> Vec<i64> {
        x.iter()
            .map(|&v| {
                let s = v / self.delta;
                let fl = s.floor();
                fl as i64 + i64::from(r.random::<f64>() < s - fl)
            })
            .collect()
    }

    /// Runs one trial of `variant` with `agents`, its messages carried by `transport`.
    #[allow(clippy::too_many_arguments)]
    pub fn run_trial<S: Scheme>(
        &self,
        graph: &Graph,
        trial: &Trial,
        variant: Variant,
        agents: &mut [Agent<S>],
        transport: &mut Transport<'_>,
        seeds: &SeedTree,
        t: u64,
    ) -> Result<TrialRun> {
        let n = graph.len();
        let d = self.d;
        let w = trial.coupling_matrix(graph, self.delta);
        let (mut xi_sq_sum, mut xi_terms, mut xi_sq_max) = (0.0, 0u64, 0.0_f64);
        let mut x = trial.x0.clone();
        let err = |x: &[Vec<f64>]| -> f64 {
            x.iter()
                .map(|xi| {
                    xi.iter()
                        .zip(&trial.x_star)
                        .map(|(a, b)| (a - b).powi(2))
                        .sum::<f64>()
                })
                .sum()
        };
        let mut errors = vec![err(&x)];
        let schedule = self.schedule();
        for it in 0..self.iterations {
            let k = (it + 1) as f64; // the paper's stepsizes count from k = 1
            let gamma = match variant {
                Variant::Proposed => schedule.attenuation(k),
                Variant::NoAttenuation | Variant::Conventional => 1.0,
            };
            // Once-per-iteration quantization (only used when not quantizing per message).
            let q: Vec<Vec<i64>> = if self.quantize_per_message {
                Vec::new()
            } else {
                (0..n)
                    .map(|i| {
                        self.quantize(&x[i], &mut seeds.stream("pdsgd/quant", &[t, it, i as u64]))
                    })
                    .collect()
            };
            let mut next = x.clone();
            for i in 0..n {
                let mut coupling = vec![0.0; d];
                for &j in graph.neighbours(i) {
                    let term: Vec<f64> = match variant {
                        Variant::Conventional => {
                            let wij = w[i * n + j];
                            x[j].iter().zip(&x[i]).map(|(a, b)| wij * (a - b)).collect()
                        }
                        _ => {
                            let mut enc = seeds.stream("pdsgd/enc", &[t, it, i as u64, j as u64]);
                            let (qi, qj) = if self.quantize_per_message {
                                let mut r =
                                    seeds.stream("pdsgd/quant-msg", &[t, it, i as u64, j as u64]);
                                (self.quantize(&x[i], &mut r), self.quantize(&x[j], &mut r))
                            } else {
                                (q[i].clone(), q[j].clone())
                            };
                            exchange(
                                agents,
                                i,
                                j,
                                it,
                                (&qi, &qj),
                                self.delta,
                                transport,
                                &mut enc,
                            )?
                        }
                    };
                    for (c, v) in coupling.iter_mut().zip(term) {
                        *c += v;
                    }
                }
                // ξ_i^k: the exchanged coupling against the exact one, Σ_j w_ij (x_j − x_i).
                let xi_sq: f64 = (0..d)
                    .map(|l| {
                        let exact: f64 = graph
                            .neighbours(i)
                            .iter()
                            .map(|&j| w[i * n + j] * (x[j][l] - x[i][l]))
                            .sum();
                        (coupling[l] - exact).powi(2)
                    })
                    .sum();
                xi_sq_sum += xi_sq;
                xi_terms += 1;
                xi_sq_max = xi_sq_max.max(xi_sq);
                let mut r = seeds.stream("pdsgd/sample", &[t, it, i as u64]);
                let g = self.gradient(trial, i, &x[i], &mut r);
                for l in 0..d {
                    let step = match variant {
                        // α^k of (6): the stepsizes' deterministic part.
                        Variant::Conventional => schedule.stepsize(k, 0.0),
                        _ => schedule.stepsize(k, r.random::<f64>()),
                    };
                    next[i][l] = x[i][l] + gamma * coupling[l] - step * g[l];
                }
            }
            x = next;
            if (it + 1) % self.eval_every == 0 || it + 1 == self.iterations {
                errors.push(err(&x));
            }
        }
        Ok(TrialRun {
            errors,
            x,
            xi_sq_sum,
            xi_terms,
            xi_sq_max,
        })
    }
}

impl Method for PdsgdConfig {
    fn validate(&self) -> Result<()> {
        ensure_count("method.trials", self.trials, MAX_TRIALS)?;
        ensure_count("method.iterations", self.iterations, MAX_STEPS)?;
        // Below 2^-40 the quantized states (x/δ as i64) overflow for |x| of a few thousand.
        ensure((MIN_DELTA..=1.0).contains(&self.delta), || {
            format!("method.delta must be in [2^-40, 1], got {}", self.delta)
        })?;
        ensure(self.omega >= 0.0 && self.omega.is_finite(), || {
            format!("method.omega must be finite and >= 0, got {}", self.omega)
        })?;
        self.schedule().check().map_err(method_param)?;
        for (key, v) in [
            ("measurements", self.measurements),
            ("p", self.p),
            ("d", self.d),
        ] {
            ensure_count(&format!("method.{key}"), v as u64, MAX_ELEMENTS)?;
        }
        let agents = self.graph()?.len() as u64;
        let (n, p, d) = (self.measurements as u64, self.p as u64, self.d as u64);
        ensure_elements("method.p × d over all agents", &[agents, p, d])?;
        ensure_elements("method.measurements × p over all agents", &[agents, n, p])?;
        ensure(self.eval_every >= 1, || {
            "method.eval_every must be >= 1".into()
        })?;
        ensure(matches!(self.paillier_bits, 1024 | 2048 | 3072), || {
            "method.paillier_bits must be 1024, 2048 or 3072".into()
        })?;
        ensure(self.eavesdropper_iterations <= 1000, || {
            format!(
                "method.eavesdropper_iterations must be at most 1000, got {}",
                self.eavesdropper_iterations
            )
        })?;
        ensure(self.paillier_bits >= 2048 || self.insecure, || {
            format!(
                "method.paillier_bits = {} is below the 2048-bit minimum; set method.insecure = \
                 true to use it anyway (tests only)",
                self.paillier_bits
            )
        })
    }

    fn uses_data(&self) -> bool {
        false
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Trained> {
        let seeds = ctx.seeds;
        let graph = self.graph()?;
        let key = TransparentKey {
            ciphertext_bytes: (2 * self.paillier_bits as usize).div_ceil(8),
        };
        let transparent_run = |cfg: &PdsgdConfig, trial: &Trial, variant, t| {
            let keys = vec![(key, ()); graph.len()];
            let mut agents = cfg.agents::<Transparent>(&graph, trial, keys)?;
            cfg.run_trial(
                &graph,
                trial,
                variant,
                &mut agents,
                &mut Transport::InMemory,
                &seeds,
                t,
            )
        };
        let variants = [
            ("proposed", Variant::Proposed),
            ("no_attenuation", Variant::NoAttenuation),
            ("conventional", Variant::Conventional),
        ];
        // Trials in parallel; each trial's numbers depend only on its index.
        let results = parallel_map(
            self.trials as usize,
            self.threads,
            "pdsgd trials",
            ctx.progress,
            |t| {
                let t = t as u64;
                let trial = self.trial(&graph, &seeds, t)?;
                variants
                    .iter()
                    .map(|(_, v)| transparent_run(self, &trial, *v, t))
                    .collect::<Result<Vec<TrialRun>>>()
            },
        )?;
        let theorem = self.theorem_checks(&graph, &seeds, &results)?;
        let results: Vec<Vec<Vec<f64>>> = results
            .into_iter()
            .map(|runs| runs.into_iter().map(|r| r.errors).collect())
            .collect();
        let points = results.first().map(|c| c[0].len()).unwrap_or(0);
        let mut means = vec![vec![0.0; points]; variants.len()];
        let mut vars = vec![vec![0.0; points]; variants.len()];
        for (vi, (mean, var)) in means.iter_mut().zip(vars.iter_mut()).enumerate() {
            for p in 0..points {
                let xs: Vec<f64> = results.iter().map(|c| c[vi][p]).collect();
                (mean[p], var[p]) = mean_variance(&xs);
            }
        }
        for p in 0..points {
            let it = (p as u64 * self.eval_every).min(self.iterations) as f64;
            let mut row: Vec<(String, f64)> = vec![("round".into(), it)];
            for (vi, (name, _)) in variants.iter().enumerate() {
                row.push((
                    format!("fig3_log10_mse/{name}"),
                    means[vi][p].max(1e-300).log10(),
                ));
                row.push((format!("mse/{name}"), means[vi][p]));
                row.push((format!("mse_variance/{name}"), vars[vi][p]));
            }
            // Remark 2's curious neighbour: the midpoint estimator's error at this iteration.
            let recovery = privacy::gradient_recovery(self, (it as u64).max(1));
            row.push((
                "gradient_recovery_error/worst".into(),
                recovery.worst_relative_error,
            ));
            row.push((
                "gradient_recovery_error/mean".into(),
                recovery.mean_relative_error,
            ));
            let row_ref: Vec<(&str, f64)> = row.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            ctx.record(&row_ref)?;
        }
        let last = |curves: &[Vec<f64>]| {
            let at = |vi: usize| curves[vi].last().copied().unwrap_or(f64::NAN);
            PerVariant {
                proposed: at(0),
                no_attenuation: at(1),
                conventional: at(2),
            }
        };
        // Per iteration each directed edge carries 2d ciphertexts (request and response).
        let mut report = PdsgdReport {
            final_mse: last(&means),
            final_mse_variance: last(&vars),
            ciphertext_bytes_per_iteration: (2
                * graph.edges().len()
                * 2
                * self.d
                * key.ciphertext_bytes) as u64,
            paillier: None,
            eavesdropper: None,
            theorem: Box::new(theorem),
            gradient_recovery: privacy::recovery_table(self),
        };
        // Every agent its own key pair, from a seeded stream (the same keys on every call).
        let make_keys = || -> Result<Vec<(privopt_paillier::PublicKey, KeyPair)>> {
            let mut krng = seeds.stream("pdsgd/keys", &[]);
            (0..graph.len())
                .map(|_| {
                    // Validation let 1024 bits through only with `insecure`.
                    let kp = KeyPair::generate_insecure_for_testing(self.paillier_bits, &mut krng)
                        .map_err(privopt_protocols::ProtocolError::from)?;
                    Ok((kp.public.clone(), kp))
                })
                .collect()
        };
        if self.eavesdropper_iterations > 0 {
            report.eavesdropper = Some(Box::new(privacy::eavesdropper(
                self,
                &graph,
                &seeds,
                self.eavesdropper_iterations,
                &make_keys,
            )?));
        }
        // Real Paillier: every agent with its own key, every message through its bytes, one
        // thread; it must match the transparent run bit for bit.
        if self.paillier_timing_iterations > 0 {
            let timed = PdsgdConfig {
                iterations: self.paillier_timing_iterations,
                eval_every: self.paillier_timing_iterations,
                ..self.clone()
            };
            let start = Instant::now();
            let keys = make_keys()?;
            let keygen = start.elapsed().as_secs_f64();
            let trial = timed.trial(&graph, &seeds, 0)?;
            let mut agents = timed.agents::<Paillier>(&graph, &trial, keys)?;
            let start = Instant::now();
            let TrialRun { x, errors, .. } = timed.run_trial(
                &graph,
                &trial,
                Variant::Proposed,
                &mut agents,
                &mut Transport::Bytes,
                &seeds,
                0,
            )?;
            let per_iter = start.elapsed().as_secs_f64() / self.paillier_timing_iterations as f64;
            if x != transparent_run(&timed, &trial, Variant::Proposed, 0)?.x {
                return Err(SimError::Mismatch(
                    "the real-Paillier run left the transparent run's trajectory",
                ));
            }
            report.paillier = Some(PaillierTiming {
                bits: self.paillier_bits,
                agents: graph.len(),
                iterations: self.paillier_timing_iterations,
                seconds_per_iteration: per_iter,
                keygen_seconds: keygen,
                final_error: errors.last().copied().unwrap_or(f64::NAN),
            });
        }
        Ok(Trained {
            params: Vec::new(),
            report: Report::Pdsgd(report),
        })
    }
}

/// What a pdsgd run reports beyond its metrics rows (Fig. 3's curves).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PdsgdReport {
    /// Mean over trials of the final mean squared error to the optimum.
    pub final_mse: PerVariant,
    /// Its variance over trials.
    pub final_mse_variance: PerVariant,
    /// Ciphertext bytes on all edges per iteration (2d per directed edge).
    pub ciphertext_bytes_per_iteration: u64,
    /// The real-Paillier run, when `paillier_timing_iterations > 0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paillier: Option<PaillierTiming>,
    /// Theorem 2's eavesdropper experiment, when `eavesdropper_iterations > 0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eavesdropper: Option<Box<privacy::EavesdropperReport>>,
    /// Theorem 1's conditions, Lemma 1 and the quantization bound on this run.
    pub theorem: Box<theorem::TheoremReport>,
    /// Remark 2 quantified: the midpoint estimator's relative error on a gradient entry from
    /// the revealed product `Λg`, by iteration.
    pub gradient_recovery: std::collections::BTreeMap<String, privacy::GradientRecovery>,
}

/// One number for each of Fig. 3's variants.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PerVariant {
    /// Random heterogeneous stepsizes with attenuation (the paper's algorithm).
    pub proposed: f64,
    /// Without the attenuation sequence.
    pub no_attenuation: f64,
    /// Eq. (6): exact states, no quantization or encryption, stepsize α^k.
    pub conventional: f64,
}

/// Timing of the run with real Paillier (every agent its own key, every message as bytes).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PaillierTiming {
    /// Modulus bits.
    pub bits: u32,
    /// Agents (one key pair each).
    pub agents: usize,
    /// Iterations run with real Paillier.
    pub iterations: u64,
    /// Wall seconds per iteration on one thread.
    pub seconds_per_iteration: f64,
    /// Wall seconds to generate every agent's key pair.
    pub keygen_seconds: f64,
    /// `Σ_i ‖x_i − x*‖²` after the last iteration (equal to the transparent run's: checked).
    pub final_error: f64,
}

/// How a run carries the messages of the pairwise exchange.
pub enum Transport<'a> {
    /// Typed messages handed over in memory.
    InMemory,
    /// Each message encoded by its sender and decoded by its receiver, as across processes.
    Bytes,
    /// As `Bytes`, and every encoded message (every edge, both directions) also handed to an
    /// eavesdropper's tap: the view of Definition 1's external attacker.
    Tapped(&'a mut dyn FnMut(&[u8])),
}

impl Transport<'_> {
    fn encodes(&self) -> bool {
        !matches!(self, Transport::InMemory)
    }

    fn tap(&mut self, bytes: &[u8]) {
        if let Transport::Tapped(tap) = self {
            tap(bytes);
        }
    }
}

/// One pairwise exchange on edge (i, j) in `iteration`: i initiates with its quantized state
/// `q.0`, j responds with `q.1`, i finishes; returns `w̃_{i→j} w̃_{j→i}(x̃_j − x̃_i)`. With
/// `transport` carries each message.
#[allow(clippy::too_many_arguments)]
fn exchange<S: Scheme>(
    agents: &mut [Agent<S>],
    i: usize,
    j: usize,
    iteration: u64,
    q: (&[i64], &[i64]),
    delta: f64,
    transport: &mut Transport<'_>,
    rng: &mut privopt_math::StreamRng,
) -> Result<Vec<f64>> {
    let mut request = agents[i].initiate(j, iteration, q.0, rng)?;
    if transport.encodes() {
        let bytes = agents[i].encode_request(&request);
        transport.tap(&bytes);
        request = agents[j]
            .decode_request(&bytes)
            .map_err(privopt_protocols::ProtocolError::from)?;
    }
    let mut response = agents[j].respond(&request, q.1, rng)?;
    if transport.encodes() {
        let bytes = agents[j].encode_response(&response)?;
        transport.tap(&bytes);
        response = agents[i]
            .decode_response(&bytes)
            .map_err(privopt_protocols::ProtocolError::from)?;
    }
    Ok(agents[i].finish(&response, delta)?)
}
