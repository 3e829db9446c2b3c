//! Signed fixed-point encoding of reals as Paillier plaintexts.

use num_bigint::BigInt;
use num_traits::{FromPrimitive, ToPrimitive};

use crate::PaillierError;

/// Reals as integers scaled by `2^frac_bits` (rounded); sums and integer multiples stay exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedPoint {
    /// Fractional bits.
    pub frac_bits: u32,
}

impl FixedPoint {
    /// `round(x · 2^frac_bits)`.
    pub fn encode(&self, x: f64) -> Result<BigInt, PaillierError> {
        let v = x * 2f64.powi(self.frac_bits as i32);
        BigInt::from_f64(v.round())
            .ok_or_else(|| PaillierError::OutOfRange(format!("{x} is not finite")))
    }

    /// `m / 2^(frac_bits · scale_power)` (a product of `scale_power` encoded factors).
    pub fn decode(&self, m: &BigInt, scale_power: u32) -> f64 {
        m.to_f64().unwrap_or(f64::NAN) / 2f64.powi((self.frac_bits * scale_power) as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_products() {
        let f = FixedPoint { frac_bits: 20 };
        let a = f.encode(-1.25).unwrap();
        assert_eq!(a, BigInt::from(-(5 << 18)));
        assert_eq!(f.decode(&a, 1), -1.25);
        let b = f.encode(3.0).unwrap();
        assert_eq!(f.decode(&(&a * &b), 2), -3.75);
        assert!(f.encode(f64::NAN).is_err());
    }
}
