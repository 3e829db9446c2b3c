//! The privacy plan of one training set: the noise of DP-GD (with clipping) and of the no-clip
//! method calibrated to (ε, δ), App. D.3's certified no-clip parameters, and output
//! perturbation's noise; everything the Table 4 suites, the encrypted runs and the Python
//! estimator train with. One function decides it, so they cannot disagree.

use privopt_dp::GaussianMechanism;
use privopt_dp::exact::gaussian_mu_for_epsilon;
use privopt_dp::logmath::normal_upper_quantile;
use privopt_dp::{Accountant, GaussianRun, Sampling};
use privopt_ml::data::Dataset;
use rand::Rng;
use serde::Serialize;

use super::algorithms::{Barrier, GdSpec, output_sensitivity};
use super::logreg::{Link, gradient_sum};
use super::theorem::{BarrierShape, PHI_MAX, RunShape, SelectionTargets, select};
use crate::error::{DpfheError, Result, ensure};

/// What the plan is asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanTargets {
    /// Target ε.
    pub epsilon: f64,
    /// Target δ.
    pub delta: f64,
    /// DP-GD's per-example clipping bound C.
    pub clip: f64,
    /// Steps T of DP-GD and of output perturbation's equivalent passes.
    pub steps: u64,
    /// Steps T of the no-clip method.
    pub steps_noclip: u64,
    /// Examples per step, sampled without replacement (accounted with the
    /// Wang–Balle–Kasiviswanathan RDP bound); `None`: full batches (exact Gaussian accounting).
    pub batch: Option<usize>,
    /// DP-GD's learning rate (the no-clip method's is certified by the plan).
    pub lr_dpgd: f64,
    /// Sigmoid degrees the no-clip selection may use, in order.
    pub sigmoid_degrees: Vec<usize>,
    /// Tolerance E_f on the no-clip sigmoid's error; it sets the sensitivity 2(φ′_max + E_f)√m.
    pub e_f_target: f64,
    /// How P_κ is built and searched.
    pub barrier: BarrierShape,
    /// Release d ≥ ‖∇f(0)‖/√m with DP (Remark 5.3) instead of the data-independent ½; full
    /// batches only (ignored otherwise).
    pub release_d: bool,
}

impl Default for PlanTargets {
    /// The paper's Table 4 at ε = 1: T = 1000 full-batch steps, C = 1, DP-GD's step 2.
    fn default() -> Self {
        let selection = SelectionTargets::default();
        Self {
            epsilon: 1.0,
            delta: 1e-5,
            clip: 1.0,
            steps: 1000,
            steps_noclip: 1000,
            batch: None,
            lr_dpgd: 2.0,
            sigmoid_degrees: selection.sigmoid_degrees,
            e_f_target: selection.e_f_target,
            barrier: selection.barrier,
            release_d: false,
        }
    }
}

impl PlanTargets {
    /// Refuses values no plan can be made for; `key` prefixes the names in the messages.
    pub fn validate(&self, key: &str) -> Result<()> {
        ensure(self.epsilon > 0.0 && self.epsilon.is_finite(), || {
            format!("{key}epsilon must be > 0, got {}", self.epsilon)
        })?;
        ensure(self.delta > 0.0 && self.delta < 1.0, || {
            format!("{key}delta must be in (0, 1), got {}", self.delta)
        })?;
        ensure(self.clip > 0.0 && self.clip.is_finite(), || {
            format!("{key}clip must be > 0, got {}", self.clip)
        })?;
        ensure(
            self.steps >= 1 && self.steps_noclip >= 1 && self.batch != Some(0),
            || format!("{key}steps and batch must be >= 1"),
        )?;
        ensure(self.lr_dpgd > 0.0 && self.lr_dpgd.is_finite(), || {
            format!("{key}lr_dpgd must be > 0, got {}", self.lr_dpgd)
        })?;
        ensure(!self.sigmoid_degrees.is_empty(), || {
            format!("{key}sigmoid_degrees must not be empty")
        })?;
        ensure(self.e_f_target > 0.0 && self.e_f_target < PHI_MAX, || {
            format!(
                "{key}e_f_target must be in (0, {PHI_MAX}), got {}",
                self.e_f_target
            )
        })
    }

    /// Noise multiplier for (ε, `delta`) over `steps` steps of `batch` out of `n` examples:
    /// exact Gaussian composition for full batches, the RDP accountant with sampling without
    /// replacement otherwise.
    pub fn noise_multiplier(&self, n: usize, batch: usize, delta: f64, steps: u64) -> Result<f64> {
        if batch >= n {
            Ok((steps as f64).sqrt() / gaussian_mu_for_epsilon(self.epsilon, delta)?)
        } else {
            let sampling = Sampling::WithoutReplacement {
                q: batch as f64 / n as f64,
            };
            Ok(GaussianRun::calibrate(
                self.epsilon,
                delta,
                sampling,
                steps,
                Accountant::Rdp,
            )?)
        }
    }

    /// Replace-one L2 sensitivity of DP-GD's clipped gradient sum: 2C.
    pub fn dpgd_sensitivity(&self) -> f64 {
        2.0 * self.clip
    }

    /// Replace-one L2 sensitivity of the no-clip gradient sum (Theorem 3, App. C.2):
    /// Δ₂ = 2(φ′_max + E_f)√m for m features.
    pub fn noclip_sensitivity(&self, m: usize) -> f64 {
        2.0 * (PHI_MAX + self.e_f_target) * (m as f64).sqrt()
    }
}

/// Table 4's parameters for one training set: noise, App. D.3's certified no-clip parameters
/// and output perturbation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PlanNumbers {
    /// Features m (with the bias).
    pub features: usize,
    /// Mean ‖x‖ over the training rows (against the √m that Theorem 3's sensitivity assumes).
    pub mean_norm: f64,
    /// The bound on d = ‖∇f(0)‖/√m used by the certificate (released with DP or ½).
    pub noclip_d: f64,
    /// Whether Theorem 3 certifies the no-clip parameters.
    pub noclip_certified: bool,
    /// DP-SGD's noise multiplier.
    pub sigma_dpgd: f64,
    /// The no-clip method's noise multiplier.
    pub sigma_noclip: f64,
    /// DP-SGD's noise standard deviation on the mean gradient.
    pub noise_std_dpgd: f64,
    /// The no-clip method's.
    pub noise_std_noclip: f64,
    /// DP-SGD's steps.
    pub steps: u64,
    /// The no-clip method's steps.
    pub steps_noclip: u64,
    /// Examples per step.
    pub batch: usize,
    /// Certified step size η.
    pub noclip_eta: f64,
    /// Barrier Θ.
    pub noclip_theta: f64,
    /// Barrier λ.
    pub noclip_lambda: f64,
    /// Barrier κ.
    pub noclip_kappa: f64,
    /// Degree of the selected polynomial sigmoid.
    pub noclip_sigmoid_degree: usize,
    /// Half-width of its interval.
    pub noclip_sigmoid_half_width: f64,
    /// Its sup error e_f.
    pub noclip_e_f: f64,
    /// The barrier polynomial's error e_b.
    pub noclip_e_b: f64,
    /// The certificate's radius R.
    pub noclip_r: f64,
    /// Output perturbation's noise standard deviation.
    pub noise_std_output: f64,
    /// Output perturbation's passes over the data.
    pub output_passes: u64,
}

/// What [`plan`] decides for one training set.
#[derive(Clone, Debug)]
pub struct Plan {
    /// DP-GD with clipping (exact sigmoid).
    pub dpgd: GdSpec,
    /// The no-clip barrier method (Algorithm 3), with its certified polynomial sigmoid.
    pub noclip: GdSpec,
    /// Output perturbation: passes over the data.
    pub passes: u64,
    /// Output perturbation: constant step.
    pub lr_out: f64,
    /// Output perturbation: noise standard deviation on the output.
    pub std_out: f64,
    /// Examples per step.
    pub batch: usize,
    /// The numbers reported.
    pub numbers: PlanNumbers,
}

/// The plan for `train` (features in [−1, 1], the bias included): DP-GD and the no-clip
/// method calibrated to (ε, δ), the no-clip parameters certified by Theorem 3 (an error if
/// App. D.3's search finds none), output perturbation. `d_rng` is drawn from only when d is
/// released (`release_d` with full batches).
pub fn plan(train: &Dataset, targets: &PlanTargets, d_rng: &mut impl Rng) -> Result<Plan> {
    targets.validate("")?;
    let (n, m) = (train.len(), train.n_features());
    ensure(n >= 1 && m >= 1, || {
        "the training set must have at least one example and one feature".into()
    })?;
    let batch = targets.batch.map_or(n, |b| b.min(n));
    let (steps, steps_noclip, delta) = (targets.steps, targets.steps_noclip, targets.delta);
    let multiplier = |delta: f64, steps: u64| targets.noise_multiplier(n, batch, delta, steps);
    let sigma_dpgd = multiplier(delta, steps)?;
    let std_dpgd = sigma_dpgd * targets.dpgd_sensitivity() / batch as f64;
    // No-clip (Thm 3): sensitivity Δ₂ = 2(φ′_max + e_f)√m with e_f ≤ E_f; Lemma 5.3's weight
    // bound takes 2δ/3. The rest goes to the Gaussian steps (δ/3), or, when d is released
    // (Remark 5.3, full batches), δ/6 to T + 1 Gaussians and δ/6 to the chance that the
    // released bound on d is too low.
    let selection_targets = SelectionTargets {
        sigmoid_degrees: targets.sigmoid_degrees.clone(),
        e_f_target: targets.e_f_target,
        barrier: targets.barrier,
        ..SelectionTargets::default()
    };
    let release_d = targets.release_d && batch == n;
    let sigma_noclip = if release_d {
        multiplier(delta / 6.0, steps_noclip + 1)?
    } else {
        multiplier(delta / 3.0, steps_noclip)?
    };
    let std_noclip = sigma_noclip * targets.noclip_sensitivity(m) / batch as f64;
    let d = if release_d {
        released_d_bound(train, sigma_noclip, delta / 6.0, d_rng)?
    } else {
        0.5
    };
    let shape = RunShape {
        m,
        steps: steps_noclip,
        delta,
        noise_std: std_noclip,
        d,
    };
    let selection = select(&shape, &selection_targets)?.map_err(|cert| {
        DpfheError::Infeasible(format!(
            "App. D.3 selection found no certified parameters; last failures: {}",
            cert.failures.join("; ")
        ))
    })?;
    let cert = &selection.certificate;
    // Output perturbation: as many epochs as DP-SGD, constant step 1/β (β = m/4), L = √m.
    let passes = ((steps as f64 * batch as f64) / n as f64).ceil().max(1.0) as u64;
    let lr_out = 4.0 / m as f64;
    let sens = output_sensitivity(passes, (m as f64).sqrt(), lr_out, batch);
    let std_out = sens / gaussian_mu_for_epsilon(targets.epsilon, delta)?;
    let numbers = PlanNumbers {
        features: m,
        mean_norm: train.mean_row_norm(),
        noclip_d: d,
        noclip_certified: true,
        sigma_dpgd,
        sigma_noclip,
        noise_std_dpgd: std_dpgd,
        noise_std_noclip: std_noclip,
        steps,
        steps_noclip,
        batch,
        noclip_eta: cert.params.eta,
        noclip_theta: cert.params.theta,
        noclip_lambda: cert.params.lambda,
        noclip_kappa: cert.params.kappa,
        noclip_sigmoid_degree: selection.sigmoid.degree(),
        noclip_sigmoid_half_width: cert.sigmoid_half_width,
        noclip_e_f: cert.e_f,
        noclip_e_b: cert.e_b,
        noclip_r: cert.r,
        noise_std_output: std_out,
        output_passes: passes,
    };
    let dpgd = GdSpec {
        link: Link::Exact,
        steps,
        lr: targets.lr_dpgd,
        batch: targets.batch,
        clip: Some(targets.clip),
        noise_std: std_dpgd,
        barrier: None,
    };
    let noclip = GdSpec {
        link: Link::Poly(selection.sigmoid.clone()),
        steps: steps_noclip,
        lr: cert.params.eta,
        batch: targets.batch,
        clip: None,
        noise_std: std_noclip,
        barrier: Some(Barrier {
            lambda: cert.params.lambda,
            theta: cert.params.theta,
            reciprocal: selection.reciprocal.clone(),
        }),
    };
    Ok(Plan {
        dpgd,
        noclip,
        passes,
        lr_out,
        std_out,
        batch,
        numbers,
    })
}

/// Remark 5.3: a DP upper bound on d = ‖∇f(0)‖/√m. ‖∇f(0)‖ = ‖mean_i (½ − y_i)·x_i‖ changes by
/// at most √m/N when one example is replaced, so it is released with Gaussian noise of standard
/// deviation σ·√m/N (one more step of the same mechanism), then raised by z·std with
/// P(N(0,1) > z) = `tail` so that it bounds the true value except with probability `tail`.
/// Never above ½, which always bounds d.
fn released_d_bound(data: &Dataset, sigma: f64, tail: f64, rng: &mut impl Rng) -> Result<f64> {
    let (n, m) = (data.len(), data.n_features());
    // ∇f(0) = mean_i (σ(0) − y_i)·x_i.
    let mut grad = vec![0.0; m];
    let all: Vec<usize> = (0..n).collect();
    gradient_sum(&Link::Exact, &vec![0.0; m], data, &all, None, &mut grad);
    let norm = grad.iter().map(|g| g * g).sum::<f64>().sqrt() / n as f64;
    let sqrt_m = (m as f64).sqrt();
    let mechanism = GaussianMechanism::new(sigma, sqrt_m / n as f64)?;
    let mut released = [norm];
    mechanism.perturb(&mut released, rng);
    let bound = released[0] + mechanism.std() * normal_upper_quantile(tail);
    Ok((bound.max(0.0) / sqrt_m).min(0.5))
}
