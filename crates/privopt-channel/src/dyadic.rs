//! The dyadic grid `2^-F` and exact ring values with power-of-two denominators.
//!
//! Real channel gains make an over-the-air sum of integer polynomials a polynomial with real
//! coefficients. Placing gains and noise on the grid `2^-F` (F ≥ 40) keeps every sum and
//! product a polynomial with a power-of-two denominator, which is held exactly as an integer
//! polynomial `X` and an exponent `e` (value `X / 2^e`) in a wide RNS basis.

use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};
use privopt_math::ntt::NttBackend;
use privopt_math::rns::{Coeff, Eval, Poly, RnsBasis};

use crate::ChannelError;

/// Smallest grid exponent accepted (finer than any gain or noise precision that matters).
pub const MIN_GRID_BITS: u32 = 40;

/// The grid `2^-F`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DyadicGrid {
    f_bits: u32,
}

impl DyadicGrid {
    /// A grid with `F = f_bits` in `40..=56`.
    pub fn new(f_bits: u32) -> Result<Self, ChannelError> {
        if !(MIN_GRID_BITS..=56).contains(&f_bits) {
            return Err(ChannelError::Invalid(format!(
                "grid exponent F = {f_bits} is outside 40..=56"
            )));
        }
        Ok(Self { f_bits })
    }

    /// F.
    pub fn bits(&self) -> u32 {
        self.f_bits
    }

    /// `round(x · 2^F)`, refusing values whose grid integer would not fit in 62 bits.
    pub fn quantize(&self, x: f64) -> Result<i64, ChannelError> {
        let v = (x * 2f64.powi(self.f_bits as i32)).round();
        if !v.is_finite() || v.abs() >= 2f64.powi(62) {
            return Err(ChannelError::OutOfRange(format!(
                "{x} does not fit the grid 2^-{}",
                self.f_bits
            )));
        }
        Ok(v as i64)
    }

    /// [`DyadicGrid::quantize`] for each value.
    pub fn quantize_all(&self, xs: &[f64]) -> Result<Vec<i64>, ChannelError> {
        xs.iter().map(|&x| self.quantize(x)).collect()
    }

    /// The real value of grid integer `v`.
    pub fn value(&self, v: i64) -> f64 {
        v as f64 / 2f64.powi(self.f_bits as i32)
    }
}

/// An element of `Q[X]/(X^n+1)` equal to `poly / 2^exp`, `poly` an integer polynomial held in
/// evaluation form in a wide basis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dyadic {
    /// The integer numerator.
    pub poly: Poly<Eval>,
    /// The power of two in the denominator.
    pub exp: u32,
}

/// Exact arithmetic on [`Dyadic`] values whose numerators stay below `2^bound_bits`.
pub struct ExactRing {
    basis: RnsBasis,
    bound_bits: u32,
}

impl ExactRing {
    /// A ring of degree `n` holding numerators of up to `bound_bits` bits exactly (the wide
    /// basis has one spare prime, so an overflow is detected when values are read).
    pub fn new(n: usize, bound_bits: u32) -> Result<Self, ChannelError> {
        let basis = RnsBasis::wide(n, bound_bits + 60, NttBackend::Fast)?;
        Ok(Self { basis, bound_bits })
    }

    /// The wide basis.
    pub fn basis(&self) -> &RnsBasis {
        &self.basis
    }

    /// The proven numerator bound, in bits.
    pub fn bound_bits(&self) -> u32 {
        self.bound_bits
    }

    /// An integer polynomial (denominator 1).
    pub fn from_i64(&self, coeffs: &[i64]) -> Dyadic {
        Dyadic {
            poly: self.basis.to_eval(self.basis.from_signed(coeffs)),
            exp: 0,
        }
    }

    /// An integer polynomial from coefficients beyond `i64` (wide smudging noise).
    pub fn from_i128(&self, coeffs: &[i128]) -> Dyadic {
        Dyadic {
            poly: self.basis.to_eval(self.basis.from_signed_wide(coeffs)),
            exp: 0,
        }
    }

    /// An integer polynomial from big-integer coefficients.
    pub fn from_bigints(&self, coeffs: &[BigInt]) -> Dyadic {
        Dyadic {
            poly: self.basis.to_eval(self.basis.from_bigints(coeffs)),
            exp: 0,
        }
    }

    /// `x · 2^k` (numerator only; the value changes).
    fn shift_up(&self, poly: &mut Poly<Eval>, mut k: u32) {
        while k > 0 {
            let step = k.min(60);
            self.basis.mul_scalar_assign(poly, 1i64 << step);
            k -= step;
        }
    }

    /// `x` rewritten with denominator `2^exp` (`exp ≥ x.exp`); same value.
    pub fn with_exp(&self, x: &Dyadic, exp: u32) -> Dyadic {
        let mut poly = x.poly.clone();
        self.shift_up(&mut poly, exp.saturating_sub(x.exp));
        Dyadic {
            poly,
            exp: exp.max(x.exp),
        }
    }

    /// `a + b`.
    pub fn add(&self, a: &Dyadic, b: &Dyadic) -> Dyadic {
        let exp = a.exp.max(b.exp);
        let mut s = self.with_exp(a, exp);
        self.basis
            .add_assign(&mut s.poly, &self.with_exp(b, exp).poly);
        s
    }

    /// `a · b`.
    pub fn mul(&self, a: &Dyadic, b: &Dyadic) -> Dyadic {
        Dyadic {
            poly: self.basis.mul(&a.poly, &b.poly),
            exp: a.exp + b.exp,
        }
    }

    /// `x · (g / 2^F)` for a grid integer `g`.
    pub fn scale(&self, x: &Dyadic, g: i64, grid: DyadicGrid) -> Dyadic {
        let mut poly = x.poly.clone();
        self.basis.mul_scalar_assign(&mut poly, g);
        Dyadic {
            poly,
            exp: x.exp + grid.bits(),
        }
    }

    /// The numerator's coefficients, checked against the bound.
    pub fn numerators(&self, x: &Dyadic) -> Result<Vec<BigInt>, ChannelError> {
        let c: Poly<Coeff> = self.basis.to_coeff(x.poly.clone());
        let all = self.basis.lift_all(&c);
        for v in &all {
            self.check(v)?;
        }
        Ok(all)
    }

    fn check(&self, v: &BigInt) -> Result<(), ChannelError> {
        if v.bits() > u64::from(self.bound_bits) {
            return Err(ChannelError::OutOfRange(format!(
                "a numerator of {} bits exceeds the proven bound of {} bits",
                v.bits(),
                self.bound_bits
            )));
        }
        Ok(())
    }

    /// The constant coefficient's exact value as (numerator, exponent), read without an
    /// inverse NTT.
    pub fn constant_term(&self, x: &Dyadic) -> Result<BigInt, ChannelError> {
        let v = self
            .basis
            .lift_centered_residues(&self.basis.constant_coefficient(&x.poly));
        self.check(&v)?;
        Ok(v)
    }

    /// `numerator / 2^exp` as f64.
    pub fn to_f64(numerator: &BigInt, exp: u32) -> f64 {
        // Shift first so that huge numerators keep their leading bits.
        let bits = numerator.bits();
        if bits > 1000 {
            return if numerator.is_negative() {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
        }
        if numerator.is_zero() {
            return 0.0;
        }
        numerator.to_f64().unwrap_or(f64::NAN) / 2f64.powi(exp as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_rounds_and_bounds() {
        let g = DyadicGrid::new(40).unwrap();
        assert_eq!(g.quantize(1.0).unwrap(), 1 << 40);
        assert_eq!(g.quantize(-0.5).unwrap(), -(1 << 39));
        assert!((g.value(g.quantize(0.123456789).unwrap()) - 0.123456789).abs() <= 2f64.powi(-41));
        assert!(g.quantize(1e7).is_err());
        assert!(DyadicGrid::new(30).is_err());
    }

    #[test]
    fn dyadic_arithmetic_is_exact() {
        let ring = ExactRing::new(16, 200).unwrap();
        let grid = DyadicGrid::new(40).unwrap();
        let x = ring.from_i64(&[3, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        let y = ring.from_i64(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        // (3 − X + 2X^15)·X = 3X − X² + 2X^16 = −2 + 3X − X².
        let p = ring.mul(&x, &y);
        let n = ring.numerators(&p).unwrap();
        assert_eq!(n[0], BigInt::from(-2));
        assert_eq!(n[1], BigInt::from(3));
        assert_eq!(n[2], BigInt::from(-1));
        // 0.75 · x + x/4 = x, exactly, after aligning denominators.
        let a = ring.scale(&x, grid.quantize(0.75).unwrap(), grid);
        let b = ring.scale(&x, grid.quantize(0.25).unwrap(), grid);
        let s = ring.add(&a, &b);
        assert_eq!(
            ExactRing::to_f64(&ring.constant_term(&s).unwrap(), s.exp),
            3.0
        );
        let mixed = ring.add(&s, &x);
        assert_eq!(mixed.exp, 40);
        assert_eq!(
            ExactRing::to_f64(&ring.constant_term(&mixed).unwrap(), mixed.exp),
            6.0
        );
    }

    #[test]
    fn overflow_beyond_the_bound_is_detected() {
        let ring = ExactRing::new(16, 64).unwrap();
        let mut c = vec![0i64; 16];
        c[0] = i64::MAX;
        let x = ring.from_i64(&c);
        let sq = ring.mul(&x, &x); // ~2^126 > 2^64
        assert!(matches!(
            ring.constant_term(&sq),
            Err(ChannelError::OutOfRange(_))
        ));
    }
}
