//! The replicated state (model and, for HiSo, the diagonal Hessian) and the one function that
//! advances it by a round's record. Server and clients both call [`ModelState::apply`], so a
//! client that replays the rounds it missed holds bit for bit the server's state.

use privopt_math::SeedTree;
use privopt_ml::zo::add_direction;
use serde::{Deserialize, Serialize};

use crate::error::{ProtocolError, Result, check_param};

/// PRG domain of the perturbation directions.
const DIRECTION_DOMAIN: &str = "scalar_fl/direction";

/// How the perturbations are shaped and what state the rounds carry.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Rule {
    /// DeComFL: `u ~ N(0, I)`, no state beyond the model.
    Decomfl,
    /// HiSo: `z = H^{-1/2} u ~ N(0, H^{-1})` with a diagonal `H` learned from the
    /// reconstructed global updates (module docs of [`super`] give the update).
    Hiso {
        /// EMA weight ν of the newest update, in (0, 1].
        nu: f64,
        /// Floor ε added to every squared update (> 0), keeping `H` positive definite.
        eps: f64,
    },
}

impl Rule {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        if let Rule::Hiso { nu, eps } = *self {
            check_param(nu > 0.0 && nu <= 1.0, || {
                format!("rule.nu must be in (0, 1], got {nu}")
            })?;
            check_param(eps > 0.0 && eps.is_finite(), || {
                format!("rule.eps must be > 0, got {eps}")
            })?;
        }
        Ok(())
    }
}

/// What every party must agree on to replay a round.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplaySpec {
    /// Learning rate η.
    pub lr: f64,
    /// Local steps per round, τ.
    pub local_steps: usize,
    /// Perturbations per local step, P.
    pub perturbations: usize,
    /// Decoupled L2 decay λ of every step, as in SGD with `weight_decay` (0: none):
    /// `x ← x − η (Δx + λ x)`. Applied exactly rather than estimated, so replay stays exact.
    pub weight_decay: f64,
    /// DeComFL or HiSo.
    pub rule: Rule,
}

/// Most local steps or perturbations per round (bounds every message's size).
pub const MAX_STEPS: usize = 1 << 16;

impl ReplaySpec {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        check_param(self.lr > 0.0 && self.lr.is_finite(), || {
            format!("lr must be > 0, got {}", self.lr)
        })?;
        check_param(
            self.weight_decay >= 0.0 && self.lr * self.weight_decay < 1.0,
            || {
                format!(
                    "weight_decay must be >= 0 with lr · weight_decay < 1, got {}",
                    self.weight_decay
                )
            },
        )?;
        for (name, v) in [
            ("local_steps", self.local_steps),
            ("perturbations", self.perturbations),
        ] {
            check_param((1..=MAX_STEPS).contains(&v), || {
                format!("{name} must be in 1..={MAX_STEPS}, got {v}")
            })?;
        }
        self.rule.validate()
    }

    /// One step of the model by the update `delta`: `x ← x − η (Δx + λ x)`.
    pub fn step(&self, x: &mut [f64], delta: &[f64]) {
        let keep = 1.0 - self.lr * self.weight_decay;
        for (xj, dj) in x.iter_mut().zip(delta) {
            *xj = keep * *xj - self.lr * dj;
        }
    }

    /// Undoes [`ReplaySpec::step`] by the same `delta` (to rounding): a client that trained in
    /// place returns to the round's start.
    pub fn unstep(&self, x: &mut [f64], delta: &[f64]) {
        let keep = 1.0 - self.lr * self.weight_decay;
        for (xj, dj) in x.iter_mut().zip(delta) {
            *xj = (*xj + self.lr * dj) / keep;
        }
    }

    /// Scalars per round: τ·P.
    pub fn scalars_per_round(&self) -> usize {
        self.local_steps * self.perturbations
    }
}

/// One round as the history keeps it: the seeds the server drew and the averaged scalars.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundRecord {
    /// The round.
    pub round: u64,
    /// One seed per local step.
    pub seeds: Vec<u64>,
    /// Averaged scalars, `τ·P` of them, step-major; `f32` as on the wire.
    pub scalars: Vec<f32>,
}

/// The key of perturbation `p` of local step `step` of `round` under the step's seed.
pub fn direction_key(seed: u64, round: u64, step: u64, p: u64) -> [u8; 32] {
    SeedTree::new(seed).key(DIRECTION_DOMAIN, &[round, step, p])
}

/// Model parameters, the HiSo Hessian diagonal, and the round they are the start of.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelState {
    /// Parameters `x_r`.
    pub x: Vec<f64>,
    /// `H_r` (HiSo only).
    pub h: Option<Vec<f64>>,
    /// The round `r` this state starts.
    pub round: u64,
}

/// Reusable buffers of a replay or local update (no per-round allocation).
#[derive(Clone, Debug, Default)]
pub struct Scratch {
    /// A direction `u`.
    pub u: Vec<f64>,
    /// The step's update `Δx`.
    pub delta: Vec<f64>,
    /// `H^{-1/2}` of the current round.
    pub h_inv_sqrt: Vec<f64>,
}

impl Scratch {
    /// Sizes the direction and update buffers for dimension `d`.
    pub fn ensure(&mut self, d: usize) {
        for v in [&mut self.u, &mut self.delta] {
            v.resize(d, 0.0);
        }
    }
}

impl ModelState {
    /// The starting state: parameters `x0`, and `H_0 = I` for HiSo (so HiSo's first round is
    /// DeComFL's).
    pub fn initial(x0: Vec<f64>, rule: Rule) -> Self {
        let h = matches!(rule, Rule::Hiso { .. }).then(|| vec![1.0; x0.len()]);
        Self { x: x0, h, round: 0 }
    }

    /// Writes `H^{-1/2}` of this state into `scratch` (ones for DeComFL).
    pub fn load_preconditioner(&self, scratch: &mut Scratch) {
        load_preconditioner(self.h.as_deref(), self.x.len(), scratch);
    }

    /// Advances the state by `rec` (which must be round `self.round`):
    ///
    /// - every step `k`: `Δx_k = (1/P) Σ_p ḡ_{k,p} H_r^{-1/2} u_{k,p}`, `x ← x − η (Δx_k + λ x)` ([`ReplaySpec::step`]);
    /// - HiSo, after each step: `H ← (1 − ν) H + ν (Δx_k² + ε)`; the directions of the whole
    ///   round use `H_r`, the Hessian at its start (clients sample them before the round's
    ///   updates exist).
    pub fn apply(
        &mut self,
        rec: &RoundRecord,
        spec: &ReplaySpec,
        scratch: &mut Scratch,
    ) -> Result<()> {
        if rec.round != self.round {
            return Err(ProtocolError::OutOfOrder(format!(
                "record of round {} applied to a state at round {}",
                rec.round, self.round
            )));
        }
        if rec.seeds.len() != spec.local_steps || rec.scalars.len() != spec.scalars_per_round() {
            return Err(ProtocolError::OutOfOrder(format!(
                "record of round {} has {} seeds and {} scalars; expected {} and {}",
                rec.round,
                rec.seeds.len(),
                rec.scalars.len(),
                spec.local_steps,
                spec.scalars_per_round()
            )));
        }
        apply_record(rec, spec, 0, &mut self.x, self.h.as_deref_mut(), scratch);
        self.round += 1;
        Ok(())
    }
}

/// Writes `H^{-1/2}` of a window of `H` into `scratch` (ones for DeComFL, `h` absent).
pub fn load_preconditioner(h: Option<&[f64]>, d: usize, scratch: &mut Scratch) {
    scratch.h_inv_sqrt.resize(d, 1.0);
    match h {
        Some(h) => {
            for (o, hj) in scratch.h_inv_sqrt.iter_mut().zip(h) {
                *o = 1.0 / hj.sqrt();
            }
        }
        None => scratch.h_inv_sqrt.fill(1.0),
    }
}

/// Advances coordinates `offset .. offset + x.len()` of a state (`x`, and `h` for HiSo) by
/// `rec`, already checked against the state's round and `spec`. Every coordinate's update
/// depends on that coordinate alone, so a state held in pieces (a PyTorch module's tensors)
/// advanced window by window ends exactly where [`ModelState::apply`] puts the whole vector.
pub fn apply_record(
    rec: &RoundRecord,
    spec: &ReplaySpec,
    offset: usize,
    x: &mut [f64],
    mut h: Option<&mut [f64]>,
    scratch: &mut Scratch,
) {
    scratch.ensure(x.len());
    load_preconditioner(h.as_deref(), x.len(), scratch);
    for (k, &seed) in rec.seeds.iter().enumerate() {
        let scalars = &rec.scalars[k * spec.perturbations..(k + 1) * spec.perturbations];
        step_delta(seed, rec.round, k, scalars, offset, scratch);
        spec.step(x, &scratch.delta);
        if let (Some(h), Rule::Hiso { nu, eps }) = (h.as_deref_mut(), spec.rule) {
            for (hj, dj) in h.iter_mut().zip(&scratch.delta) {
                *hj = (1.0 - nu) * *hj + nu * (dj * dj + eps);
            }
        }
    }
}

/// `scratch.delta = (1/P) Σ_p g_p H^{-1/2} u_p` over the window at `offset`: local step `k`'s
/// update from its `P` scalars, with `H^{-1/2}` already in `scratch` and `scratch` sized.
pub fn step_delta(
    seed: u64,
    round: u64,
    k: usize,
    scalars: &[f32],
    offset: usize,
    scratch: &mut Scratch,
) {
    let inv_p = 1.0 / scalars.len() as f64;
    scratch.delta.fill(0.0);
    for (p, &g) in scalars.iter().enumerate() {
        // Each direction is consumed as it is generated (the sum is add_scaled_direction's,
        // coordinate for coordinate).
        add_direction(
            &direction_key(seed, round, k as u64, p as u64),
            offset,
            &mut scratch.delta,
            f64::from(g) * inv_p,
            Some(&scratch.h_inv_sqrt),
        );
    }
}

/// `x += t · H^{-1/2} u` over the window at `offset`, `u` the direction of perturbation `p` of
/// local step `k`, `h_inv_sqrt` the window of `H^{-1/2}` (HiSo; `None`: the identity): the
/// probe point of a model perturbed in place, each coordinate computed as [`super::Client`]
/// computes it (with `H^{-1/2} = 1` the product by one is exact). The direction is used as it
/// is generated, never stored.
#[allow(clippy::too_many_arguments)]
pub fn perturb(
    seed: u64,
    round: u64,
    k: usize,
    p: usize,
    t: f64,
    offset: usize,
    x: &mut [f64],
    h_inv_sqrt: Option<&[f64]>,
) {
    add_direction(
        &direction_key(seed, round, k as u64, p as u64),
        offset,
        x,
        t,
        h_inv_sqrt,
    );
}

/// `acc += c · s ⊙ u`: the preconditioned direction `z = H^{-1/2} u`, scaled.
pub fn add_scaled_direction(acc: &mut [f64], c: f64, s: &[f64], u: &[f64]) {
    for ((a, sj), uj) in acc.iter_mut().zip(s).zip(u) {
        *a += c * sj * uj;
    }
}
