//! A MiniLM/BERT encoder (forward pass only, `f32`) with a linear classification head on the
//! mean-pooled token states, as a [`Model`] for zeroth-order fine-tuning.
//!
//! The weights are read from a `model.safetensors` file (all-MiniLM-L6-v2: 6 layers, width 384,
//! 12 heads, GELU feed-forward of width 1536). The trainable parameters — the flat vector the
//! zeroth-order methods perturb — are the head and either every bias and LayerNorm vector of
//! the encoder ([`Trainable::Bitfit`], 31 490 parameters; the weight matrices and embedding
//! tables stay frozen at their pretrained values) or every tensor of it ([`Trainable::All`],
//! 22.7M parameters). Forward passes only: the model has no gradient
//! ([`Model::has_gradient`] is false). With two classes the head starts as a zero-shot
//! sentiment head built from two prompts.
//!
//! The forward pass runs in `f32`: a batch loss converts the parameter vector once and every
//! example reads its tensors from that copy or from the frozen store.
//!
//! Inputs are rows of token ids stored as `f64`, `[CLS] … [SEP]` followed by `-1` padding
//! (see [`crate::data::load`]'s `movie-snippets`); each example runs at its own length, so
//! padding costs nothing.

use std::collections::HashMap;
use std::path::Path;

use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};

use serde::{Deserialize, Serialize};

use crate::data::Dataset;
use crate::error::{MlError, Result};
use crate::model::{Model, argmax, par_sum_chunks, softmax_cross_entropy};

/// LayerNorm epsilon of BERT.
const LN_EPS: f32 = 1e-12;
/// Examples per forward batch (one GEMM per weight matrix) and per parallel chunk of a batch
/// loss: a client's minibatch of 16 splits over two cores.
const BATCH: usize = 8;

/// Shape of the encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncoderShape {
    /// Layers.
    pub layers: usize,
    /// Hidden width.
    pub hidden: usize,
    /// Attention heads.
    pub heads: usize,
    /// Feed-forward width.
    pub ffn: usize,
}

/// A tensor in a safetensors file: shape and `f32` data.
struct Tensor {
    shape: Vec<usize>,
    data: Vec<f32>,
}

/// Reads every `F32` tensor of a safetensors file.
fn read_safetensors(path: &Path) -> Result<HashMap<String, Tensor>> {
    let bytes = std::fs::read(path).map_err(|e| MlError::io(path, e))?;
    let corrupt = |r: String| MlError::corrupt(path, r);
    let head_len = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as usize)
        .ok_or_else(|| corrupt("shorter than its header length".into()))?;
    let header = bytes
        .get(8..8 + head_len)
        .ok_or_else(|| corrupt("header runs past the end".into()))?;
    let body = &bytes[8 + head_len..];
    let json: serde_json::Value =
        serde_json::from_slice(header).map_err(|e| corrupt(format!("header: {e}")))?;
    let obj = json
        .as_object()
        .ok_or_else(|| corrupt("header is not an object".into()))?;
    let mut out = HashMap::new();
    for (name, info) in obj {
        if name == "__metadata__" || info["dtype"] != "F32" {
            continue;
        }
        let shape = usizes(&info["shape"]);
        let off = usizes(&info["data_offsets"]);
        let n: usize = shape.iter().product();
        let raw = match off.as_slice() {
            [a, b] if b - a == 4 * n => body.get(*a..*b),
            _ => None,
        }
        .ok_or_else(|| {
            corrupt(format!(
                "tensor {name}: bad offsets {off:?} for shape {shape:?}"
            ))
        })?;
        let data = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        out.insert(name.clone(), Tensor { shape, data });
    }
    Ok(out)
}

/// The non-negative integers of a JSON array (empty for anything else).
fn usizes(v: &serde_json::Value) -> Vec<usize> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_u64().map(|x| x as usize))
                .collect()
        })
        .unwrap_or_default()
}

/// Which of the encoder's tensors the parameter vector holds (the rest stay frozen).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trainable {
    /// Every bias and LayerNorm vector (BitFit), plus the head.
    #[default]
    Bitfit,
    /// Every tensor: embedding tables, weight matrices, biases, LayerNorms, plus the head.
    All,
}

/// Where a tensor sits: a range of the parameter vector or of the frozen store.
#[derive(Clone, Copy, Debug)]
enum Src {
    Param(Slot),
    Frozen(Slot),
}

/// A range of a flat vector.
#[derive(Clone, Copy, Debug)]
struct Slot {
    at: usize,
    len: usize,
}

/// The tensors of one layer (matrices row-major `out × in`).
struct LayerTensors {
    q: Src,
    k: Src,
    v: Src,
    o: Src,
    up: Src,
    down: Src,
    bq: Src,
    bk: Src,
    bv: Src,
    bo: Src,
    ln1_g: Src,
    ln1_b: Src,
    b_up: Src,
    b_down: Src,
    ln2_g: Src,
    ln2_b: Src,
}

/// MiniLM encoder + linear head for `classes` classes.
pub struct MiniLmClassifier {
    shape: EncoderShape,
    classes: usize,
    max_len: usize,
    word: Src,
    position: Src,
    token_type: Src,
    emb_ln_g: Src,
    emb_ln_b: Src,
    layers: Vec<LayerTensors>,
    head_w: Slot,
    head_b: Slot,
    /// Pretrained values of the trainable tensors (the head's entries: see `load`).
    pretrained: Vec<f64>,
    /// The frozen tensors.
    frozen: Vec<f32>,
    vocab: usize,
}

/// Appends tensors to the parameter vector or the frozen store.
struct Placer {
    params: Vec<f64>,
    frozen: Vec<f32>,
}

impl Placer {
    fn place(&mut self, v: Vec<f32>, trainable: bool) -> Src {
        if trainable {
            let at = self.params.len();
            self.params.extend(v.iter().map(|&x| f64::from(x)));
            Src::Param(Slot { at, len: v.len() })
        } else {
            let at = self.frozen.len();
            self.frozen.extend_from_slice(&v);
            Src::Frozen(Slot { at, len: v.len() })
        }
    }
}

impl MiniLmClassifier {
    /// Loads `dir/model.safetensors` (a BERT-style encoder) for rows of at most `max_len`
    /// token ids and `classes` classes, training the `trainable` tensors.
    pub fn load(dir: &Path, max_len: usize, classes: usize, trainable: Trainable) -> Result<Self> {
        if !(2..=512).contains(&max_len) {
            return Err(MlError::Invalid(format!(
                "MiniLM rows must hold 2..=512 token ids, the data has {max_len}"
            )));
        }
        let path = dir.join("model.safetensors");
        let mut t = read_safetensors(&path)?;
        let mut take = |name: &str, shape: &[usize]| -> Result<Vec<f32>> {
            let x = t
                .remove(name)
                .ok_or_else(|| MlError::corrupt(&path, format!("no tensor {name}")))?;
            if x.shape != shape {
                return Err(MlError::corrupt(
                    &path,
                    format!("{name} has shape {:?}, expected {shape:?}", x.shape),
                ));
            }
            Ok(x.data)
        };
        let all = trainable == Trainable::All;
        let mut placer = Placer {
            params: Vec::new(),
            frozen: Vec::new(),
        };
        let word = take("embeddings.word_embeddings.weight", &[30522, 384])?;
        let vocab = word.len() / 384;
        let word = placer.place(word, all);
        let hidden = 384;
        let ffn = 1536;
        let shape = EncoderShape {
            layers: 6,
            hidden,
            heads: 12,
            ffn,
        };
        let position = take("embeddings.position_embeddings.weight", &[512, hidden])?;
        let position = placer.place(position, all);
        let token_type = take("embeddings.token_type_embeddings.weight", &[2, hidden])?;
        let token_type = placer.place(token_type, all);
        // Vectors are trainable in both modes; matrices only in `All`.
        let mut vector =
            |name: &str, len: usize| -> Result<Src> { Ok(placer.place(take(name, &[len])?, true)) };
        let emb_ln_g = vector("embeddings.LayerNorm.weight", hidden)?;
        let emb_ln_b = vector("embeddings.LayerNorm.bias", hidden)?;
        let mut layers = Vec::new();
        for l in 0..shape.layers {
            let name = |s: &str| format!("encoder.layer.{l}.{s}");
            let mut vector = |s: &str, len: usize| -> Result<Src> {
                Ok(placer.place(take(&name(s), &[len])?, true))
            };
            let bq = vector("attention.self.query.bias", hidden)?;
            let bk = vector("attention.self.key.bias", hidden)?;
            let bv = vector("attention.self.value.bias", hidden)?;
            let bo = vector("attention.output.dense.bias", hidden)?;
            let ln1_g = vector("attention.output.LayerNorm.weight", hidden)?;
            let ln1_b = vector("attention.output.LayerNorm.bias", hidden)?;
            let b_up = vector("intermediate.dense.bias", ffn)?;
            let b_down = vector("output.dense.bias", hidden)?;
            let ln2_g = vector("output.LayerNorm.weight", hidden)?;
            let ln2_b = vector("output.LayerNorm.bias", hidden)?;
            let mut matrix = |s: &str, rows: usize, cols: usize| -> Result<Src> {
                Ok(placer.place(take(&name(s), &[rows, cols])?, all))
            };
            layers.push(LayerTensors {
                q: matrix("attention.self.query.weight", hidden, hidden)?,
                k: matrix("attention.self.key.weight", hidden, hidden)?,
                v: matrix("attention.self.value.weight", hidden, hidden)?,
                o: matrix("attention.output.dense.weight", hidden, hidden)?,
                up: matrix("intermediate.dense.weight", ffn, hidden)?,
                down: matrix("output.dense.weight", hidden, ffn)?,
                bq,
                bk,
                bv,
                bo,
                ln1_g,
                ln1_b,
                b_up,
                b_down,
                ln2_g,
                ln2_b,
            });
        }
        let head = |src: Src| match src {
            Src::Param(s) | Src::Frozen(s) => s,
        };
        let head_w = head(placer.place(vec![0.0; classes * hidden], true));
        let head_b = head(placer.place(vec![0.0; classes], true));
        let mut model = Self {
            shape,
            classes,
            max_len,
            vocab,
            word,
            position,
            token_type,
            emb_ln_g,
            emb_ln_b,
            layers,
            head_w,
            head_b,
            pretrained: placer.params,
            frozen: placer.frozen,
        };
        if classes == 2 {
            model.set_zero_shot_head(dir)?;
        }
        Ok(model)
    }

    /// For two classes, the head starts as a zero-shot sentiment classifier: row `c` is
    /// `10 · e_c / ‖e_c‖²` for the embeddings `e_c` of the prompts "this movie is terrible."
    /// and "this movie is great." (MeZO-style prompt initialization), so fine-tuning starts
    /// from a meaningful model rather than a random head.
    fn set_zero_shot_head(&mut self, dir: &Path) -> Result<()> {
        let vocab = super::WordPiece::from_vocab_file(&dir.join("vocab.txt"))?;
        let h = self.shape.hidden;
        for (c, prompt) in ["this movie is terrible.", "this movie is great."]
            .iter()
            .enumerate()
        {
            let row: Vec<f64> = vocab
                .encode(prompt, self.max_len)
                .into_iter()
                .map(f64::from)
                .collect();
            let e = self.embed_batch(&to_f32(&self.pretrained), &[&row]);
            let norm2 = dot(&e, &e).max(f32::MIN_POSITIVE);
            for (j, v) in e.iter().enumerate() {
                self.pretrained[self.head_w.at + c * h + j] = f64::from(10.0 * v / norm2);
            }
        }
        Ok(())
    }

    /// The encoder's shape.
    pub fn shape(&self) -> EncoderShape {
        self.shape
    }

    /// A tensor's values, from `p` (the parameter vector in `f32`) or the frozen store.
    fn get<'a>(&'a self, p: &'a [f32], src: Src) -> &'a [f32] {
        match src {
            Src::Param(s) => &p[s.at..s.at + s.len],
            Src::Frozen(s) => &self.frozen[s.at..s.at + s.len],
        }
    }

    /// Mean-pooled final hidden states of a batch of examples (token ids, `-1`-padded) under
    /// the parameters `p` (in `f32`), `hidden` values per example. The tokens of the whole
    /// batch go through each weight matrix as one GEMM, so a matrix is packed once per batch
    /// rather than once per example; attention and pooling stay within each example.
    fn embed_batch(&self, p: &[f32], xs: &[&[f64]]) -> Vec<f32> {
        let h = self.shape.hidden;
        let vec = |src: Src| self.get(p, src);
        let (word, position, token_type) =
            (vec(self.word), vec(self.position), vec(self.token_type));
        // Each example's token rows in the batch's state, and its ids (at least one row).
        let mut spans = Vec::with_capacity(xs.len());
        let mut ids = Vec::new();
        for x in xs {
            let start = ids.len();
            ids.extend(
                x.iter()
                    .take_while(|&&v| v >= 0.0)
                    .map(|&v| (v as usize).min(self.vocab - 1)),
            );
            if ids.len() == start {
                // An empty row runs as one all-zero token row, as it always has.
                ids.push(usize::MAX);
            }
            spans.push(start..ids.len());
        }
        let rows = ids.len();
        let mut state = vec![0.0f32; rows * h];
        for span in &spans {
            for (t, r) in span.clone().enumerate() {
                let id = ids[r];
                if id == usize::MAX {
                    continue;
                }
                let row = &mut state[r * h..(r + 1) * h];
                let word = &word[id * h..(id + 1) * h];
                let pos = &position[t * h..(t + 1) * h];
                for (((s, wv), pv), tv) in row.iter_mut().zip(word).zip(pos).zip(token_type) {
                    *s = wv + pv + tv;
                }
            }
        }
        layer_norm(&mut state, h, vec(self.emb_ln_g), vec(self.emb_ln_b));
        let heads = self.shape.heads;
        let dh = h / heads;
        let scale = 1.0 / (dh as f32).sqrt();
        let (mut q, mut k, mut v) = (
            vec![0.0; rows * h],
            vec![0.0; rows * h],
            vec![0.0; rows * h],
        );
        let mut ctx = vec![0.0; rows * h];
        let mut att = vec![0.0; rows * h];
        let mut up = vec![0.0; rows * self.shape.ffn];
        let longest = spans.iter().map(|s| s.len()).max().unwrap_or(0);
        let mut scores = vec![0.0f32; longest];
        for l in &self.layers {
            linear(&state, h, vec(l.q), vec(l.bq), &mut q);
            linear(&state, h, vec(l.k), vec(l.bk), &mut k);
            linear(&state, h, vec(l.v), vec(l.bv), &mut v);
            for span in &spans {
                let scores = &mut scores[..span.len()];
                for hd in 0..heads {
                    let cols = hd * dh..(hd + 1) * dh;
                    for i in span.clone() {
                        let qi = &q[i * h + cols.start..i * h + cols.end];
                        for (j, s) in span.clone().zip(scores.iter_mut()) {
                            *s = dot(qi, &k[j * h + cols.start..j * h + cols.end]) * scale;
                        }
                        softmax(scores);
                        let out = &mut ctx[i * h + cols.start..i * h + cols.end];
                        out.fill(0.0);
                        for (j, &p) in span.clone().zip(scores.iter()) {
                            for (o, vj) in
                                out.iter_mut().zip(&v[j * h + cols.start..j * h + cols.end])
                            {
                                *o += p * vj;
                            }
                        }
                    }
                }
            }
            linear(&ctx, h, vec(l.o), vec(l.bo), &mut att);
            state.iter_mut().zip(&att).for_each(|(s, a)| *s += a);
            layer_norm(&mut state, h, vec(l.ln1_g), vec(l.ln1_b));
            linear(&state, h, vec(l.up), vec(l.b_up), &mut up);
            up.iter_mut().for_each(|u| *u = gelu(*u));
            linear(&up, self.shape.ffn, vec(l.down), vec(l.b_down), &mut att);
            state.iter_mut().zip(&att).for_each(|(s, a)| *s += a);
            layer_norm(&mut state, h, vec(l.ln2_g), vec(l.ln2_b));
        }
        let mut pooled = vec![0.0f32; xs.len() * h];
        for (out, span) in pooled.chunks_mut(h).zip(&spans) {
            let len = span.len() as f32;
            for row in state[span.start * h..span.end * h].chunks(h) {
                out.iter_mut().zip(row).for_each(|(p, r)| *p += r / len);
            }
        }
        pooled
    }

    /// The mean-pooled sentence embedding of one row of token ids under parameters `w`.
    pub fn sentence_embedding(&self, w: &[f64], x: &[f64]) -> Vec<f32> {
        self.embed_batch(&to_f32(w), &[x])
    }

    /// Logits of a batch of examples, `classes` per example; `p` is `w` in `f32` (the head
    /// reads `w` itself).
    fn logits_batch(&self, w: &[f64], p: &[f32], xs: &[&[f64]]) -> Vec<Vec<f64>> {
        let h = self.shape.hidden;
        self.embed_batch(p, xs)
            .chunks(h)
            .map(|pooled| {
                (0..self.classes)
                    .map(|c| {
                        let row = &w[self.head_w.at + c * h..self.head_w.at + (c + 1) * h];
                        row.iter()
                            .zip(pooled)
                            .map(|(a, b)| a * f64::from(*b))
                            .sum::<f64>()
                            + w[self.head_b.at + c]
                    })
                    .collect()
            })
            .collect()
    }

    /// Logits of one example.
    fn logits(&self, w: &[f64], p: &[f32], x: &[f64]) -> Vec<f64> {
        self.logits_batch(w, p, &[x]).swap_remove(0)
    }

    /// Sum over the examples `idx` (all when `None`) of `score(logits, label)`, the batch
    /// split into [`BATCH`]-example chunks run in parallel; and the number of examples.
    fn sum_over(
        &self,
        w: &[f64],
        data: &Dataset,
        idx: Option<&[usize]>,
        score: impl Fn(&[f64], usize) -> f64 + Sync,
    ) -> (f64, usize) {
        let p = to_f32(w);
        par_sum_chunks(data.len(), idx, BATCH, |chunk| {
            let rows: Vec<&[f64]> = chunk.iter().map(|&i| data.row(i)).collect();
            self.logits_batch(w, &p, &rows)
                .iter()
                .zip(chunk)
                .map(|(logits, &i)| score(logits, data.label(i) as usize))
                .sum()
        })
    }
}

/// The parameter vector as the forward pass reads it.
fn to_f32(w: &[f64]) -> Vec<f32> {
    w.iter().map(|&v| v as f32).collect()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Sixteen independent lanes, so the loop vectorizes despite float ordering rules (measured:
    // wider accumulators are slower without target-specific flags).
    let mut acc = [0.0f32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (xa, xb) in ca.zip(cb) {
        for l in 0..16 {
            acc[l] += xa[l] * xb[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `out[t] = W · x[t] + b` for every row `t` of `x` (width `n_in`); `W` is `out × n_in`.
/// One sequential GEMM (faer's packed, runtime-dispatched SIMD kernel): the forward pass is
/// nearly all of a full-parameter zeroth-order round, and a dot product per (row, token)
/// measured 3× slower. Sequential so results do not depend on the core count.
fn linear(x: &[f32], n_in: usize, w: &[f32], b: &[f32], out: &mut [f32]) {
    let n_out = b.len();
    let tokens = x.len() / n_in;
    for row in out.chunks_mut(n_out) {
        row.copy_from_slice(b);
    }
    faer::linalg::matmul::matmul(
        faer::MatMut::from_row_major_slice_mut(out, tokens, n_out),
        faer::Accum::Add,
        faer::MatRef::from_row_major_slice(x, tokens, n_in),
        faer::MatRef::from_row_major_slice(w, n_out, n_in).transpose(),
        1.0f32,
        faer::Par::Seq,
    );
}

fn layer_norm(x: &mut [f32], h: usize, g: &[f32], b: &[f32]) {
    for row in x.chunks_mut(h) {
        let mean = row.iter().sum::<f32>() / h as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
        let inv = 1.0 / (var + LN_EPS).sqrt();
        for ((v, gi), bi) in row.iter_mut().zip(g).zip(b) {
            *v = (*v - mean) * inv * gi + bi;
        }
    }
}

fn softmax(s: &mut [f32]) {
    let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut z = 0.0;
    for v in s.iter_mut() {
        *v = (*v - m).exp();
        z += *v;
    }
    s.iter_mut().for_each(|v| *v /= z);
}

/// BERT's exact GELU, `x·Φ(x)`.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x / std::f32::consts::SQRT_2))
}

impl Model for MiniLmClassifier {
    fn name(&self) -> &'static str {
        "minilm"
    }
    fn num_params(&self) -> usize {
        self.pretrained.len()
    }
    fn n_features(&self) -> usize {
        self.max_len
    }
    fn l2(&self) -> f64 {
        0.0
    }
    fn has_gradient(&self) -> bool {
        false
    }
    /// The pretrained trainable tensors; the zero-shot head for two classes, else a head
    /// ~ N(0, 1/hidden); zero head bias.
    fn init_params(&self, rng: &mut dyn RngCore) -> Vec<f64> {
        let mut w = self.pretrained.clone();
        if self.classes == 2 {
            return w;
        }
        let s = 1.0 / (self.shape.hidden as f64).sqrt();
        for v in &mut w[self.head_w.at..self.head_w.at + self.head_w.len] {
            let z: f64 = StandardNormal.sample(&mut *rng);
            *v = s * z;
        }
        w
    }
    /// The loss only: `grad` is left untouched (forward passes only).
    fn example_loss(&self, w: &[f64], x: &[f64], y: f64, _grad: Option<&mut [f64]>) -> f64 {
        softmax_cross_entropy(&self.logits(w, &to_f32(w), x), y as usize, false).0
    }
    fn predict_class(&self, w: &[f64], x: &[f64]) -> Option<usize> {
        argmax(&self.logits(w, &to_f32(w), x))
    }
    fn parallel_chunk(&self) -> Option<usize> {
        Some(BATCH)
    }
    /// The batch loss converts `w` to `f32` once, not per example (22.7M entries with
    /// [`Trainable::All`]), and runs the examples in batches.
    fn loss(&self, w: &[f64], data: &Dataset, idx: Option<&[usize]>) -> f64 {
        let (sum, count) = self.sum_over(w, data, idx, |logits, label| {
            softmax_cross_entropy(logits, label, false).0
        });
        sum / count.max(1) as f64
    }
    fn accuracy(&self, w: &[f64], data: &Dataset) -> Option<f64> {
        data.num_classes()?;
        let (hits, n) = self.sum_over(w, data, None, |logits, label| {
            f64::from(u8::from(argmax(logits) == Some(label)))
        });
        Some(hits / n.max(1) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::WordPiece;

    /// The fetched `minilm` folder, or `None` (the test returns early and counts as passed:
    /// this crate has no build script to mark it ignored, as the dataset tests of
    /// privopt-experiments and privopt-cli are, since one would rebuild every crate above it
    /// when data arrives). Under CI (which fetches first) a missing model fails the test.
    fn minilm_dir() -> Option<std::path::PathBuf> {
        let root = std::env::var_os("PRIVOPT_DATA")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| format!("{}/../../data", env!("CARGO_MANIFEST_DIR")).into());
        let dir = root.join("minilm");
        let present = dir.join("model.safetensors").is_file();
        assert!(
            present || std::env::var("CI").as_deref() != Ok("true"),
            "CI must fetch minilm into {} before testing",
            root.display()
        );
        present.then_some(dir)
    }

    /// The BitFit model for rows of 32 tokens, its vocabulary and its initial parameters.
    fn bitfit(dir: &Path) -> (MiniLmClassifier, WordPiece, Vec<f64>) {
        let model = MiniLmClassifier::load(dir, 32, 2, Trainable::Bitfit).unwrap();
        let vocab = WordPiece::from_vocab_file(&dir.join("vocab.txt")).unwrap();
        let w = model.init_params(&mut privopt_math::SeedTree::new(0).stream("t", &[]));
        (model, vocab, w)
    }

    /// `text`'s token ids as a row of 32, `-1`-padded.
    fn padded(vocab: &WordPiece, text: &str) -> Vec<f64> {
        let mut row: Vec<f64> = vocab.encode(text, 32).into_iter().map(f64::from).collect();
        row.resize(32, -1.0);
        row
    }

    #[test]
    fn pretrained_embeddings_rank_paraphrases_above_unrelated_sentences() {
        let Some(dir) = minilm_dir() else {
            eprintln!("skipping: minilm not fetched");
            return;
        };
        let (model, vocab, w) = bitfit(&dir);
        let embed = |t: &str| model.sentence_embedding(&w, &padded(&vocab, t));
        let cos = |a: &[f32], b: &[f32]| dot(a, b) / (dot(a, a) * dot(b, b)).sqrt();
        assert_eq!(
            vocab.encode("a great movie", 32),
            vec![101, 1037, 2307, 3185, 102],
            "BERT-uncased ids"
        );
        let a = embed("a great movie");
        let b = embed("an excellent film");
        let c = embed("the stock market fell sharply today");
        // An independent NumPy implementation of the BERT forward pass (same safetensors file,
        // mean pooling) gives these first coordinates for "a great movie".
        let numpy = [
            -0.73582, 0.35327, -0.16613, 0.10267, -0.45091, 0.36510, 0.41652, 0.06059,
        ];
        for (x, r) in a.iter().zip(numpy) {
            assert!((x - r).abs() < 1e-4, "{:?} vs {numpy:?}", &a[..8]);
        }
        assert!(
            cos(&a, &b) > cos(&a, &c) + 0.2,
            "{} vs {}",
            cos(&a, &b),
            cos(&a, &c)
        );
    }

    #[test]
    fn training_every_tensor_starts_from_the_same_model_and_reaches_the_matrices() {
        let Some(dir) = minilm_dir() else {
            eprintln!("skipping: minilm not fetched");
            return;
        };
        let bitfit = MiniLmClassifier::load(&dir, 32, 2, Trainable::Bitfit).unwrap();
        let all = MiniLmClassifier::load(&dir, 32, 2, Trainable::All).unwrap();
        assert_eq!(bitfit.num_params(), 31_490);
        // Embedding tables 11 917 824 and their LayerNorm 768, six layers of 1 774 464, and
        // the head's 770: 22.57M (the published 22.7M also counts the unused pooler).
        assert_eq!(all.num_params(), 11_917_824 + 768 + 6 * 1_774_464 + 770);
        assert!(all.frozen.is_empty());
        let vocab = WordPiece::from_vocab_file(&dir.join("vocab.txt")).unwrap();
        let row = padded(&vocab, "a thoughtful, moving film");
        let rng = &mut privopt_math::SeedTree::new(0).stream("t", &[]);
        let (wb, mut wa) = (bitfit.init_params(rng), all.init_params(rng));
        let lb = bitfit.example_loss(&wb, &row, 1.0, None);
        let la = all.example_loss(&wa, &row, 1.0, None);
        assert_eq!(lb.to_bits(), la.to_bits(), "{lb} vs {la}");
        // A query-matrix entry of layer 0 is a parameter now: moving it moves the loss.
        let Src::Param(q) = all.layers[0].q else {
            panic!("layer 0's query matrix is frozen");
        };
        wa[q.at] += 0.5;
        assert_ne!(all.example_loss(&wa, &row, 1.0, None), la);
    }

    #[test]
    fn a_batch_embeds_each_example_as_it_embeds_alone() {
        let Some(dir) = minilm_dir() else {
            eprintln!("skipping: minilm not fetched");
            return;
        };
        let (model, vocab, w) = bitfit(&dir);
        let p = to_f32(&w);
        let row = |t: &str| padded(&vocab, t);
        // Different lengths, and an empty row: attention and pooling must stay per example,
        // and positions restart at each example.
        let rows = [
            row("a great movie"),
            vec![-1.0; 32],
            row("the plot drags, but the performances are wonderful throughout"),
            row("dull"),
        ];
        let refs: Vec<&[f64]> = rows.iter().map(Vec::as_slice).collect();
        let batch = model.embed_batch(&p, &refs);
        let h = model.shape().hidden;
        assert_eq!(batch.len(), rows.len() * h);
        for (i, r) in refs.iter().enumerate() {
            let alone = model.embed_batch(&p, &[r]);
            let got = &batch[i * h..(i + 1) * h];
            let err = got
                .iter()
                .zip(&alone)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(
                err < 1e-5,
                "example {i}: batch and single embeddings differ by {err}"
            );
        }
        let logits = model.logits_batch(&w, &p, &refs);
        assert_eq!(logits.len(), rows.len());
        for (a, b) in logits[2].iter().zip(model.logits(&w, &p, refs[2])) {
            assert!((a - b).abs() < 1e-5, "{:?}", logits[2]);
        }
    }
}
