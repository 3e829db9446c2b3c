//! EvalMod: `t ↦ sin(2πt)` on `|t| ≤ K`, which equals `2π·(t mod 1)` up to
//! `O((t mod 1)³)` when `t` is near an integer — the reduction modulo `q_0` that removes
//! ModRaise's overflow `q_0·I`.
//!
//! Evaluated as `cos(2π(t − ¼)/2^r)` by a Chebyshev interpolant on `s = t/K ∈ [−1, 1]`, then
//! `r` double-angle steps `y ← 2y² − 1` (Han–Ki): the interpolant only has to cover `2K/2^r`
//! periods, so a low degree suffices, and each step costs one level.
//!
//! Optionally a Taylor polynomial of `arcsin` follows, so the output is `2π·(t mod 1)` without
//! the sine's cubic error: it matters when the message ratio `q_0/Δ_0` is small (a larger
//! scale), where `(2π·(t mod 1))²/6` is no longer negligible.
//!
//! [`EvalMod::scaled_output`] multiplies the result by a constant, folded into the arcsine's
//! coefficients (or, without one, a product of its own: one level). SlotsToCoeffs-first
//! bootstrapping needs it: no transform follows EvalMod there to undo `2π·Δ_0/q_0`.

use privopt_approx::chebyshev::{ChebPoly, Interval, interpolate};

use super::super::ciphertext::Ciphertext;
use super::super::evaluator::Evaluator;
use super::super::polyeval::PolyBasis;
use crate::encoding::Complex;
use crate::error::CkksError;

/// The largest interpolant degree tried (depth 6 plus the leaves).
const MAX_DEGREE: usize = 63;

/// The approximation of `sin(2πt)` on `|t| ≤ K`.
#[derive(Clone, Debug)]
pub struct EvalMod {
    /// `K`: the bound on `|t|` (ModRaise's overflow plus the message).
    pub k: f64,
    /// Double-angle steps `r`.
    pub double_angles: u32,
    /// The interpolant of `cos(2π(Ks − ¼)/2^r)` on `s ∈ [−1, 1]`.
    pub poly: ChebPoly,
    /// Sup error of the interpolant on a fine grid (before the double angles amplify it).
    pub interpolation_error: f64,
    /// Power-basis coefficients of the polynomial applied last: the `arcsin` Taylor
    /// polynomial times [`EvalMod::scaled_output`]'s factor (empty: none).
    pub arcsine: Vec<f64>,
}

/// `arcsin y = y + y³/6 + 3y⁵/40 + 5y⁷/112 + …`, the odd coefficients up to degree 7.
const ARCSINE_TAYLOR: [f64; 8] = [0.0, 1.0, 0.0, 1.0 / 6.0, 0.0, 3.0 / 40.0, 0.0, 5.0 / 112.0];

impl EvalMod {
    /// The lowest-degree interpolant whose error is below `target` (at most degree 63),
    /// followed by `arcsin`'s Taylor polynomial of degree `arcsine_degree` (0 or 1: none; 3, 5
    /// or 7).
    pub fn new(
        k: f64,
        double_angles: u32,
        target: f64,
        arcsine_degree: usize,
    ) -> Result<Self, CkksError> {
        if !(k >= 1.0 && k.is_finite()) || double_angles > 10 {
            return Err(CkksError::InvalidParams(format!(
                "EvalMod needs K >= 1 and at most 10 double angles (got K = {k}, r = {double_angles})"
            )));
        }
        let arcsine = match arcsine_degree {
            0 | 1 => Vec::new(),
            3 | 5 | 7 => ARCSINE_TAYLOR[..=arcsine_degree].to_vec(),
            d => {
                return Err(CkksError::InvalidParams(format!(
                    "arcsine degree {d} is not 0, 1, 3, 5 or 7"
                )));
            }
        };
        let r = f64::from(1u32 << double_angles);
        let f = move |s: f64| (2.0 * std::f64::consts::PI * (k * s - 0.25) / r).cos();
        let unit = Interval::new(-1.0, 1.0)
            .map_err(|e| CkksError::InvalidParams(format!("EvalMod interval: {e}")))?;
        let mut best = None;
        for degree in 7..=MAX_DEGREE {
            let p = interpolate(f, unit, degree)
                .map_err(|e| CkksError::InvalidParams(format!("EvalMod interpolant: {e}")))?;
            let err = (0..=4000)
                .map(|i| {
                    let s = -1.0 + 2.0 * i as f64 / 4000.0;
                    (p.eval(s) - f(s)).abs()
                })
                .fold(0.0, f64::max);
            let done = err < target;
            best = Some((p, err));
            if done {
                break;
            }
        }
        let (poly, interpolation_error) =
            best.ok_or_else(|| CkksError::InvalidParams("no EvalMod degree tried".into()))?;
        Ok(Self {
            k,
            double_angles,
            poly,
            interpolation_error,
            arcsine,
        })
    }

    /// The same approximation with its output multiplied by `factor`: folded into the
    /// arcsine's coefficients, or (without an arcsine) a degree-1 polynomial of its own.
    pub fn scaled_output(mut self, factor: f64) -> Result<Self, CkksError> {
        if !(factor.is_finite() && factor != 0.0) {
            return Err(CkksError::InvalidParams(format!(
                "EvalMod's output factor must be finite and non-zero, got {factor}"
            )));
        }
        if self.arcsine.is_empty() {
            self.arcsine = vec![0.0, 1.0];
        }
        for c in &mut self.arcsine {
            *c *= factor;
        }
        Ok(self)
    }

    /// `sin(2πt)` (or `2π·(t mod 1)` with the arcsine), times [`EvalMod::scaled_output`]'s
    /// factor, for a ciphertext holding `s = t/K` in every slot.
    pub fn apply(&self, ev: &Evaluator, s: &Ciphertext) -> Result<Ciphertext, CkksError> {
        let y = self.sine(ev, s)?;
        if self.arcsine.is_empty() {
            return Ok(y);
        }
        ev.evaluate_polynomial(&y, &self.arcsine, PolyBasis::Power)
    }

    /// `sin(2πt)`: the interpolant and the double angles.
    fn sine(&self, ev: &Evaluator, s: &Ciphertext) -> Result<Ciphertext, CkksError> {
        let mut y = ev.evaluate_polynomial(
            s,
            self.poly.coeffs(),
            PolyBasis::Chebyshev { lo: -1.0, hi: 1.0 },
        )?;
        for _ in 0..self.double_angles {
            let sq = ev.square(&y)?;
            y = ev.add_const(&ev.mul_int(&sq, 2)?, -1.0)?;
        }
        Ok(y)
    }

    /// [`EvalMod::apply`] times `mask` slot by slot (complex), in the levels `apply` uses: the
    /// mask is folded into the last polynomial's coefficients, which must be `a_1·y` or
    /// `a_1·y + a_3·y³` (an arcsine of degree 3, or [`EvalMod::scaled_output`] without one).
    pub fn apply_masked(
        &self,
        ev: &Evaluator,
        s: &Ciphertext,
        mask: &[Complex],
    ) -> Result<Ciphertext, CkksError> {
        let (a1, a3) = match self.arcsine.as_slice() {
            &[0.0, a1] => (a1, None),
            &[0.0, a1, 0.0, a3] => (a1, Some(a3)),
            other => {
                return Err(CkksError::InvalidParams(format!(
                    "a masked EvalMod folds the mask into a last polynomial a_1 y (+ a_3 y^3), \
                     not one of {} coefficients",
                    other.len()
                )));
            }
        };
        let y = self.sine(ev, s)?;
        let times = |c: f64| -> Vec<Complex> { mask.iter().map(|m| m.scale(c)).collect() };
        let l = y.level();
        let Some(a3) = a3 else {
            return ev.mul_plain(&y, &ev.encode_complex_for_product(&times(a1), l)?);
        };
        // y² and a_3·mask∘y one level down, their product two; a_1·mask∘y lands there too
        // (dropped a level first, then a plaintext that rescales onto the level's scale).
        let cube = ev.multiply(
            &ev.square(&y)?,
            &ev.mul_plain(&y, &ev.encode_complex_for_product(&times(a3), l)?)?,
        )?;
        let lower = ev.drop_to_level(&y, l - 1)?;
        let linear = ev.mul_plain(&lower, &ev.encode_complex_for_product(&times(a1), l - 1)?)?;
        ev.add(&linear, &cube)
    }

    /// The same map in the clear (for tests and error budgets).
    pub fn reference(&self, t: f64) -> f64 {
        let mut y = self.poly.eval(t / self.k);
        for _ in 0..self.double_angles {
            y = 2.0 * y * y - 1.0;
        }
        if self.arcsine.is_empty() {
            y
        } else {
            privopt_approx::chebyshev::eval_power_basis(&self.arcsine, y)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approximation_reduces_modulo_one() {
        let m = EvalMod::new(12.0, 3, 1e-13, 0).unwrap();
        assert!(m.poly.degree() <= 63 && m.interpolation_error < 1e-13);
        // sin(2π(I + ε)) / 2π = ε − (2π)²ε³/6 + …: for |ε| ≤ 2^-10 within 1.1e-8·|ε|·….
        for i in -11..=11 {
            for eps in [-1e-3, -1e-5, 0.0, 2e-4, 9e-4] {
                let got = m.reference(f64::from(i) + eps) / (2.0 * std::f64::consts::PI);
                let want = eps - (2.0 * std::f64::consts::PI).powi(2) * eps.powi(3) / 6.0;
                assert!(
                    (got - want).abs() < 1e-10,
                    "I = {i}, ε = {eps}: {got} vs {want}"
                );
            }
        }
        assert!(EvalMod::new(0.5, 3, 1e-13, 0).is_err());
        assert!(EvalMod::new(12.0, 3, 1e-13, 4).is_err());
        // With the arcsine the cubic term goes: 2π·ε to the 7th-order remainder.
        let a = EvalMod::new(12.0, 3, 1e-13, 7).unwrap();
        for i in -11..=11 {
            for eps in [-2e-2, -1e-3, 0.0, 5e-3, 3e-2] {
                let got = a.reference(f64::from(i) + eps) / (2.0 * std::f64::consts::PI);
                assert!((got - eps).abs() < 1e-8, "I = {i}, ε = {eps}: {got}");
            }
        }
    }

    #[test]
    fn a_scaled_output_is_the_same_map_times_the_factor() {
        let tau = 2.0 * std::f64::consts::PI;
        for degree in [0, 3] {
            let plain = EvalMod::new(10.0, 3, 1e-13, degree).unwrap();
            let scaled = plain.clone().scaled_output(1.0 / tau).unwrap();
            // A degree-1 polynomial appears without an arcsine; the arcsine's is scaled.
            assert_eq!(scaled.arcsine.len(), if degree == 0 { 2 } else { 4 });
            for t in [-9.99, -3.01, 0.0, 0.004, 7.002] {
                let want = plain.reference(t) / tau;
                assert!((scaled.reference(t) - want).abs() < 1e-15, "t = {t}");
            }
        }
        let m = EvalMod::new(10.0, 3, 1e-13, 0).unwrap();
        assert!(m.clone().scaled_output(0.0).is_err());
        assert!(m.scaled_output(f64::NAN).is_err());
    }
}
