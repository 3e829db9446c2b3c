//! Best uniform (minimax) approximation by the Remez exchange algorithm.
//!
//! Each iteration solves for the polynomial p and level E with f(x_i) − p(x_i) = (−1)^i·E on a
//! reference of n+2 points, then moves the reference to the alternating extrema of the new
//! error. At convergence the error equioscillates at n+2 points, which characterises the
//! minimax polynomial (Chebyshev's alternation theorem); [`Minimax::alternation`] exposes them
//! so callers can check it.

use serde::{Deserialize, Serialize};

use crate::ApproxError;
use crate::analysis::maximize;
use crate::chebyshev::{ChebPoly, Interval};

/// Grid for locating the error's extrema.
const GRID: usize = 4096;

/// Remez settings.
#[derive(Clone, Copy, Debug)]
pub struct RemezOptions {
    /// Stop when (max |e| − min |e| on the reference) / max |e| falls below this.
    pub tolerance: f64,
    /// Give up after this many exchanges.
    pub max_iterations: usize,
}

impl Default for RemezOptions {
    fn default() -> Self {
        Self {
            tolerance: 1e-9,
            max_iterations: 60,
        }
    }
}

/// The minimax polynomial and the evidence that it is one.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Minimax {
    /// The polynomial.
    pub poly: ChebPoly,
    /// The final reference: n+2 points where the error alternates in sign.
    pub alternation: Vec<f64>,
    /// f − p at the reference points.
    pub alternation_errors: Vec<f64>,
    /// The sup error over the interval at the last iteration.
    pub sup_error: f64,
    /// Exchanges performed.
    pub iterations: usize,
}

/// The degree-`degree` minimax approximation to `f` on `interval`.
pub fn remez(
    f: impl Fn(f64) -> f64,
    interval: Interval,
    degree: usize,
    options: RemezOptions,
) -> Result<Minimax, ApproxError> {
    let n = degree;
    // Start from the Chebyshev extrema, which are near-optimal for smooth f, pushed slightly
    // off-centre by t ↦ t + (1 − t²)/20 (monotone, ends fixed). A symmetric reference is
    // degenerate for odd or even f (the sigmoid, |x|): the levelled error E comes out 0.
    let mut reference: Vec<f64> = (0..n + 2)
        .map(|i| {
            let t = -(std::f64::consts::PI * i as f64 / (n + 1) as f64).cos();
            interval.from_unit(t + (1.0 - t * t) / 20.0)
        })
        .collect();
    let mut last = None;
    for iteration in 1..=options.max_iterations {
        let (poly, _level) = solve_reference(&f, interval, n, &reference)?;
        let error = |x: f64| f(x) - poly.eval(x);
        let extrema = alternating_extrema(&error, interval, n + 2)?;
        let abs: Vec<f64> = extrema.iter().map(|&x| error(x).abs()).collect();
        let max = abs.iter().copied().fold(0.0, f64::max);
        let min = abs.iter().copied().fold(f64::INFINITY, f64::min);
        let sup_error = max.max(maximize(|x| error(x).abs(), interval).1);
        reference = extrema;
        let converged = max == 0.0 || (sup_error - min) / sup_error < options.tolerance;
        last = Some((poly, sup_error, iteration));
        if converged {
            break;
        }
    }
    let Some((_, _, iterations)) = last else {
        return Err(ApproxError::Invalid(
            "Remez needs at least one iteration".into(),
        ));
    };
    // Re-solve on the final reference so polynomial and alternation set match.
    let (poly, _) = solve_reference(&f, interval, n, &reference)?;
    let error = |x: f64| f(x) - poly.eval(x);
    let alternation_errors: Vec<f64> = reference.iter().map(|&x| error(x)).collect();
    let sup_error = maximize(|x| error(x).abs(), interval).1;
    Ok(Minimax {
        poly,
        alternation: reference,
        alternation_errors,
        sup_error,
        iterations,
    })
}

impl Minimax {
    /// Whether the error alternates in sign on the reference and every |error| there is within
    /// `rel` of the sup error: the equioscillation certificate.
    pub fn equioscillates(&self, rel: f64) -> bool {
        let signs_alternate = self
            .alternation_errors
            .windows(2)
            .all(|w| w[0] * w[1] < 0.0);
        let level_ok = self
            .alternation_errors
            .iter()
            .all(|e| (e.abs() - self.sup_error).abs() <= rel * self.sup_error);
        signs_alternate && level_ok && self.alternation.len() == self.poly.degree() + 2
    }
}

/// Solves Σ_k c_k·T_k(t_i) + (−1)^i·E = f(x_i) for the n+1 coefficients and E.
fn solve_reference(
    f: &impl Fn(f64) -> f64,
    interval: Interval,
    n: usize,
    reference: &[f64],
) -> Result<(ChebPoly, f64), ApproxError> {
    let m = n + 2;
    let mut a = vec![vec![0.0; m + 1]; m];
    for (i, &x) in reference.iter().enumerate() {
        let t = interval.to_unit(x);
        let (mut tkm1, mut tk) = (1.0, t);
        for (k, entry) in a[i].iter_mut().take(n + 1).enumerate() {
            *entry = match k {
                0 => 1.0,
                1 => t,
                _ => {
                    let next = 2.0 * t * tk - tkm1;
                    tkm1 = tk;
                    tk = next;
                    next
                }
            };
        }
        a[i][n + 1] = if i % 2 == 0 { 1.0 } else { -1.0 };
        a[i][m] = f(x);
    }
    let sol = gaussian_elimination(a)?;
    let level = sol[n + 1];
    Ok((ChebPoly::new(sol[..=n].to_vec(), interval)?, level))
}

/// Solves the augmented system [A | b] with partial pivoting.
fn gaussian_elimination(mut a: Vec<Vec<f64>>) -> Result<Vec<f64>, ApproxError> {
    let m = a.len();
    for col in 0..m {
        let pivot = (col..m)
            .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
            .unwrap_or(col);
        if a[pivot][col].abs() < 1e-300 {
            return Err(ApproxError::Invalid(
                "Remez reference system is singular".into(),
            ));
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for row in a.iter_mut().skip(col + 1) {
            let factor = row[col] / pivot_row[col];
            for (x, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                *x -= factor * p;
            }
        }
    }
    let mut x = vec![0.0; m];
    for row in (0..m).rev() {
        let s: f64 = (row + 1..m).map(|k| a[row][k] * x[k]).sum();
        x[row] = (a[row][m] - s) / a[row][row];
    }
    Ok(x)
}

/// The extrema of `e` with alternating signs, reduced to exactly `count` points: one extremum
/// per run of constant sign, then the weakest removed while keeping alternation.
fn alternating_extrema(
    e: &impl Fn(f64) -> f64,
    interval: Interval,
    count: usize,
) -> Result<Vec<f64>, ApproxError> {
    let xs: Vec<f64> = interval.grid(GRID).collect();
    let vs: Vec<f64> = xs.iter().map(|&x| e(x)).collect();
    let mut points: Vec<(f64, f64)> = Vec::new(); // (x, e(x))
    let mut start = 0;
    for i in 1..=xs.len() {
        let run_ends = i == xs.len() || (vs[i] >= 0.0) != (vs[start] >= 0.0);
        if run_ends {
            let best = (start..i)
                .max_by(|&a, &b| vs[a].abs().total_cmp(&vs[b].abs()))
                .unwrap_or(start);
            let lo = xs[best.saturating_sub(1).max(start)];
            let hi = xs[(best + 1).min(i - 1)];
            let sign = vs[best].signum();
            let (x, v) = if lo < hi {
                let (x, _) = maximize(|x| sign * e(x), Interval { lo, hi });
                (x, e(x))
            } else {
                (xs[best], vs[best])
            };
            let (x, v) = if v.abs() >= vs[best].abs() {
                (x, v)
            } else {
                (xs[best], vs[best])
            };
            points.push((x, v));
            start = i;
        }
    }
    while points.len() > count {
        if points.len() == count + 1 {
            // Drop the weaker end.
            if points[0].1.abs() < points[points.len() - 1].1.abs() {
                points.remove(0);
            } else {
                points.pop();
            }
            continue;
        }
        let k = (0..points.len())
            .min_by(|&a, &b| points[a].1.abs().total_cmp(&points[b].1.abs()))
            .unwrap_or(0);
        if k == 0 || k == points.len() - 1 {
            points.remove(k);
        } else {
            // Removing k leaves two same-signed neighbours; keep the stronger.
            points.remove(k);
            let weaker = if points[k - 1].1.abs() < points[k].1.abs() {
                k - 1
            } else {
                k
            };
            points.remove(weaker);
        }
    }
    if points.len() < count {
        return Err(ApproxError::Invalid(format!(
            "Remez found {} alternating extrema, needs {count}",
            points.len()
        )));
    }
    Ok(points.into_iter().map(|(x, _)| x).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::error_report;
    use crate::chebyshev::interpolate;

    #[test]
    fn exp_minimax_equioscillates_and_beats_interpolation() {
        let iv = Interval::new(-1.0, 1.0).unwrap();
        for degree in [3, 5, 8] {
            let mm = remez(f64::exp, iv, degree, RemezOptions::default()).unwrap();
            assert!(
                mm.equioscillates(1e-6),
                "degree {degree}: {:?}",
                mm.alternation_errors
            );
            let cheb = interpolate(f64::exp, iv, degree).unwrap();
            let cheb_sup = error_report(f64::exp, 3.0, &cheb, iv).sup;
            assert!(
                mm.sup_error < cheb_sup,
                "degree {degree}: {} vs {cheb_sup}",
                mm.sup_error
            );
        }
    }

    #[test]
    fn abs_minimax_matches_known_degree_two_solution() {
        // The best quadratic to |x| on [−1, 1] is x² + 1/8, with error 1/8.
        let iv = Interval::new(-1.0, 1.0).unwrap();
        let mm = remez(f64::abs, iv, 2, RemezOptions::default()).unwrap();
        assert!((mm.sup_error - 0.125).abs() < 1e-8, "{}", mm.sup_error);
        assert!(mm.equioscillates(1e-6));
        let mono = mm.poly.to_power_basis();
        assert!(
            (mono[0] - 0.125).abs() < 1e-7 && mono[1].abs() < 1e-7 && (mono[2] - 1.0).abs() < 1e-7
        );
    }
}
