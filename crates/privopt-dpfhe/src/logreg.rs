//! Logistic regression with an exact or polynomial sigmoid: gradients (averaged, or clipped per
//! example), loss, accuracy and AUC. Labels are 0/1 and the last feature is the bias.

use privopt_approx::ChebPoly;
use privopt_approx::functions::sigmoid;
use privopt_dp::clip_l2;
use privopt_ml::data::Dataset;

/// The function that turns a margin z = ⟨w, x⟩ into a prediction inside the gradient
/// (σ(z) − y)·x: the true sigmoid, or its polynomial stand-in p̃ (so p̃′(z, y) = p̃(z) − y).
#[derive(Clone, Debug)]
pub enum Link {
    /// The logistic sigmoid.
    Exact,
    /// A polynomial approximation of it.
    Poly(ChebPoly),
}

impl Link {
    /// σ(z) or p̃(z).
    pub fn eval(&self, z: f64) -> f64 {
        match self {
            Link::Exact => sigmoid(z),
            Link::Poly(p) => p.eval(z),
        }
    }
}

/// ⟨w, x⟩.
pub fn margin(w: &[f64], x: &[f64]) -> f64 {
    w.iter().zip(x).map(|(a, b)| a * b).sum()
}

/// Adds Σ_{i ∈ batch} (link(⟨w, x_i⟩) − y_i)·x_i to `sum`; per-example terms are clipped to L2
/// norm `clip` first when given (DP-SGD's clipping). Returns max_i |⟨w, x_i⟩| over the batch.
pub fn gradient_sum(
    link: &Link,
    w: &[f64],
    data: &Dataset,
    batch: &[usize],
    clip: Option<f64>,
    sum: &mut [f64],
) -> f64 {
    let mut g = vec![0.0; w.len()];
    let mut max_margin = 0.0_f64;
    for &i in batch {
        let x = data.row(i);
        let z = margin(w, x);
        max_margin = max_margin.max(z.abs());
        let r = link.eval(z) - data.label(i);
        match clip {
            None => sum.iter_mut().zip(x).for_each(|(s, xi)| *s += r * xi),
            Some(c) => {
                g.iter_mut().zip(x).for_each(|(gi, xi)| *gi = r * xi);
                clip_l2(&mut g, c);
                sum.iter_mut().zip(&g).for_each(|(s, gi)| *s += gi);
            }
        }
    }
    max_margin
}

/// Mean logistic loss with the exact sigmoid, f(w) (what `gradient_sum` differentiates).
pub fn logistic_loss(w: &[f64], data: &Dataset) -> f64 {
    let total: f64 = (0..data.len())
        .map(|i| {
            let z = margin(w, data.row(i));
            // ln(1 + e^z) − y·z, computed without overflow.
            let softplus = if z > 0.0 {
                z + (-z).exp().ln_1p()
            } else {
                z.exp().ln_1p()
            };
            softplus - data.label(i) * z
        })
        .sum();
    total / data.len().max(1) as f64
}

/// w* = argmin f, the exact logistic loss on `data` (the minimum-norm one when f is flat in
/// some direction), by damped Newton steps with backtracking (d is at most a few hundred).
/// `None` when f has no finite minimizer: on separable or quasi-separable data (a rare one-hot
/// category whose examples share one label) f keeps falling as ‖w‖ grows along some direction.
pub fn minimizer(data: &Dataset, max_iter: usize) -> Option<Vec<f64>> {
    use faer::linalg::solvers::Solve;
    let d = data.n_features();
    let n = data.len().max(1) as f64;
    let all: Vec<usize> = (0..data.len()).collect();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let mut w = vec![0.0; d];
    let mut f = logistic_loss(&w, data);
    for _ in 0..max_iter {
        let mut grad = vec![0.0; d];
        gradient_sum(&Link::Exact, &w, data, &all, None, &mut grad);
        grad.iter_mut().for_each(|g| *g /= n);
        // Hessian Σ σ(1 − σ)·x xᵀ / N (lower triangle).
        let mut hess = faer::Mat::<f64>::zeros(d, d);
        for i in 0..data.len() {
            let x = data.row(i);
            let s = sigmoid(margin(&w, x));
            let c = s * (1.0 - s) / n;
            for a in 0..d {
                for b in 0..=a {
                    hess[(a, b)] += c * x[a] * x[b];
                }
            }
        }
        // One-hot groups beside the bias make H singular: f is flat along X's null space and
        // its minimizers form an affine set. A small damping keeps every step in X's row space,
        // where GD from w₀ = 0 stays too, so the limit is the minimum-norm minimizer: the point
        // of that set GD converges to, and the nearest one to every GD iterate.
        let damping = 1e-8 * (0..d).map(|a| hess[(a, a)]).sum::<f64>() / d.max(1) as f64;
        for a in 0..d {
            hess[(a, a)] += damping.max(f64::MIN_POSITIVE);
        }
        let llt = hess.llt(faer::Side::Lower).ok()?;
        let rhs = faer::Mat::<f64>::from_fn(d, 1, |a, _| grad[a]);
        let solved = llt.solve(&rhs);
        let step: Vec<f64> = (0..d).map(|a| solved[(a, 0)]).collect();
        let (size, scale) = (norm(&step), 1.0 + norm(&w));
        // gᵀ(H + δI)⁻¹g/2 estimates f − f* (the Newton decrement), and rounding noise in X's
        // null space barely enters it. Once it is spent, a minimizer has a small Newton step;
        // along a (quasi-)separating direction f decays like e^{−t} and the step stays ≈ 1.
        let slope: f64 = grad.iter().zip(&step).map(|(g, s)| g * s).sum();
        if size <= 1e-10 * scale || slope <= 2e-20 {
            return (size <= 1e-3 * scale).then_some(w);
        }
        // Near w* the full step is safe and its decrease is below f's rounding; farther out,
        // backtrack until Armijo's condition (c = 1e-4) holds.
        let mut t = 1.0;
        loop {
            let trial: Vec<f64> = w.iter().zip(&step).map(|(wi, s)| wi - t * s).collect();
            let ft = logistic_loss(&trial, data);
            if size <= 1e-6 * scale || ft <= f - 1e-4 * t * slope {
                w = trial;
                f = ft;
                break;
            }
            t *= 0.5;
            if t < 1e-12 {
                return None;
            }
        }
    }
    None
}

/// Fraction of examples with (⟨w, x⟩ > 0) == (y == 1).
pub fn accuracy(w: &[f64], data: &Dataset) -> f64 {
    let correct = (0..data.len())
        .filter(|&i| (margin(w, data.row(i)) > 0.0) == (data.label(i) > 0.5))
        .count();
    correct as f64 / data.len().max(1) as f64
}

/// Area under the ROC curve of the scores ⟨w, x⟩ (Mann–Whitney, ties counted half).
pub fn auc(w: &[f64], data: &Dataset) -> f64 {
    let mut scored: Vec<(f64, bool)> = (0..data.len())
        .map(|i| (margin(w, data.row(i)), data.label(i) > 0.5))
        .collect();
    scored.sort_by(|a, b| a.0.total_cmp(&b.0));
    let positives = scored.iter().filter(|s| s.1).count() as f64;
    let negatives = scored.len() as f64 - positives;
    if positives == 0.0 || negatives == 0.0 {
        return f64::NAN;
    }
    // Sum of the positives' ranks, with tied scores sharing their average rank.
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < scored.len() {
        let mut j = i;
        while j + 1 < scored.len() && scored[j + 1].0 == scored[i].0 {
            j += 1;
        }
        let avg_rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum += avg_rank * scored[i..=j].iter().filter(|s| s.1).count() as f64;
        i = j + 1;
    }
    (rank_sum - positives * (positives + 1.0) / 2.0) / (positives * negatives)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy() -> Dataset {
        Dataset::new(
            vec![1.0, 1.0, -1.0, 1.0, 0.5, 1.0, -0.5, 1.0],
            vec![1.0, 0.0, 1.0, 0.0],
            2,
            Some(2),
        )
        .unwrap()
    }

    #[test]
    fn auc_counts_ordered_pairs() {
        let d = toy();
        // Scores x0: positives 1.0, 0.5; negatives −1.0, −0.5 → perfectly separated.
        assert_eq!(auc(&[1.0, 0.0], &d), 1.0);
        assert_eq!(auc(&[-1.0, 0.0], &d), 0.0);
        // All scores tied → 0.5.
        assert_eq!(auc(&[0.0, 1.0], &d), 0.5);
        assert_eq!(accuracy(&[1.0, 0.0], &d), 1.0);
    }

    #[test]
    fn gradient_matches_finite_differences_of_the_loss() {
        let d = toy();
        let w = [0.3, -0.2];
        let mut g = vec![0.0; 2];
        gradient_sum(&Link::Exact, &w, &d, &[0, 1, 2, 3], None, &mut g);
        for k in 0..2 {
            let h = 1e-6;
            let (mut a, mut b) = (w, w);
            a[k] += h;
            b[k] -= h;
            let fd = (logistic_loss(&a, &d) - logistic_loss(&b, &d)) / (2.0 * h);
            assert!((g[k] / 4.0 - fd).abs() < 1e-8);
        }
    }

    #[test]
    fn the_minimizer_zeroes_the_gradient_and_separable_data_have_none() {
        // Positives at x = 1, −0.5, 2, negatives at −1, 0.5: no threshold separates them.
        let mixed = Dataset::new(
            vec![1.0, 1.0, -1.0, 1.0, 0.5, 1.0, -0.5, 1.0, 2.0, 1.0],
            vec![1.0, 0.0, 0.0, 1.0, 1.0],
            2,
            Some(2),
        )
        .unwrap();
        let w = minimizer(&mixed, 50).expect("a minimizer exists");
        let mut g = vec![0.0; 2];
        gradient_sum(&Link::Exact, &w, &mixed, &[0, 1, 2, 3, 4], None, &mut g);
        assert!(g.iter().all(|x| x.abs() < 1e-10), "{g:?}");
        assert!(w[0] > 0.1, "{w:?}");
        let f = logistic_loss(&w, &mixed);
        for delta in [[0.01, 0.0], [0.0, 0.01], [-0.01, 0.01]] {
            let moved = [w[0] + delta[0], w[1] + delta[1]];
            assert!(logistic_loss(&moved, &mixed) > f);
        }
        // A copy of the first column (as one-hot groups beside the bias give): f is flat along
        // (1, −1, 0) and the limit splits the weight evenly, the minimum-norm minimizer.
        let doubled = Dataset::new(
            (0..5)
                .flat_map(|i| {
                    let r = mixed.row(i);
                    [r[0], r[0], r[1]]
                })
                .collect(),
            vec![1.0, 0.0, 0.0, 1.0, 1.0],
            3,
            Some(2),
        )
        .unwrap();
        let v = minimizer(&doubled, 50).expect("a minimizer exists");
        assert!((v[0] - v[1]).abs() < 1e-6, "{v:?}");
        assert!(
            (v[0] + v[1] - w[0]).abs() < 1e-6 && (v[2] - w[1]).abs() < 1e-6,
            "{v:?} {w:?}"
        );
        // Quasi-separation: a category seen once, with a positive label, pulls its weight to
        // +∞ while the rest of the data stays mixed.
        let mut rows: Vec<f64> = (0..5)
            .flat_map(|i| {
                let r = mixed.row(i);
                [r[0], 0.0, r[1]]
            })
            .collect();
        rows.extend([0.0, 1.0, 1.0]);
        let rare = Dataset::new(rows, vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0], 3, Some(2)).unwrap();
        assert!(minimizer(&rare, 200).is_none());
        // toy() is separated by x0 > 0: f has no minimizer.
        assert!(minimizer(&toy(), 50).is_none());
    }

    #[test]
    fn clipping_bounds_each_contribution() {
        let d = toy();
        let mut g = vec![0.0; 2];
        gradient_sum(&Link::Exact, &[5.0, 5.0], &d, &[1], Some(0.1), &mut g);
        assert!((g.iter().map(|x| x * x).sum::<f64>().sqrt() - 0.1).abs() < 1e-12);
    }
}
