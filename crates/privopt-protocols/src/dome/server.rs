//! The DOME server's part of a round (Alg. 1 lines 15–21): open the round (the noise level
//! and the quantizer follow from the participants), and once SecAgg+ has summed the clients'
//! vectors decompress `ĝ = S·sum/B + m̂`, take the bias-corrected Adam step whose second moment
//! is debiased by the known noise (Lemma 3.2), and update the sketch (Alg. 2).

use rand::Rng;

use super::messages::RoundBroadcast;
use super::sketch::{Basis, Sketch};
use crate::error::{ProtocolError, Result, check_param};
use crate::noise::SharedNoise;

/// The server's fixed settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServerSettings {
    /// Adam step size η.
    pub lr: f64,
    /// Adam β1.
    pub beta1: f64,
    /// Adam β2.
    pub beta2: f64,
    /// Floor γ′ of the debiased second moment.
    pub gamma_prime: f64,
    /// Clipping norm C of the released sketch.
    pub clip: f64,
    /// `n·E·σ²·C²`: the total noise variance of a round's sum (0 without privacy); each of
    /// `B` participants adds a share of variance `a² = noise_total / B`.
    pub noise_total: f64,
    /// `None`: the paper's shares (`a² = noise_total / B`), so every dropout leaves the sum
    /// with less noise than the accountant assumed. `Some(f)`: each participant adds noise for
    /// `⌈f·B⌉` contributors (`a² = noise_total / ⌈f·B⌉`), and a round with fewer contributors
    /// is refused, so the sum always carries at least `noise_total` (distributed-DP practice).
    pub noise_floor: Option<f64>,
    /// Whether the sketch is learned (its `Diag(S Sᵀ)` changes every round).
    pub learned_sketch: bool,
}

impl ServerSettings {
    /// The noise of a round's sum and how it is shared.
    pub fn noise(&self) -> SharedNoise {
        SharedNoise {
            variance: self.noise_total,
            floor: self.noise_floor,
        }
    }

    /// The contributor count each participant's noise share is sized for (≥ 1).
    pub fn noise_shares(&self, participants: usize) -> usize {
        self.noise().shares(participants)
    }

    /// Checks every setting's range (finite values only).
    pub fn validate(&self) -> Result<()> {
        for (name, v, ok) in [
            ("lr", self.lr, self.lr > 0.0),
            ("beta1", self.beta1, (0.0..1.0).contains(&self.beta1)),
            ("beta2", self.beta2, (0.0..1.0).contains(&self.beta2)),
            ("gamma_prime", self.gamma_prime, self.gamma_prime > 0.0),
            ("clip", self.clip, self.clip > 0.0),
        ] {
            check_param(ok && v.is_finite(), || {
                format!("DOME server setting {name} = {v} is out of range")
            })?;
        }
        self.noise().validate("DOME server settings")
    }
}

/// Adam with bias correction, the second moment debiased by the known noise, and `m̂` kept for
/// the clients' mean removal.
#[derive(Debug)]
struct DebiasedAdam {
    m_tilde: Vec<f64>,
    v_tilde: Vec<f64>,
    m_hat: Vec<f64>,
    t: i32,
}

/// The open round.
#[derive(Clone, Copy, Debug)]
struct Open {
    round: u64,
    participants: usize,
    a2: f64,
}

/// The DOME server: the model, the optimizer, the sketch.
pub struct DomeServer {
    settings: ServerSettings,
    w: Vec<f64>,
    adam: DebiasedAdam,
    sketch: Sketch,
    diag: Vec<f64>,
    open: Option<Open>,
}

impl std::fmt::Debug for DomeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DomeServer")
            .field("d", &self.w.len())
            .field("dim", &self.sketch.dim())
            .field("open", &self.open)
            .finish_non_exhaustive()
    }
}

impl DomeServer {
    /// A server starting from the model `w0` and the sketch `S_0`.
    pub fn new(settings: ServerSettings, w0: Vec<f64>, sketch: Sketch) -> Result<Self> {
        settings.validate()?;
        check_param(!w0.is_empty() && w0.iter().all(|v| v.is_finite()), || {
            "the initial model must be a non-empty finite vector".into()
        })?;
        let d = w0.len();
        check_param(sketch.basis().d() == d, || {
            format!(
                "a sketch of dimension {} for a model of {d}",
                sketch.basis().d()
            )
        })?;
        let diag = sketch.diag_sst();
        Ok(Self {
            settings,
            adam: DebiasedAdam {
                m_tilde: vec![0.0; d],
                v_tilde: vec![0.0; d],
                m_hat: vec![0.0; d],
                t: 0,
            },
            w: w0,
            sketch,
            diag,
            open: None,
        })
    }

    /// The model.
    pub fn model(&self) -> &[f64] {
        &self.w
    }

    /// The basis clients project with this round.
    pub fn basis(&self) -> Basis<'_> {
        self.sketch.basis()
    }

    /// `S s` with the current sketch (for diagnostics of the noise's effect).
    pub fn decompress(&self, s: &[f64]) -> Vec<f64> {
        self.sketch.decompress(s)
    }

    /// Streaming-PCA components kept at the last sketch update.
    pub fn kept(&self) -> usize {
        self.sketch.kept()
    }

    /// Opens round `round` with `participants` clients: what they need to privatize.
    pub fn open_round(&mut self, round: u64, participants: usize) -> Result<RoundBroadcast> {
        if let Some(o) = self.open {
            return Err(ProtocolError::OutOfOrder(format!(
                "round {} is still open",
                o.round
            )));
        }
        check_param(
            participants >= 1 && participants <= u32::MAX as usize,
            || format!("{participants} participants"),
        )?;
        let a2 = self.settings.noise().share_variance(participants);
        let quantizer_bound = (self.settings.noise())
            .quantizer(self.settings.clip, participants)?
            .clip();
        self.open = Some(Open {
            round,
            participants,
            a2,
        });
        Ok(RoundBroadcast {
            round,
            participants: participants as u32,
            noise_std: a2.sqrt(),
            clip: self.settings.clip,
            quantizer_bound,
            m_hat: self.adam.m_hat.clone(),
        })
    }

    /// The fewest contributors (clients whose masked input is in the sum) the open round may
    /// close with: `⌈f·B⌉` under a noise floor, else 1. A driver checks it before asking
    /// SecAgg+ to unmask, so a sum with too little noise is never revealed.
    pub fn required_contributors(&self) -> Option<usize> {
        self.open
            .map(|o| self.settings.noise().required_contributors(o.participants))
    }

    /// Abandons the open round (its secure sum failed, e.g. too few clients survived):
    /// nothing of it is applied, and the next round may open. Returns whether one was open.
    pub fn abort_round(&mut self) -> bool {
        self.open.take().is_some()
    }

    /// Closes the round with SecAgg+'s sum of the `contributors` quantized vectors it holds
    /// (participants that dropped before sending theirs are not in it): returns `ĝ` after the
    /// Adam step and the sketch update (which draws its probes from `rng`). Fewer
    /// contributors than [`Self::required_contributors`] is refused and the round stays open
    /// (abort it).
    pub fn close_round(
        &mut self,
        sum: &[u32],
        contributors: usize,
        rng: &mut impl Rng,
    ) -> Result<Vec<f64>> {
        let open = self
            .open
            .ok_or_else(|| ProtocolError::OutOfOrder("no round is open".into()))?;
        check_param(contributors <= open.participants, || {
            format!(
                "{contributors} contributors in a round of {} participants",
                open.participants
            )
        })?;
        let required = self.required_contributors().unwrap_or(1);
        if contributors < required {
            return Err(ProtocolError::Incomplete(format!(
                "round {}: {contributors} of {} participants contributed, below the {required} \
                 the noise floor needs",
                open.round, open.participants
            )));
        }
        let quantizer = self
            .settings
            .noise()
            .quantizer(self.settings.clip, open.participants)?;
        if sum.len() != self.sketch.dim() {
            return Err(ProtocolError::Parameters(format!(
                "a sum of {} words for a sketch of dimension {}",
                sum.len(),
                self.sketch.dim()
            )));
        }
        // The mean over those whose vectors are in the sum; its noise has variance
        // `contributors·a²/contributors² = a²/contributors` per sketch coordinate.
        let bp = contributors as f64;
        let g_prec: Vec<f64> = quantizer.decode_sum(sum).iter().map(|s| s / bp).collect();
        let mut g_hat = self.sketch.decompress(&g_prec);
        g_hat
            .iter_mut()
            .zip(&self.adam.m_hat)
            .for_each(|(g, m)| *g += m);
        self.step(&g_hat, open.a2 / bp, open.round)?;
        self.sketch.update(&g_hat, rng);
        if self.settings.learned_sketch {
            self.diag = self.sketch.diag_sst();
        }
        self.open = None;
        Ok(g_hat)
    }

    /// Without privacy: the plain mean gradient of the round, no noise, no sketch.
    pub fn close_round_plain(&mut self, mean: &[f64], rng: &mut impl Rng) -> Result<Vec<f64>> {
        let open = self
            .open
            .ok_or_else(|| ProtocolError::OutOfOrder("no round is open".into()))?;
        check_param(mean.len() == self.w.len(), || {
            format!("a mean of {} for a model of {}", mean.len(), self.w.len())
        })?;
        self.step(mean, 0.0, open.round)?;
        self.sketch.update(mean, rng);
        if self.settings.learned_sketch {
            self.diag = self.sketch.diag_sst();
        }
        self.open = None;
        Ok(mean.to_vec())
    }

    /// One Adam step on the model with `g_hat`, whose noise has variance `noise_var·diag[j]`.
    // Five vectors move together coordinate by coordinate; an index reads plainest.
    #[allow(clippy::needless_range_loop)]
    fn step(&mut self, g_hat: &[f64], noise_var: f64, round: u64) -> Result<()> {
        let s = &self.settings;
        let a = &mut self.adam;
        a.t += 1;
        let (b1, b2) = (s.beta1, s.beta2);
        let (c1, c2) = (1.0 - b1.powi(a.t), 1.0 - b2.powi(a.t));
        for j in 0..self.w.len() {
            a.m_tilde[j] = b1 * a.m_tilde[j] + (1.0 - b1) * g_hat[j];
            a.m_hat[j] = a.m_tilde[j] / c1;
            let second = g_hat[j] * g_hat[j] - noise_var * self.diag[j];
            a.v_tilde[j] = b2 * a.v_tilde[j] + (1.0 - b2) * second;
            let v_hat = a.v_tilde[j] / c2;
            self.w[j] -= s.lr * a.m_hat[j] / v_hat.max(s.gamma_prime).sqrt();
        }
        if self.w.iter().any(|x| !x.is_finite()) {
            return Err(ProtocolError::Diverged {
                round,
                what: "model parameters".into(),
            });
        }
        Ok(())
    }
}
