//! Encodings of float vectors into Z_{2^32} for a masked sum.
//!
//! [`Quantizer`], privopt's: each coordinate is clipped to `[−clip, clip]`, scaled by
//! `scale = (2^31 − 1) / (max_summands · clip)` and rounded to the nearest integer, stored in
//! two's complement. A sum of at most `max_summands` such integers lies in
//! `[−2^31 + 1, 2^31 − 1]`, so it never wraps and decodes exactly as a signed integer.
//!
//! [`StochasticQuantizer`], Flower's SecAgg+ encoding: clipped, shifted to `[0, 2·clip]`,
//! scaled to `[0, quantization_range]` and rounded up with probability the fractional part,
//! so the encoding is unbiased; the app reduces the sum modulo its own modulus.

use rand::{CryptoRng, Rng};

use crate::SecAggError;
use crate::mask::{MaskSeed, Sign};

/// Most vectors one code sums (2^24: the scale keeps 2^7 levels per sign per summand).
pub const MAX_SUMMANDS: usize = 1 << 24;

/// A fixed-point code for one aggregation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantizer {
    clip: f64,
    max_summands: usize,
    scale: f64,
}

impl Quantizer {
    /// A code for values clipped to `[−clip, clip]`, summed over at most `max_summands` vectors
    /// (at most [`MAX_SUMMANDS`], so each summand keeps at least 2^7 levels per sign).
    pub fn new(clip: f64, max_summands: usize) -> Result<Self, SecAggError> {
        if !(clip.is_finite() && clip > 0.0 && (1..=MAX_SUMMANDS).contains(&max_summands)) {
            return Err(SecAggError::Parameters(format!(
                "quantizer needs a finite clip > 0 and 1..={MAX_SUMMANDS} summands, got {clip} \
                 and {max_summands}"
            )));
        }
        let scale = f64::from(i32::MAX) / (max_summands as f64 * clip);
        // A clip so small that the scale overflows has no representable step.
        if !scale.is_finite() {
            return Err(SecAggError::Parameters(format!(
                "quantizer clip {clip:e} is too small to encode at any resolution"
            )));
        }
        Ok(Self {
            clip,
            max_summands,
            scale,
        })
    }

    /// The clipping bound.
    pub fn clip(&self) -> f64 {
        self.clip
    }

    /// Encodes one vector: values beyond the clip are clipped; a NaN or infinite value is
    /// refused (naming its index) rather than encoded as a number it is not.
    pub fn encode(&self, values: &[f64]) -> Result<Vec<u32>, SecAggError> {
        if let Some(i) = values.iter().position(|x| !x.is_finite()) {
            return Err(SecAggError::Parameters(format!(
                "value {i} is {}: only finite values can be quantized",
                values[i]
            )));
        }
        Ok(values
            .iter()
            .map(|&x| {
                let x = x.clamp(-self.clip, self.clip);
                // |x·scale| ≤ (2^31 − 1)/max_summands: the rounded value fits an i32.
                ((x * self.scale).round() as i32) as u32
            })
            .collect())
    }

    /// Decodes a sum of at most `max_summands` encoded vectors.
    pub fn decode_sum(&self, sum: &[u32]) -> Vec<f64> {
        sum.iter()
            .map(|&w| f64::from(w as i32) / self.scale)
            .collect()
    }

    /// Worst-case absolute error per coordinate of a decoded sum of `summands` vectors whose
    /// values lie within the clip: half a step per summand.
    pub fn sum_error_bound(&self, summands: usize) -> f64 {
        0.5 * summands as f64 / self.scale
    }

    /// The largest number of vectors whose sum decodes correctly.
    pub fn max_summands(&self) -> usize {
        self.max_summands
    }
}

/// Largest `quantization_range` of a [`StochasticQuantizer`]: a coordinate rounds up to at
/// most the range, which must fit a word (Flower allows any range below its modulus, at most
/// 2^32).
pub const MAX_QUANTIZATION_RANGE: u32 = u32::MAX;

/// Flower's SecAgg+ quantization (`flwr.common.secure_aggregation.quantization.quantize`):
/// `x ↦ ⌊(clamp(x, −c, c) + c) · q / 2c + u⌋` with `u` uniform in `[0, 1)`, i.e. rounded up
/// with probability the fractional part.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StochasticQuantizer {
    clip: f64,
    scale: f64,
    range: f64,
}

impl StochasticQuantizer {
    /// A code for values clipped to `[−clipping_range, clipping_range]` mapped onto
    /// `0..=quantization_range`.
    pub fn new(clipping_range: f64, quantization_range: u32) -> Result<Self, SecAggError> {
        let fits = clipping_range.is_finite()
            && clipping_range > 0.0
            && (1..=MAX_QUANTIZATION_RANGE).contains(&quantization_range);
        if !fits {
            return Err(SecAggError::Parameters(format!(
                "stochastic quantization needs a finite clipping range > 0 and a quantization \
                 range in 1..={MAX_QUANTIZATION_RANGE}, got {clipping_range} and \
                 {quantization_range}"
            )));
        }
        Ok(Self {
            clip: clipping_range,
            scale: f64::from(quantization_range) / (2.0 * clipping_range),
            range: f64::from(quantization_range),
        })
    }

    /// Encodes `multiplier · values`, refusing a NaN or infinite value (naming its index) or
    /// multiplier. The rounding draws 32 bits per coordinate from an AES-128-CTR keystream
    /// keyed from `rng`, the masks' generator.
    pub fn encode(
        &self,
        values: &[f64],
        multiplier: f64,
        rng: &mut (impl Rng + CryptoRng),
    ) -> Result<Vec<u32>, SecAggError> {
        if !multiplier.is_finite() {
            return Err(SecAggError::Parameters(format!(
                "the multiplier is {multiplier}: only finite values can be quantized"
            )));
        }
        if let Some(i) = values.iter().position(|x| !x.is_finite()) {
            return Err(SecAggError::Parameters(format!(
                "value {i} is {}: only finite values can be quantized",
                values[i]
            )));
        }
        // The keystream first, then each word becomes its coordinate's encoding.
        let mut out = vec![0u32; values.len()];
        MaskSeed(rng.random()).apply(&mut out, 0, Sign::Plus);
        let (c, scale, range) = (self.clip, self.scale, self.range);
        for (o, &x) in out.iter_mut().zip(values) {
            // At the clip, `2c·(q/2c)` can round a hair above `q`: held to `q`.
            let level = (((x * multiplier).clamp(-c, c) + c) * scale).min(range);
            let uniform = f64::from(*o) * (1.0 / 4_294_967_296.0);
            // Non-negative, below the range + 1: truncation is the floor.
            *o = (level + uniform) as u32;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn sums_decode_within_the_bound_even_at_the_extremes() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let q = Quantizer::new(2.5, 100).unwrap();
        let n = 100;
        let vectors: Vec<Vec<f64>> = (0..n)
            .map(|_| {
                (0..64)
                    .map(|j| {
                        if j == 0 {
                            2.5
                        } else {
                            rng.random_range(-2.5..2.5)
                        }
                    })
                    .collect()
            })
            .collect();
        let mut sum = vec![0u32; 64];
        for v in &vectors {
            for (s, w) in sum.iter_mut().zip(q.encode(v).unwrap()) {
                *s = s.wrapping_add(w);
            }
        }
        let decoded = q.decode_sum(&sum);
        let bound = q.sum_error_bound(n);
        for j in 0..64 {
            let exact: f64 = vectors.iter().map(|v| v[j]).sum();
            assert!(
                (decoded[j] - exact).abs() <= bound,
                "coord {j}: {} vs {exact}",
                decoded[j]
            );
        }
        // Coordinate 0 is the extreme 100 × 2.5 and must not wrap.
        assert!((decoded[0] - 250.0).abs() <= bound);
        // Clipping: a value beyond the clip decodes as the clip.
        let clipped = q.decode_sum(&q.encode(&[1e9, -1e9]).unwrap());
        assert!((clipped[0] - 2.5).abs() <= q.sum_error_bound(1));
        assert!((clipped[1] + 2.5).abs() <= q.sum_error_bound(1));
        assert!(Quantizer::new(0.0, 3).is_err());
    }

    /// Finding 6 of the third adversarial pass: NaN and infinity were encoded as 0 (and ±clip),
    /// and a code whose step exceeded the clip encoded everything as 0 without a word.
    #[test]
    fn non_finite_values_and_collapsed_resolutions_are_refused() {
        let q = Quantizer::new(1.0, 10).unwrap();
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let e = q.encode(&[0.5, bad]).unwrap_err().to_string();
            assert!(e.contains("value 1"), "{e}");
        }
        assert!(Quantizer::new(1.0, MAX_SUMMANDS + 1).is_err());
        assert!(Quantizer::new(1e-320, 1).is_err());
        // At the bounds the code still resolves: one unit step is below the clip.
        let coarse = Quantizer::new(1.0, MAX_SUMMANDS).unwrap();
        assert_ne!(coarse.encode(&[0.5]).unwrap(), vec![0]);
    }
    #[test]
    fn stochastic_rounding_is_unbiased_and_stays_in_range() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let q = StochasticQuantizer::new(2.0, 1000).unwrap();
        // 0.3 maps to (0.3 + 2)·250 = 575 exactly; 0.3013 to 575.325: up a third of the time.
        let n = 200_000;
        let words = q.encode(&vec![0.3013; n], 1.0, &mut rng).unwrap();
        assert!(words.iter().all(|&w| w == 575 || w == 576));
        let up = words.iter().filter(|&&w| w == 576).count() as f64 / n as f64;
        // Five standard deviations of a binomial proportion at p = 0.325.
        assert!(
            (up - 0.325).abs() < 5.0 * (0.325 * 0.675 / n as f64).sqrt(),
            "{up}"
        );
        // The multiplier scales before the clip; the ends of the range are reached exactly.
        let ends = q.encode(&[1e9, -1e9, 0.5], 4.0, &mut rng).unwrap();
        assert_eq!(ends, vec![1000, 0, 1000]);
        let e = q
            .encode(&[0.0, f64::NAN], 1.0, &mut rng)
            .unwrap_err()
            .to_string();
        assert!(e.contains("value 1"), "{e}");
        assert!(q.encode(&[0.0], f64::INFINITY, &mut rng).is_err());
        assert!(StochasticQuantizer::new(0.0, 10).is_err());
        assert!(StochasticQuantizer::new(1.0, 0).is_err());
        // The widest range Flower allows (below a 2^32 modulus) keeps its top level.
        let widest = StochasticQuantizer::new(0.3, u32::MAX).unwrap();
        let top = widest.encode(&[0.3, 1e9, -0.3], 1.0, &mut rng).unwrap();
        assert_eq!(top, vec![u32::MAX, u32::MAX, 0]);
    }
}
