//! Principal component analysis (fitted on training data, applied to any data).

use faer::{Mat, Side};

use crate::data::Dataset;
use crate::error::{MlError, Result, ensure};

/// A fitted projection onto the top principal components.
#[derive(Clone, Debug)]
pub struct Pca {
    mean: Vec<f64>,
    /// `d x k`, column `j` is the `j`-th principal direction (unit norm).
    components: Mat<f64>,
    /// Variance of the data along each component, largest first.
    explained_variance: Vec<f64>,
}

impl Pca {
    /// Fits `k` components to the features of `data` (eigendecomposition of the sample
    /// covariance; fine for the d ≤ a few thousand features of the papers' datasets).
    pub fn fit(data: &Dataset, k: usize) -> Result<Pca> {
        let (n, d) = (data.len(), data.n_features());
        ensure(k >= 1 && k <= d, || {
            format!("PCA needs 1 <= k <= {d}, got {k}")
        })?;
        ensure(n >= 2, || "PCA needs at least 2 examples".into())?;
        let mut mean = vec![0.0; d];
        for i in 0..n {
            for (m, v) in mean.iter_mut().zip(data.row(i)) {
                *m += v;
            }
        }
        mean.iter_mut().for_each(|m| *m /= n as f64);
        let centered = Mat::from_fn(n, d, |i, j| data.row(i)[j] - mean[j]);
        let cov = centered.transpose() * &centered * faer::Scale(1.0 / (n as f64 - 1.0));
        let eig = cov
            .self_adjoint_eigen(Side::Lower)
            .map_err(|e| MlError::Invalid(format!("PCA eigendecomposition failed: {e:?}")))?;
        // Eigenvalues come in nondecreasing order: the top k are the last k, reversed.
        let u = eig.U();
        let s = eig.S().column_vector();
        let components = Mat::from_fn(d, k, |i, j| u[(i, d - 1 - j)]);
        let explained_variance = (0..k).map(|j| s[d - 1 - j].max(0.0)).collect();
        Ok(Pca {
            mean,
            components,
            explained_variance,
        })
    }

    /// Number of components.
    pub fn k(&self) -> usize {
        self.components.ncols()
    }

    /// Variance along each component, largest first.
    pub fn explained_variance(&self) -> &[f64] {
        &self.explained_variance
    }

    /// Projects every row of `data` onto the components (after subtracting the training mean).
    pub fn transform(&self, data: &Dataset) -> Result<Dataset> {
        let d = self.mean.len();
        ensure(data.n_features() == d, || {
            format!(
                "PCA was fitted on {d} features, data has {}",
                data.n_features()
            )
        })?;
        let k = self.k();
        let mut centered = vec![0.0; d];
        data.map_rows(k, |row, out| {
            for ((c, v), m) in centered.iter_mut().zip(row).zip(&self.mean) {
                *c = v - m;
            }
            for (j, o) in out.iter_mut().enumerate() {
                *o = (0..d).map(|i| centered[i] * self.components[(i, j)]).sum();
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use privopt_math::SeedTree;
    use rand_distr::{Distribution, StandardNormal};

    #[test]
    fn recovers_the_dominant_direction_and_its_variance() {
        // Points along (3, 4)/5 with sd 10 plus isotropic noise of sd 0.1.
        let mut r = SeedTree::new(3).stream("pca", &[]);
        let n = 4000;
        let mut x = Vec::new();
        for _ in 0..n {
            let t: f64 = StandardNormal.sample(&mut r);
            let e1: f64 = StandardNormal.sample(&mut r);
            let e2: f64 = StandardNormal.sample(&mut r);
            x.push(1.0 + 6.0 * t + 0.1 * e1);
            x.push(-2.0 + 8.0 * t + 0.1 * e2);
        }
        let ds = Dataset::new(x, vec![0.0; n], 2, None).unwrap();
        let pca = Pca::fit(&ds, 1).unwrap();
        let (c0, c1) = (pca.components[(0, 0)], pca.components[(1, 0)]);
        assert!((c0.abs() - 0.6).abs() < 1e-3 && (c1.abs() - 0.8).abs() < 1e-3);
        assert!(c0 * c1 > 0.0);
        // Variance 100 + 0.01; the sample estimate has relative sd sqrt(2/n) ~ 2.2%: allow 5 sd.
        assert!(
            (pca.explained_variance()[0] - 100.01).abs() < 100.0 * 5.0 * (2.0f64 / n as f64).sqrt()
        );
        let p = pca.transform(&ds).unwrap();
        assert_eq!(p.n_features(), 1);
        let mean: f64 = p.features().iter().sum::<f64>() / n as f64;
        assert!(mean.abs() < 1e-9);
        assert!(Pca::fit(&ds, 3).is_err());
    }
}
