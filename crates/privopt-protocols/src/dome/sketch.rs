//! The sketching matrix `S` (d × k, orthonormal columns) and Alg. 2 (UpdateSketch): a streaming
//! PCA of the decompressed gradients, truncated to the components that hold a fraction `q` of
//! the energy, refilled with Gaussian probes orthogonal to them.

use faer::{Mat, MatRef};
use rand::Rng;
use rand_distr::StandardNormal;

use crate::error::{Result, check_param};

/// Most entries of a sketch matrix (`d · k`, 2 GiB of `f64`).
pub const MAX_SKETCH_ENTRIES: usize = 1 << 28;

/// How the sketch evolves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SketchKind {
    /// DOME (Alg. 2): streaming PCA, truncation to energy `q`, orthogonal probes.
    Learned {
        /// Fraction of spectral energy kept before refilling with probes.
        energy: f64,
    },
    /// DOME without probes: the sketch is the streaming PCA basis itself.
    LearnedNoProbes,
    /// A random orthonormal sketch drawn once (data-independent, as in Chen et al. 2022).
    Random,
    /// No sketch (`S = I`): full-dimension DP-FedAdam.
    Identity,
}

/// The projection a client applies: `S^T g`, or `g` itself for the identity sketch.
#[derive(Clone, Copy, Debug)]
pub enum Basis<'a> {
    /// No sketch (`S = I` of dimension `d`).
    Identity {
        /// The model dimension.
        d: usize,
    },
    /// `S` (d × k), column-major.
    Matrix(MatRef<'a, f64>),
}

impl Basis<'_> {
    /// The model dimension `d`.
    pub fn d(&self) -> usize {
        match self {
            Basis::Identity { d } => *d,
            Basis::Matrix(s) => s.nrows(),
        }
    }

    /// The released dimension (`k`, or `d` for the identity).
    pub fn dim(&self) -> usize {
        match self {
            Basis::Identity { d } => *d,
            Basis::Matrix(s) => s.ncols(),
        }
    }

    /// `S^T g` for each gradient `g` in `columns`, `d` values after `d` values (a trailing
    /// part shorter than `d` is ignored). One matrix product reads `S` (208 MB at MNIST's d
    /// and k = 256) once for all of them; column by column, the products are bound by memory
    /// and took most of a simulated round.
    pub fn project_columns(&self, columns: &[f64]) -> Vec<Vec<f64>> {
        let d = self.d();
        if d == 0 {
            return Vec::new();
        }
        let columns = &columns[..columns.len() - columns.len() % d];
        match self {
            Basis::Identity { .. } => columns.chunks(d).map(<[f64]>::to_vec).collect(),
            Basis::Matrix(s) => {
                let g = MatRef::from_column_major_slice(columns, d, columns.len() / d);
                let p = s.transpose() * g;
                (0..p.ncols())
                    .map(|c| (0..p.nrows()).map(|i| p[(i, c)]).collect())
                    .collect()
            }
        }
    }
}

/// The sketch and the streaming-PCA state behind it.
pub struct Sketch {
    kind: SketchKind,
    d: usize,
    k: usize,
    /// `S` (d × k); unused for `Identity`.
    s: Mat<f64>,
    /// `U_t` (d × k) and `Λ_t` of the streaming PCA (empty before the first update).
    u: Mat<f64>,
    lambda: Vec<f64>,
    /// Components kept at the last update (`r` of Alg. 2).
    kept: usize,
}

/// Orthonormal basis of the columns of `m` (thin Householder QR).
fn orthonormalize(m: MatRef<'_, f64>) -> Mat<f64> {
    m.qr().compute_thin_Q()
}

fn gaussian(d: usize, k: usize, rng: &mut impl Rng) -> Mat<f64> {
    Mat::from_fn(d, k, |_, _| rng.sample::<f64, _>(StandardNormal))
}

impl Sketch {
    /// `S_0`: an orthonormalized Gaussian d × k matrix (identity for `Identity`). The rank
    /// must be in `1..=d` (a d × k matrix with k > d has no orthonormal columns), and `d · k`
    /// at most `MAX_SKETCH_ENTRIES`.
    pub fn new(kind: SketchKind, d: usize, k: usize, rng: &mut impl Rng) -> Result<Self> {
        check_param(d >= 1, || "the model has no parameters to sketch".into())?;
        let (k, s) = match kind {
            SketchKind::Identity => (d, Mat::zeros(0, 0)),
            _ => {
                check_param((1..=d).contains(&k), || {
                    format!("the sketch rank k must be in 1..={d} (the parameter count), got {k}")
                })?;
                check_param(d.saturating_mul(k) <= MAX_SKETCH_ENTRIES, || {
                    format!(
                        "a {d} × {k} sketch has more than {MAX_SKETCH_ENTRIES} entries; lower k"
                    )
                })?;
                (k, orthonormalize(gaussian(d, k, rng).as_ref()))
            }
        };
        Ok(Self {
            kind,
            d,
            k,
            s,
            u: Mat::zeros(0, 0),
            lambda: Vec::new(),
            kept: 0,
        })
    }

    /// Sketch dimension `k` (`d` for the identity).
    pub fn dim(&self) -> usize {
        self.k
    }

    /// Streaming-PCA components kept at the last update (0 before any).
    pub fn kept(&self) -> usize {
        self.kept
    }

    /// What clients project with this round.
    pub fn basis(&self) -> Basis<'_> {
        match self.kind {
            SketchKind::Identity => Basis::Identity { d: self.d },
            _ => Basis::Matrix(self.s.as_ref()),
        }
    }

    /// `S s`.
    pub fn decompress(&self, s: &[f64]) -> Vec<f64> {
        match self.kind {
            SketchKind::Identity => s.to_vec(),
            _ => {
                let col = MatRef::from_column_major_slice(s, s.len(), 1);
                let out = &self.s * col;
                (0..self.d).map(|i| out[(i, 0)]).collect()
            }
        }
    }

    /// `Diag(S S^T)`: the per-coordinate variance of `S z` for unit-variance `z` (Lemma 3.2).
    pub fn diag_sst(&self) -> Vec<f64> {
        match self.kind {
            SketchKind::Identity => vec![1.0; self.d],
            _ => (0..self.d)
                .map(|i| (0..self.k).map(|c| self.s[(i, c)].powi(2)).sum())
                .collect(),
        }
    }

    /// Alg. 2 with the decompressed batch gradient `g_hat`.
    pub fn update(&mut self, g_hat: &[f64], rng: &mut impl Rng) {
        let energy = match self.kind {
            SketchKind::Learned { energy } => Some(energy),
            SketchKind::LearnedNoProbes => None,
            SketchKind::Random | SketchKind::Identity => return,
        };
        let (u, r) = self.streaming_pca_step(g_hat);
        // Λ' = column norms of R; we order components by it, so "the top r" are the first r.
        let norms: Vec<f64> = (0..self.k)
            .map(|c| (0..self.k).map(|i| r[(i, c)].powi(2)).sum::<f64>().sqrt())
            .collect();
        let mut order: Vec<usize> = (0..self.k).collect();
        order.sort_by(|&a, &b| norms[b].total_cmp(&norms[a]));
        self.u = Mat::from_fn(self.d, self.k, |i, j| u[(i, order[j])]);
        self.lambda = order.iter().map(|&c| norms[c]).collect();
        let Some(q) = energy else {
            self.s = self.u.clone();
            self.kept = self.k;
            return;
        };
        let total: f64 = self.lambda.iter().map(|l| l * l).sum();
        let mut acc = 0.0;
        let mut kept = self.k;
        for (i, l) in self.lambda.iter().enumerate() {
            acc += l * l;
            if acc >= q * total {
                kept = i + 1;
                break;
            }
        }
        self.kept = kept;
        let top = self.u.subcols(0, kept);
        let probes = self.k - kept;
        if probes == 0 {
            self.s = top.to_owned();
            return;
        }
        // Ω ⊥ span(U'): Ω − U'(U'^T Ω), then orthonormalized.
        let omega = gaussian(self.d, probes, rng);
        let omega_perp = &omega - top * (top.transpose() * &omega);
        let q_probe = orthonormalize(omega_perp.as_ref());
        self.s = Mat::from_fn(self.d, self.k, |i, j| {
            if j < kept {
                top[(i, j)]
            } else {
                q_probe[(i, j - kept)]
            }
        });
    }

    /// One streaming-PCA step (Alg. 2 lines 2–7): the thin QR `U R` of
    /// `Y = ĝ ĝ^T S` (first update) or `Y = U Λ + ĝ ĝ^T U`.
    ///
    /// After the first update `Y = U (Λ + w w^T) + ρ r̂ w^T` with `w = U^T ĝ` and `ĝ = U w + ρ r̂`,
    /// so `Y = [U | r̂] M` with a (k+1) × k matrix `M`; the QR of `M` gives that of `Y` for a
    /// d × k² product instead of a d × k Householder QR.
    fn streaming_pca_step(&self, g_hat: &[f64]) -> (Mat<f64>, Mat<f64>) {
        let g = MatRef::from_column_major_slice(g_hat, self.d, 1);
        if self.lambda.is_empty() {
            let y = g * (g.transpose() * &self.s);
            let qr = y.qr();
            return (qr.compute_thin_Q(), qr.thin_R().to_owned());
        }
        let w = self.u.transpose() * g; // k × 1
        let resid = g - &self.u * &w;
        let rho = (0..self.d)
            .map(|i| resid[(i, 0)].powi(2))
            .sum::<f64>()
            .sqrt();
        let k = self.k;
        let m = Mat::from_fn(k + 1, k, |i, j| {
            if i < k {
                let diag = if i == j { self.lambda[j] } else { 0.0 };
                diag + w[(i, 0)] * w[(j, 0)]
            } else {
                rho * w[(j, 0)]
            }
        });
        let qr = m.qr();
        let (qm, r) = (qr.compute_thin_Q(), qr.thin_R().to_owned());
        let mut u = &self.u * qm.subrows(0, k);
        if rho > 0.0 {
            // Add r̂ · (last row of Q_m).
            for j in 0..k {
                let c = qm[(k, j)] / rho;
                for i in 0..self.d {
                    u[(i, j)] += resid[(i, 0)] * c;
                }
            }
        }
        (u, r)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn orthonormality_error(s: MatRef<'_, f64>) -> f64 {
        let g = s.transpose() * s;
        let mut worst: f64 = 0.0;
        for i in 0..g.nrows() {
            for j in 0..g.ncols() {
                let target = if i == j { 1.0 } else { 0.0 };
                worst = worst.max((g[(i, j)] - target).abs());
            }
        }
        worst
    }

    #[test]
    fn the_factored_update_equals_a_direct_qr_of_y() {
        let (d, k) = (300, 6);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut sk = Sketch::new(SketchKind::LearnedNoProbes, d, k, &mut rng).unwrap();
        for _ in 0..3 {
            let g: Vec<f64> = (0..d).map(|_| rng.sample(StandardNormal)).collect();
            // Direct: Y = U Λ + g g^T U, compare the spanned projector and the R column norms.
            if !sk.lambda.is_empty() {
                let gm = MatRef::from_column_major_slice(&g, d, 1);
                let ul = Mat::from_fn(d, k, |i, j| sk.u[(i, j)] * sk.lambda[j]);
                let y = &ul + gm * (gm.transpose() * &sk.u);
                let direct = y.qr();
                let (q, r) = sk.streaming_pca_step(&g);
                let proj = |m: &Mat<f64>| m * m.transpose();
                let diff = proj(&q) - proj(&direct.compute_thin_Q());
                assert!(
                    diff.norm_max() < 1e-9,
                    "projectors differ by {}",
                    diff.norm_max()
                );
                for c in 0..k {
                    let n1: f64 = (0..k).map(|i| r[(i, c)].powi(2)).sum();
                    let n2: f64 = (0..k).map(|i| direct.thin_R()[(i, c)].powi(2)).sum();
                    assert!((n1 - n2).abs() < 1e-8 * n2.max(1.0));
                }
            }
            sk.update(&g, &mut rng);
        }
    }

    #[test]
    fn probes_are_orthogonal_and_the_sketch_tracks_a_fixed_subspace() {
        let (d, k) = (500, 8);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        // Gradients in a fixed 2-dimensional subspace.
        let basis = orthonormalize(gaussian(d, 2, &mut rng).as_ref());
        let mut sk = Sketch::new(SketchKind::Learned { energy: 0.99 }, d, k, &mut rng).unwrap();
        for _ in 0..20 {
            let (a, b): (f64, f64) = (rng.sample(StandardNormal), rng.sample(StandardNormal));
            let g: Vec<f64> = (0..d)
                .map(|i| a * basis[(i, 0)] + b * basis[(i, 1)])
                .collect();
            sk.update(&g, &mut rng);
            assert!(orthonormality_error(sk.s.as_ref()) < 1e-10);
        }
        assert!(sk.kept() <= 3, "kept {}", sk.kept());
        // The subspace lies in span(S): projecting the basis loses nothing.
        let p = sk.s.transpose() * &basis;
        let captured: f64 = (0..2)
            .map(|c| (0..k).map(|i| p[(i, c)].powi(2)).sum::<f64>())
            .sum();
        // Λ' (column norms of R) only approximates the spectrum, so the kept columns hold most,
        // not all, of the subspace; a random 8-dim sketch would hold 2·8/500 = 0.03.
        assert!(captured > 1.9, "captured {captured}");
    }

    /// Fraction of `v`'s energy inside span(S).
    fn captured(sk: &Sketch, v: &[f64]) -> f64 {
        let col = MatRef::from_column_major_slice(v, v.len(), 1);
        let p = sk.s.transpose() * col;
        (0..sk.k).map(|i| p[(i, 0)].powi(2)).sum::<f64>() / v.iter().map(|x| x * x).sum::<f64>()
    }

    #[test]
    fn without_probes_the_sketch_never_sees_a_new_direction() {
        // The paper's collapse. The server only sees gradients through the sketch
        // (ĝ = S Sᵀ g). When the gradient moves to a direction outside span(S), the no-probe
        // sketch never learns it; the probed one finds part of it.
        let (d, k) = (400, 4);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut noprobe = Sketch::new(SketchKind::LearnedNoProbes, d, k, &mut rng).unwrap();
        let mut probed = Sketch::new(SketchKind::Learned { energy: 0.9 }, d, k, &mut rng).unwrap();
        let target: Vec<f64> = (0..d).map(|_| rng.sample(StandardNormal)).collect();
        let observe = |sk: &Sketch, g: &[f64]| {
            let col = MatRef::from_column_major_slice(g, g.len(), 1);
            sk.decompress(
                &(0..sk.k)
                    .map(|i| (sk.s.transpose() * col)[(i, 0)])
                    .collect::<Vec<_>>(),
            )
        };
        // The first update replaces S_0 by the QR basis of a rank-one Y, whose completion is
        // arbitrary; from then on ĝ ∈ span(S) and span(S) is frozen.
        let g = observe(&noprobe, &target);
        noprobe.update(&g, &mut rng);
        let start_noprobe = captured(&noprobe, &target);
        for _ in 0..300 {
            let g = observe(&noprobe, &target);
            noprobe.update(&g, &mut rng);
            let g = observe(&probed, &target);
            probed.update(&g, &mut rng);
        }
        let (frozen, found) = (captured(&noprobe, &target), captured(&probed, &target));
        assert!(
            frozen <= start_noprobe + 1e-9,
            "no-probe capture grew: {start_noprobe} → {frozen}"
        );
        // Probes find part of it, but slowly: the streaming PCA never forgets (Λ only grows),
        // so pieces found late carry little energy and are truncated again. 300 rounds reach
        // about 0.1 here (docs/dome.md).
        assert!(
            found > 2.0 * frozen.max(0.02),
            "probed {found} vs frozen {frozen}"
        );
    }

    #[test]
    fn diag_of_s_st_sums_to_k() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let sk = Sketch::new(SketchKind::Random, 200, 7, &mut rng).unwrap();
        let total: f64 = sk.diag_sst().iter().sum();
        assert!((total - 7.0).abs() < 1e-10);
        let id = Sketch::new(SketchKind::Identity, 5, 0, &mut rng).unwrap();
        // Finding 4 of the third adversarial pass: a rank above the parameter count panicked.
        for (d, k) in [(5, 6), (5, 0), (0, 1), (1 << 20, 1 << 9)] {
            assert!(
                Sketch::new(SketchKind::Random, d, k, &mut rng).is_err(),
                "{d} × {k}"
            );
        }
        assert_eq!(id.dim(), 5);
        assert_eq!(
            id.decompress(&[1.0, 2.0, 3.0, 4.0, 5.0]),
            vec![1.0, 2.0, 3.0, 4.0, 5.0]
        );
    }
}
