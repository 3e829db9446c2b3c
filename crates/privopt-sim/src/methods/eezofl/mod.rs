//! EEZOFL (the EEZOFL paper): zeroth-order federated learning where each device sends one scalar
//! per round, encrypted under xMK-CKKS and summed over a fading channel by the four-phase
//! protocol, plus the baselines and audits the paper's claims call for.
//!
//! One round (§III-A, §IV-G): the perturbation `Φ_k` comes from the round seed (shared, never
//! sent); device `i` computes `Δf_i = f_i(θ + γ_kΦ_k) − f_i(θ − γ_kΦ_k)` on a batch of its
//! data; the aggregation turns the `Δf_i` into `M_k ≈ Σ_i h_i Δf_i / μ_i`; every device
//! applies `θ ← θ − η_k Φ_k M_k`. The global objective is `F = Σ_i F_i`.

pub mod aggregate;
pub mod audit;
pub mod theorem;

use std::sync::Arc;

use privopt_channel::fading::Fading;
use privopt_ckks::{CkksParams, CkksParamsBuilder};
use privopt_math::SeedTree;
use privopt_ml::data::minibatch;
use privopt_ml::zo::{Direction, ZoAddress, ZoEstimator};
use privopt_protocols::eezofl::Schedule;
use serde::{Deserialize, Serialize};

use self::aggregate::{
    Csi, DigitalHe, DigitalKey, ExactHeOta, ModularHeOta, PlainOta, Precoder, RoundOutput,
    ScalarAggregation,
};
use super::{Method, Report, Trained};
use crate::context::RunContext;
use crate::error::{MAX_STEPS, Result, SimError, ensure, ensure_count, method_param};
use privopt_data::problem::Problem;

/// How the scalars are aggregated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    /// (a) Non-encrypted over the air, eq. (4).
    Plain,
    /// The proposed four-phase protocol, exact arithmetic.
    #[default]
    HeOta,
    /// The proposed protocol with mod-q reduction at every transmission (audit only: fails).
    HeOtaModular,
    /// (c) Digital xMK-CKKS, no channel.
    Digital,
    /// (b) CSI zero-forcing pre-equalization, keys aggregated once at setup.
    CsiZf,
    /// (b) CSI MMSE pre-equalization, keys aggregated once at setup.
    CsiMmse,
}

/// `[method] name = "eezofl"`; defaults are the paper's §VI setup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EezoflConfig {
    /// Aggregation mode.
    #[serde(default)]
    pub aggregation: Aggregation,
    /// Rounds K.
    #[serde(default = "default_rounds")]
    pub rounds: u64,
    /// η₀ of `η_k = η₀ (1+k)^{−eta_decay}`.
    #[serde(default = "default_eta0")]
    pub eta0: f64,
    /// Decay exponent of η.
    #[serde(default = "default_eta_decay")]
    pub eta_decay: f64,
    /// γ₀ of `γ_k = γ₀ (1+k)^{−gamma_decay}`.
    #[serde(default = "default_gamma0")]
    pub gamma0: f64,
    /// Decay exponent of γ.
    #[serde(default = "default_gamma_decay")]
    pub gamma_decay: f64,
    /// Batch per device per round.
    #[serde(default = "default_batch")]
    pub batch_size: usize,
    /// Law of the entries of Φ (default Rademacher: E[Φ²] = 1, ‖Φ‖ = √d).
    #[serde(default = "default_direction")]
    pub perturbation: Direction,
    /// Channel law of every device.
    #[serde(default = "default_channel")]
    pub channel: Fading,
    /// σ_n: AWGN per received symbol (per ring coefficient for HE modes).
    #[serde(default = "default_noise")]
    pub noise_sigma: f64,
    /// HE ring degree: 4096 (log q ≈ 109) or 8192 (log q ≈ 218).
    #[serde(default = "default_he_n")]
    pub he_n: usize,
    /// log2 σ* of the decryption-share noise (at least 20 unless `insecure`).
    #[serde(default = "default_smudging")]
    pub smudging_log2: f64,
    /// Digital aggregation only: the key's threshold `t` (any `t` devices decrypt a round; 0:
    /// every device, the paper's xMK-CKKS).
    #[serde(default)]
    pub threshold: usize,
    /// Digital aggregation on a threshold key only: devices that go silent each round once
    /// their ciphertext is in (chosen afresh per round; at most `N − t`).
    #[serde(default)]
    pub dropouts: usize,
    /// Explicit opt-in to parameters below privopt's security policy (here decryption-share
    /// smudging below 2^20); for tests and studies of the paper's weaker setting only.
    #[serde(default)]
    pub insecure: bool,
    /// F of the dyadic grid of gains and noise.
    #[serde(default = "default_grid_bits")]
    pub grid_bits: u32,
    /// σ_pilot of the CSI baselines' channel estimate.
    #[serde(default = "default_pilot")]
    pub pilot_sigma: f64,
    /// The CSI baselines' precoder weight cap (a transmit power limit; the paper has none:
    /// `inf`).
    #[serde(default = "default_weight_cap")]
    pub precoder_weight_cap: f64,
    /// Evaluate every this many rounds (0: about 50 evaluations).
    #[serde(default)]
    pub eval_every: u64,
    /// Measure the decoded noise variance every this many rounds (0: never; HE-OTA only).
    #[serde(default)]
    pub audit_every: u64,
}

fn default_rounds() -> u64 {
    400
}
fn default_eta0() -> f64 {
    Schedule::default().eta0
}
fn default_eta_decay() -> f64 {
    Schedule::default().eta_decay
}
fn default_gamma0() -> f64 {
    Schedule::default().gamma0
}
fn default_gamma_decay() -> f64 {
    Schedule::default().gamma_decay
}
fn default_batch() -> usize {
    128
}
fn default_direction() -> Direction {
    Direction::Rademacher
}
fn default_channel() -> Fading {
    Fading::Gaussian {
        mu: 1.0,
        sigma: 1.0,
    }
}
fn default_noise() -> f64 {
    1.0
}
fn default_he_n() -> usize {
    4096
}
fn default_smudging() -> f64 {
    privopt_ckks::params::DEFAULT_SMUDGING_LOG2
}
fn default_grid_bits() -> u32 {
    40
}
fn default_weight_cap() -> f64 {
    aggregate::DEFAULT_PRECODER_WEIGHT_CAP
}
fn default_pilot() -> f64 {
    0.1
}

/// The paper's HE parameter set for ring degree `n`, with smudging `2^smudging_log2`
/// (below 2^20 only if `insecure`).
pub fn paper_params(n: usize, smudging_log2: f64, insecure: bool) -> Result<Arc<CkksParams>> {
    let bits: &[u32] = match n {
        4096 => &[37, 36, 36],
        8192 => &[44, 44, 44, 43, 43],
        other => {
            return Err(SimError::Config(format!(
                "method.he_n must be 4096 or 8192, got {other}"
            )));
        }
    };
    CkksParamsBuilder::new(n, bits)
        .smudging_log2(smudging_log2)
        .insecure_for_testing(insecure)
        .build()
        .map_err(|e| SimError::Config(format!("method: {e}")))
}

impl EezoflConfig {
    /// The step-size and radius sequences.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            eta0: self.eta0,
            eta_decay: self.eta_decay,
            gamma0: self.gamma0,
            gamma_decay: self.gamma_decay,
        }
    }

    /// Builds the aggregation for `devices` devices.
    pub fn aggregation(
        &self,
        devices: usize,
        seeds: &SeedTree,
    ) -> Result<Box<dyn ScalarAggregation>> {
        let laws = vec![self.channel; devices];
        let exact = |precoder| {
            self.exact_ota(
                paper_params(self.he_n, self.smudging_log2, self.insecure)?,
                devices,
                *seeds,
                precoder,
            )
        };
        Ok(match self.aggregation {
            Aggregation::Plain => Box::new(PlainOta {
                laws: laws.clone(),
                noise_sigma: self.noise_sigma,
                seeds: *seeds,
            }),
            Aggregation::HeOta => Box::new(exact(Precoder::None)?),
            Aggregation::HeOtaModular => Box::new(ModularHeOta::new(exact(Precoder::None)?)),
            // Every digital message crosses as its bytes, as between processes.
            Aggregation::Digital => Box::new(DigitalHe::new(
                paper_params(self.he_n, self.smudging_log2, self.insecure)?,
                devices as u32,
                *seeds,
                true,
                self.digital_key(devices)?,
            )?),
            Aggregation::CsiZf => Box::new(exact(Precoder::ZeroForcing)?),
            Aggregation::CsiMmse => Box::new(exact(Precoder::Mmse)?),
        })
    }

    /// The digital path's key for `devices` devices: `threshold` of them (with `dropouts`
    /// silent each round), or every one.
    fn digital_key(&self, devices: usize) -> Result<DigitalKey> {
        if self.threshold == 0 || self.threshold >= devices {
            ensure(self.dropouts == 0, || {
                "method.dropouts needs a threshold key (0 < method.threshold < devices): on \
                 the paper's key every device is needed"
                    .into()
            })?;
            return Ok(DigitalKey::Everyone);
        }
        ensure(self.threshold >= 2, || {
            "method.threshold must be 0 (every device) or >= 2 (one device alone must never \
             decrypt)"
                .into()
        })?;
        ensure(self.dropouts <= devices - self.threshold, || {
            format!(
                "method.dropouts = {} leaves fewer than method.threshold = {} of {devices} \
                 devices to decrypt",
                self.dropouts, self.threshold
            )
        })?;
        Ok(DigitalKey::Threshold {
            threshold: self.threshold,
            dropouts: self.dropouts,
        })
    }

    /// The exact-model protocol for `devices` devices with this config's channel, noise and grid.
    pub fn exact_ota(
        &self,
        params: Arc<CkksParams>,
        devices: usize,
        seeds: SeedTree,
        precoder: Precoder,
    ) -> Result<ExactHeOta> {
        ExactHeOta::new(
            params,
            vec![self.channel; devices],
            self.noise_sigma,
            self.grid_bits,
            seeds,
            precoder,
            Csi {
                pilot_sigma: self.pilot_sigma,
                weight_cap: self.precoder_weight_cap,
            },
        )
    }

    /// App. B eq. (26): the predicted per-coefficient decoded noise variance for `devices`
    /// devices on this config's channel, ring degree and noise, with share noise
    /// `2^smudging_log2`.
    pub fn predicted_noise_variance(&self, devices: usize, smudging_log2: f64) -> Result<f64> {
        let params = paper_params(self.he_n, smudging_log2, self.insecure)?;
        Ok(audit::decoded_noise_variance(
            params.n(),
            &vec![self.channel; devices],
            params.error().sigma(),
            self.noise_sigma,
            2f64.powf(smudging_log2),
            params.scale(),
        ))
    }

    fn estimator(&self, gamma: f64) -> ZoEstimator {
        ZoEstimator {
            direction: self.perturbation,
            difference: privopt_ml::zo::Difference::TwoPoint,
            mu: gamma,
            perturbations: 1,
        }
    }

    /// One round: local differences, aggregation, update of `theta`.
    pub fn round(
        &self,
        problem: &Problem,
        seeds: &SeedTree,
        k: u64,
        theta: &mut [f64],
        agg: &mut dyn ScalarAggregation,
        audit: bool,
    ) -> Result<RoundOutput> {
        let schedule = self.schedule();
        let (gamma, eta) = (schedule.gamma(k), schedule.eta(k));
        let at = ZoAddress { round: k, step: 0 };
        let est = self.estimator(gamma);
        let mut phi = vec![0.0; theta.len()];
        est.perturbation(seeds, at, 0, &mut phi);
        let mut plus = theta.to_vec();
        let mut minus = theta.to_vec();
        for ((p, m), (t, f)) in plus
            .iter_mut()
            .zip(minus.iter_mut())
            .zip(theta.iter().zip(&phi))
        {
            *p = t + gamma * f;
            *m = t - gamma * f;
        }
        let deltas: Vec<f64> = problem
            .clients
            .iter()
            .enumerate()
            .map(|(i, pool)| {
                let batch = minibatch(
                    pool,
                    self.batch_size,
                    &mut seeds.stream("eezofl/batch", &[k, i as u64]),
                );
                problem.model.loss(&plus, &problem.train, Some(&batch))
                    - problem.model.loss(&minus, &problem.train, Some(&batch))
            })
            .collect();
        let out = agg.round(k, &deltas, audit)?;
        for (t, f) in theta.iter_mut().zip(&phi) {
            *t -= eta * out.value * f;
        }
        Ok(out)
    }
}

impl Method for EezoflConfig {
    fn validate(&self) -> Result<()> {
        ensure_count("method.rounds", self.rounds, MAX_STEPS)?;
        ensure(self.batch_size >= 1, || {
            "method.batch_size must be >= 1".into()
        })?;
        self.schedule().check().map_err(method_param)?;
        ensure(
            self.noise_sigma >= 0.0 && self.noise_sigma.is_finite(),
            || "method.noise_sigma must be >= 0".into(),
        )?;
        ensure(
            self.pilot_sigma >= 0.0 && self.pilot_sigma.is_finite(),
            || "method.pilot_sigma must be >= 0".into(),
        )?;
        ensure(self.precoder_weight_cap >= 1.0, || {
            format!(
                "method.precoder_weight_cap must be >= 1 (inf: none), got {}",
                self.precoder_weight_cap
            )
        })?;
        ensure(matches!(self.he_n, 4096 | 8192), || {
            format!("method.he_n must be 4096 or 8192, got {}", self.he_n)
        })?;
        ensure((0.0..=50.0).contains(&self.smudging_log2), || {
            "method.smudging_log2 must be in [0, 50]".into()
        })?;
        ensure(
            self.smudging_log2 >= privopt_ckks::params::MIN_SMUDGING_LOG2 || self.insecure,
            || {
                format!(
                    "method.smudging_log2 = {} is below 20 (shares would not hide the \
                     ciphertext noise); set method.insecure = true to use it anyway",
                    self.smudging_log2
                )
            },
        )?;
        ensure((40..=56).contains(&self.grid_bits), || {
            format!(
                "method.grid_bits must be in 40..=56, got {}",
                self.grid_bits
            )
        })?;
        self.channel
            .validate()
            .map_err(|e| SimError::Config(format!("method.channel: {e}")))
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Trained> {
        let p = ctx.problem()?;
        let seeds = ctx.seeds;
        let mut agg = self.aggregation(p.clients.len(), &seeds)?;
        let bytes_up = agg.uplink_bits().div_ceil(8) * p.clients.len() as u64;
        let mut theta = p.model.init_params(&mut seeds.stream("model/init", &[]));
        let mut noise = Vec::new();
        let mut worst_error: f64 = 0.0;
        ctx.train_loop(
            "eezofl",
            self.rounds,
            self.eval_every,
            &mut theta,
            |ctx, k, theta| {
                let audit = self.audit_every > 0 && k % self.audit_every == 0;
                let out = self.round(p, &seeds, k, theta, agg.as_mut(), audit)?;
                worst_error = worst_error.max((out.value - out.ideal).abs());
                noise.extend(out.noise_var);
                ctx.send_up(bytes_up);
                ctx.send_down(8 * p.clients.len() as u64);
                Ok(())
            },
        )?;
        let mut report = EezoflReport {
            max_aggregation_error: worst_error,
            noise_var: None,
        };
        if !noise.is_empty() {
            report.noise_var = Some(NoiseAudit {
                measured: noise.iter().sum::<f64>() / noise.len() as f64,
                predicted: self.predicted_noise_variance(p.clients.len(), self.smudging_log2)?,
            });
        }
        Ok(Trained {
            params: theta,
            report: Report::Eezofl(report),
        })
    }
}

/// What an EEZOFL run reports beyond its metrics rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EezoflReport {
    /// Largest |decoded sum − exact sum| over the rounds.
    pub max_aggregation_error: f64,
    /// The decoded-noise audit, when `audit_every > 0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise_var: Option<NoiseAudit>,
}

/// Variance of the noise in the decoded sum: measured over the audited rounds, and App. B's
/// prediction.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct NoiseAudit {
    /// Mean over audited rounds.
    pub measured: f64,
    /// App. B's budget.
    pub predicted: f64,
}
