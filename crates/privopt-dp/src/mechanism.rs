//! The Gaussian mechanism and per-example L2 clipping.

use rand::Rng;
use rand_distr::{Distribution, Normal};

use crate::DpError;

/// Scales `v` in place so that its L2 norm is at most `bound`; returns the norm before clipping.
pub fn clip_l2(v: &mut [f64], bound: f64) -> f64 {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm > bound {
        let scale = bound / norm;
        v.iter_mut().for_each(|x| *x *= scale);
    }
    norm
}

/// Adds N(0, std²) noise to every coordinate: std = noise multiplier × L2 sensitivity.
#[derive(Clone, Debug)]
pub struct GaussianMechanism {
    normal: Normal<f64>,
}

impl GaussianMechanism {
    /// A mechanism for a query with L2 `sensitivity`, at noise multiplier `sigma`.
    pub fn new(sigma: f64, sensitivity: f64) -> Result<Self, DpError> {
        let std = sigma * sensitivity;
        let normal = Normal::new(0.0, std)
            .map_err(|_| DpError::Invalid(format!("noise standard deviation {std} is invalid")))?;
        if !(std.is_finite() && std >= 0.0) {
            return Err(DpError::Invalid(format!(
                "noise standard deviation {std} is invalid"
            )));
        }
        Ok(Self { normal })
    }

    /// The per-coordinate noise standard deviation.
    pub fn std(&self) -> f64 {
        self.normal.std_dev()
    }

    /// Adds fresh noise to `v`.
    pub fn perturb<R: Rng + ?Sized>(&self, v: &mut [f64], rng: &mut R) {
        v.iter_mut().for_each(|x| *x += self.normal.sample(rng));
    }

    /// A noise vector of length `dim` (pre-sampled noise, as the FHE client ships it).
    pub fn noise<R: Rng + ?Sized>(&self, dim: usize, rng: &mut R) -> Vec<f64> {
        (0..dim).map(|_| self.normal.sample(rng)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn clipping_bounds_the_norm_and_keeps_direction() {
        let mut v = vec![3.0, 4.0];
        assert_eq!(clip_l2(&mut v, 1.0), 5.0);
        assert!((v[0] - 0.6).abs() < 1e-15 && (v[1] - 0.8).abs() < 1e-15);
        let mut w = vec![0.3, 0.4];
        clip_l2(&mut w, 1.0);
        assert_eq!(w, vec![0.3, 0.4]);
    }

    #[test]
    fn noise_has_the_calibrated_variance() {
        let m = GaussianMechanism::new(2.0, 0.5).unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        let n = m.noise(200_000, &mut rng);
        let var = n.iter().map(|x| x * x).sum::<f64>() / n.len() as f64;
        // std = 1; the sample variance of 2e5 normals is within 1% with overwhelming probability.
        assert!((var - 1.0).abs() < 0.01, "{var}");
        assert!(GaussianMechanism::new(-1.0, 1.0).is_err());
    }
}
