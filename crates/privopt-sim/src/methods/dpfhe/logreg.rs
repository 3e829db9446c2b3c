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

    /// Mean logistic loss with the exact sigmoid (what `gradient_sum` differentiates).
    fn logistic_loss(w: &[f64], data: &Dataset) -> f64 {
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
    fn clipping_bounds_each_contribution() {
        let d = toy();
        let mut g = vec![0.0; 2];
        gradient_sum(&Link::Exact, &[5.0, 5.0], &d, &[1], Some(0.1), &mut g);
        assert!((g.iter().map(|x| x * x).sum::<f64>().sqrt() - 0.1).abs() < 1e-12);
    }
}
