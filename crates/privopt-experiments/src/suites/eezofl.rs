//! The EEZOFL reproduction (paper §VI): Table III, Fig. 2 and 3, Table II, and the audits,
//! as one method whose summary carries every figure and whose metrics carry the curves.

use std::time::Instant;

use privopt_channel::fading::Fading;
use privopt_math::SeedTree;
use privopt_ml::data::Dataset;
use serde::{Deserialize, Serialize};

use privopt_sim::context::{RunContext, parallel_map};
use privopt_sim::error::{Result, ensure};
use privopt_sim::methods::eezofl::aggregate::{
    ModularHeOta, Precoder, Recorded, ScalarAggregation,
};
use privopt_sim::methods::eezofl::{Aggregation, EezoflConfig, audit, paper_params, theorem};

use super::{Suite, SuiteReport, validate_base};
use privopt_data::problem::Problem;
use privopt_sim::metrics::Summary;
use privopt_sim::metrics::mean_variance;

/// `[suite] name = "eezofl"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EezoflSuiteConfig {
    /// Settings shared by every run (`[suite.base]`; aggregation and channel σ are varied).
    pub base: EezoflConfig,
    /// Seeds of the repeated runs (mean ± std over them).
    pub seeds: Vec<u64>,
    /// Channel standard deviations σ (μ = base channel mean).
    pub sigmas: Vec<f64>,
    /// HE ring degrees to compare.
    pub he_sets: Vec<usize>,
    /// Ring degree of the CSI baselines (Fig. 3: q ≈ 2^109).
    #[serde(default = "default_csi_n")]
    pub csi_he_n: usize,
    /// Precoder weight caps of the CSI baselines (`inf`: none, as in the paper); the base's
    /// cap keeps the plain labels (`zf_sigma1`), others are labelled (`zf_nocap_sigma1`,
    /// `zf_cap10_sigma1`).
    #[serde(default = "default_caps")]
    pub csi_weight_caps: Vec<f64>,
    /// Rounds of the decoded-noise audit per HE set.
    #[serde(default = "default_noise_rounds")]
    pub noise_audit_rounds: u64,
    /// Rounds of the modular-model audit.
    #[serde(default = "default_modular_rounds")]
    pub modular_audit_rounds: u64,
    /// Loss is recorded every this many rounds.
    #[serde(default = "default_eval")]
    pub eval_every: u64,
    /// Worker threads (runs are independent; results do not depend on this).
    #[serde(default = "default_threads")]
    pub threads: usize,
    /// A run whose test accuracy ends below this has collapsed (counted per label).
    #[serde(default = "default_collapse")]
    pub collapse_below: f64,
}

fn default_collapse() -> f64 {
    0.6
}

fn default_caps() -> Vec<f64> {
    vec![privopt_sim::methods::eezofl::aggregate::DEFAULT_PRECODER_WEIGHT_CAP]
}

fn default_csi_n() -> usize {
    4096
}
fn default_noise_rounds() -> u64 {
    10
}
fn default_modular_rounds() -> u64 {
    2
}
fn default_eval() -> u64 {
    10
}
fn default_threads() -> usize {
    2
}

/// Which runs a result groups (over seeds): one aggregation at one channel σ, the key of a
/// Table III cell or a figure's curve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "aggregation", rename_all = "snake_case")]
pub enum GroupKey {
    /// Homomorphic over-the-air aggregation with CKKS ring degree `n`.
    He {
        /// Ring degree.
        n: usize,
        /// Channel σ.
        sigma: f64,
    },
    /// Over the air without encryption.
    NoEncryption {
        /// Channel σ.
        sigma: f64,
    },
    /// A channel-state baseline (Fig. 3).
    Csi {
        /// The baseline.
        baseline: CsiBaseline,
        /// Its weight cap, when it is not the base config's (`inf`: uncapped).
        cap: Option<f64>,
        /// Channel σ.
        sigma: f64,
    },
    /// Digital multi-key CKKS aggregation (no channel noise).
    Digital,
}

/// A channel-state baseline of Fig. 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CsiBaseline {
    /// Zero-forcing precoding.
    Zf,
    /// MMSE precoding.
    Mmse,
}

impl CsiBaseline {
    fn aggregation(self) -> Aggregation {
        match self {
            CsiBaseline::Zf => Aggregation::CsiZf,
            CsiBaseline::Mmse => Aggregation::CsiMmse,
        }
    }

    fn name(self) -> &'static str {
        match self {
            CsiBaseline::Zf => "zf",
            CsiBaseline::Mmse => "mmse",
        }
    }
}

impl GroupKey {
    /// The key's name in summaries and plots: `he4096_sigma1`, `noenc_sigma10`, `zf_sigma1`,
    /// `mmse_nocap_sigma1`, `digital`.
    pub fn label(&self) -> String {
        let sig = |s: f64| format!("sigma{s}");
        match *self {
            GroupKey::He { n, sigma } => format!("he{n}_{}", sig(sigma)),
            GroupKey::NoEncryption { sigma } => format!("noenc_{}", sig(sigma)),
            GroupKey::Csi {
                baseline,
                cap,
                sigma,
            } => {
                let name = baseline.name();
                let tag = match cap {
                    None => String::new(),
                    Some(c) if c.is_infinite() => "nocap_".into(),
                    Some(c) => format!("cap{c}_"),
                };
                format!("{name}_{tag}{}", sig(sigma))
            }
            GroupKey::Digital => "digital".into(),
        }
    }

    /// The figure its loss curve belongs to.
    fn figure(&self) -> &'static str {
        match self {
            GroupKey::Csi { .. } => "fig3",
            GroupKey::Digital => "digital",
            GroupKey::He { .. } | GroupKey::NoEncryption { .. } => "fig2",
        }
    }
}

/// One training run of the suite.
#[derive(Clone, Debug)]
struct Job {
    key: GroupKey,
    cfg: EezoflConfig,
    seed: u64,
}

/// What a run produced.
#[derive(Clone, Debug, Default)]
struct Trace {
    losses: Vec<f64>,
    accuracy: f64,
    /// `‖∇F(θ_K)‖²` of `F = Σ_i F_i` at the final model (Theorem 2's quantity).
    grad_norm_sq: f64,
}

fn run_job(problem: &Problem, job: &Job, eval_every: u64) -> Result<Trace> {
    let seeds = SeedTree::new(job.seed);
    let mut agg = job.cfg.aggregation(problem.clients.len(), &seeds)?;
    let mut theta = vec![0.0; problem.model.num_params()];
    let mut losses = vec![problem.model.loss(&theta, &problem.train, None)];
    for k in 0..job.cfg.rounds {
        job.cfg
            .round(problem, &seeds, k, &mut theta, agg.as_mut(), false)?;
        if (k + 1) % eval_every == 0 || k + 1 == job.cfg.rounds {
            losses.push(problem.model.loss(&theta, &problem.train, None));
        }
    }
    let accuracy = problem
        .model
        .accuracy(&theta, &problem.test)
        .unwrap_or(f64::NAN);
    // F = Σ_i F_i over equal shares of the training set: N times the mean loss.
    let mut grad = vec![0.0; theta.len()];
    problem
        .model
        .loss_grad(&theta, &problem.train, None, &mut grad);
    let n = problem.clients.len() as f64;
    let grad_norm_sq = n * n * grad.iter().map(|g| g * g).sum::<f64>();
    Ok(Trace {
        losses,
        accuracy,
        grad_norm_sq,
    })
}

/// The largest `‖x̃‖` over the examples (x̃ = (x, 1)): the Lipschitz constant of the logistic
/// loss of any batch of them.
fn max_row_norm(data: &Dataset) -> f64 {
    (0..data.len())
        .map(|i| (1.0 + data.row(i).iter().map(|x| x * x).sum::<f64>()).sqrt())
        .fold(0.0, f64::max)
}

/// Sample mean and standard deviation.
fn mean_std(xs: &[f64]) -> (f64, f64) {
    let (m, v) = mean_variance(xs);
    (m, v.sqrt())
}

/// Largest eigenvalue of `E[x̃ x̃ᵀ]` (x̃ = (x, 1)) by power iteration: `L_i` of the mean logistic
/// loss is a quarter of it.
fn second_moment_top_eigenvalue(data: &Dataset) -> f64 {
    let d = data.n_features() + 1;
    let mut v = vec![1.0 / (d as f64).sqrt(); d];
    let mut lambda = 0.0;
    for _ in 0..100 {
        let mut w = vec![0.0; d];
        for i in 0..data.len() {
            let row = data.row(i);
            let dot: f64 = row.iter().zip(&v).map(|(a, b)| a * b).sum::<f64>() + v[d - 1];
            for (wj, xj) in w.iter_mut().zip(row) {
                *wj += dot * xj;
            }
            w[d - 1] += dot;
        }
        let norm = w.iter().map(|x| x * x).sum::<f64>().sqrt();
        lambda = norm / data.len() as f64;
        v = w.iter().map(|x| x / norm.max(f64::MIN_POSITIVE)).collect();
    }
    lambda
}

impl EezoflSuiteConfig {
    fn variant(&self, aggregation: Aggregation, he_n: usize, sigma: f64) -> EezoflConfig {
        let mu = self.base.channel.mean();
        EezoflConfig {
            aggregation,
            he_n,
            channel: Fading::Gaussian { mu, sigma },
            ..self.base.clone()
        }
    }
}

impl EezoflSuiteConfig {
    /// Theorems 1–2 with the constants estimated from the data: `L` the smoothness above,
    /// `b = λ/4` (each device's data is a random share of the same set), the Lipschitz
    /// constant `max ‖x̃‖`, `Δ̂ ≤ F(0) = N ln 2` (the logistic loss is ≥ 0), `b₁ = 1`,
    /// `b₂² = d` (Rademacher or sphere Φ; unbounded for Gaussian Φ), σ̄_ε² measured at the
    /// first HE set, channels at the first σ.
    fn theorem_report(
        &self,
        p: &Problem,
        smoothness: f64,
        lambda: f64,
        audits: &[HeSetAudit],
    ) -> TheoremReport {
        let base = &self.base;
        let n = p.clients.len() as f64;
        let d = p.model.num_params() as f64;
        let mu = base.channel.mean();
        let sigma = self.sigmas.first().copied().unwrap_or(0.0);
        let omega = mu * mu + sigma * sigma;
        let b2_sq = match base.perturbation {
            privopt_ml::zo::Direction::Gaussian => f64::INFINITY,
            _ => d,
        };
        let constants = theorem::Constants {
            smoothness,
            lipschitz: max_row_norm(&p.train),
            hessian_bound: lambda / 4.0,
            b1: 1.0,
            b2_sq,
            devices: n,
            sum_omega_over_mu2: n * omega / (mu * mu),
            delta_hat: n * std::f64::consts::LN_2,
            decoded_var: audits.first().map_or(0.0, |a| a.noise_privopt.measured),
        };
        TheoremReport {
            conditions: theorem::step_conditions(base.eta_decay, base.gamma_decay),
            theorem2: theorem::theorem2(
                &constants,
                base.eta0,
                base.gamma0,
                base.rounds,
                &[1.0, 0.1, 0.01],
                0.5,
            ),
            constants,
        }
    }

    /// §IV-F: colluders over the first seed's training rounds (HE-OTA at the first HE set, each
    /// σ; digital), and the channel layer at the first σ.
    fn privacy_audit(&self, p: &Problem) -> Result<PrivacyAudit> {
        let n = self.he_sets[0];
        let seeds = SeedTree::new(self.seeds[0]);
        let record = |cfg: &EezoflConfig| -> Result<audit::CollusionReport> {
            let mut agg = cfg.aggregation(p.clients.len(), &seeds)?;
            let mut rec = Recorded {
                inner: agg.as_mut(),
                rounds: Vec::new(),
            };
            let mut theta = vec![0.0; p.model.num_params()];
            for k in 0..COLLUSION_ROUNDS.min(cfg.rounds) {
                cfg.round(p, &seeds, k, &mut theta, &mut rec, false)?;
            }
            let laws = vec![cfg.channel; p.clients.len()];
            Ok(audit::collusion(&rec.rounds, &laws, &seeds))
        };
        let collusion = self
            .sigmas
            .iter()
            .map(|&sigma| Ok((sigma, record(&self.variant(Aggregation::HeOta, n, sigma))?)))
            .collect::<Result<Vec<_>>>()?;
        let collusion_digital = record(&self.variant(Aggregation::Digital, n, 0.0))?;
        let cfg = self.variant(Aggregation::HeOta, n, self.sigmas[0]);
        let params = paper_params(n, cfg.smudging_log2, cfg.insecure)?;
        let ota = cfg.exact_ota(params, p.clients.len(), seeds, Precoder::None)?;
        let channel_layer =
            audit::channel_layer(&ota, 2 * p.clients.len() as u64, cfg.channel.mean(), 3.2)?;
        Ok(PrivacyAudit {
            collusion,
            collusion_digital,
            channel_layer,
        })
    }

    /// `noise_audit_rounds` rounds of the exact protocol with share noise `2^smudging_log2`:
    /// the mean per-coefficient decoded noise variance, each round's largest `|ε̂_j/Λ|`, and
    /// the largest `|M_k|` (the message the modulus must also hold).
    fn noise_audit(
        &self,
        p: &Problem,
        cfg: &EezoflConfig,
        smudging_log2: f64,
    ) -> Result<(f64, Vec<f64>, f64)> {
        let params = paper_params(cfg.he_n, smudging_log2, cfg.insecure)?;
        let seeds = SeedTree::new(self.seeds[0]);
        let mut ota = cfg.exact_ota(params, p.clients.len(), seeds, Precoder::None)?;
        let mut theta = vec![0.0; p.model.num_params()];
        let (mut measured, mut max_abs, mut message) = (Vec::new(), Vec::new(), 0.0f64);
        for k in 0..self.noise_audit_rounds {
            let out = cfg.round(p, &seeds, k, &mut theta, &mut ota, true)?;
            measured.extend(out.noise_var);
            max_abs.extend(out.noise_max_abs);
            message = message.max(out.ideal.abs());
        }
        Ok((mean_std(&measured).0, max_abs, message))
    }
}

/// Prop. 1's correctness bound `1 − 4B_ε²/q²` against the audited rounds, in message units
/// (divided by Λ): `n_sigma2 = n·σ̄_ε²` is `B_ε²/Λ²` (eq. (20)), `q_over_scale` the real q/Λ.
fn prop1_stress(n_sigma2: f64, q_over_scale: f64, max_abs: &[f64], message: f64) -> Prop1Stress {
    // The modulus at which the bound reads p: 4B²/q² = p.
    let q_at = |p: f64| 2.0 * (n_sigma2 / p).sqrt();
    let failures = |q: f64| {
        max_abs.iter().filter(|&&m| 2.0 * m >= q).count() as f64 / max_abs.len().max(1) as f64
    };
    let worst = max_abs.iter().copied().fold(0.0, f64::max);
    Prop1Stress {
        bound_at_q: 4.0 * n_sigma2 / (q_over_scale * q_over_scale),
        log2_q_over_scale_bound_1pct: q_at(0.01).log2(),
        failures_at_bound_1pct: failures(q_at(0.01)),
        failures_at_bound_1: failures(q_at(1.0)),
        log2_q_over_scale_no_failure: (2.0 * worst).log2(),
        log2_q_over_scale_message: (2.0 * message).log2(),
    }
}

impl Suite for EezoflSuiteConfig {
    fn validate(&self) -> Result<()> {
        validate_base(&self.base)?;
        ensure(!self.seeds.is_empty(), || {
            "suite.seeds must not be empty".into()
        })?;
        ensure(
            !self.sigmas.is_empty() && self.sigmas.iter().all(|s| *s >= 0.0),
            || "suite.sigmas must be non-empty and >= 0".into(),
        )?;
        ensure(
            !self.he_sets.is_empty() && self.he_sets.iter().all(|n| matches!(n, 4096 | 8192)),
            || "suite.he_sets must list 4096 and/or 8192".into(),
        )?;
        ensure(matches!(self.csi_he_n, 4096 | 8192), || {
            "suite.csi_he_n must be 4096 or 8192".into()
        })?;
        ensure(self.eval_every >= 1, || {
            "suite.eval_every must be >= 1".into()
        })?;
        ensure(
            !self.csi_weight_caps.is_empty() && self.csi_weight_caps.iter().all(|&c| c >= 1.0),
            || "suite.csi_weight_caps must be non-empty and >= 1 (inf: no cap)".into(),
        )?;
        ensure((0.0..=1.0).contains(&self.collapse_below), || {
            "suite.collapse_below must be in [0, 1]".into()
        })?;
        ensure(matches!(self.base.channel, Fading::Gaussian { .. }), || {
            "suite.base.channel must be gaussian (sigma is varied)".into()
        })
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<SuiteReport> {
        let p = ctx.problem()?;
        // Table III / Fig. 2: HE sets and no encryption; Fig. 3: CSI baselines; (c) digital.
        let mut jobs = Vec::new();
        for &sigma in &self.sigmas {
            for &n in &self.he_sets {
                for &seed in &self.seeds {
                    jobs.push(Job {
                        key: GroupKey::He { n, sigma },
                        cfg: self.variant(Aggregation::HeOta, n, sigma),
                        seed,
                    });
                }
            }
            for &seed in &self.seeds {
                jobs.push(Job {
                    key: GroupKey::NoEncryption { sigma },
                    cfg: self.variant(Aggregation::Plain, 4096, sigma),
                    seed,
                });
            }
            for baseline in [CsiBaseline::Zf, CsiBaseline::Mmse] {
                for &cap in &self.csi_weight_caps {
                    jobs.push(Job {
                        key: GroupKey::Csi {
                            baseline,
                            cap: (cap != self.base.precoder_weight_cap).then_some(cap),
                            sigma,
                        },
                        cfg: EezoflConfig {
                            precoder_weight_cap: cap,
                            ..self.variant(baseline.aggregation(), self.csi_he_n, sigma)
                        },
                        seed: self.seeds[0],
                    });
                }
            }
        }
        for &seed in &self.seeds {
            jobs.push(Job {
                key: GroupKey::Digital,
                cfg: self.variant(Aggregation::Digital, self.he_sets[0], 0.0),
                seed,
            });
        }
        let started = Instant::now();
        let traces = parallel_map(jobs.len(), self.threads, "eezofl runs", ctx.progress, |i| {
            run_job(p, &jobs[i], self.eval_every)
        })?;
        let training_runs_seconds = started.elapsed().as_secs_f64();

        // Group by key: mean accuracy over seeds and the mean loss curve.
        let mut keys: Vec<GroupKey> = jobs.iter().map(|j| j.key).collect();
        keys.dedup();
        let mut curves: Vec<(String, Vec<f64>)> = Vec::new();
        let mut groups = Vec::new();
        for key in keys {
            let group: Vec<&Trace> = jobs
                .iter()
                .zip(&traces)
                .filter(|(j, _)| j.key == key)
                .map(|(_, t)| t)
                .collect();
            let accs: Vec<f64> = group.iter().map(|t| t.accuracy).collect();
            let by_seed = jobs
                .iter()
                .zip(&traces)
                .filter(|(j, _)| j.key == key)
                .map(|(j, t)| (j.seed, t.accuracy))
                .collect();
            let (mean, std) = mean_std(&accs);
            let len = group[0].losses.len();
            let curve: Vec<f64> = (0..len)
                .map(|r| group.iter().map(|t| t.losses[r]).sum::<f64>() / group.len() as f64)
                .collect();
            let collapsed = accs.iter().filter(|&&a| a < self.collapse_below).count();
            groups.push(RunGroup {
                key,
                accuracy_by_seed: by_seed,
                accuracy_mean: mean,
                accuracy_std: std,
                collapsed_fraction: collapsed as f64 / accs.len() as f64,
                grad_norm_sq_mean: group.iter().map(|t| t.grad_norm_sq).sum::<f64>()
                    / group.len() as f64,
                final_loss: curve.last().copied(),
            });
            curves.push((format!("{}/{}", key.figure(), key.label()), curve));
        }
        let rows = curves.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
        for r in 0..rows {
            let round = (r as u64 * self.eval_every).min(self.base.rounds) as f64;
            let mut row: Vec<(&str, f64)> = vec![("round", round)];
            for (name, c) in &curves {
                // Fig. 3 losses span many orders of magnitude: plot log10.
                let v = c.get(r).copied().unwrap_or(f64::NAN);
                row.push((
                    name.as_str(),
                    if name.starts_with("fig3") {
                        v.max(1e-300).log10()
                    } else {
                        v
                    },
                ));
            }
            ctx.record(&row)?;
        }

        // Audits and Table II, per HE set, at the first σ.
        let laws_for = |sigma: f64| {
            vec![
                Fading::Gaussian {
                    mu: self.base.channel.mean(),
                    sigma
                };
                p.clients.len()
            ]
        };
        let lambda = second_moment_top_eigenvalue(&p.train);
        let smoothness = p.clients.len() as f64 * 0.25 * lambda;
        let sigma_e = 3.2f64;
        let mut audits = Vec::new();
        for &n in &self.he_sets {
            let cfg = self.variant(Aggregation::HeOta, n, self.sigmas[0]);
            let params = paper_params(n, cfg.smudging_log2, cfg.insecure)?;
            let laws = laws_for(self.sigmas[0]);
            let d = p.model.num_params() as f64;
            // Decoded noise: privopt's smudging, then the paper's modelling (σ_φ = σ_e).
            // The paper's model (σ* = σ_e) is below privopt's smudging policy: it is measured
            // here, never run.
            let audited = EezoflConfig {
                insecure: true,
                ..cfg.clone()
            };
            let q_over_scale =
                2f64.powf(params.basis().log_modulus() - f64::from(params.scale_log2()));
            let noise = |smudging_log2: f64| -> Result<NoiseAuditRow> {
                let (measured, max_abs, message) = self.noise_audit(p, &audited, smudging_log2)?;
                let predicted = audited.predicted_noise_variance(p.clients.len(), smudging_log2)?;
                let omega2 = laws[0].second_moment().powi(2);
                Ok(NoiseAuditRow {
                    measured,
                    predicted,
                    predicted_per_omega2: predicted / omega2,
                    rho: audit::noise_floor(smoothness, 1.0, d, measured, cfg.eta0, cfg.gamma0),
                    prop1: prop1_stress(n as f64 * predicted, q_over_scale, &max_abs, message),
                })
            };
            let noise_privopt = noise(cfg.smudging_log2)?;
            let noise_paper = noise(sigma_e.log2())?;
            // Table II.
            let log_q = params.basis().log_modulus().ceil();
            // A digital xMK-CKKS round (10 encryptions, sum, 10 shares, fusion): the crypto
            // alone, messages in memory.
            let seeds = SeedTree::new(self.seeds[0]);
            let mut digital = privopt_sim::methods::eezofl::aggregate::DigitalHe::new(
                params.clone(),
                p.clients.len() as u32,
                seeds,
                false,
                privopt_sim::methods::eezofl::aggregate::DigitalKey::Everyone,
            )?;
            let t = Instant::now();
            let reps = 20;
            for k in 0..reps {
                digital.round(k, &vec![0.01; p.clients.len()], false)?;
            }
            let digital_round_ms = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
            // Audit (a): the modular model with real-valued gains.
            let exact = cfg.exact_ota(params.clone(), p.clients.len(), seeds, Precoder::None)?;
            let mut modular = ModularHeOta::new(exact);
            let mut errors = Vec::new();
            for k in 0..self.modular_audit_rounds {
                let out = modular.round(k, &vec![0.01; p.clients.len()], false)?;
                errors.push((out.value - out.ideal).abs());
            }
            audits.push(HeSetAudit {
                n,
                noise_privopt,
                noise_paper,
                uplink_bits_per_device: 4.0 * n as f64 * log_q,
                ciphertext_bytes_packed: 2.0 * n as f64 * log_q / 8.0,
                ciphertext_bytes_wire: (2 * n * params.basis().moduli().len() * 8) as f64,
                digital_round_ms,
                modular_model_decrypt_error: mean_std(&errors).0,
                q_over_scale,
            });
        }
        let theorem = self.theorem_report(p, smoothness, lambda, &audits);
        let privacy = self.privacy_audit(p)?;
        Ok(SuiteReport::Eezofl(Box::new(EezoflSuiteReport {
            privacy,
            sigmas: self.sigmas.clone(),
            training_runs_seconds,
            groups,
            smoothness,
            audits,
            theorem,
        })))
    }
}

/// The runs of one label (an aggregation at one σ) over the seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunGroup {
    /// The aggregation and σ of these runs (named in summaries by [`GroupKey::label`]).
    pub key: GroupKey,
    /// Test accuracy of each seed's run.
    pub accuracy_by_seed: Vec<(u64, f64)>,
    /// Their mean.
    pub accuracy_mean: f64,
    /// Their standard deviation.
    pub accuracy_std: f64,
    /// Fraction of seeds whose accuracy ended below the suite's `collapse_below`.
    pub collapsed_fraction: f64,
    /// Mean over seeds of `‖∇F(θ_K)‖²` at the final model.
    pub grad_norm_sq_mean: f64,
    /// Final training loss of the mean loss curve.
    pub final_loss: Option<f64>,
}

/// The decoded-noise audit at one share-noise level.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct NoiseAuditRow {
    /// Mean per-coefficient variance over the audited rounds.
    pub measured: f64,
    /// App. B's prediction.
    pub predicted: f64,
    /// The prediction over ω² (the channel's squared second moment).
    pub predicted_per_omega2: f64,
    /// Theorem 1's noise floor ρ from the measured variance.
    pub rho: f64,
    /// Prop. 1's decryption-correctness bound against the audited rounds.
    pub prop1: Prop1Stress,
}

/// Prop. 1 (`Pr[correct] ≥ 1 − 4B_ε²/q²`) at this HE set, and what the audited rounds show
/// at smaller moduli (all in message units, q/Λ).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Prop1Stress {
    /// The bound's failure probability `4B_ε²/q²` at the set's real q.
    pub bound_at_q: f64,
    /// log2(q/Λ) at which the bound allows 1% failures.
    pub log2_q_over_scale_bound_1pct: f64,
    /// Fraction of audited rounds whose noise would wrap at that q.
    pub failures_at_bound_1pct: f64,
    /// The same where the bound allows 100% (`q = 2B_ε`).
    pub failures_at_bound_1: f64,
    /// log2(q/Λ) of the smallest modulus no audited round's noise wraps at: `2·max|ε̂_j/Λ|`.
    pub log2_q_over_scale_no_failure: f64,
    /// log2(q/Λ) the message itself needs, `2·max|M_k|`, which Prop. 1 leaves out.
    pub log2_q_over_scale_message: f64,
}

/// Audits and Table II at one HE ring degree (at the first σ).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HeSetAudit {
    /// Ring degree.
    pub n: usize,
    /// Decoded noise with privopt's smudging.
    pub noise_privopt: NoiseAuditRow,
    /// Decoded noise under the paper's modelling (σ_φ = σ_e = 3.2).
    pub noise_paper: NoiseAuditRow,
    /// Table II: uplink bits per device per round.
    pub uplink_bits_per_device: f64,
    /// A ciphertext packed at ⌈log q⌉ bits per coefficient.
    pub ciphertext_bytes_packed: f64,
    /// A ciphertext in privopt's wire format.
    pub ciphertext_bytes_wire: f64,
    /// A digital xMK-CKKS round's cryptography, in milliseconds.
    pub digital_round_ms: f64,
    /// Audit (a): mean |decoded − exact| of the modular model with real-valued gains.
    pub modular_model_decrypt_error: f64,
    /// q over the scale Δ.
    pub q_over_scale: f64,
}

/// What the EEZOFL suite found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EezoflSuiteReport {
    /// The channel σ of the runs (the audits use the first).
    pub sigmas: Vec<f64>,
    /// Wall seconds of the training runs.
    pub training_runs_seconds: f64,
    /// Every label's runs.
    pub groups: Vec<RunGroup>,
    /// L of the mean logistic loss (n/4 × the top eigenvalue of E[x̃x̃ᵀ]).
    pub smoothness: f64,
    /// Audits and Table II per HE set.
    pub audits: Vec<HeSetAudit>,
    /// Theorems 1 and 2 on this configuration.
    pub theorem: TheoremReport,
    /// §IV-F's claims, measured.
    pub privacy: PrivacyAudit,
}

/// §IV-F measured: colluders against the last device, per σ and digitally, and what phase 1's
/// superpositions reveal about one device's key.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PrivacyAudit {
    /// `(σ, report)` over HE-OTA training rounds of the first seed.
    pub collusion: Vec<(f64, audit::CollusionReport)>,
    /// The same over digital xMK-CKKS rounds.
    pub collusion_digital: audit::CollusionReport,
    /// Phase 1 at the first σ, 2N observations.
    pub channel_layer: audit::ChannelLayerReport,
}

/// Training rounds recorded for the collusion audit.
const COLLUSION_ROUNDS: u64 = 40;

/// Theorems 1 and 2 of the paper, checked on the suite's configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TheoremReport {
    /// Assumption 3.3 and Theorem 1's `Σ η² < ∞` for the base's decay exponents.
    pub conditions: theorem::StepConditions,
    /// The constants, estimated from the data (see `theorem_report`).
    pub constants: theorem::Constants,
    /// Theorem 2 at the base's η₀, γ₀ and rounds, at the first σ and HE set.
    pub theorem2: theorem::Theorem2,
}

impl EezoflSuiteReport {
    fn group(&self, key: GroupKey) -> Option<&RunGroup> {
        self.groups.iter().find(|g| g.key == key)
    }

    /// The flat `summary.json` keys (`acc_n4096_sigma1`, `rho_n8192`, …).
    pub fn write_summary(&self, s: &mut Summary) {
        let mut note = |k: String, v: f64| {
            s.insert(k, v);
        };
        note("training_runs_seconds".into(), self.training_runs_seconds);
        for g in &self.groups {
            let label = g.key.label();
            for &(seed, acc) in &g.accuracy_by_seed {
                note(format!("acc_{label}_seed{seed}"), acc);
            }
            note(format!("acc_{label}"), g.accuracy_mean);
            note(format!("acc_std_{label}"), g.accuracy_std);
            note(format!("collapsed_fraction_{label}"), g.collapsed_fraction);
            note(format!("grad_norm_sq_{label}"), g.grad_norm_sq_mean);
            if let Some(l) = g.final_loss {
                note(format!("final_loss_{label}"), l);
            }
        }
        // The short names for the CSI losses at the first σ.
        if let Some(&sigma) = self.sigmas.first() {
            for baseline in [CsiBaseline::Zf, CsiBaseline::Mmse] {
                let key = GroupKey::Csi {
                    baseline,
                    cap: None,
                    sigma,
                };
                if let Some(g) = self.group(key) {
                    note(
                        format!("final_loss_{}", baseline.name()),
                        g.final_loss.unwrap_or(f64::NAN),
                    );
                }
            }
        }
        let mean_of = |key: GroupKey| self.group(key).map_or(f64::NAN, |g| g.accuracy_mean);
        let mut short_names = Vec::new();
        for &sigma in &self.sigmas {
            let short = if sigma.fract() == 0.0 {
                format!("sigma{}", sigma as i64)
            } else {
                format!("sigma{sigma}")
            };
            for a in &self.audits {
                let n = a.n;
                short_names.push((
                    format!("acc_n{n}_{short}"),
                    mean_of(GroupKey::He { n, sigma }),
                ));
            }
            short_names.push((
                format!("acc_noenc_{short}"),
                mean_of(GroupKey::NoEncryption { sigma }),
            ));
        }
        for (k, v) in short_names {
            note(k, v);
        }
        note("smoothness_L".into(), self.smoothness);
        for a in &self.audits {
            let n = a.n;
            for (tag, row) in [("", a.noise_privopt), ("sigma_phi_3_2_", a.noise_paper)] {
                note(format!("noise_var_measured_{tag}n{n}"), row.measured);
                note(format!("noise_var_predicted_{tag}n{n}"), row.predicted);
                note(
                    format!("noise_var_predicted_{tag}per_omega2_n{n}"),
                    row.predicted_per_omega2,
                );
                note(format!("rho_{tag}n{n}"), row.rho);
                let pr = &row.prop1;
                for (k, v) in [
                    ("bound_at_q", pr.bound_at_q),
                    ("log2_q_bound_1pct", pr.log2_q_over_scale_bound_1pct),
                    ("failures_at_bound_1pct", pr.failures_at_bound_1pct),
                    ("failures_at_bound_1", pr.failures_at_bound_1),
                    ("log2_q_no_failure", pr.log2_q_over_scale_no_failure),
                    ("log2_q_message", pr.log2_q_over_scale_message),
                ] {
                    note(format!("prop1_{k}_{tag}n{n}"), v);
                }
            }
            note(
                format!("uplink_bits_per_device_n{n}"),
                a.uplink_bits_per_device,
            );
            note(
                format!("ciphertext_bytes_packed_n{n}"),
                a.ciphertext_bytes_packed,
            );
            note(
                format!("ciphertext_bytes_wire_n{n}"),
                a.ciphertext_bytes_wire,
            );
            note(format!("digital_round_ms_n{n}"), a.digital_round_ms);
            note(
                format!("modular_model_decrypt_error_n{n}"),
                a.modular_model_decrypt_error,
            );
            note(format!("q_over_scale_n{n}"), a.q_over_scale);
        }
        let t = &self.theorem;
        let c = &t.conditions;
        for (k, v) in [
            ("sum_eta_gamma_diverges", c.sum_eta_gamma_diverges),
            ("sum_eta_gamma3_converges", c.sum_eta_gamma3_converges),
            ("sum_eta2_gamma2_converges", c.sum_eta2_gamma2_converges),
            ("sum_eta2_converges", c.sum_eta2_converges),
            ("assumption_3_3_holds", c.assumption_3_3_holds),
            ("theorem1_holds", c.theorem_1_holds),
        ] {
            note(format!("theorem_{k}"), f64::from(u8::from(v)));
        }
        let t2 = &t.theorem2;
        for (k, v) in [
            ("c1", t2.c1),
            ("c3", t2.c3),
            ("c_gamma", t2.c_gamma),
            ("r", t2.r),
            ("rho", t2.rho),
            ("bound_at_rounds", t2.bound_at_rounds),
            ("lipschitz", t.constants.lipschitz),
            ("hessian_bound", t.constants.hessian_bound),
        ] {
            note(format!("theorem2_{k}"), v);
        }
        for &(eps, k) in &t2.iterations_for {
            note(format!("theorem2_iterations_eps{eps}"), k);
        }
        let collusion = self
            .privacy
            .collusion
            .iter()
            .map(|(s, r)| (format!("sigma{s}"), r));
        for (tag, r) in collusion.chain([("digital".to_string(), &self.privacy.collusion_digital)])
        {
            note(
                format!("collusion_rmse_messages_only_{tag}"),
                r.relative_rmse_messages_only,
            );
            note(
                format!("collusion_correlation_messages_only_{tag}"),
                r.correlation_messages_only,
            );
            note(
                format!("collusion_rmse_with_gains_{tag}"),
                r.relative_rmse_with_gains,
            );
            note(
                format!("collusion_sign_agreement_with_gains_{tag}"),
                r.sign_agreement_with_gains,
            );
        }
        let cl = &self.privacy.channel_layer;
        note(
            "channel_layer_linear_relative_error".into(),
            cl.linear_relative_error,
        );
        note(
            "channel_layer_rlwe_relative_noise".into(),
            cl.rlwe_relative_noise,
        );
        note("channel_layer_rank_gap".into(), cl.rank_gap);
        let first = self.audits.iter().min_by_key(|a| a.n);
        note(
            "modular_model_decrypt_error".into(),
            first.map_or(f64::NAN, |a| a.modular_model_decrypt_error),
        );
    }
}
