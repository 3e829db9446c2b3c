//! Special functions the privacy and failure-probability bounds share.

/// `ln C(n, k)` through `lgamma`; accurate (to about 1e-12 relative) for `n` up to a few
/// thousand, which covers every caller (Rényi orders, SecAgg+ group sizes, bootstrapping's
/// overflow terms).
pub fn ln_binomial(n: f64, k: f64) -> f64 {
    libm::lgamma(n + 1.0) - libm::lgamma(k + 1.0) - libm::lgamma(n - k + 1.0)
}

/// `P(|U_1 + … + U_m| > t)` for `m` independent uniforms on `[−1/2, 1/2]`: the exact
/// Irwin–Hall tail, `2·F_m(m/2 − t)` with `F_m(x) = Σ_{k < x} (−1)^k C(m, k) (x − k)^m / m!`.
/// The alternating terms cancel where the tail is not small (or `m` is large); where they
/// would lose more than six of `f64`'s sixteen digits, the normal approximation with
/// variance `m/12` is returned instead (dense secrets: `m` in the thousands).
pub fn uniform_sum_tail(m: u32, t: f64) -> f64 {
    let (mf, half) = (f64::from(m), f64::from(m) / 2.0);
    if t >= half {
        return 0.0;
    }
    let x = half - t.max(0.0);
    let ln_fact = libm::lgamma(mf + 1.0);
    let (mut cdf, mut largest, mut k) = (0.0f64, 0.0f64, 0u32);
    while f64::from(k) < x {
        let term = (ln_binomial(mf, f64::from(k)) + mf * (x - f64::from(k)).ln() - ln_fact).exp();
        cdf += if k % 2 == 0 { term } else { -term };
        largest = largest.max(term);
        k += 1;
    }
    if largest.is_finite() && largest <= 1e6 * cdf.abs() {
        return (2.0 * cdf).clamp(0.0, 1.0);
    }
    let sigma = (mf / 12.0).sqrt();
    libm::erfc(t / (sigma * std::f64::consts::SQRT_2)).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomials_match_exact_counts() {
        assert!((ln_binomial(10.0, 3.0).exp() - 120.0).abs() < 1e-9);
        assert!((ln_binomial(64.0, 32.0) - 1.832_624_140_942_590_5e18_f64.ln()).abs() < 1e-9);
    }

    #[test]
    fn uniform_sum_tails_match_closed_forms_and_the_normal_limit() {
        // One uniform: P(|U| > t) = 1 − 2t. Two: the triangle, P(|S| > t) = (1 − t)².
        assert!((uniform_sum_tail(1, 0.2) - 0.6).abs() < 1e-12);
        assert!((uniform_sum_tail(2, 0.5) - 0.25).abs() < 1e-12);
        assert!((uniform_sum_tail(2, 0.8) - 0.04).abs() < 1e-12);
        // Beyond the largest possible sum: impossible.
        assert_eq!(uniform_sum_tail(33, 16.5), 0.0);
        // m = 33 (a weight-32 secret), t = 10.5: 1.01226724996854e-11 by exact rationals.
        assert!((uniform_sum_tail(33, 10.5) / 1.012_267_249_968_537_4e-11 - 1.0).abs() < 1e-8);
        assert!((uniform_sum_tail(65, 14.5) / 1.324_991_555_707_387_4e-10 - 1.0).abs() < 1e-8);
        // Lighter than the normal tail far out (bounded support), close to it at 2σ.
        let sigma = (33.0f64 / 12.0).sqrt();
        let normal = |t: f64| libm::erfc(t / (sigma * std::f64::consts::SQRT_2));
        assert!(uniform_sum_tail(33, 10.5) < normal(10.5));
        assert!((uniform_sum_tail(33, 2.0 * sigma) / normal(2.0 * sigma) - 1.0).abs() < 0.05);
        for m in [33, 64, 65, 1000] {
            let tails: Vec<f64> = (0..40)
                .map(|i| uniform_sum_tail(m, f64::from(i) * 0.5))
                .collect();
            assert!(tails.windows(2).all(|w| w[1] <= w[0]), "m = {m}: {tails:?}");
            assert!(
                (tails[0] - 1.0).abs() < 1e-6,
                "m = {m}: P(|S| > 0) = {}",
                tails[0]
            );
        }
    }
}
