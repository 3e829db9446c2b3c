//! Polynomials stored as Chebyshev series on an interval [a, b]: p(x) = Σ c_k·T_k(t) with
//! t = (2x − a − b)/(b − a). The Chebyshev basis keeps coefficients well scaled on wide
//! intervals such as [−30, 30], where power-basis coefficients span 10 orders of magnitude.

use serde::{Deserialize, Serialize};

use crate::ApproxError;

/// A closed interval [lo, hi] with lo < hi.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Left end.
    pub lo: f64,
    /// Right end.
    pub hi: f64,
}

impl Interval {
    /// [lo, hi]; an error unless lo < hi and both are finite.
    pub fn new(lo: f64, hi: f64) -> Result<Self, ApproxError> {
        if lo.is_finite() && hi.is_finite() && lo < hi {
            Ok(Self { lo, hi })
        } else {
            Err(ApproxError::Invalid(format!(
                "[{lo}, {hi}] is not an interval"
            )))
        }
    }

    /// [−h, h].
    pub fn symmetric(h: f64) -> Result<Self, ApproxError> {
        Self::new(-h, h)
    }

    /// hi − lo.
    pub fn width(&self) -> f64 {
        self.hi - self.lo
    }

    /// Maps x ∈ [lo, hi] to t ∈ [−1, 1].
    pub fn to_unit(&self, x: f64) -> f64 {
        (2.0 * x - self.lo - self.hi) / self.width()
    }

    /// Maps t ∈ [−1, 1] to x ∈ [lo, hi].
    pub fn from_unit(&self, t: f64) -> f64 {
        0.5 * (self.lo + self.hi) + 0.5 * self.width() * t
    }

    /// `n` equally spaced points including both ends (n ≥ 2).
    pub fn grid(&self, n: usize) -> impl Iterator<Item = f64> + '_ {
        let n = n.max(2);
        let step = self.width() / (n - 1) as f64;
        (0..n).map(move |i| {
            if i + 1 == n {
                self.hi
            } else {
                self.lo + i as f64 * step
            }
        })
    }
}

/// A polynomial as a Chebyshev series on an interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChebPoly {
    coeffs: Vec<f64>,
    interval: Interval,
}

impl ChebPoly {
    /// The series Σ coeffs[k]·T_k on `interval` (at least one coefficient).
    pub fn new(coeffs: Vec<f64>, interval: Interval) -> Result<Self, ApproxError> {
        if coeffs.is_empty() || coeffs.iter().any(|c| !c.is_finite()) {
            return Err(ApproxError::Invalid(
                "a Chebyshev series needs finite coefficients".into(),
            ));
        }
        Ok(Self { coeffs, interval })
    }

    /// The Chebyshev coefficients.
    pub fn coeffs(&self) -> &[f64] {
        &self.coeffs
    }

    /// The interval the series is defined on (it can still be evaluated anywhere).
    pub fn interval(&self) -> Interval {
        self.interval
    }

    /// Degree (index of the last coefficient).
    pub fn degree(&self) -> usize {
        self.coeffs.len() - 1
    }

    /// p(x) by Clenshaw's recurrence.
    pub fn eval(&self, x: f64) -> f64 {
        let t = self.interval.to_unit(x);
        let (mut b1, mut b2) = (0.0, 0.0);
        for &c in self.coeffs.iter().skip(1).rev() {
            let b0 = 2.0 * t * b1 - b2 + c;
            b2 = b1;
            b1 = b0;
        }
        t * b1 - b2 + self.coeffs[0]
    }

    /// p′ as a Chebyshev series on the same interval.
    pub fn derivative(&self) -> ChebPoly {
        let n = self.degree();
        if n == 0 {
            return ChebPoly {
                coeffs: vec![0.0],
                interval: self.interval,
            };
        }
        // d/dt: c'_{k-1} = c'_{k+1} + 2k·c_k, then halve c'_0; chain rule gives 2/(b − a).
        let mut d = vec![0.0; n + 1];
        for k in (1..=n).rev() {
            d[k - 1] = d.get(k + 1).copied().unwrap_or(0.0) + 2.0 * k as f64 * self.coeffs[k];
        }
        d[0] *= 0.5;
        d.truncate(n);
        let scale = 2.0 / self.interval.width();
        d.iter_mut().for_each(|c| *c *= scale);
        ChebPoly {
            coeffs: d,
            interval: self.interval,
        }
    }

    /// Coefficients in the monomial basis of x (index k multiplies x^k), what a CKKS circuit
    /// evaluates.
    pub fn to_power_basis(&self) -> Vec<f64> {
        let n = self.degree();
        // Monomial coefficients of T_k(t) by the recurrence T_{k+1} = 2t·T_k − T_{k−1}.
        let mut in_t = vec![0.0; n + 1];
        let mut prev = vec![0.0; n + 1];
        let mut cur = vec![0.0; n + 1];
        prev[0] = 1.0;
        if n >= 1 {
            cur[1] = 1.0;
        }
        in_t[0] += self.coeffs[0];
        for k in 1..=n {
            for j in 0..=n {
                in_t[j] += self.coeffs[k] * cur[j];
            }
            let mut next = vec![0.0; n + 1];
            for j in 0..n {
                next[j + 1] += 2.0 * cur[j];
            }
            for j in 0..=n {
                next[j] -= prev[j];
            }
            prev = cur;
            cur = next;
        }
        // Substitute t = α·x + β.
        let alpha = 2.0 / self.interval.width();
        let beta = -(self.interval.lo + self.interval.hi) / self.interval.width();
        let mut out = vec![0.0; n + 1];
        let mut power = vec![1.0]; // coefficients of (αx + β)^j
        for (j, &cj) in in_t.iter().enumerate() {
            if j > 0 {
                let mut next = vec![0.0; power.len() + 1];
                for (i, &p) in power.iter().enumerate() {
                    next[i] += beta * p;
                    next[i + 1] += alpha * p;
                }
                power = next;
            }
            for (i, &p) in power.iter().enumerate() {
                out[i] += cj * p;
            }
        }
        out
    }
}

/// The `n` Chebyshev points of the first kind on `interval`.
pub fn chebyshev_nodes(n: usize, interval: Interval) -> Vec<f64> {
    (0..n)
        .map(|j| interval.from_unit((std::f64::consts::PI * (j as f64 + 0.5) / n as f64).cos()))
        .collect()
}

/// The degree-`degree` polynomial interpolating `f` at the Chebyshev points of the first kind.
pub fn interpolate(
    f: impl Fn(f64) -> f64,
    interval: Interval,
    degree: usize,
) -> Result<ChebPoly, ApproxError> {
    let n = degree + 1;
    let nodes = chebyshev_nodes(n, interval);
    let values: Vec<f64> = nodes.iter().map(|&x| f(x)).collect();
    // Discrete orthogonality of T_k at the first-kind nodes.
    let coeffs = (0..n)
        .map(|k| {
            let s: f64 = values
                .iter()
                .enumerate()
                .map(|(j, v)| {
                    v * (std::f64::consts::PI * k as f64 * (j as f64 + 0.5) / n as f64).cos()
                })
                .sum();
            if k == 0 {
                s / n as f64
            } else {
                2.0 * s / n as f64
            }
        })
        .collect();
    ChebPoly::new(coeffs, interval)
}

/// Evaluates a monomial-basis polynomial by Horner's rule.
pub fn eval_power_basis(coeffs: &[f64], x: f64) -> f64 {
    coeffs.iter().rev().fold(0.0, |acc, c| acc * x + c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_reproduces_polynomials_and_power_basis_agrees() {
        let iv = Interval::new(-3.0, 5.0).unwrap();
        let f = |x: f64| 1.0 - 2.0 * x + 0.5 * x.powi(3) - 0.01 * x.powi(5);
        let p = interpolate(f, iv, 5).unwrap();
        let mono = p.to_power_basis();
        let want = [1.0, -2.0, 0.0, 0.5, 0.0, -0.01];
        for (a, b) in mono.iter().zip(want) {
            assert!((a - b).abs() < 1e-10, "{mono:?}");
        }
        for x in iv.grid(50) {
            assert!((p.eval(x) - f(x)).abs() < 1e-10);
            assert!((eval_power_basis(&mono, x) - f(x)).abs() < 1e-9);
        }
    }

    #[test]
    fn derivative_matches_finite_differences() {
        let iv = Interval::new(-2.0, 7.0).unwrap();
        let p = interpolate(|x| (0.3 * x).sin() + x * x * 0.1, iv, 9).unwrap();
        let d = p.derivative();
        for x in iv.grid(31) {
            let h = 1e-5;
            let fd = (p.eval(x + h) - p.eval(x - h)) / (2.0 * h);
            assert!(
                (d.eval(x) - fd).abs() < 1e-7,
                "x={x}: {} vs {fd}",
                d.eval(x)
            );
        }
    }

    #[test]
    fn bad_intervals_are_rejected() {
        assert!(Interval::new(1.0, 1.0).is_err());
        assert!(Interval::new(f64::NAN, 1.0).is_err());
    }
}
