//! Log-space arithmetic: the accountants work with log-moments that overflow `f64` at large
//! Rényi orders, so every sum is a log-sum-exp.

/// `ln(e^a + e^b)`, exact for infinite arguments.
pub fn log_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

pub use privopt_math::special::ln_binomial as log_binomial;

/// Standard normal CDF Φ(x), accurate in both tails (via `erfc`).
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// z with P(N(0, 1) > z) = p, for p ∈ (0, 1/2], by bisection on the normal tail.
pub fn normal_upper_quantile(p: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, 40.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if normal_cdf(-mid) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// Log-sum-exp of an iterator; `-∞` for an empty one.
pub fn log_sum_exp(values: impl IntoIterator<Item = f64>) -> f64 {
    let values: Vec<f64> = values.into_iter().collect();
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY || max.is_infinite() {
        return max;
    }
    max + values.iter().map(|v| (v - max).exp()).sum::<f64>().ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_add_is_exact_at_large_arguments() {
        let s = log_add(700.0, 699.0);
        assert!((s - (700.0 + (-1.0_f64).exp().ln_1p())).abs() < 1e-12);
        assert_eq!(log_add(f64::NEG_INFINITY, 3.0), 3.0);
    }

    #[test]
    fn upper_quantile_inverts_the_tail() {
        assert!((normal_upper_quantile(0.025) - 1.959963984540054).abs() < 1e-12);
        assert!((normal_cdf(-normal_upper_quantile(1e-6)) - 1e-6).abs() < 1e-18);
    }

    #[test]
    fn normal_cdf_tails() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-15);
        assert!((normal_cdf(-10.0) - 7.619853024160527e-24).abs() / 7.6e-24 < 1e-9);
        assert!((normal_cdf(1.959963984540054) - 0.975).abs() < 1e-12);
    }
}
