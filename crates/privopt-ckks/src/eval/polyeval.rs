//! Polynomial evaluation by baby-step giant-step Paterson–Stockmeyer, in the power basis or
//! the Chebyshev basis of an interval.
//!
//! With `k` baby steps `B_1 … B_k` and giant steps `B_k, B_2k, B_4k, …`, a polynomial is split
//! as `p = q · B_G + r` around the largest giant step `G` below its degree, recursively, until
//! the pieces have degree below `k`; those leaves are sums of constant multiples of baby steps.
//! A degree-`d` polynomial then costs about `ceil(log2(d + 1))` levels (plus one when the
//! leaves' constants meet a baby step that already used its levels) and about `k + d/k`
//! ciphertext products instead of `d`. Callers read the depth off the result's level.
//! In the Chebyshev basis `T_{a+b} = 2 T_a T_b − T_{a−b}` builds the steps and
//! `c_i T_i = 2 c_i T_{i−G} T_G − c_i T_{2G−i}` divides by `T_G`.
//!
//! Prefer the Chebyshev basis on wide intervals: every `T_i` stays in `[−1, 1]`, whereas in the
//! power basis a leaf's rescale noise (about `1e-8` at scale `2^40`) is multiplied by the
//! giant step `x^G`, which on `[−7, 7]` is already `2401` for `G = 4`.

use super::ciphertext::Ciphertext;
use super::evaluator::Evaluator;
use crate::error::CkksError;

/// The basis a polynomial's coefficients refer to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PolyBasis {
    /// `Σ c_i x^i`.
    Power,
    /// `Σ c_i T_i(t)` with `t = (2x − lo − hi)/(hi − lo)` mapping `[lo, hi]` onto `[−1, 1]`
    /// (one extra level for the affine map unless the interval is `[−1, 1]`).
    Chebyshev {
        /// Left end.
        lo: f64,
        /// Right end.
        hi: f64,
    },
}

/// Coefficients below this are treated as zero (they would encode to the integer 0).
const NEGLIGIBLE: f64 = 1e-300;

fn ceil_log2(x: usize) -> usize {
    x.next_power_of_two().trailing_zeros() as usize
}

impl Evaluator {
    /// `p(x)` in every slot, with `coeffs` in `basis`. Fails with
    /// [`CkksError::LevelExhausted`] when `x` has too few levels left.
    pub fn evaluate_polynomial(
        &self,
        x: &Ciphertext,
        coeffs: &[f64],
        basis: PolyBasis,
    ) -> Result<Ciphertext, CkksError> {
        let degree = coeffs
            .iter()
            .rposition(|c| c.abs() > NEGLIGIBLE)
            .unwrap_or(0);
        if let Some(bad) = coeffs.iter().find(|c| !c.is_finite()) {
            return Err(CkksError::Encoding(format!(
                "coefficient {bad} is not finite"
            )));
        }
        let coeffs = &coeffs[..=degree];
        let (t, chebyshev) = match basis {
            PolyBasis::Power => (x.clone(), false),
            PolyBasis::Chebyshev { lo, hi } => {
                if !(lo < hi && lo.is_finite() && hi.is_finite()) {
                    return Err(CkksError::InvalidParams(format!(
                        "interval [{lo}, {hi}] is empty or not finite"
                    )));
                }
                let t = if lo == -1.0 && hi == 1.0 {
                    x.clone()
                } else {
                    let scaled = self.mul_const(x, 2.0 / (hi - lo))?;
                    self.add_const(&scaled, -(lo + hi) / (hi - lo))?
                };
                (t, true)
            }
        };
        if degree == 0 {
            let zero = self.mul_const(&t, 0.0)?;
            return self.add_const(&zero, coeffs[0]);
        }
        let baby = (ceil_log2(degree + 1) / 2).max(1);
        let k = 1usize << baby;
        let steps = Steps::new(self, &t, k, degree, chebyshev)?;
        steps.evaluate(self, coeffs)
    }
}

/// The baby steps `B_0 … B_k` (index 0 unused) and giant steps `B_{k·2^j}`.
struct Steps {
    k: usize,
    baby: Vec<Option<Ciphertext>>,
    giant: Vec<Ciphertext>,
    chebyshev: bool,
}

impl Steps {
    fn new(
        ev: &Evaluator,
        t: &Ciphertext,
        k: usize,
        degree: usize,
        chebyshev: bool,
    ) -> Result<Self, CkksError> {
        let mut baby: Vec<Option<Ciphertext>> = vec![None; k + 1];
        baby[1] = Some(t.clone());
        for i in 2..=k {
            // i = a + b with a the largest power of two below i: depth ceil(log2 i).
            let a = if i.is_power_of_two() {
                i / 2
            } else {
                1 << (usize::BITS - 1 - i.leading_zeros())
            };
            let b = i - a;
            let (ba, bb) = (step(&baby, a)?, step(&baby, b)?);
            let prod = ev.multiply(ba, bb)?;
            baby[i] = Some(if chebyshev {
                let doubled = ev.mul_int(&prod, 2)?;
                if a == b {
                    ev.add_const(&doubled, -1.0)?
                } else {
                    ev.sub(&doubled, step(&baby, a - b)?)?
                }
            } else {
                prod
            });
        }
        let mut giant = vec![step(&baby, k)?.clone()];
        while k << giant.len() <= degree {
            let last = &giant[giant.len() - 1];
            let sq = ev.square(last)?;
            giant.push(if chebyshev {
                ev.add_const(&ev.mul_int(&sq, 2)?, -1.0)?
            } else {
                sq
            });
        }
        Ok(Self {
            k,
            baby,
            giant,
            chebyshev,
        })
    }

    fn evaluate(&self, ev: &Evaluator, coeffs: &[f64]) -> Result<Ciphertext, CkksError> {
        if coeffs.len() <= self.k {
            return self.leaf(ev, coeffs);
        }
        // Largest giant step G = k·2^j with G < len (so the quotient is non-empty).
        let mut j = 0;
        while (self.k << (j + 1)) < coeffs.len() {
            j += 1;
        }
        let g = self.k << j;
        let (q, r) = self.divide(coeffs, g);
        let hi = self.evaluate(ev, &q)?;
        let lo = self.evaluate(ev, &r)?;
        ev.add(&ev.multiply(&hi, &self.giant[j])?, &lo)
    }

    /// `p = q·B_G + r` with `deg r < G`.
    fn divide(&self, c: &[f64], g: usize) -> (Vec<f64>, Vec<f64>) {
        if !self.chebyshev {
            return (c[g..].to_vec(), c[..g].to_vec());
        }
        let mut q = vec![0.0; c.len() - g];
        let mut r = c[..g].to_vec();
        q[0] = c[g];
        for i in g + 1..c.len() {
            q[i - g] = 2.0 * c[i];
            r[2 * g - i] -= c[i];
        }
        (q, r)
    }

    /// `Σ c_i B_i` for `i < len ≤ k`, every term landing on one level.
    fn leaf(&self, ev: &Evaluator, coeffs: &[f64]) -> Result<Ciphertext, CkksError> {
        let terms: Vec<usize> = (1..coeffs.len())
            .filter(|&i| coeffs[i].abs() > NEGLIGIBLE)
            .collect();
        let lowest = (1..coeffs.len().max(2))
            .filter_map(|i| self.baby[i].as_ref().map(Ciphertext::level))
            .min()
            .unwrap_or(0);
        let target = lowest.checked_sub(1).ok_or_else(|| {
            CkksError::LevelExhausted("no level left for the leaf constants".into())
        })?;
        // Baby step 1 always takes part (at 0 if absent), so the sum exists.
        let mut combination = vec![(step(&self.baby, 1)?, 0.0)];
        for i in terms {
            match i {
                1 => combination[0].1 = coeffs[1],
                _ => combination.push((step(&self.baby, i)?, coeffs[i])),
            }
        }
        let acc = ev.linear_combination_to(&combination, target)?;
        ev.add_const(&acc, coeffs[0])
    }
}

fn step(baby: &[Option<Ciphertext>], i: usize) -> Result<&Ciphertext, CkksError> {
    baby.get(i)
        .and_then(Option::as_ref)
        .ok_or_else(|| CkksError::InvalidParams(format!("baby step {i} was not computed")))
}
