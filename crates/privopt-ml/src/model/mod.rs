//! Models with loss, gradient and per-example gradient.
//!
//! A model is a pure function of a flat parameter vector `w`: methods hold `w`, models only
//! evaluate it. This keeps parameters easy to perturb (zeroth-order methods), encrypt, sketch
//! or send. The objective is the mean example loss plus `l2/2 · ‖w‖²`.

mod cnn;
mod linear;
mod mlp;

pub use cnn::{Cnn, CnnShape};
pub use linear::{LeastSquares, Linear, LinearLoss, LogLoss, Logistic, Squared};
pub use mlp::Mlp;

use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::data::Dataset;
use crate::error::{Result, ensure};

/// A differentiable model over a flat parameter vector.
pub trait Model: Send + Sync {
    /// Short name (`"logistic"`, …).
    fn name(&self) -> &'static str;
    /// Length of the parameter vector.
    fn num_params(&self) -> usize;
    /// Number of input features.
    fn n_features(&self) -> usize;
    /// L2 regularization strength.
    fn l2(&self) -> f64;
    /// Initial parameters (zeros for convex models, small random weights for networks).
    fn init_params(&self, rng: &mut dyn RngCore) -> Vec<f64>;
    /// Loss of one example; when `grad` is given, adds the example's gradient to it.
    fn example_loss(&self, w: &[f64], x: &[f64], y: f64, grad: Option<&mut [f64]>) -> f64;
    /// Whether `example_loss` computes gradients (false for forward-only models, which only
    /// zeroth-order methods can train).
    fn has_gradient(&self) -> bool {
        true
    }
    /// Predicted class of one example, or `None` for a regression model on real targets.
    fn predict_class(&self, w: &[f64], x: &[f64]) -> Option<usize>;

    /// Examples per parallel chunk of [`Model::loss`] and [`Model::accuracy`], or `None` to
    /// evaluate sequentially (cheap models, whose results then keep their summation order).
    fn parallel_chunk(&self) -> Option<usize> {
        None
    }

    /// Mean loss over `idx` (all examples when `None`) plus the L2 term.
    fn loss(&self, w: &[f64], data: &Dataset, idx: Option<&[usize]>) -> f64 {
        let example = |i: usize| self.example_loss(w, data.row(i), data.label(i), None);
        let (sum, count) = match self.parallel_chunk() {
            Some(chunk) => par_sum(data.len(), idx, chunk, example),
            None => fold_examples(data, idx, example),
        };
        sum / count.max(1) as f64 + regularizer(self.l2(), w)
    }

    /// Mean loss and writes its gradient (incl. the L2 term) into `grad`.
    fn loss_grad(&self, w: &[f64], data: &Dataset, idx: Option<&[usize]>, grad: &mut [f64]) -> f64 {
        grad.iter_mut().for_each(|g| *g = 0.0);
        let (sum, count) = fold_examples(data, idx, |i| {
            self.example_loss(w, data.row(i), data.label(i), Some(&mut *grad))
        });
        let scale = 1.0 / count.max(1) as f64;
        let l2 = self.l2();
        for (g, wi) in grad.iter_mut().zip(w) {
            *g = *g * scale + l2 * wi;
        }
        sum * scale + regularizer(l2, w)
    }

    /// Gradient of each example's loss (without the L2 term), one vector per index.
    fn per_example_grads(&self, w: &[f64], data: &Dataset, idx: &[usize]) -> Vec<Vec<f64>> {
        idx.iter()
            .map(|&i| {
                let mut g = vec![0.0; self.num_params()];
                self.example_loss(w, data.row(i), data.label(i), Some(&mut g));
                g
            })
            .collect()
    }

    /// Fraction of examples whose predicted class equals the label (`None` for regression).
    fn accuracy(&self, w: &[f64], data: &Dataset) -> Option<f64> {
        data.num_classes()?;
        if let Some(chunk) = self.parallel_chunk() {
            let (hits, n) = par_sum(data.len(), None, chunk, |i| {
                let hit = self.predict_class(w, data.row(i)) == Some(data.label(i) as usize);
                f64::from(u8::from(hit))
            });
            return Some(hits / n.max(1) as f64);
        }
        let mut correct = 0usize;
        for i in 0..data.len() {
            if self.predict_class(w, data.row(i))? == data.label(i) as usize {
                correct += 1;
            }
        }
        Some(correct as f64 / data.len().max(1) as f64)
    }
}

/// Softmax cross-entropy of `logits` for class `label`, and (when asked) its gradient in the
/// logits, `softmax − one_hot(label)`. Shared by every softmax classifier.
pub(crate) fn softmax_cross_entropy(
    logits: &[f64],
    label: usize,
    with_delta: bool,
) -> (f64, Vec<f64>) {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let z: f64 = logits.iter().map(|l| (l - max).exp()).sum();
    let loss = max + z.ln() - logits[label];
    let delta = if with_delta {
        logits
            .iter()
            .enumerate()
            .map(|(c, l)| (l - max).exp() / z - f64::from(u8::from(c == label)))
            .collect()
    } else {
        Vec::new()
    };
    (loss, delta)
}

/// The index of the largest logit (the predicted class).
pub(crate) fn argmax(logits: &[f64]) -> Option<usize> {
    logits
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(c, _)| c)
}

/// Sum of `f(i)` over `idx` (every example when `None`) in parallel chunks of `chunk`
/// examples, partial sums added in chunk order: the result does not depend on the thread
/// count. Returns the sum and the number of examples.
pub(crate) fn par_sum(
    n: usize,
    idx: Option<&[usize]>,
    chunk: usize,
    f: impl Fn(usize) -> f64 + Sync,
) -> (f64, usize) {
    par_sum_chunks(n, idx, chunk, |c| c.iter().map(|&i| f(i)).sum())
}

/// Like [`par_sum`], with `f` scoring a whole chunk of indices (for models that batch).
pub(crate) fn par_sum_chunks(
    n: usize,
    idx: Option<&[usize]>,
    chunk: usize,
    f: impl Fn(&[usize]) -> f64 + Sync + Send,
) -> (f64, usize) {
    use rayon::prelude::*;
    let all: Vec<usize>;
    let idx = match idx {
        Some(i) => i,
        None => {
            all = (0..n).collect();
            &all
        }
    };
    let partial: Vec<f64> = idx.par_chunks(chunk.max(1)).map(f).collect();
    (partial.iter().sum(), idx.len())
}

fn regularizer(l2: f64, w: &[f64]) -> f64 {
    if l2 == 0.0 {
        0.0
    } else {
        0.5 * l2 * w.iter().map(|v| v * v).sum::<f64>()
    }
}

fn fold_examples(
    data: &Dataset,
    idx: Option<&[usize]>,
    mut f: impl FnMut(usize) -> f64,
) -> (f64, usize) {
    match idx {
        Some(idx) => (idx.iter().map(|&i| f(i)).sum(), idx.len()),
        None => ((0..data.len()).map(&mut f).sum(), data.len()),
    }
}

/// Most parameters a model may have (2^28: 2 GiB of `f64`, before gradients and moments).
pub const MAX_PARAMS: usize = 1 << 28;

/// Which model to build; the `[model]` table of an experiment config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelSpec {
    /// Linear least squares `½(w·x + b − y)²`.
    LeastSquares {
        /// L2 regularization strength (>= 0).
        #[serde(default)]
        l2: f64,
    },
    /// Binary logistic regression on labels {0, 1}.
    Logistic {
        /// L2 regularization strength (>= 0).
        #[serde(default)]
        l2: f64,
    },
    /// One hidden tanh layer and a softmax output.
    Mlp {
        /// Hidden units (>= 1).
        hidden: usize,
        /// L2 regularization strength (>= 0).
        #[serde(default)]
        l2: f64,
    },
    /// The MiniLM-L6 encoder of the `minilm` dataset with a linear head on mean-pooled
    /// states (forward passes only). Rows are token ids.
    Minilm {
        /// `bitfit` (the default: biases, LayerNorms and the head; 31 490 parameters with two
        /// classes) or `all` (every tensor; 22.7M parameters).
        #[serde(default)]
        trainable: crate::text::Trainable,
    },
    /// Two convolutions with ReLU and 2×2 max-pooling, then a softmax layer ([`Cnn`]);
    /// square one-channel images.
    Cnn {
        /// Channels of the first convolution (>= 1).
        #[serde(default = "cnn_c1")]
        c1: usize,
        /// Channels of the second convolution (>= 1).
        #[serde(default = "cnn_c2")]
        c2: usize,
        /// Kernel side (>= 1).
        #[serde(default = "cnn_kernel")]
        kernel: usize,
        /// Zeros padded around each convolution's input (0: valid, the default; 2 with
        /// `kernel = 5`: same).
        #[serde(default)]
        padding: usize,
        /// L2 regularization strength (>= 0).
        #[serde(default)]
        l2: f64,
    },
}

fn cnn_c1() -> usize {
    8
}
fn cnn_c2() -> usize {
    16
}
fn cnn_kernel() -> usize {
    5
}

impl ModelSpec {
    /// Builds the model for data with `n_features` features and `num_classes` classes.
    /// MiniLM needs its pretrained weights: see [`ModelSpec::build_with`].
    pub fn build(&self, n_features: usize, num_classes: Option<usize>) -> Result<Box<dyn Model>> {
        self.build_with(n_features, num_classes, None)
    }

    /// [`ModelSpec::build`], reading MiniLM's pretrained weights from `minilm_dir` (the
    /// fetched `minilm` folder; `privopt-data` finds it in the data directory).
    pub fn build_with(
        &self,
        n_features: usize,
        num_classes: Option<usize>,
        minilm_dir: Option<&std::path::Path>,
    ) -> Result<Box<dyn Model>> {
        let check_l2 = |l2: f64| {
            ensure(l2 >= 0.0 && l2.is_finite(), || {
                format!("model.l2 must be >= 0, got {l2}")
            })
        };
        Ok(match *self {
            ModelSpec::LeastSquares { l2 } => {
                check_l2(l2)?;
                Box::new(LeastSquares::new(n_features, l2))
            }
            ModelSpec::Logistic { l2 } => {
                check_l2(l2)?;
                ensure(num_classes == Some(2), || {
                    format!(
                        "model.kind = \"logistic\" needs binary labels, the data has {num_classes:?} classes"
                    )
                })?;
                Box::new(Logistic::new(n_features, l2))
            }
            ModelSpec::Mlp { hidden, l2 } => {
                check_l2(l2)?;
                ensure(hidden >= 1, || "model.hidden must be >= 1".into())?;
                let classes = num_classes.ok_or_else(|| {
                    crate::MlError::Invalid("model.kind = \"mlp\" needs class labels".into())
                })?;
                let params = (n_features + 1)
                    .saturating_mul(hidden)
                    .saturating_add((hidden + 1).saturating_mul(classes));
                ensure(params <= MAX_PARAMS, || {
                    format!(
                        "model.hidden = {hidden} makes {params} parameters, above the bound of \
                         {MAX_PARAMS}"
                    )
                })?;
                Box::new(Mlp::new(n_features, hidden, classes, l2))
            }
            ModelSpec::Minilm { trainable } => {
                let classes = num_classes.ok_or_else(|| {
                    crate::MlError::Invalid("model.kind = \"minilm\" needs class labels".into())
                })?;
                let dir = minilm_dir.ok_or_else(|| {
                    crate::MlError::Invalid(
                        "model.kind = \"minilm\" needs the folder of its pretrained weights".into(),
                    )
                })?;
                Box::new(crate::text::MiniLmClassifier::load(
                    dir, n_features, classes, trainable,
                )?)
            }
            ModelSpec::Cnn {
                c1,
                c2,
                kernel,
                padding,
                l2,
            } => {
                check_l2(l2)?;
                ensure(c1 <= 1024 && c2 <= 1024 && kernel <= 64, || {
                    format!(
                        "model.c1 and model.c2 must be at most 1024 and model.kernel at most 64, \
                         got {c1}, {c2}, {kernel}"
                    )
                })?;
                let side = (n_features as f64).sqrt().round() as usize;
                ensure(side * side == n_features, || {
                    format!(
                        "model.kind = \"cnn\" needs square images, the data has {n_features} features"
                    )
                })?;
                let classes = num_classes.ok_or_else(|| {
                    crate::MlError::Invalid("model.kind = \"cnn\" needs class labels".into())
                })?;
                let shape = CnnShape {
                    kernel,
                    c1,
                    c2,
                    pad: padding,
                };
                Box::new(Cnn::new(shape, side, classes, l2)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::synthetic;
    use privopt_math::SeedTree;

    /// Model sizes that would abort on allocation are refused naming the key.
    #[test]
    fn oversized_models_are_refused() {
        let mlp = ModelSpec::Mlp {
            hidden: 1 << 30,
            l2: 0.0,
        };
        let e = mlp.build(784, Some(10)).err().unwrap().to_string();
        assert!(e.contains("model.hidden") && e.contains("bound"), "{e}");
        let cnn = ModelSpec::Cnn {
            c1: 1 << 20,
            c2: 16,
            kernel: 5,
            padding: 0,
            l2: 0.0,
        };
        let e = cnn.build(784, Some(10)).err().unwrap().to_string();
        assert!(e.contains("model.c1"), "{e}");
    }

    /// Central finite differences of the full objective, compared with `loss_grad`.
    fn check_gradient(model: &dyn Model, data: &Dataset, seed: u64) {
        let mut r = SeedTree::new(seed).stream("init", &[]);
        let mut w = model.init_params(&mut r);
        // Move away from the (symmetric) init so that every term contributes.
        for (i, v) in w.iter_mut().enumerate() {
            *v += 0.1 * ((i as f64) * 0.7).sin();
        }
        let mut g = vec![0.0; w.len()];
        model.loss_grad(&w, data, None, &mut g);
        let h = 1e-5;
        for j in 0..w.len() {
            let mut wp = w.clone();
            wp[j] += h;
            let mut wm = w.clone();
            wm[j] -= h;
            let fd = (model.loss(&wp, data, None) - model.loss(&wm, data, None)) / (2.0 * h);
            // Central differences have O(h²) truncation and O(ε/h) rounding error.
            assert!(
                (fd - g[j]).abs() < 1e-6 * (1.0 + fd.abs()),
                "{} param {j}: fd {fd} vs {}",
                model.name(),
                g[j]
            );
        }
        // The batch gradient is the mean of the per-example gradients plus the L2 term.
        let idx: Vec<usize> = (0..data.len()).collect();
        let per = model.per_example_grads(&w, data, &idx);
        for j in 0..w.len() {
            let mean: f64 = per.iter().map(|p| p[j]).sum::<f64>() / idx.len() as f64;
            assert!((mean + model.l2() * w[j] - g[j]).abs() < 1e-10);
        }
    }

    #[test]
    fn gradients_match_finite_differences() {
        let mut r = SeedTree::new(11).stream("data", &[]);
        let cls = synthetic::logistic(30, 5, 4, &mut r).unwrap().train;
        let reg = synthetic::linear(30, 5, 4, 0.5, &mut r).unwrap().train;
        let three = Dataset::new(
            cls.features().to_vec(),
            (0..30).map(|i| (i % 3) as f64).collect(),
            4,
            Some(3),
        )
        .unwrap();
        check_gradient(&Logistic::new(4, 0.1), &cls, 1);
        check_gradient(&LeastSquares::new(4, 0.05), &reg, 2);
        check_gradient(&Mlp::new(4, 6, 3, 0.01), &three, 3);
        check_gradient(&Mlp::new(4, 3, 2, 0.0), &cls, 4);
        // A 16×16 image: conv 5×5 → 12² → pool 6² → conv 5×5 → 2² → pool 1².
        let mut r = SeedTree::new(12).stream("images", &[]);
        let images: Vec<f64> = (0..6 * 256)
            .map(|_| rand::Rng::random::<f64>(&mut r))
            .collect();
        let labels = (0..6).map(|i| (i % 3) as f64).collect();
        let img = Dataset::new(images, labels, 256, Some(3)).unwrap();
        let shape = CnnShape {
            kernel: 5,
            c1: 2,
            c2: 3,
            pad: 0,
        };
        let cnn = Cnn::new(shape, 16, 3, 0.01).unwrap();
        assert_eq!(cnn.num_params(), 2 * 25 + 2 + 3 * 2 * 25 + 3 + 3 * 3 + 3);
        check_gradient(&cnn, &img, 5);
        // Same padding: 16² → 16² → 8² → 8² → 4², so the linear layer sees 3·4² features.
        let padded = Cnn::new(CnnShape { pad: 2, ..shape }, 16, 3, 0.01).unwrap();
        assert_eq!(
            padded.num_params(),
            2 * 25 + 2 + 3 * 2 * 25 + 3 + 3 * 3 * 16 + 3
        );
        check_gradient(&padded, &img, 6);
    }

    #[test]
    fn cnn_shape_checks_and_mnist_size() {
        assert_eq!(Cnn::mnist(0.0).unwrap().num_params(), 5994);
        assert!(Cnn::new(CnnShape::SMALL, 27, 10, 0.0).is_err());
        // The public DeComFL code's CNN_MNIST: 416 + 12 832 + 15 690.
        let public = CnnShape {
            kernel: 5,
            c1: 16,
            c2: 32,
            pad: 2,
        };
        assert_eq!(Cnn::new(public, 28, 10, 0.0).unwrap().num_params(), 28_938);
        let too_wide = CnnShape { pad: 5, ..public };
        assert!(Cnn::new(too_wide, 28, 10, 0.0).is_err());
        assert!(
            ModelSpec::Cnn {
                c1: 8,
                c2: 16,
                kernel: 5,
                padding: 0,
                l2: 0.0
            }
            .build(780, Some(10))
            .is_err()
        );
    }

    #[test]
    fn spec_validation_names_the_key() {
        let e = ModelSpec::Logistic { l2: -1.0 }
            .build(3, Some(2))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("model.l2"), "{e}");
        assert!(ModelSpec::Logistic { l2: 0.0 }.build(3, Some(10)).is_err());
        assert!(
            ModelSpec::Mlp { hidden: 0, l2: 0.0 }
                .build(3, Some(10))
                .is_err()
        );
        assert_eq!(
            ModelSpec::Mlp { hidden: 5, l2: 0.0 }
                .build(3, Some(10))
                .unwrap()
                .num_params(),
            5 * 3 + 5 + 10 * 5 + 10
        );
    }
}
