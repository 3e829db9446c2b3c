//! Rényi differential privacy of the Gaussian mechanism, alone and subsampled.
//!
//! All values are for noise multiplier σ (noise standard deviation divided by the L2
//! sensitivity). Poisson subsampling uses add-or-remove-one neighbours (Mironov, Talwar and
//! Zhang 2019); sampling without replacement uses replace-one neighbours and the general bound of
//! Wang, Balle and Kasiviswanathan 2019 (Theorem 9).

use crate::DpError;
use crate::logmath::{log_add, log_binomial, log_sum_exp};

/// How each step's batch is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    /// Every record every step (full-batch gradient descent).
    Full,
    /// Each record independently with probability `q`.
    Poisson {
        /// Sampling probability.
        q: f64,
    },
    /// A fixed-size batch, a fraction `q` of the data, drawn without replacement.
    WithoutReplacement {
        /// Batch size divided by dataset size.
        q: f64,
    },
}

impl Sampling {
    /// The sampling rate (1 for full batches).
    pub fn rate(&self) -> f64 {
        match *self {
            Sampling::Full => 1.0,
            Sampling::Poisson { q } | Sampling::WithoutReplacement { q } => q,
        }
    }

    fn validate(&self) -> Result<(), DpError> {
        let q = self.rate();
        if !(q > 0.0 && q <= 1.0) {
            return Err(DpError::Invalid(format!(
                "sampling rate q = {q} must be in (0, 1]"
            )));
        }
        Ok(())
    }
}

/// The Rényi orders Google's `dp-accounting` uses by default: 1.1, 1.2, …, 10.9, 11, …, 63, 128,
/// 256, 512, 1024. Using the same grid makes our optimal orders comparable with theirs.
pub fn default_orders() -> Vec<f64> {
    let mut orders: Vec<f64> = (1..100).map(|x| 1.0 + f64::from(x) / 10.0).collect();
    orders.extend((11..64).map(f64::from));
    orders.extend([128.0, 256.0, 512.0, 1024.0]);
    orders
}

/// The smallest noise multiplier the accountant takes: one step is then above ε = 200 at
/// every order (the guarantee is vacuous), and the accountants' cost grows as 1/σ² (the
/// Poisson integral's step is σ/64; without replacement, 3 s at 0.05 and 70 s at 0.01).
pub const MIN_SIGMA: f64 = 0.05;

/// RDP at `order` of one step of the Gaussian mechanism with noise multiplier `sigma` under
/// `sampling`.
pub fn rdp_step(sigma: f64, sampling: Sampling, order: f64) -> Result<f64, DpError> {
    if !(sigma.is_finite() && sigma >= MIN_SIGMA) {
        return Err(DpError::Invalid(format!(
            "noise multiplier σ = {sigma} must be at least {MIN_SIGMA} (below it the \
             guarantee is vacuous and the subsampled accountants cost minutes)"
        )));
    }
    if !(order.is_finite() && order > 1.0) {
        return Err(DpError::Invalid(format!("Rényi order {order} must be > 1")));
    }
    sampling.validate()?;
    let q = sampling.rate();
    Ok(match sampling {
        _ if q == 1.0 => order / (2.0 * sigma * sigma),
        Sampling::Full => order / (2.0 * sigma * sigma),
        Sampling::Poisson { q } => poisson_log_moment(q, sigma, order) / (order - 1.0),
        Sampling::WithoutReplacement { q } => wor_rdp(q, sigma, order),
    })
}

/// `ln A_α` with `A_α = E_{z~N(0,σ²)}[((1−q) + q·e^{(2z−1)/(2σ²)})^α]`, the log-moment of the
/// Poisson-subsampled Gaussian. Integer orders use the exact binomial expansion; fractional
/// orders integrate numerically (the alternating series some libraries use loses all precision
/// for small orders, which is why `dp-accounting` drops them).
fn poisson_log_moment(q: f64, sigma: f64, order: f64) -> f64 {
    if order.fract() == 0.0 && order <= 4096.0 {
        poisson_log_moment_integer(q, sigma, order)
    } else {
        poisson_log_moment_integral(q, sigma, order)
    }
}

fn poisson_log_moment_integer(q: f64, sigma: f64, order: f64) -> f64 {
    let (ln_q, ln_1mq) = (q.ln(), (-q).ln_1p());
    let n = order as u64;
    log_sum_exp((0..=n).map(|i| {
        let i = i as f64;
        log_binomial(order, i)
            + i * ln_q
            + (order - i) * ln_1mq
            + (i * i - i) / (2.0 * sigma * sigma)
    }))
}

/// Trapezoid rule in log space over a window that holds both possible modes of the integrand
/// (near 0, and near `order` where the tilted term takes over). The integrand is smooth on the
/// scale σ, so a step of σ/64 makes the rule exact to double precision.
///
/// Below the crossover `c` where the tilted term reaches `1 − q`, the integrand is at most
/// `2^α (1−q)^α` times the Gaussian density, so past `z* = σ·√(2(α ln 2 + 60))` it holds less
/// than `e^{−60}` of the mass near 0: the window stops at `min(c, z*)` (besides `order`)
/// instead of `c`, which for a large σ is `σ² ln(1/q)` and took minutes to cover.
fn poisson_log_moment_integral(q: f64, sigma: f64, order: f64) -> f64 {
    let (ln_q, ln_1mq) = (q.ln(), (-q).ln_1p());
    let s2 = sigma * sigma;
    let lo = -(14.0 * sigma + 1.0);
    let crossover = 0.5 + s2 * (1.0 / q).ln();
    let negligible = sigma * (2.0 * (order * std::f64::consts::LN_2 + 60.0)).sqrt();
    let hi = order.max(crossover.min(negligible)) + 14.0 * sigma + 1.0;
    let h = sigma / 64.0;
    let n = ((hi - lo) / h).ceil() as usize;
    let ln_norm = -(sigma * (2.0 * std::f64::consts::PI).sqrt()).ln();
    let log_integrand = |z: f64| {
        -z * z / (2.0 * s2) + ln_norm + order * log_add(ln_1mq, ln_q + (2.0 * z - 1.0) / (2.0 * s2))
    };
    let interior = log_sum_exp((1..n).map(|i| log_integrand(lo + i as f64 * h)));
    let ends = log_add(log_integrand(lo), log_integrand(lo + n as f64 * h)) + 0.5_f64.ln();
    log_add(interior, ends) + h.ln()
}

/// Orders above this use the general `2·e^{(j−1)ε(j)}` terms instead of forward differences.
const WOR_MAX_EXACT_ORDER: u64 = 256;

/// Wang–Balle–Kasiviswanathan's bound for sampling without replacement, Gaussian base
/// mechanism (ε(j) = j/(2σ²)), at integer orders, in the strengthened form of their Theorem 27
/// (arXiv v4): the j-th term uses the even forward differences of G(j) = e^{(j−1)·ε(j)}
/// where they beat the general Theorem 9 term 2·e^{(j−1)ε(j)}. Fractional orders interpolate
/// `(α−1)·ε(α)` linearly, valid because that cumulant is convex in α. Never worse than the
/// mechanism without subsampling.
fn wor_rdp(q: f64, sigma: f64, order: f64) -> f64 {
    let diffs = EvenForwardDifferences::new(sigma, (order.ceil() as u64).min(WOR_MAX_EXACT_ORDER));
    wor_rdp_with(q, sigma, order, &diffs)
}

fn wor_rdp_with(q: f64, sigma: f64, order: f64, diffs: &EvenForwardDifferences) -> f64 {
    let unsampled = order / (2.0 * sigma * sigma);
    let lo = order.floor();
    let hi = order.ceil();
    let at = |a: f64| {
        if a <= 1.0 {
            0.0
        } else {
            wor_log_moment_integer(q, sigma, a, diffs)
        }
    };
    let bound = if lo == hi {
        at(lo) / (order - 1.0)
    } else {
        let t = order - lo;
        ((1.0 - t) * at(lo) + t * at(hi)) / (order - 1.0)
    };
    bound.min(unsampled)
}

fn wor_log_moment_integer(q: f64, sigma: f64, order: f64, diffs: &EvenForwardDifferences) -> f64 {
    let s2 = sigma * sigma;
    let cgf = |x: f64| x * (x + 1.0) / (2.0 * s2); // (x)·ε(x + 1)
    let eps2 = 1.0 / s2; // ε(2)
    // min{4(e^{ε(2)} − 1), 2·e^{ε(2)}} in log space.
    let j2 = (4.0_f64.ln() + eps2.exp_m1().ln()).min(2.0_f64.ln() + eps2);
    let mut terms = vec![0.0, 2.0 * q.ln() + log_binomial(order, 2.0) + j2];
    let n = order as u64;
    terms.extend((3..=n).map(|j| {
        let general = 2.0_f64.ln() + cgf(j as f64 - 1.0);
        let strengthened = match (diffs.log_abs(2 * (j / 2)), diffs.log_abs(2 * j.div_ceil(2))) {
            (Some(a), Some(b)) => 4.0_f64.ln() + 0.5 * (a + b),
            _ => f64::INFINITY,
        };
        let j = j as f64;
        j * q.ln() + log_binomial(order, j) + general.min(strengthened)
    }));
    log_sum_exp(terms)
}

/// ln Δ^k G(0) for even k, where G(x) = e^{x(x−1)/(2σ²)} = E[e^{xT}] with T = Z/σ − 1/(2σ²),
/// Z ~ N(0, 1). Hence Δ^k G(0) = E[(e^T − 1)^k], positive for even k and computed by
/// integrating in log space: no alternating sums, so no cancellation.
struct EvenForwardDifferences {
    log_values: Vec<f64>, // index k/2 − 1 holds ln Δ^k G(0)
}

impl EvenForwardDifferences {
    fn new(sigma: f64, max_order: u64) -> Self {
        let c = 1.0 / (2.0 * sigma * sigma);
        let log_values = (1..=max_order / 2)
            .map(|half| {
                let k = (2 * half) as f64;
                // The integrand peaks near z = k/σ for large k; the window covers it.
                let (lo, hi) = (-40.0, k / sigma + 40.0);
                let h = 0.01_f64.min(sigma / 64.0);
                let n = ((hi - lo) / h).ceil() as usize;
                let ln_norm = -0.5 * (2.0 * std::f64::consts::PI).ln();
                let f = |z: f64| -0.5 * z * z + ln_norm + k * (z / sigma - c).exp_m1().abs().ln();
                log_sum_exp((0..=n).map(|i| f(lo + i as f64 * h))) + h.ln()
            })
            .collect();
        Self { log_values }
    }

    fn log_abs(&self, k: u64) -> Option<f64> {
        if k < 2 || k % 2 == 1 {
            return None;
        }
        self.log_values.get((k / 2 - 1) as usize).copied()
    }
}

/// How an RDP curve is turned into (ε, δ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conversion {
    /// ε = min_α RDP(α) + ln(1/δ)/(α−1) (Mironov 2017).
    Classic,
    /// ε = min_α RDP(α) + ln(1−1/α) − ln(δ·α)/(α−1) (Canonne–Kamath–Steinke 2020, Prop. 12).
    Improved,
}

/// ε at one δ, with the order that attains it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpsilonAt {
    /// The privacy loss.
    pub epsilon: f64,
    /// The Rényi order that minimises the conversion.
    pub order: f64,
}

/// RDP values at a grid of orders: what composition adds up.
#[derive(Clone, Debug, PartialEq)]
pub struct RdpCurve {
    orders: Vec<f64>,
    values: Vec<f64>,
}

impl RdpCurve {
    /// The RDP of `steps` compositions of the (subsampled) Gaussian mechanism.
    pub fn gaussian(
        sigma: f64,
        sampling: Sampling,
        steps: u64,
        orders: &[f64],
    ) -> Result<Self, DpError> {
        let values = match sampling {
            Sampling::WithoutReplacement { q } if q < 1.0 => {
                // Validate every order, then share one table of forward differences.
                for &a in orders {
                    rdp_step(sigma, Sampling::Full, a)?;
                }
                sampling.validate()?;
                let top = orders.iter().copied().fold(2.0, f64::max).ceil() as u64;
                let diffs = EvenForwardDifferences::new(sigma, top.min(WOR_MAX_EXACT_ORDER));
                orders
                    .iter()
                    .map(|&a| wor_rdp_with(q, sigma, a, &diffs) * steps as f64)
                    .collect()
            }
            _ => orders
                .iter()
                .map(|&a| rdp_step(sigma, sampling, a).map(|r| r * steps as f64))
                .collect::<Result<Vec<_>, _>>()?,
        };
        Ok(Self {
            orders: orders.to_vec(),
            values,
        })
    }

    /// Sequential composition with another mechanism on the same order grid.
    pub fn compose(&self, other: &Self) -> Result<Self, DpError> {
        if self.orders != other.orders {
            return Err(DpError::Invalid(
                "composed RDP curves use different orders".into(),
            ));
        }
        let values = self
            .values
            .iter()
            .zip(&other.values)
            .map(|(a, b)| a + b)
            .collect();
        Ok(Self {
            orders: self.orders.clone(),
            values,
        })
    }

    /// The orders.
    pub fn orders(&self) -> &[f64] {
        &self.orders
    }

    /// The RDP value at each order.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The smallest ε over the grid at which the curve gives (ε, δ)-DP.
    pub fn epsilon(&self, delta: f64, conversion: Conversion) -> Result<EpsilonAt, DpError> {
        check_delta(delta)?;
        let mut best = EpsilonAt {
            epsilon: f64::INFINITY,
            order: f64::NAN,
        };
        for (&a, &r) in self.orders.iter().zip(&self.values) {
            if !r.is_finite() {
                continue;
            }
            let eps = match conversion {
                Conversion::Classic => r + (1.0 / delta).ln() / (a - 1.0),
                Conversion::Improved => r + (-1.0 / a).ln_1p() - (delta * a).ln() / (a - 1.0),
            };
            if eps < best.epsilon {
                best = EpsilonAt {
                    epsilon: eps.max(0.0),
                    order: a,
                };
            }
        }
        if best.epsilon.is_finite() {
            Ok(best)
        } else {
            Err(DpError::Invalid("no Rényi order gives a finite ε".into()))
        }
    }
}

pub(crate) fn check_delta(delta: f64) -> Result<(), DpError> {
    if delta > 0.0 && delta < 1.0 {
        Ok(())
    } else {
        Err(DpError::Invalid(format!("δ = {delta} must be in (0, 1)")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integral_matches_binomial_expansion_at_integer_orders() {
        // The last two: a σ so large that the window's old bound (σ² ln(1/q)) took minutes.
        let cases = [
            (0.01, 1.0),
            (0.1, 1.0),
            (0.1, 2.0),
            (0.5, 0.8),
            (0.02, 4.0),
            (0.1, 30.0),
            (0.1, 1e5),
        ];
        for &(q, sigma) in &cases {
            for order in [2.0, 3.0, 5.0, 8.0, 16.0] {
                let exact = poisson_log_moment_integer(q, sigma, order);
                let numeric = poisson_log_moment_integral(q, sigma, order);
                // Plus 1e-14 absolute: near σ = 1e5 the log-moment is ~1e-12, the size of the
                // rounding of a sum whose terms are ~1.
                assert!(
                    (exact - numeric).abs() <= 1e-9 * exact.abs().max(1e-12) + 1e-14,
                    "q={q} σ={sigma} α={order}: {exact} vs {numeric}"
                );
            }
        }
    }

    #[test]
    fn even_forward_differences_match_the_alternating_sum() {
        for sigma in [0.8_f64, 1.5, 4.0] {
            let diffs = EvenForwardDifferences::new(sigma, 8);
            let g = |x: f64| (x * (x - 1.0) / (2.0 * sigma * sigma)).exp();
            for k in [2u64, 4, 6, 8] {
                let direct: f64 = (0..=k)
                    .map(|i| {
                        let sign = if (k - i) % 2 == 0 { 1.0 } else { -1.0 };
                        sign * log_binomial(k as f64, i as f64).exp() * g(i as f64)
                    })
                    .sum();
                let ours = diffs.log_abs(k).unwrap().exp();
                assert!(
                    (ours - direct).abs() <= 1e-7 * direct.abs(),
                    "σ={sigma} k={k}: {ours} vs {direct}"
                );
            }
        }
    }

    #[test]
    fn full_sampling_is_the_plain_gaussian() {
        let r = rdp_step(2.0, Sampling::Poisson { q: 1.0 }, 3.0).unwrap();
        assert!((r - 3.0 / 8.0).abs() < 1e-15);
        let r = rdp_step(2.0, Sampling::WithoutReplacement { q: 1.0 }, 3.0).unwrap();
        assert!((r - 3.0 / 8.0).abs() < 1e-15);
    }

    #[test]
    fn subsampling_amplifies() {
        for order in [2.0, 2.5, 8.0, 32.0] {
            let full = rdp_step(1.5, Sampling::Full, order).unwrap();
            for q in [0.001, 0.01, 0.1, 0.5] {
                let p = rdp_step(1.5, Sampling::Poisson { q }, order).unwrap();
                let w = rdp_step(1.5, Sampling::WithoutReplacement { q }, order).unwrap();
                assert!(p <= full * (1.0 + 1e-12) && w <= full * (1.0 + 1e-12));
            }
        }
    }

    #[test]
    fn small_q_poisson_is_quadratic_in_q() {
        // For small q, RDP ≈ q²·α/σ²·(e^{1/σ²} − 1)/2·… ; halving q quarters the value.
        let a = rdp_step(2.0, Sampling::Poisson { q: 1e-4 }, 2.0).unwrap();
        let b = rdp_step(2.0, Sampling::Poisson { q: 5e-5 }, 2.0).unwrap();
        assert!((a / b - 4.0).abs() < 1e-3, "{}", a / b);
        // At order 2 the moment is exact: A_2 = 1 + q²(e^{1/σ²} − 1).
        let q: f64 = 0.3;
        let exact = (q * q * (0.25_f64).exp_m1()).ln_1p();
        let r = rdp_step(2.0, Sampling::Poisson { q }, 2.0).unwrap();
        assert!((r - exact).abs() < 1e-13);
    }

    #[test]
    fn invalid_inputs_are_rejected() {
        assert!(rdp_step(0.0, Sampling::Full, 2.0).is_err());
        assert!(rdp_step(1.0, Sampling::Poisson { q: 1.5 }, 2.0).is_err());
        assert!(rdp_step(1.0, Sampling::Full, 1.0).is_err());
        // Finding 5 of the third adversarial pass: a tiny σ (what calibrating a huge ε
        // searches down to) made the Poisson integral take seconds per order.
        assert!(rdp_step(MIN_SIGMA / 2.0, Sampling::Poisson { q: 0.1 }, 2.5).is_err());
        let e = crate::accountant::GaussianRun::calibrate(
            1e30,
            1e-5,
            Sampling::Poisson { q: 0.1 },
            10,
            crate::accountant::Accountant::Rdp,
        );
        assert!(e.is_err());
        let c = RdpCurve::gaussian(1.0, Sampling::Full, 1, &[2.0]).unwrap();
        assert!(c.epsilon(0.0, Conversion::Improved).is_err());
    }
}
