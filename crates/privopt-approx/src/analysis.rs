//! What the paper needs to know about an approximation: sup and L2 errors (the sup error with
//! a certified upper bound), extreme values and derivative bounds (smoothness β = m·max|p′|),
//! and monotonicity on an interval.

use serde::{Deserialize, Serialize};

use crate::chebyshev::{ChebPoly, Interval};
use crate::least_squares::integrate;

/// Grid density for locating extrema before refinement.
const GRID: usize = 8192;
/// Grid density for the certified sup-error bound.
const CERTIFY_GRID: usize = 1 << 20;

/// The maximum of `g` on `interval`: grid search, then golden-section refinement around the
/// best grid point. Returns (argmax, max).
pub fn maximize(g: impl Fn(f64) -> f64, interval: Interval) -> (f64, f64) {
    let xs: Vec<f64> = interval.grid(GRID).collect();
    let (mut best_i, mut best) = (0, f64::NEG_INFINITY);
    for (i, &x) in xs.iter().enumerate() {
        let v = g(x);
        if v > best {
            best = v;
            best_i = i;
        }
    }
    let lo = xs[best_i.saturating_sub(1)];
    let hi = xs[(best_i + 1).min(xs.len() - 1)];
    let (x, v) = golden_max(&g, lo, hi);
    if v > best { (x, v) } else { (xs[best_i], best) }
}

/// The minimum of `g` on `interval`, as (argmin, min).
pub fn minimize(g: impl Fn(f64) -> f64, interval: Interval) -> (f64, f64) {
    let (x, v) = maximize(|x| -g(x), interval);
    (x, -v)
}

fn golden_max(g: &impl Fn(f64) -> f64, mut a: f64, mut b: f64) -> (f64, f64) {
    let r = (5f64.sqrt() - 1.0) / 2.0;
    let mut c = b - r * (b - a);
    let mut d = a + r * (b - a);
    let (mut gc, mut gd) = (g(c), g(d));
    for _ in 0..80 {
        if gc > gd {
            b = d;
            d = c;
            gd = gc;
            c = b - r * (b - a);
            gc = g(c);
        } else {
            a = c;
            c = d;
            gc = gd;
            d = a + r * (b - a);
            gd = g(d);
        }
        if (b - a).abs() < 1e-14 * (1.0 + a.abs()) {
            break;
        }
    }
    if gc > gd { (c, gc) } else { (d, gd) }
}

/// A rigorous bound on sup |p′| over p's own interval: |T_k′| ≤ k² on [−1, 1].
pub fn derivative_bound(p: &ChebPoly) -> f64 {
    let scale = 2.0 / p.interval().width();
    scale
        * p.coeffs()
            .iter()
            .enumerate()
            .map(|(k, c)| (k * k) as f64 * c.abs())
            .sum::<f64>()
}

/// Approximation errors of `p` against `f` on `interval`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorReport {
    /// max |f − p| found (dense grid + refinement): a lower bound on the true sup error.
    pub sup: f64,
    /// Where the sup error is attained.
    pub argmax: f64,
    /// A certified upper bound on sup |f − p|: the grid maximum plus half the grid step times
    /// the Lipschitz constant of f − p (f's, given by the caller, plus the Markov bound on p′).
    pub sup_bound: f64,
    /// √∫ (f − p)² dx over the interval.
    pub l2: f64,
    /// √(∫ (f − p)² dx / (b − a)): the root-mean-square error.
    pub rms: f64,
}

/// Errors of `p` against `f` on `interval`; `f_lipschitz` bounds |f′| there.
pub fn error_report(
    f: impl Fn(f64) -> f64,
    f_lipschitz: f64,
    p: &ChebPoly,
    interval: Interval,
) -> ErrorReport {
    error_report_on_grid(f, f_lipschitz, p, interval, CERTIFY_GRID)
}

/// [`error_report`] with a chosen certification grid (coarser is faster, the bound looser).
pub fn error_report_on_grid(
    f: impl Fn(f64) -> f64,
    f_lipschitz: f64,
    p: &ChebPoly,
    interval: Interval,
    grid: usize,
) -> ErrorReport {
    let grid = grid.max(2);
    let e = |x: f64| (f(x) - p.eval(x)).abs();
    let grid_max = interval.grid(grid).map(e).fold(0.0, f64::max);
    let (argmax, sup) = maximize(e, interval);
    let step = interval.width() / (grid - 1) as f64;
    let lipschitz = f_lipschitz + derivative_bound(&restricted(p, interval));
    let sq = integrate(|x| (f(x) - p.eval(x)).powi(2), interval, 2048);
    ErrorReport {
        sup: sup.max(grid_max),
        argmax,
        sup_bound: grid_max + 0.5 * step * lipschitz,
        l2: sq.sqrt(),
        rms: (sq / interval.width()).sqrt(),
    }
}

/// `p` re-expanded on `interval` (so bounds computed from coefficients hold there).
fn restricted(p: &ChebPoly, interval: Interval) -> ChebPoly {
    if p.interval() == interval {
        return p.clone();
    }
    // Interpolating a degree-n polynomial at n+1 points reproduces it exactly.
    crate::chebyshev::interpolate(|x| p.eval(x), interval, p.degree()).unwrap_or_else(|_| p.clone())
}

/// max |p| on `interval`.
pub fn max_abs(p: &ChebPoly, interval: Interval) -> f64 {
    maximize(|x| p.eval(x).abs(), interval).1
}

/// max |p′| on `interval`.
pub fn max_abs_derivative(p: &ChebPoly, interval: Interval) -> f64 {
    max_abs(&p.derivative(), interval)
}

/// Whether p is non-increasing on `interval` (max p′ ≤ 0).
pub fn is_non_increasing(p: &ChebPoly, interval: Interval) -> bool {
    let d = p.derivative();
    maximize(|x| d.eval(x), interval).1 <= 0.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chebyshev::interpolate;

    #[test]
    fn certified_bound_is_above_the_true_error() {
        let iv = Interval::new(-1.0, 1.0).unwrap();
        let p = interpolate(f64::exp, iv, 4).unwrap();
        let r = error_report(f64::exp, std::f64::consts::E, &p, iv);
        // Interpolation error bound: |e| ≤ e/(2^4·5!) at Chebyshev nodes.
        assert!(r.sup <= std::f64::consts::E / (16.0 * 120.0));
        assert!(r.sup_bound >= r.sup && r.sup_bound < 1.05 * r.sup, "{r:?}");
        assert!(r.rms <= r.sup && (r.l2 - r.rms * 2f64.sqrt()).abs() < 1e-15);
    }

    #[test]
    fn extremes_and_monotonicity() {
        let iv = Interval::new(0.5, 4.0).unwrap();
        let p = interpolate(|x| 5.0 - x - x.powi(3), iv, 3).unwrap();
        assert!(is_non_increasing(&p, iv));
        assert!((max_abs(&p, iv) - p.eval(4.0).abs()).abs() < 1e-9);
        let q = interpolate(|x| x * x, Interval::new(-1.0, 1.0).unwrap(), 2).unwrap();
        assert!(!is_non_increasing(&q, Interval::new(-1.0, 1.0).unwrap()));
        assert!((max_abs_derivative(&q, Interval::new(-1.0, 1.0).unwrap()) - 2.0).abs() < 1e-12);
    }
}
