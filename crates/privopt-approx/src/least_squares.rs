//! Continuous least squares: the degree-n polynomial minimising ∫_a^b (f − p)² dx, by
//! projecting f on the Legendre polynomials with Gauss–Legendre quadrature.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::ApproxError;
use crate::chebyshev::{ChebPoly, Interval, interpolate};

/// Nodes and weights of a quadrature rule.
pub type Rule = (Vec<f64>, Vec<f64>);

/// Gauss–Legendre nodes and weights on [−1, 1], computed once per size and shared (the
/// Newton iteration costs O(n²), which dominates repeated error reports).
pub fn gauss_legendre(n: usize) -> Arc<Rule> {
    static CACHE: OnceLock<Mutex<HashMap<usize, Arc<Rule>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Ok(map) = cache.lock()
        && let Some(rule) = map.get(&n)
    {
        return Arc::clone(rule);
    }
    let rule = Arc::new(compute_gauss_legendre(n));
    if let Ok(mut map) = cache.lock() {
        map.insert(n, Arc::clone(&rule));
    }
    rule
}

/// Gauss–Legendre nodes and weights on [−1, 1] (Newton's method on P_n).
fn compute_gauss_legendre(n: usize) -> Rule {
    let mut nodes = Vec::with_capacity(n);
    let mut weights = Vec::with_capacity(n);
    for i in 0..n {
        let mut x = (std::f64::consts::PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
        let mut dp = 1.0;
        for _ in 0..100 {
            let (p, d) = legendre_with_derivative(n, x);
            dp = d;
            let dx = p / d;
            x -= dx;
            if dx.abs() < 1e-16 {
                break;
            }
        }
        let (_, d) = legendre_with_derivative(n, x);
        dp = if d != 0.0 { d } else { dp };
        nodes.push(x);
        weights.push(2.0 / ((1.0 - x * x) * dp * dp));
    }
    (nodes, weights)
}

/// (P_n(x), P_n′(x)) by the three-term recurrence.
fn legendre_with_derivative(n: usize, x: f64) -> (f64, f64) {
    let (mut p0, mut p1) = (1.0, x);
    if n == 0 {
        return (1.0, 0.0);
    }
    for k in 2..=n {
        let k = k as f64;
        let p2 = ((2.0 * k - 1.0) * x * p1 - (k - 1.0) * p0) / k;
        p0 = p1;
        p1 = p2;
    }
    let n = n as f64;
    (p1, n * (x * p1 - p0) / (x * x - 1.0))
}

/// All Legendre values P_0(x) … P_n(x).
fn legendre_values(n: usize, x: f64) -> Vec<f64> {
    let mut v = vec![1.0, x];
    for k in 2..=n {
        let kf = k as f64;
        v.push(((2.0 * kf - 1.0) * x * v[k - 1] - (kf - 1.0) * v[k - 2]) / kf);
    }
    v.truncate(n + 1);
    v
}

/// The continuous L2-optimal polynomial of `degree` for `f` on `interval`. The quadrature uses
/// enough nodes (≥ 256) for the steep functions privopt approximates (a sigmoid on [−30, 30]).
pub fn least_squares(
    f: impl Fn(f64) -> f64,
    interval: Interval,
    degree: usize,
) -> Result<ChebPoly, ApproxError> {
    let rule = gauss_legendre((8 * (degree + 1)).max(256));
    let (nodes, weights) = (&rule.0, &rule.1);
    let mut legendre = vec![0.0; degree + 1];
    for (&t, &w) in nodes.iter().zip(weights) {
        let fx = f(interval.from_unit(t));
        for (c, p) in legendre.iter_mut().zip(legendre_values(degree, t)) {
            *c += w * fx * p;
        }
    }
    for (k, c) in legendre.iter_mut().enumerate() {
        *c *= (2.0 * k as f64 + 1.0) / 2.0;
    }
    // Re-express in the Chebyshev basis: a degree-n polynomial is its own interpolant.
    let legendre_poly = |x: f64| {
        let t = interval.to_unit(x);
        legendre
            .iter()
            .zip(legendre_values(degree, t))
            .map(|(c, p)| c * p)
            .sum::<f64>()
    };
    interpolate(legendre_poly, interval, degree)
}

/// ∫_a^b g(x) dx by Gauss–Legendre with `n` nodes.
pub fn integrate(g: impl Fn(f64) -> f64, interval: Interval, n: usize) -> f64 {
    let rule = gauss_legendre(n);
    0.5 * interval.width()
        * rule
            .0
            .iter()
            .zip(&rule.1)
            .map(|(&t, &w)| w * g(interval.from_unit(t)))
            .sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quadrature_is_exact_for_polynomials() {
        let iv = Interval::new(-1.0, 3.0).unwrap();
        let got = integrate(|x| x.powi(9) - 2.0 * x * x, iv, 6);
        let want = (3f64.powi(10) - 1.0) / 10.0 - 2.0 * (27.0 + 1.0) / 3.0;
        assert!((got - want).abs() < 1e-9 * want.abs());
    }

    #[test]
    fn least_squares_is_orthogonal_to_the_polynomial_space() {
        // The residual of an L2 projection is orthogonal to every x^j, j ≤ degree.
        let iv = Interval::symmetric(10.0).unwrap();
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        let p = least_squares(sig, iv, 7).unwrap();
        for j in 0..=7 {
            let inner = integrate(|x| (sig(x) - p.eval(x)) * (x / 10.0).powi(j), iv, 400);
            assert!(inner.abs() < 1e-10, "j={j}: {inner}");
        }
    }
}
