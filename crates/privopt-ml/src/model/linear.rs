//! Linear models: parameters are `d` weights followed by one bias.

use rand::RngCore;

use super::Model;

fn affine(w: &[f64], x: &[f64]) -> f64 {
    let d = x.len();
    x.iter().zip(&w[..d]).map(|(a, b)| a * b).sum::<f64>() + w[d]
}

/// Adds `coef · (x, 1)` to `grad`.
fn add_affine_grad(grad: &mut [f64], x: &[f64], coef: f64) {
    let d = x.len();
    for (g, xi) in grad[..d].iter_mut().zip(x) {
        *g += coef * xi;
    }
    grad[d] += coef;
}

/// `log(1 + e^z)` without overflow.
pub(crate) fn softplus(z: f64) -> f64 {
    z.max(0.0) + (-z.abs()).exp().ln_1p()
}

pub(crate) use privopt_approx::functions::sigmoid;

/// The loss of a linear model as a function of its score `z = w·x + b`.
pub trait LinearLoss: Send + Sync {
    /// Model name.
    const NAME: &'static str;
    /// Loss at score `z` for label `y`, and its derivative in `z`.
    fn loss_and_slope(z: f64, y: f64) -> (f64, f64);
    /// Predicted class at score `z`.
    fn class(z: f64) -> usize;
}

/// Squared loss `½(z − y)²`; for 0/1 labels the class is `z > ½`.
#[derive(Clone, Copy, Debug)]
pub struct Squared;

impl LinearLoss for Squared {
    const NAME: &'static str = "least_squares";
    fn loss_and_slope(z: f64, y: f64) -> (f64, f64) {
        let r = z - y;
        (0.5 * r * r, r)
    }
    fn class(z: f64) -> usize {
        usize::from(z > 0.5)
    }
}

/// Logistic loss `log(1 + e^z) − y·z` on labels {0, 1}; the class is `z > 0`.
#[derive(Clone, Copy, Debug)]
pub struct LogLoss;

impl LinearLoss for LogLoss {
    const NAME: &'static str = "logistic";
    fn loss_and_slope(z: f64, y: f64) -> (f64, f64) {
        (softplus(z) - y * z, sigmoid(z) - y)
    }
    fn class(z: f64) -> usize {
        usize::from(z > 0.0)
    }
}

/// A linear model with loss `L`: parameters are `d` weights followed by one bias.
#[derive(Clone, Debug)]
pub struct Linear<L> {
    d: usize,
    l2: f64,
    loss: std::marker::PhantomData<L>,
}

/// Linear least squares.
pub type LeastSquares = Linear<Squared>;
/// Binary logistic regression.
pub type Logistic = Linear<LogLoss>;

impl<L> Linear<L> {
    /// A model over `d` features with L2 strength `l2`.
    pub fn new(d: usize, l2: f64) -> Self {
        Self {
            d,
            l2,
            loss: std::marker::PhantomData,
        }
    }
}

impl<L: LinearLoss> Model for Linear<L> {
    fn name(&self) -> &'static str {
        L::NAME
    }
    fn num_params(&self) -> usize {
        self.d + 1
    }
    fn n_features(&self) -> usize {
        self.d
    }
    fn l2(&self) -> f64 {
        self.l2
    }
    fn init_params(&self, _rng: &mut dyn RngCore) -> Vec<f64> {
        vec![0.0; self.d + 1]
    }
    fn example_loss(&self, w: &[f64], x: &[f64], y: f64, grad: Option<&mut [f64]>) -> f64 {
        let (loss, slope) = L::loss_and_slope(affine(w, x), y);
        if let Some(g) = grad {
            add_affine_grad(g, x, slope);
        }
        loss
    }
    fn predict_class(&self, w: &[f64], x: &[f64]) -> Option<usize> {
        Some(L::class(affine(w, x)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_at_extremes() {
        assert_eq!(softplus(1000.0), 1000.0);
        assert!(softplus(-1000.0) >= 0.0 && softplus(-1000.0) < 1e-300);
        assert!((softplus(0.0) - 2f64.ln()).abs() < 1e-15);
        assert_eq!(sigmoid(-1000.0), 0.0);
        assert_eq!(sigmoid(1000.0), 1.0);
        let m = Logistic::new(1, 0.0);
        let l = m.example_loss(&[1.0, 0.0], &[800.0], 0.0, None);
        assert!((l - 800.0).abs() < 1e-9 && l.is_finite());
    }
}
