//! Encodings of real numbers as ring elements.
//!
//! - **Coefficient encoding** of one scalar: the constant coefficient is `round(x·Λ)`, the
//!   rest are zero. This is what EEZOFL sends: one scalar per device per round. Decoding
//!   reads one coefficient, so its error is the per-coefficient noise divided by Λ.
//! - **Slot encoding** of up to `n/2` reals through the canonical embedding: the polynomial
//!   `m` with `m(ζ^{5^j}) ≈ z_j`, `ζ = e^{iπ/n}`, computed with the special FFT over the
//!   rotation group `{5^j mod 2n}`. Each slot collects `n` coefficient noises, so its error is
//!   about `√(n/2)` times larger than a coefficient's.

use crate::error::CkksError;

/// Largest `|x·Λ|` accepted (leaves headroom in i64 for sums of many parties).
const MAX_ENCODED: f64 = 9.0e15; // < 2^53, so rounding in f64 is exact

/// The coefficients encoding scalar `x` at scale `2^scale_log2` in a ring of degree `n`.
pub fn encode_scalar(x: f64, n: usize, scale_log2: u32) -> Result<Vec<i64>, CkksError> {
    let v = (x * 2f64.powi(scale_log2 as i32)).round();
    if !v.is_finite() || v.abs() > MAX_ENCODED {
        return Err(CkksError::Encoding(format!(
            "{x} times 2^{scale_log2} does not fit in 53 bits"
        )));
    }
    let mut m = vec![0i64; n];
    m[0] = v as i64;
    Ok(m)
}

/// A complex slot value (bootstrapping's transforms act on complex slots).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Complex {
    /// Real part.
    pub re: f64,
    /// Imaginary part.
    pub im: f64,
}

impl Complex {
    /// `re + i·im`.
    pub const fn new(re: f64, im: f64) -> Self {
        Self { re, im }
    }

    /// `e^{iθ}`.
    pub fn cis(theta: f64) -> Self {
        Self::new(theta.cos(), theta.sin())
    }

    /// `|z|`.
    pub fn abs(self) -> f64 {
        self.re.hypot(self.im)
    }

    /// `z̄`.
    pub fn conj(self) -> Self {
        Self::new(self.re, -self.im)
    }

    /// `c·z` for a real `c`.
    pub fn scale(self, c: f64) -> Self {
        Self::new(c * self.re, c * self.im)
    }
}

impl std::ops::Add for Complex {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self::new(self.re + o.re, self.im + o.im)
    }
}

impl std::ops::Sub for Complex {
    type Output = Self;
    fn sub(self, o: Self) -> Self {
        Self::new(self.re - o.re, self.im - o.im)
    }
}

impl std::ops::Mul for Complex {
    type Output = Self;
    fn mul(self, o: Self) -> Self {
        Self::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }
}

/// Slot encoder/decoder for ring degree `n` (`n/2` real slots).
#[derive(Clone, Debug)]
pub struct SlotEncoder {
    n: usize,
    /// `5^j mod 2n` for `j < n/2`.
    rot_group: Vec<usize>,
    /// `e^{2πik/2n}` for `k ≤ 2n`.
    ksi: Vec<Complex>,
}

impl SlotEncoder {
    /// An encoder for ring degree `n` (a power of two ≥ 4).
    pub fn new(n: usize) -> Result<Self, CkksError> {
        if !n.is_power_of_two() || n < 4 {
            return Err(CkksError::InvalidParams(format!(
                "slot encoding needs n a power of two >= 4, got {n}"
            )));
        }
        let m = 2 * n;
        let mut rot_group = Vec::with_capacity(n / 2);
        let mut g = 1usize;
        for _ in 0..n / 2 {
            rot_group.push(g);
            g = g * 5 % m;
        }
        let ksi = (0..=m)
            .map(|k| {
                let t = 2.0 * std::f64::consts::PI * k as f64 / m as f64;
                Complex {
                    re: t.cos(),
                    im: t.sin(),
                }
            })
            .collect();
        Ok(Self { n, rot_group, ksi })
    }

    /// Number of real slots, `n/2`.
    pub fn slots(&self) -> usize {
        self.n / 2
    }

    /// The integer coefficients encoding `values` (at most `n/2`; the rest are zero) at
    /// scale `2^scale_log2`.
    pub fn encode(&self, values: &[f64], scale_log2: u32) -> Result<Vec<i64>, CkksError> {
        let scale = 2f64.powi(scale_log2 as i32);
        self.coefficients(values)?
            .iter()
            .map(|&part| {
                let c = (part * scale).round();
                if c.abs() > MAX_ENCODED {
                    return Err(CkksError::Encoding(format!(
                        "slot values too large for scale 2^{scale_log2}"
                    )));
                }
                Ok(c as i64)
            })
            .collect()
    }

    /// The real (unscaled, unrounded) coefficients of the polynomial whose slots are
    /// `values`: the inverse canonical embedding.
    pub fn coefficients(&self, values: &[f64]) -> Result<Vec<f64>, CkksError> {
        let complex: Vec<Complex> = values.iter().map(|&x| Complex::new(x, 0.0)).collect();
        self.coefficients_complex(&complex)
    }

    /// The coefficients of the polynomial whose (complex) slots are `values`.
    pub fn coefficients_complex(&self, values: &[Complex]) -> Result<Vec<f64>, CkksError> {
        let slots = self.slots();
        if values.len() > slots {
            return Err(CkksError::Encoding(format!(
                "{} values for {slots} slots",
                values.len()
            )));
        }
        if let Some(bad) = values
            .iter()
            .find(|v| !(v.re.is_finite() && v.im.is_finite()))
        {
            return Err(CkksError::Encoding(format!("value {bad:?} is not finite")));
        }
        let mut vals = vec![Complex::default(); slots];
        vals[..values.len()].copy_from_slice(values);
        self.fft_special_inv(&mut vals);
        let mut coeffs = vec![0.0; self.n];
        for (j, v) in vals.iter().enumerate() {
            coeffs[j] = v.re;
            coeffs[j + slots] = v.im;
        }
        Ok(coeffs)
    }

    /// The real slot values of a polynomial given by its (already unscaled) coefficients.
    pub fn decode(&self, coeffs: &[f64]) -> Vec<f64> {
        self.decode_complex(coeffs).iter().map(|v| v.re).collect()
    }

    /// The complex slot values of a polynomial given by its (unscaled) coefficients.
    pub fn decode_complex(&self, coeffs: &[f64]) -> Vec<Complex> {
        let slots = self.slots();
        let mut vals: Vec<Complex> = (0..slots)
            .map(|j| Complex {
                re: coeffs[j],
                im: coeffs[j + slots],
            })
            .collect();
        self.fft_special(&mut vals);
        vals
    }

    /// Evaluates at the slot roots (decoding direction).
    fn fft_special(&self, vals: &mut [Complex]) {
        let size = vals.len();
        let m = 2 * self.n;
        privopt_math::ntt::bit_reverse_permute(vals);
        let mut len = 2;
        while len <= size {
            let (lenh, lenq) = (len / 2, len * 4);
            for i in (0..size).step_by(len) {
                for j in 0..lenh {
                    let idx = (self.rot_group[j] % lenq) * m / lenq;
                    let u = vals[i + j];
                    let v = vals[i + j + lenh] * self.ksi[idx];
                    vals[i + j] = u + v;
                    vals[i + j + lenh] = u - v;
                }
            }
            len *= 2;
        }
    }

    /// Interpolates from slot values (encoding direction): the inverse of `fft_special`.
    fn fft_special_inv(&self, vals: &mut [Complex]) {
        let size = vals.len();
        let m = 2 * self.n;
        let mut len = size;
        while len >= 2 {
            let (lenh, lenq) = (len / 2, len * 4);
            for i in (0..size).step_by(len) {
                for j in 0..lenh {
                    let idx = (lenq - self.rot_group[j] % lenq) * m / lenq;
                    let u = vals[i + j] + vals[i + j + lenh];
                    let v = (vals[i + j] - vals[i + j + lenh]) * self.ksi[idx];
                    vals[i + j] = u;
                    vals[i + j + lenh] = v;
                }
            }
            len /= 2;
        }
        privopt_math::ntt::bit_reverse_permute(vals);
        let inv = 1.0 / size as f64;
        for v in vals.iter_mut() {
            v.re *= inv;
            v.im *= inv;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct canonical embedding: slot j = m(ζ^{5^j}) for ζ = e^{iπ/n}, real part.
    fn direct_decode(coeffs: &[f64]) -> Vec<f64> {
        let n = coeffs.len();
        let mut g = 1usize;
        (0..n / 2)
            .map(|_| {
                let root = g;
                g = g * 5 % (2 * n);
                coeffs
                    .iter()
                    .enumerate()
                    .map(|(k, c)| {
                        c * (std::f64::consts::PI * ((root * k) % (2 * n)) as f64 / n as f64).cos()
                    })
                    .sum()
            })
            .collect()
    }

    #[test]
    fn special_fft_matches_the_canonical_embedding() {
        for n in [8usize, 64, 1024] {
            let enc = SlotEncoder::new(n).unwrap();
            let coeffs: Vec<f64> = (0..n)
                .map(|k| ((k * 7919 % 101) as f64 - 50.0) / 13.0)
                .collect();
            let fast = enc.decode(&coeffs);
            let slow = direct_decode(&coeffs);
            for (a, b) in fast.iter().zip(&slow) {
                assert!((a - b).abs() < 1e-9 * n as f64, "n={n}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn encode_then_decode_round_trips_to_rounding_precision() {
        let n = 4096;
        let enc = SlotEncoder::new(n).unwrap();
        let values: Vec<f64> = (0..n / 2)
            .map(|j| ((j as f64) * 0.37).sin() * 10.0)
            .collect();
        let coeffs = enc.encode(&values, 40).unwrap();
        let unscaled: Vec<f64> = coeffs.iter().map(|&c| c as f64 / 2f64.powi(40)).collect();
        let back = enc.decode(&unscaled);
        // Rounding each coefficient adds U(−½, ½)/Λ; a slot sums n of them: sd √(n/12)/Λ ≈ 2^-35.
        let worst = back
            .iter()
            .zip(&values)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-9, "worst slot error {worst}");
        // The encoding of a real vector is a real polynomial: conjugate slots come for free.
        assert!(enc.encode(&vec![1.0; n / 2 + 1], 40).is_err());
        assert!(enc.encode(&[f64::NAN], 40).is_err());
        assert!(enc.encode(&[1e10], 40).is_err());
    }

    #[test]
    fn slot_encoding_is_precise_up_to_n_2_16() {
        // Measured: the special FFT's float round trip is 2.6e-14 at n = 2^16 (values up to 10),
        // and rounding at scale 2^40 adds 2.8e-10 — both far below the encryption noise.
        for n in [1usize << 14, 1 << 16] {
            let enc = SlotEncoder::new(n).unwrap();
            let values: Vec<f64> = (0..n / 2)
                .map(|j| ((j as f64) * 0.37).sin() * 10.0)
                .collect();
            let coeffs = enc.coefficients(&values).unwrap();
            let back = enc.decode(&coeffs);
            let fft_err = back
                .iter()
                .zip(&values)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(fft_err < 1e-12, "n = {n}: FFT round trip {fft_err:e}");
            let ints = enc.encode(&values, 40).unwrap();
            let unscaled: Vec<f64> = ints.iter().map(|&c| c as f64 / 2f64.powi(40)).collect();
            let rounded = enc
                .decode(&unscaled)
                .iter()
                .zip(&values)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(rounded < 1e-9, "n = {n}: encode/decode {rounded:e}");
        }
    }

    #[test]
    fn scalar_encoding_limits() {
        let m = encode_scalar(-1.5, 16, 40).unwrap();
        assert_eq!(m[0], -(3i64 << 39));
        assert!(m[1..].iter().all(|&c| c == 0));
        assert!(encode_scalar(1e6, 16, 40).is_err());
        assert!(encode_scalar(f64::INFINITY, 16, 40).is_err());
    }
}
