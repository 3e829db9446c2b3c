//! A one-hidden-layer perceptron: `softmax(W2 · tanh(W1 x + b1) + b2)` with cross-entropy loss.
//!
//! Parameter layout: `W1` (hidden × d, row-major), `b1` (hidden), `W2` (classes × hidden),
//! `b2` (classes). Batch losses and accuracies run in parallel ([`Model::parallel_chunk`]).

use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};

use super::{Model, argmax, softmax_cross_entropy};

/// Examples per parallel chunk of a batch loss.
const CHUNK: usize = 32;

/// A small MLP classifier.
#[derive(Clone, Debug)]
pub struct Mlp {
    d: usize,
    hidden: usize,
    classes: usize,
    l2: f64,
}

impl Mlp {
    /// An MLP with `d` inputs, `hidden` tanh units and `classes` outputs.
    pub fn new(d: usize, hidden: usize, classes: usize, l2: f64) -> Self {
        Self {
            d,
            hidden,
            classes,
            l2,
        }
    }

    fn offsets(&self) -> (usize, usize, usize) {
        let b1 = self.hidden * self.d;
        let w2 = b1 + self.hidden;
        let b2 = w2 + self.classes * self.hidden;
        (b1, w2, b2)
    }

    /// Hidden activations and output logits.
    fn forward(&self, w: &[f64], x: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let (b1, w2, b2) = self.offsets();
        let h: Vec<f64> = (0..self.hidden)
            .map(|j| {
                let row = &w[j * self.d..(j + 1) * self.d];
                (row.iter().zip(x).map(|(a, b)| a * b).sum::<f64>() + w[b1 + j]).tanh()
            })
            .collect();
        let logits = (0..self.classes)
            .map(|c| {
                let row = &w[w2 + c * self.hidden..w2 + (c + 1) * self.hidden];
                row.iter().zip(&h).map(|(a, b)| a * b).sum::<f64>() + w[b2 + c]
            })
            .collect();
        (h, logits)
    }
}

impl Model for Mlp {
    fn name(&self) -> &'static str {
        "mlp"
    }
    fn num_params(&self) -> usize {
        self.offsets().2 + self.classes
    }
    fn n_features(&self) -> usize {
        self.d
    }
    fn l2(&self) -> f64 {
        self.l2
    }
    /// Glorot-style scaling: weights ~ N(0, 1/fan_in), biases zero.
    fn init_params(&self, rng: &mut dyn RngCore) -> Vec<f64> {
        let (b1, w2, b2) = self.offsets();
        let mut w = vec![0.0; self.num_params()];
        let s1 = 1.0 / (self.d as f64).sqrt();
        let s2 = 1.0 / (self.hidden as f64).sqrt();
        for v in &mut w[..b1] {
            let z: f64 = StandardNormal.sample(&mut *rng);
            *v = s1 * z;
        }
        for v in &mut w[w2..b2] {
            let z: f64 = StandardNormal.sample(&mut *rng);
            *v = s2 * z;
        }
        w
    }
    fn example_loss(&self, w: &[f64], x: &[f64], y: f64, grad: Option<&mut [f64]>) -> f64 {
        let (h, logits) = self.forward(w, x);
        let (loss, delta) = softmax_cross_entropy(&logits, y as usize, grad.is_some());
        if let Some(g) = grad {
            let (b1, w2, b2) = self.offsets();
            let mut dh = vec![0.0; self.hidden];
            for (c, dc) in delta.iter().enumerate() {
                g[b2 + c] += dc;
                let row = w2 + c * self.hidden;
                for j in 0..self.hidden {
                    g[row + j] += dc * h[j];
                    dh[j] += dc * w[row + j];
                }
            }
            for j in 0..self.hidden {
                let da = dh[j] * (1.0 - h[j] * h[j]);
                g[b1 + j] += da;
                for (gi, xi) in g[j * self.d..(j + 1) * self.d].iter_mut().zip(x) {
                    *gi += da * xi;
                }
            }
        }
        loss
    }
    fn predict_class(&self, w: &[f64], x: &[f64]) -> Option<usize> {
        argmax(&self.forward(w, x).1)
    }
    fn parallel_chunk(&self) -> Option<usize> {
        Some(CHUNK)
    }
}
