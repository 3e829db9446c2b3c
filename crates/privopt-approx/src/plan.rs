//! Evaluation plans for polynomials on ciphertexts, and their multiplicative depth.
//!
//! A plan lists the ciphertext products that build the needed powers of x, each power made
//! from the largest power of two below it (x^k = x^{2^j}·x^{k−2^j}), so x^k sits at depth
//! ⌈log₂ k⌉, the minimum. The result is Σ c_k·x^k; multiplying by the real coefficients costs
//! one more level in CKKS (a plaintext product followed by a rescale). The CKKS evaluator
//! executes the same plan; [`EvalPlan::eval`] runs it on plain numbers to check it.

use serde::{Deserialize, Serialize};

/// One ciphertext product: x^`power` = x^`lhs` · x^`rhs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Product {
    /// Exponent produced.
    pub power: usize,
    /// Left factor's exponent.
    pub lhs: usize,
    /// Right factor's exponent.
    pub rhs: usize,
}

/// A power-basis evaluation plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalPlan {
    coeffs: Vec<f64>,
    products: Vec<Product>,
    depth_of_power: Vec<u32>,
}

impl EvalPlan {
    /// The plan for Σ coeffs[k]·x^k (monomial basis, e.g. from `ChebPoly::to_power_basis`).
    /// Powers with zero coefficient are computed only if a later power needs them.
    pub fn power_basis(coeffs: &[f64]) -> Self {
        let degree = coeffs.iter().rposition(|c| *c != 0.0).unwrap_or(0);
        let mut needed = vec![false; degree + 1];
        for k in (2..=degree).rev() {
            if coeffs[k] != 0.0 || needed[k] {
                needed[k] = true;
                let (hi, lo) = split(k);
                needed[hi] = true;
                needed[lo] = true;
            }
        }
        let mut depth_of_power = vec![0u32; degree + 1];
        let mut products = Vec::new();
        for k in 2..=degree {
            if needed[k] {
                let (hi, lo) = split(k);
                depth_of_power[k] = depth_of_power[hi].max(depth_of_power[lo]) + 1;
                products.push(Product {
                    power: k,
                    lhs: hi,
                    rhs: lo,
                });
            }
        }
        Self {
            coeffs: coeffs[..=degree].to_vec(),
            products,
            depth_of_power,
        }
    }

    /// Multiplicative depth: the deepest power used, plus one level for the coefficient
    /// products (zero for a constant).
    pub fn depth(&self) -> u32 {
        let deepest = (1..self.coeffs.len())
            .filter(|&k| self.coeffs[k] != 0.0)
            .map(|k| self.depth_of_power[k])
            .max();
        match deepest {
            Some(d) => d + 1,
            None => 0,
        }
    }

    /// Number of ciphertext-ciphertext products (each needs a relinearisation).
    pub fn ciphertext_products(&self) -> usize {
        self.products.len()
    }

    /// The products in execution order.
    pub fn products(&self) -> &[Product] {
        &self.products
    }

    /// The monomial coefficients.
    pub fn coeffs(&self) -> &[f64] {
        &self.coeffs
    }

    /// Runs the plan on a plain number, product by product (a check that the plan computes the
    /// polynomial).
    pub fn eval(&self, x: f64) -> f64 {
        let mut powers = vec![f64::NAN; self.coeffs.len().max(2)];
        powers[0] = 1.0;
        powers[1] = x;
        for p in &self.products {
            powers[p.power] = powers[p.lhs] * powers[p.rhs];
        }
        self.coeffs
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != 0.0)
            .map(|(k, c)| c * powers[k])
            .sum()
    }
}

/// k = 2^j + r with 2^j the largest power of two below k (or k/2 twice for powers of two).
fn split(k: usize) -> (usize, usize) {
    let high = 1usize << (usize::BITS - 1 - k.leading_zeros());
    if high == k {
        (k / 2, k / 2)
    } else {
        (high, k - high)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chebyshev::eval_power_basis;

    #[test]
    fn depth_is_ceil_log2_plus_coefficient_level() {
        for degree in 1..=16usize {
            let coeffs: Vec<f64> = (0..=degree).map(|k| 1.0 / (k as f64 + 1.0)).collect();
            let plan = EvalPlan::power_basis(&coeffs);
            let want = (degree as f64).log2().ceil() as u32 + 1;
            assert_eq!(plan.depth(), want, "degree {degree}");
            for x in [-1.5, 0.3, 2.0] {
                let direct = eval_power_basis(&coeffs, x);
                assert!((plan.eval(x) - direct).abs() < 1e-12 * direct.abs().max(1.0));
            }
        }
        assert_eq!(EvalPlan::power_basis(&[3.0]).depth(), 0);
    }

    #[test]
    fn odd_polynomials_skip_unneeded_powers() {
        // Degree-7 odd sigmoid part: x, x³, x⁵, x⁷ need x², x³, x⁴, x⁵, x⁷ (x⁶ never).
        let plan = EvalPlan::power_basis(&[0.5, 0.2, 0.0, -0.01, 0.0, 1e-4, 0.0, -1e-6]);
        assert!(plan.products().iter().all(|p| p.power != 6));
        assert_eq!(plan.depth(), 4); // the paper's "Sigmoid Poly +4" for degree 7
    }
}
