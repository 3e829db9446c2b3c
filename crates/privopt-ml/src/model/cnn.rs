//! A small convolutional classifier for square one-channel images (the "simple CNN" of
//! federated zeroth-order papers, sized for CPU training):
//!
//! ```text
//! image s×s → conv k×k, c1 channels → ReLU → 2×2 max-pool
//!           → conv k×k, c2 channels → ReLU → 2×2 max-pool → linear → softmax
//! ```
//!
//! Both convolutions pad their input with `p` zeros on every side (`p = 0`: valid; `p = (k−1)/2`:
//! same). On 28×28 MNIST with `k = 5, c1 = 8, c2 = 16, p = 0` the maps are 24² → 12² → 8² → 4²,
//! and the model has 5 994 parameters (208 + 3 216 + 2 570) and costs about 3.2·10⁵
//! multiply-adds per image. With `c1 = 16, c2 = 32, p = 2` (the public DeComFL code's
//! `CNN_MNIST`) they are 28² → 14² → 14² → 7²: 28 938 parameters, 2.8·10⁶ multiply-adds. Parameter layout: conv1 weights `[c1][k][k]`, conv1 biases, conv2 weights
//! `[c2][c1][k][k]`, conv2 biases, linear weights `[classes][c2·q2²]`, linear biases.
//!
//! Losses and accuracies over many examples are computed in parallel over fixed chunks whose
//! partial sums are added in chunk order, so the result does not depend on the thread count.

use std::borrow::Cow;

use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};

use super::{Model, argmax, softmax_cross_entropy};
use crate::error::{Result, ensure};

/// Examples per parallel chunk of a batch loss.
const CHUNK: usize = 16;

/// The CNN's shape.
#[derive(Clone, Debug)]
pub struct Cnn {
    side: usize,
    kernel: usize,
    c1: usize,
    c2: usize,
    /// Zeros padded on every side of each convolution's input.
    pad: usize,
    classes: usize,
    l2: f64,
    /// Side of conv1's output, of pool1's output, of conv2's output and of pool2's output.
    o1: usize,
    q1: usize,
    o2: usize,
    q2: usize,
}

/// Offsets of the parameter blocks.
struct Layout {
    b1: usize,
    w2: usize,
    b2: usize,
    w3: usize,
    b3: usize,
    len: usize,
}

/// Intermediate maps of one forward pass (kept for the backward pass).
struct Forward {
    /// ReLU(conv1), `[c1][o1][o1]`.
    a1: Vec<f64>,
    /// Max-pool of `a1`, zero-padded (conv2's input), and the index in `a1` of each maximum.
    p1: Vec<f64>,
    arg1: Vec<usize>,
    a2: Vec<f64>,
    p2: Vec<f64>,
    arg2: Vec<usize>,
    logits: Vec<f64>,
}

impl Cnn {
    /// A CNN for `side`×`side` images with `kernel`×`kernel` convolutions of `c1` and `c2`
    /// channels, `pad` zeros around each convolution's input, and `classes` outputs. Both
    /// convolution outputs must have even sides.
    pub fn new(shape: CnnShape, side: usize, classes: usize, l2: f64) -> Result<Self> {
        let CnnShape {
            kernel,
            c1,
            c2,
            pad,
        } = shape;
        ensure(kernel >= 1 && c1 >= 1 && c2 >= 1 && classes >= 2, || {
            "model: the CNN needs kernel, channels >= 1 and >= 2 classes".into()
        })?;
        ensure(pad < kernel, || {
            format!("model: padding {pad} must be below the kernel side {kernel}")
        })?;
        let padded = side + 2 * pad;
        ensure(
            padded >= kernel && (padded - kernel + 1).is_multiple_of(2),
            || {
                format!(
                    "model: a {kernel}×{kernel} convolution of a {side}-pixel side padded by {pad} \
                     must leave an even side"
                )
            },
        )?;
        let o1 = padded - kernel + 1;
        let q1 = o1 / 2;
        ensure(
            q1 + 2 * pad >= kernel && (q1 + 2 * pad - kernel + 1).is_multiple_of(2),
            || {
                format!(
                    "model: the second convolution of a {q1}-pixel map padded by {pad} must leave \
                     an even side"
                )
            },
        )?;
        let o2 = q1 + 2 * pad - kernel + 1;
        Ok(Self {
            side,
            kernel,
            c1,
            c2,
            pad,
            classes,
            l2,
            o1,
            q1,
            o2,
            q2: o2 / 2,
        })
    }

    /// The MNIST network of the module docs (5 994 parameters).
    pub fn mnist(l2: f64) -> Result<Self> {
        Self::new(CnnShape::SMALL, 28, 10, l2)
    }

    fn features(&self) -> usize {
        self.c2 * self.q2 * self.q2
    }

    fn layout(&self) -> Layout {
        let k2 = self.kernel * self.kernel;
        let b1 = self.c1 * k2;
        let w2 = b1 + self.c1;
        let b2 = w2 + self.c2 * self.c1 * k2;
        let w3 = b2 + self.c2;
        let b3 = w3 + self.classes * self.features();
        Layout {
            b1,
            w2,
            b2,
            w3,
            b3,
            len: b3 + self.classes,
        }
    }

    fn forward(&self, w: &[f64], x: &[f64]) -> Forward {
        let l = self.layout();
        let k = self.kernel;
        let (p, s1, s2) = (self.pad, self.side + 2 * self.pad, self.q1 + 2 * self.pad);
        let mut a1 = vec![0.0; self.c1 * self.o1 * self.o1];
        conv_relu(
            &zero_pad(x, 1, self.side, p),
            1,
            s1,
            &w[..l.b1],
            &w[l.b1..l.w2],
            k,
            self.o1,
            &mut a1,
        );
        let (p1, arg1) = max_pool(&a1, self.c1, self.o1);
        let p1 = zero_pad(&p1, self.c1, self.q1, p).into_owned();
        let mut a2 = vec![0.0; self.c2 * self.o2 * self.o2];
        conv_relu(
            &p1,
            self.c1,
            s2,
            &w[l.w2..l.b2],
            &w[l.b2..l.w3],
            k,
            self.o2,
            &mut a2,
        );
        let (p2, arg2) = max_pool(&a2, self.c2, self.o2);
        let f = self.features();
        let logits = (0..self.classes)
            .map(|c| dot(&w[l.w3 + c * f..l.w3 + (c + 1) * f], &p2) + w[l.b3 + c])
            .collect();
        Forward {
            a1,
            p1,
            arg1,
            a2,
            p2,
            arg2,
            logits,
        }
    }

    /// Adds the gradient of the example loss to `g`, given `delta` = dL/dlogits.
    fn backward(&self, w: &[f64], x: &[f64], fwd: &Forward, delta: &[f64], g: &mut [f64]) {
        let l = self.layout();
        let f = self.features();
        let k = self.kernel;
        let mut dp2 = vec![0.0; f];
        for (c, &dc) in delta.iter().enumerate() {
            g[l.b3 + c] += dc;
            let row = l.w3 + c * f;
            for j in 0..f {
                g[row + j] += dc * fwd.p2[j];
                dp2[j] += dc * w[row + j];
            }
        }
        let (p, s1, s2) = (self.pad, self.side + 2 * self.pad, self.q1 + 2 * self.pad);
        let da2 = unpool_relu(&dp2, &fwd.arg2, &fwd.a2);
        let mut dp1 = vec![0.0; fwd.p1.len()];
        conv_backward(
            &fwd.p1,
            self.c1,
            s2,
            &w[l.w2..l.b2],
            k,
            self.o2,
            &da2,
            &mut g[l.w2..l.w3],
            Some(&mut dp1),
        );
        let dp1 = crop(&dp1, self.c1, s2, p);
        let da1 = unpool_relu(&dp1, &fwd.arg1, &fwd.a1);
        conv_backward(
            &zero_pad(x, 1, self.side, p),
            1,
            s1,
            &w[..l.b1],
            k,
            self.o1,
            &da1,
            &mut g[..l.w2],
            None,
        );
    }
}

/// The shape of a [`Cnn`]'s two convolutions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CnnShape {
    /// Kernel side.
    pub kernel: usize,
    /// Channels of the first convolution.
    pub c1: usize,
    /// Channels of the second convolution.
    pub c2: usize,
    /// Zeros padded on every side of each convolution's input.
    pub pad: usize,
}

impl CnnShape {
    /// 5×5 kernels, 8 and 16 channels, no padding (5 994 parameters on MNIST).
    pub const SMALL: Self = Self {
        kernel: 5,
        c1: 8,
        c2: 16,
        pad: 0,
    };
}

/// `channels` maps of side `side` with `p` zeros added on every side.
fn zero_pad(input: &[f64], channels: usize, side: usize, p: usize) -> Cow<'_, [f64]> {
    if p == 0 {
        return Cow::Borrowed(input);
    }
    let s = side + 2 * p;
    let mut out = vec![0.0; channels * s * s];
    for c in 0..channels {
        for y in 0..side {
            let src = &input[(c * side + y) * side..(c * side + y + 1) * side];
            let at = (c * s + y + p) * s + p;
            out[at..at + side].copy_from_slice(src);
        }
    }
    Cow::Owned(out)
}

/// The inverse of [`zero_pad`]: the interior `side − 2p` square of each of `channels` maps.
fn crop(input: &[f64], channels: usize, side: usize, p: usize) -> Cow<'_, [f64]> {
    if p == 0 {
        return Cow::Borrowed(input);
    }
    let inner = side - 2 * p;
    let mut out = Vec::with_capacity(channels * inner * inner);
    for c in 0..channels {
        for y in 0..inner {
            let at = (c * side + y + p) * side + p;
            out.extend_from_slice(&input[at..at + inner]);
        }
    }
    Cow::Owned(out)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `out[co] = ReLU(bias[co] + Σ_ci input[ci] ⋆ weights[co][ci])` for valid `k`×`k` kernels on
/// `side`×`side` inputs (`out_side = side − k + 1`).
#[allow(clippy::too_many_arguments)]
fn conv_relu(
    input: &[f64],
    channels_in: usize,
    side: usize,
    weights: &[f64],
    bias: &[f64],
    k: usize,
    out_side: usize,
    out: &mut [f64],
) {
    let plane = out_side * out_side;
    for (co, o) in out.chunks_mut(plane).enumerate() {
        o.fill(bias[co]);
        for ci in 0..channels_in {
            let inp = &input[ci * side * side..(ci + 1) * side * side];
            let kern =
                &weights[(co * channels_in + ci) * k * k..(co * channels_in + ci + 1) * k * k];
            for ky in 0..k {
                for kx in 0..k {
                    let wv = kern[ky * k + kx];
                    for y in 0..out_side {
                        let src = &inp[(y + ky) * side + kx..(y + ky) * side + kx + out_side];
                        let dst = &mut o[y * out_side..(y + 1) * out_side];
                        for (d, s) in dst.iter_mut().zip(src) {
                            *d += wv * s;
                        }
                    }
                }
            }
        }
        o.iter_mut().for_each(|v| *v = v.max(0.0));
    }
}

/// Gradients of a valid convolution: adds dL/dweights and dL/dbias to `grad` (weights then
/// biases) and, if asked, dL/dinput to `d_input`; `d_out` is dL/d(pre-activation output).
#[allow(clippy::too_many_arguments)]
fn conv_backward(
    input: &[f64],
    channels_in: usize,
    side: usize,
    weights: &[f64],
    k: usize,
    out_side: usize,
    d_out: &[f64],
    grad: &mut [f64],
    mut d_input: Option<&mut [f64]>,
) {
    let plane = out_side * out_side;
    let n_weights = weights.len();
    let (gw, gb) = grad.split_at_mut(n_weights);
    for (co, d) in d_out.chunks(plane).enumerate() {
        gb[co] += d.iter().sum::<f64>();
        for ci in 0..channels_in {
            let inp = &input[ci * side * side..(ci + 1) * side * side];
            let base = (co * channels_in + ci) * k * k;
            for ky in 0..k {
                for kx in 0..k {
                    let mut acc = 0.0;
                    for y in 0..out_side {
                        let src = &inp[(y + ky) * side + kx..(y + ky) * side + kx + out_side];
                        acc += dot(&d[y * out_side..(y + 1) * out_side], src);
                    }
                    gw[base + ky * k + kx] += acc;
                    if let Some(di) = d_input.as_deref_mut() {
                        let wv = weights[base + ky * k + kx];
                        let plane_in = &mut di[ci * side * side..(ci + 1) * side * side];
                        for y in 0..out_side {
                            let dst = &mut plane_in
                                [(y + ky) * side + kx..(y + ky) * side + kx + out_side];
                            for (t, s) in dst.iter_mut().zip(&d[y * out_side..(y + 1) * out_side]) {
                                *t += wv * s;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// 2×2 max-pooling of `channels` maps of side `side`; returns the pooled maps and the index of
/// each maximum in the input.
fn max_pool(input: &[f64], channels: usize, side: usize) -> (Vec<f64>, Vec<usize>) {
    let half = side / 2;
    let mut out = Vec::with_capacity(channels * half * half);
    let mut arg = Vec::with_capacity(channels * half * half);
    for c in 0..channels {
        for y in 0..half {
            for x in 0..half {
                let mut best = c * side * side + 2 * y * side + 2 * x;
                for (dy, dx) in [(0, 1), (1, 0), (1, 1)] {
                    let i = c * side * side + (2 * y + dy) * side + 2 * x + dx;
                    if input[i] > input[best] {
                        best = i;
                    }
                }
                out.push(input[best]);
                arg.push(best);
            }
        }
    }
    (out, arg)
}

/// Routes pooled gradients back to the maxima and through the ReLU (zero where it was off).
fn unpool_relu(d_pooled: &[f64], arg: &[usize], activ: &[f64]) -> Vec<f64> {
    let mut d = vec![0.0; activ.len()];
    for (&i, &g) in arg.iter().zip(d_pooled) {
        if activ[i] > 0.0 {
            d[i] += g;
        }
    }
    d
}

impl Model for Cnn {
    fn name(&self) -> &'static str {
        "cnn"
    }
    fn num_params(&self) -> usize {
        self.layout().len
    }
    fn n_features(&self) -> usize {
        self.side * self.side
    }
    fn l2(&self) -> f64 {
        self.l2
    }
    /// He initialization for the ReLU layers (N(0, 2/fan_in)), N(0, 1/fan_in) for the output
    /// layer, zero biases.
    fn init_params(&self, rng: &mut dyn RngCore) -> Vec<f64> {
        let l = self.layout();
        let k2 = (self.kernel * self.kernel) as f64;
        let mut w = vec![0.0; l.len];
        let scales = [
            (0..l.b1, (2.0 / k2).sqrt()),
            (l.w2..l.b2, (2.0 / (k2 * self.c1 as f64)).sqrt()),
            (l.w3..l.b3, (1.0 / self.features() as f64).sqrt()),
        ];
        for (range, s) in scales {
            for v in &mut w[range] {
                let z: f64 = StandardNormal.sample(&mut *rng);
                *v = s * z;
            }
        }
        w
    }
    fn example_loss(&self, w: &[f64], x: &[f64], y: f64, grad: Option<&mut [f64]>) -> f64 {
        let fwd = self.forward(w, x);
        let (loss, delta) = softmax_cross_entropy(&fwd.logits, y as usize, grad.is_some());
        if let Some(g) = grad {
            self.backward(w, x, &fwd, &delta, g);
        }
        loss
    }
    fn predict_class(&self, w: &[f64], x: &[f64]) -> Option<usize> {
        argmax(&self.forward(w, x).logits)
    }
    fn parallel_chunk(&self) -> Option<usize> {
        Some(CHUNK)
    }
}
