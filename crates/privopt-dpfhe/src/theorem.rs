//! Theorem 3's conditions for Algorithm 3 to be (ε, δ)-DP, and the data-independent parameter
//! selection of App. D.3 that searches for parameters meeting them.
//!
//! Notation as in the paper: m features (bias included), φ′_max = 1 for the logistic loss,
//! d ≥ ‖∇f(0)‖/√m (data-independently 1/2, since |σ(0) − y| = 1/2 and ‖x‖ ≤ √m), σ the
//! standard deviation of the noise on the averaged gradient, c_δ = √(2 ln(3T/δ)).

use privopt_approx::analysis::{error_report_on_grid, is_non_increasing, maximize, minimize};
use privopt_approx::functions::{
    Method, SIGMOID_LIPSCHITZ, approximate, reciprocal, reciprocal_lipschitz, sigmoid,
};
use privopt_approx::{ChebPoly, Interval};
use serde::Serialize;

use crate::error::Result;

/// φ′_max of the logistic loss: |σ(z) − y| ≤ 1.
pub const PHI_MAX: f64 = 1.0;

/// What the theorem needs to know about the run, apart from the tunable parameters.
#[derive(Clone, Copy, Debug)]
pub struct RunShape {
    /// Features m (bias included).
    pub m: usize,
    /// Steps T.
    pub steps: u64,
    /// δ.
    pub delta: f64,
    /// Standard deviation of the gradient noise.
    pub noise_std: f64,
    /// d ≥ ‖∇f(0)‖/√m.
    pub d: f64,
}

/// The tunable parameters of Algorithm 3.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct BarrierParams {
    /// Learning rate η.
    pub eta: f64,
    /// Threshold Θ.
    pub theta: f64,
    /// Penalty λ.
    pub lambda: f64,
    /// κ ∈ (0, 1).
    pub kappa: f64,
}

/// Every quantity of Theorem 3 for one parameter set, and which conditions fail.
#[derive(Clone, Debug, Serialize)]
pub struct Certificate {
    /// The parameters checked.
    pub params: BarrierParams,
    /// Sup error e_f of p̃ against σ on its own interval [−h, h] (certified bound).
    pub e_f: f64,
    /// h, the half-width of the sigmoid approximation interval.
    pub sigmoid_half_width: f64,
    /// Sup error e_B of P_κ against 1/x on [κΘ, Θ] (certified bound).
    pub e_b: f64,
    /// R, Lemma 5.3's bound on ‖w_i‖.
    pub r: f64,
    /// min and max of P_κ on [Θ − R², κΘ].
    pub m_p: f64,
    /// See `m_p`.
    pub big_m_p: f64,
    /// Right side of condition (1).
    pub eta_bound: f64,
    /// Both sides of condition (2).
    pub lhs2: f64,
    /// See `lhs2`.
    pub rhs2: f64,
    /// α = 2ηλ·m_P.
    pub alpha: f64,
    /// Failed conditions, in words; empty when the parameters are certified.
    pub failures: Vec<String>,
}

impl Certificate {
    /// Whether every condition holds.
    pub fn holds(&self) -> bool {
        self.failures.is_empty()
    }
}

/// c_δ = √(2 ln(3T/δ)).
pub fn c_delta(steps: u64, delta: f64) -> f64 {
    (2.0 * (3.0 * steps as f64 / delta).ln()).sqrt()
}

/// Lemma 5.3's R.
pub fn weight_bound(shape: &RunShape, p: &BarrierParams, zeta_f: f64, e_b: f64) -> f64 {
    let sm = (shape.m as f64).sqrt();
    ((1.0 - p.kappa) * p.theta).sqrt()
        + p.eta
            * (PHI_MAX * sm
                + zeta_f
                + 2.0 * p.lambda * e_b * p.theta.sqrt()
                + (sm + c_delta(shape.steps, shape.delta)) * shape.noise_std)
}

/// Checks Theorem 3 for `params` with sigmoid polynomial `sigmoid_poly` (fitted on [−h, h]) and
/// P_κ `reciprocal_poly` (fitted on [κΘ, Θ]). The sigmoid condition is checked as "h ≥ √m·R",
/// which makes e_f (measured on [−h, h]) an error bound on the interval the theorem asks for.
pub fn check(
    shape: &RunShape,
    params: &BarrierParams,
    sigmoid_poly: &ChebPoly,
    reciprocal_poly: &ChebPoly,
) -> Result<Certificate> {
    let e_f = sigmoid_error(sigmoid_poly);
    let e_b = reciprocal_error(params.theta, params.kappa, reciprocal_poly)?;
    check_numbers(
        shape,
        params,
        e_f,
        sigmoid_poly.interval().hi,
        reciprocal_poly,
        e_b,
    )
}

/// Certified sup error of a sigmoid polynomial on its own interval.
pub fn sigmoid_error(sigmoid_poly: &ChebPoly) -> f64 {
    error_report_on_grid(
        sigmoid,
        SIGMOID_LIPSCHITZ,
        sigmoid_poly,
        sigmoid_poly.interval(),
        SEARCH_GRID,
    )
    .sup_bound
}

/// Certified sup error e_B of P_κ against 1/x on [κΘ, Θ].
pub fn reciprocal_error(theta: f64, kappa: f64, reciprocal_poly: &ChebPoly) -> Result<f64> {
    let fit = Interval::new(kappa * theta, theta)?;
    Ok(error_report_on_grid(
        reciprocal,
        reciprocal_lipschitz(fit),
        reciprocal_poly,
        fit,
        SEARCH_GRID,
    )
    .sup_bound)
}

/// Certification grid of the errors inside the checker (a coarser grid only loosens the bound).
const SEARCH_GRID: usize = 1 << 16;

/// Theorem 3 from the numbers: sigmoid error `e_f` valid on [−h, h], P_κ and its error `e_b`.
pub fn check_numbers(
    shape: &RunShape,
    params: &BarrierParams,
    e_f: f64,
    h: f64,
    reciprocal_poly: &ChebPoly,
    e_b: f64,
) -> Result<Certificate> {
    let p = params;
    let mut failures = Vec::new();
    if !(p.kappa > 0.0 && p.kappa < 1.0 && p.theta > 0.0 && p.lambda > 0.0 && p.eta > 0.0) {
        failures.push("parameters out of range (need 0 < κ < 1, Θ, λ, η > 0)".into());
    }
    let sm = (shape.m as f64).sqrt();
    let zeta_f = e_f * sm;
    let r = weight_bound(shape, p, zeta_f, e_b);
    if sm * r > h {
        failures.push(format!(
            "sigmoid interval [−{h:.3}, {h:.3}] does not cover √m·R = {:.3}",
            sm * r
        ));
    }
    if e_f > PHI_MAX {
        failures.push(format!("e_f = {e_f:.4} exceeds φ′_max"));
    }
    // [Θ − R², κΘ]; when R² < (1 − κ)Θ it shrinks to (a sliver at) κΘ.
    let kt = p.kappa * p.theta;
    let tail = Interval::new((p.theta - r * r).min(kt - 1e-9 * kt.abs().max(1e-300)), kt)?;
    if !is_non_increasing(reciprocal_poly, tail) {
        failures.push(format!(
            "P_κ is not decreasing on [Θ − R², κΘ] = [{:.4}, {:.4}]",
            tail.lo, tail.hi
        ));
    }
    let m_p = minimize(|x| reciprocal_poly.eval(x), tail).1;
    let big_m_p = maximize(|x| reciprocal_poly.eval(x), tail).1;
    if m_p < 0.0 {
        failures.push(format!("m_P = {m_p:.4} < 0"));
    }
    let root = ((1.0 - p.kappa) * p.theta).sqrt();
    let eta_bound = (p.kappa * p.theta / p.lambda)
        .min(1.0 / (p.lambda * (big_m_p + m_p) + (PHI_MAX - shape.d) * sm / (2.0 * root)));
    if p.eta > eta_bound {
        failures.push(format!(
            "condition (1): η = {:.4e} > {eta_bound:.4e}",
            p.eta
        ));
    }
    let alpha = 2.0 * p.eta * p.lambda * m_p;
    if alpha > 1.0 {
        failures.push(format!("α = 2ηλm_P = {alpha:.4} > 1"));
    }
    let c = c_delta(shape.steps, shape.delta);
    let sigma = shape.noise_std;
    let a_coef = 2.0 * alpha - alpha * alpha;
    let b_coef = -2.0 * p.eta * ((1.0 - alpha) * (shape.d * sm + c * sigma) + zeta_f);
    let c_coef = -p.eta * p.eta * ((sm * PHI_MAX + (sm + c) * sigma).powi(2) - zeta_f * zeta_f);
    let rhs2 = if a_coef > 0.0 {
        (-b_coef + (b_coef * b_coef - 4.0 * a_coef * c_coef).max(0.0).sqrt()) / (2.0 * a_coef)
    } else {
        f64::INFINITY
    };
    if root < rhs2 {
        failures.push(format!("condition (2): √((1−κ)Θ) = {root:.4} < {rhs2:.4}"));
    }
    Ok(Certificate {
        params: *p,
        e_f,
        sigmoid_half_width: h,
        e_b,
        r,
        m_p,
        big_m_p,
        eta_bound,
        lhs2: root,
        rhs2,
        alpha,
        failures,
    })
}

/// How P_κ is built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BarrierShape {
    /// The paper's: least squares of 1/x on [κΘ, Θ] (App. D.3), searched over Θ, λ, κ.
    #[default]
    LeastSquares,
    /// A soft wall: P(x) = (1/(κΘ))·((Θ − x)/((1 − κ)Θ))^k, equal to 1/x at κΘ, decreasing
    /// and bounded by a power of R²/((1 − κ)Θ) on [Θ − R², κΘ], and nearly zero deep inside the
    /// ball. Theorem 3 allows any P_κ; this one keeps M_P close to m_P (D.3: "the left tail
    /// kept as low as possible … allows a larger learning rate") and barely regularises inside
    /// the ball, at the price of a larger e_B, which only widens R. Searched over the radius
    /// √((1 − κ)Θ), κ and the wall strength; see [`select`].
    Wall,
}

/// Targets and starting points of the D.3 procedure.
#[derive(Clone, Debug)]
pub struct SelectionTargets {
    /// Tolerance E_f on the sigmoid error.
    pub e_f_target: f64,
    /// Sigmoid degrees to try, in order.
    pub sigmoid_degrees: Vec<usize>,
    /// Degree of P_κ (least squares on [κΘ, Θ]).
    pub barrier_degree: usize,
    /// Initial λ (the paper: 0.001).
    pub lambda0: f64,
    /// Initial κ (the paper: 0.01).
    pub kappa0: f64,
    /// How P_κ is built.
    pub barrier: BarrierShape,
}

impl Default for SelectionTargets {
    fn default() -> Self {
        Self {
            e_f_target: 0.05,
            sigmoid_degrees: vec![7, 9],
            barrier_degree: 4,
            lambda0: 1e-3,
            kappa0: 0.01,
            barrier: BarrierShape::LeastSquares,
        }
    }
}

/// A certified parameter set with its polynomials.
#[derive(Clone, Debug)]
pub struct Selection {
    /// The certificate (all conditions hold).
    pub certificate: Certificate,
    /// p̃, the sigmoid polynomial.
    pub sigmoid: ChebPoly,
    /// P_κ.
    pub reciprocal: ChebPoly,
}

/// App. D.3: start from η = 1/(2·m/4), Θ = m, λ = λ₀, κ = κ₀; shrink κ until condition (2)
/// holds, then fit the sigmoid on [−√m·R, √m·R] and accept the first degree whose error is
/// within E_f and passes the full check; shrink Θ and grow λ and repeat. Of the certified sets
/// found, returns the one with the largest step η; if none, the last certificate tried (whose
/// `failures` say why).
///
/// With [`BarrierShape::Wall`] the search is over the wall instead (see [`search_wall`]).
pub fn select(
    shape: &RunShape,
    targets: &SelectionTargets,
) -> Result<std::result::Result<Selection, Certificate>> {
    match targets.barrier {
        BarrierShape::LeastSquares => search(shape, targets),
        BarrierShape::Wall => search_wall(shape, targets),
    }
}

/// The soft wall P(x) = (1/(κΘ))·((Θ − x)/((1 − κ)Θ))^k of [`BarrierShape::Wall`], exactly, as
/// a Chebyshev series on [κΘ, Θ] (it is evaluated anywhere).
pub fn wall_polynomial(theta: f64, kappa: f64, degree: usize) -> Result<ChebPoly> {
    let scale = 1.0 / (kappa * theta);
    let depth = (1.0 - kappa) * theta;
    let exponent = i32::try_from(degree)
        .map_err(|_| crate::DpfheError::Config(format!("wall degree {degree} is too large")))?;
    // Interpolation at degree + 1 points reproduces a polynomial of that degree exactly.
    Ok(approximate(
        |x| scale * ((theta - x) / depth).powi(exponent),
        Interval::new(kappa * theta, theta)?,
        degree,
        Method::Chebyshev,
    )?)
}

/// Radii √((1 − κ)Θ) tried by the wall search, as multiples of 1/√m (the sigmoid interval
/// scales with √m·R): 0.5, 0.5·1.15, … up to 40.
fn wall_radii(m: usize) -> impl Iterator<Item = f64> {
    let unit = 1.0 / (m as f64).sqrt();
    (0..)
        .map(move |i| 0.5 * unit * 1.15f64.powi(i))
        .take_while(move |r| *r <= 40.0 * unit)
}

/// The wall search: for each radius r = √((1 − κ)Θ) and κ ∈ {0.2, 0.5}, the wall strength
/// u = λ/(κΘ) on a geometric grid and, for each u, the largest η (bisection) for which every
/// condition of Theorem 3 holds, the sigmoid fitted on [−√m·R, √m·R] at the lowest degree
/// within E_f. Returns the certified set with the **largest radius** (the wall only acts near
/// it, so the radius is what limits the model), then the largest η; data-independent.
fn search_wall(
    shape: &RunShape,
    targets: &SelectionTargets,
) -> Result<std::result::Result<Selection, Certificate>> {
    let sm = (shape.m as f64).sqrt();
    let mut sigmoid_fits = SigmoidFits::default();
    let mut best: Option<(f64, Selection)> = None;
    let mut last = None;
    for r in wall_radii(shape.m) {
        let mut found_at_r = false;
        for kappa in [0.2, 0.5] {
            let theta = r * r / (1.0 - kappa);
            let wall = wall_polynomial(theta, kappa, targets.barrier_degree)?;
            // e_B does not depend on η or λ.
            let barrier = (&wall, reciprocal_error(theta, kappa, &wall)?);
            // Stronger walls hold the boundary at a larger step until condition (1), which
            // shrinks like 1/λ, takes over: scan u upwards and stop once η falls.
            let mut best_here: Option<Selection> = None;
            let mut u = 0.05;
            while u < 1e4 {
                let lambda = u * kappa * theta;
                u *= 1.25;
                let params = |eta| BarrierParams {
                    eta,
                    theta,
                    lambda,
                    kappa,
                };
                let mut at =
                    |eta: f64| certify(shape, targets, params(eta), barrier, sm, &mut sigmoid_fits);
                let (mut lo, mut hi) = (1e-6, 1.0);
                let mut sel = match at(lo)? {
                    Ok(sel) => sel,
                    Err(cert) => {
                        last = Some(cert);
                        continue;
                    }
                };
                for _ in 0..30 {
                    let mid = (lo * hi).sqrt();
                    match at(mid)? {
                        Ok(s) => {
                            lo = mid;
                            sel = s;
                        }
                        Err(_) => hi = mid,
                    }
                }
                let eta = sel.certificate.params.eta;
                if best_here
                    .as_ref()
                    .is_some_and(|b| b.certificate.params.eta >= eta)
                {
                    break;
                }
                best_here = Some(sel);
            }
            if let Some(sel) = best_here {
                found_at_r = true;
                let better = best.as_ref().is_none_or(|(br, b)| {
                    r > *br || sel.certificate.params.eta > b.certificate.params.eta
                });
                if better {
                    best = Some((r, sel));
                }
            }
        }
        if !found_at_r && best.is_some() {
            // Radii only get harder from here (the sigmoid interval grows with R).
            break;
        }
    }
    if let Some((_, sel)) = best {
        return Ok(Ok(sel));
    }
    match last {
        Some(cert) => Ok(Err(cert)),
        None => Err(crate::DpfheError::Infeasible(
            "wall selection tried no parameter set".into(),
        )),
    }
}

/// Minimax sigmoid fits by (degree, 2h), with their certified errors; `None` when Remez failed.
type SigmoidFits = std::collections::HashMap<(usize, u64), Option<(ChebPoly, f64)>>;

/// Every condition of Theorem 3 for `params` and P_κ = `reciprocal` (error `e_b` on [κΘ, Θ]),
/// with the sigmoid fitted on [−h, h], h = √m·R rounded up to a half (a wider interval still
/// covers √m·R, and nearby candidates share one Remez run), at the first degree of `targets`
/// whose error is within E_f. The certified selection, or the certificate that failed.
fn certify(
    shape: &RunShape,
    targets: &SelectionTargets,
    params: BarrierParams,
    (reciprocal, e_b): (&ChebPoly, f64),
    sm: f64,
    sigmoid_fits: &mut SigmoidFits,
) -> Result<std::result::Result<Selection, Certificate>> {
    let barrier_side = check_numbers(
        shape,
        &params,
        targets.e_f_target,
        f64::INFINITY,
        reciprocal,
        e_b,
    )?;
    if !barrier_side.holds() {
        return Ok(Err(barrier_side));
    }
    let h = ((sm * barrier_side.r).max(0.5) * 2.0).ceil() / 2.0;
    let mut last = barrier_side;
    for &degree in &targets.sigmoid_degrees {
        let fit = sigmoid_fits
            .entry((degree, (h * 2.0) as u64))
            .or_insert_with(|| {
                approximate(
                    sigmoid,
                    Interval::symmetric(h).ok()?,
                    degree,
                    Method::Minimax,
                )
                .ok()
                .map(|poly| {
                    let e_f = sigmoid_error(&poly);
                    (poly, e_f)
                })
            });
        let Some((sigmoid_poly, e_f)) = fit.clone() else {
            continue;
        };
        let mut full = check_numbers(shape, &params, e_f, h, reciprocal, e_b)?;
        if e_f > targets.e_f_target {
            full.failures.push(format!(
                "e_f = {e_f:.4} above the target {}",
                targets.e_f_target
            ));
        }
        if full.holds() {
            return Ok(Ok(Selection {
                certificate: full,
                sigmoid: sigmoid_poly,
                reciprocal: reciprocal.clone(),
            }));
        }
        last = full;
    }
    Ok(Err(last))
}

fn search(
    shape: &RunShape,
    targets: &SelectionTargets,
) -> Result<std::result::Result<Selection, Certificate>> {
    let m = shape.m as f64;
    let mut theta = m;
    let mut lambda = targets.lambda0;
    let mut last = None;
    let mut best: Option<Selection> = None;
    let mut fits = SigmoidFits::default();
    for _ in 0..25 {
        let mut kappa = targets.kappa0;
        let mut eta = 2.0 / m;
        for _ in 0..30 {
            let fit = Interval::new(kappa * theta, theta)?;
            let reciprocal_poly = approximate(
                reciprocal,
                fit,
                targets.barrier_degree,
                Method::LeastSquares,
            )?;
            let mut params = BarrierParams {
                eta,
                theta,
                lambda,
                kappa,
            };
            let e_b = reciprocal_error(theta, kappa, &reciprocal_poly)?;
            // Barrier-side conditions first, with the sigmoid at its target error and an
            // unbounded interval: cheap, and most candidates fail here.
            let barrier_side = |params: &BarrierParams| {
                check_numbers(
                    shape,
                    params,
                    targets.e_f_target,
                    f64::INFINITY,
                    &reciprocal_poly,
                    e_b,
                )
            };
            let mut cert = barrier_side(&params)?;
            if cert.eta_bound < params.eta {
                // Condition (1) only asks for a smaller step; take it and re-check.
                params.eta = 0.99 * cert.eta_bound;
                eta = params.eta;
                cert = barrier_side(&params)?;
            }
            if cert.holds() {
                let barrier = (&reciprocal_poly, e_b);
                match certify(shape, targets, params, barrier, m.sqrt(), &mut fits)? {
                    Ok(sel) => {
                        // Keep searching: the certified set with the largest step wins (the
                        // step decides how far T noisy steps can travel).
                        if best
                            .as_ref()
                            .is_none_or(|b: &Selection| b.certificate.params.eta < params.eta)
                        {
                            best = Some(sel);
                        }
                    }
                    Err(full) => last = Some(full),
                }
            } else {
                last = Some(cert);
            }
            kappa *= 0.7;
            if kappa < 1e-6 {
                break;
            }
        }
        theta *= 0.7;
        lambda *= 1.5;
    }
    if let Some(sel) = best {
        return Ok(Ok(sel));
    }
    match last {
        Some(cert) => Ok(Err(cert)),
        None => Err(crate::DpfheError::Infeasible(
            "D.3 selection tried no parameter set".into(),
        )),
    }
}
