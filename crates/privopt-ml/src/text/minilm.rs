//! A MiniLM/BERT encoder (forward pass only, `f32`) with a linear classification head on the
//! mean-pooled token states, as a [`Model`] for zeroth-order fine-tuning.
//!
//! The weights are read from a `model.safetensors` file (all-MiniLM-L6-v2: 6 layers, width 384,
//! 12 heads, GELU feed-forward of width 1536). The trainable parameters — the flat vector the
//! zeroth-order methods perturb — are the head and every bias and LayerNorm vector of the
//! encoder (BitFit); the weight matrices stay frozen at their pretrained values. Forward
//! passes only: the model has no gradient ([`Model::has_gradient`] is false). With two
//! classes the head starts as a zero-shot sentiment head built from two prompts.
//!
//! Inputs are rows of token ids stored as `f64`, `[CLS] … [SEP]` followed by `-1` padding
//! (see [`crate::data::load`]'s `movie-snippets`); each example runs at its own length, so
//! padding costs nothing.

use std::collections::HashMap;
use std::path::Path;

use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};

use crate::error::{Error, Result};
use crate::model::{Model, argmax, softmax_cross_entropy};

/// LayerNorm epsilon of BERT.
const LN_EPS: f32 = 1e-12;
/// Examples per parallel chunk of a batch loss.
const CHUNK: usize = 2;

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
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let corrupt = |r: String| Error::corrupt(path, r);
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

/// Frozen weight matrices of one layer (row-major `out × in`).
struct LayerWeights {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    o: Vec<f32>,
    up: Vec<f32>,
    down: Vec<f32>,
}

/// Where a trainable vector sits in the parameter vector.
#[derive(Clone, Copy, Debug)]
struct Slot {
    at: usize,
    len: usize,
}

/// Trainable vectors of one layer.
struct LayerSlots {
    bq: Slot,
    bk: Slot,
    bv: Slot,
    bo: Slot,
    ln1_g: Slot,
    ln1_b: Slot,
    b_up: Slot,
    b_down: Slot,
    ln2_g: Slot,
    ln2_b: Slot,
}

/// MiniLM encoder + linear head for `classes` classes.
pub struct MiniLmClassifier {
    shape: EncoderShape,
    classes: usize,
    max_len: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    layers: Vec<LayerWeights>,
    emb_ln_g: Slot,
    emb_ln_b: Slot,
    slots: Vec<LayerSlots>,
    head_w: Slot,
    head_b: Slot,
    /// Pretrained values of the trainable vectors (the head's entries are unused).
    pretrained: Vec<f64>,
    vocab: usize,
}

impl MiniLmClassifier {
    /// Loads `dir/model.safetensors` (a BERT-style encoder) for rows of at most `max_len`
    /// token ids and `classes` classes.
    pub fn load(dir: &Path, max_len: usize, classes: usize) -> Result<Self> {
        if !(2..=512).contains(&max_len) {
            return Err(Error::Invalid(format!(
                "MiniLM rows must hold 2..=512 token ids, the data has {max_len}"
            )));
        }
        let path = dir.join("model.safetensors");
        let mut t = read_safetensors(&path)?;
        let mut take = |name: &str, shape: &[usize]| -> Result<Vec<f32>> {
            let x = t
                .remove(name)
                .ok_or_else(|| Error::corrupt(&path, format!("no tensor {name}")))?;
            if x.shape != shape {
                return Err(Error::corrupt(
                    &path,
                    format!("{name} has shape {:?}, expected {shape:?}", x.shape),
                ));
            }
            Ok(x.data)
        };
        let word = take("embeddings.word_embeddings.weight", &[30522, 384])?;
        let hidden = 384;
        let ffn = 1536;
        let shape = EncoderShape {
            layers: 6,
            hidden,
            heads: 12,
            ffn,
        };
        let position = take("embeddings.position_embeddings.weight", &[512, hidden])?;
        let token_type = take("embeddings.token_type_embeddings.weight", &[2, hidden])?;
        let mut pretrained = Vec::new();
        let mut slot = |v: Vec<f32>| {
            let s = Slot {
                at: pretrained.len(),
                len: v.len(),
            };
            pretrained.extend(v.iter().map(|&x| f64::from(x)));
            s
        };
        let emb_ln_g = slot(take("embeddings.LayerNorm.weight", &[hidden])?);
        let emb_ln_b = slot(take("embeddings.LayerNorm.bias", &[hidden])?);
        let mut layers = Vec::new();
        let mut slots = Vec::new();
        for l in 0..shape.layers {
            let p = format!("encoder.layer.{l}.");
            let name = |s: &str| format!("{p}{s}");
            layers.push(LayerWeights {
                q: take(&name("attention.self.query.weight"), &[hidden, hidden])?,
                k: take(&name("attention.self.key.weight"), &[hidden, hidden])?,
                v: take(&name("attention.self.value.weight"), &[hidden, hidden])?,
                o: take(&name("attention.output.dense.weight"), &[hidden, hidden])?,
                up: take(&name("intermediate.dense.weight"), &[ffn, hidden])?,
                down: take(&name("output.dense.weight"), &[hidden, ffn])?,
            });
            slots.push(LayerSlots {
                bq: slot(take(&name("attention.self.query.bias"), &[hidden])?),
                bk: slot(take(&name("attention.self.key.bias"), &[hidden])?),
                bv: slot(take(&name("attention.self.value.bias"), &[hidden])?),
                bo: slot(take(&name("attention.output.dense.bias"), &[hidden])?),
                ln1_g: slot(take(&name("attention.output.LayerNorm.weight"), &[hidden])?),
                ln1_b: slot(take(&name("attention.output.LayerNorm.bias"), &[hidden])?),
                b_up: slot(take(&name("intermediate.dense.bias"), &[ffn])?),
                b_down: slot(take(&name("output.dense.bias"), &[hidden])?),
                ln2_g: slot(take(&name("output.LayerNorm.weight"), &[hidden])?),
                ln2_b: slot(take(&name("output.LayerNorm.bias"), &[hidden])?),
            });
        }
        let head_w = slot(vec![0.0; classes * hidden]);
        let head_b = slot(vec![0.0; classes]);
        let mut model = Self {
            shape,
            classes,
            max_len,
            vocab: word.len() / hidden,
            word,
            position,
            token_type,
            layers,
            emb_ln_g,
            emb_ln_b,
            slots,
            head_w,
            head_b,
            pretrained,
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
            let e = self.embed(&self.pretrained, &row);
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

    /// Mean-pooled final hidden states of one example (token ids, `-1`-padded).
    fn embed(&self, w: &[f64], x: &[f64]) -> Vec<f32> {
        let h = self.shape.hidden;
        let vec =
            |s: Slot| -> Vec<f32> { w[s.at..s.at + s.len].iter().map(|&v| v as f32).collect() };
        let ids: Vec<usize> = x
            .iter()
            .take_while(|&&v| v >= 0.0)
            .map(|&v| (v as usize).min(self.vocab - 1))
            .collect();
        let len = ids.len().max(1);
        let mut state = vec![0.0f32; len * h];
        for (t, &id) in ids.iter().enumerate() {
            let row = &mut state[t * h..(t + 1) * h];
            let word = &self.word[id * h..(id + 1) * h];
            let pos = &self.position[t * h..(t + 1) * h];
            for (((r, wv), pv), tv) in row.iter_mut().zip(word).zip(pos).zip(&self.token_type) {
                *r = wv + pv + tv;
            }
        }
        layer_norm(&mut state, h, &vec(self.emb_ln_g), &vec(self.emb_ln_b));
        let heads = self.shape.heads;
        let dh = h / heads;
        let scale = 1.0 / (dh as f32).sqrt();
        let (mut q, mut k, mut v) = (vec![0.0; len * h], vec![0.0; len * h], vec![0.0; len * h]);
        let mut ctx = vec![0.0; len * h];
        let mut att = vec![0.0; len * h];
        let mut up = vec![0.0; len * self.shape.ffn];
        let mut scores = vec![0.0f32; len];
        for (lw, ls) in self.layers.iter().zip(&self.slots) {
            linear(&state, h, &lw.q, &vec(ls.bq), &mut q);
            linear(&state, h, &lw.k, &vec(ls.bk), &mut k);
            linear(&state, h, &lw.v, &vec(ls.bv), &mut v);
            for hd in 0..heads {
                let cols = hd * dh..(hd + 1) * dh;
                for i in 0..len {
                    let qi = &q[i * h + cols.start..i * h + cols.end];
                    for (j, s) in scores.iter_mut().enumerate() {
                        *s = dot(qi, &k[j * h + cols.start..j * h + cols.end]) * scale;
                    }
                    softmax(&mut scores);
                    let out = &mut ctx[i * h + cols.start..i * h + cols.end];
                    out.fill(0.0);
                    for (j, &p) in scores.iter().enumerate() {
                        for (o, vj) in out.iter_mut().zip(&v[j * h + cols.start..j * h + cols.end])
                        {
                            *o += p * vj;
                        }
                    }
                }
            }
            linear(&ctx, h, &lw.o, &vec(ls.bo), &mut att);
            state.iter_mut().zip(&att).for_each(|(s, a)| *s += a);
            layer_norm(&mut state, h, &vec(ls.ln1_g), &vec(ls.ln1_b));
            linear(&state, h, &lw.up, &vec(ls.b_up), &mut up);
            up.iter_mut().for_each(|u| *u = gelu(*u));
            linear(&up, self.shape.ffn, &lw.down, &vec(ls.b_down), &mut att);
            state.iter_mut().zip(&att).for_each(|(s, a)| *s += a);
            layer_norm(&mut state, h, &vec(ls.ln2_g), &vec(ls.ln2_b));
        }
        let mut pooled = vec![0.0f32; h];
        for row in state.chunks(h) {
            pooled
                .iter_mut()
                .zip(row)
                .for_each(|(p, r)| *p += r / len as f32);
        }
        pooled
    }

    /// The mean-pooled sentence embedding of one row of token ids under parameters `w`.
    pub fn sentence_embedding(&self, w: &[f64], x: &[f64]) -> Vec<f32> {
        self.embed(w, x)
    }

    fn logits(&self, w: &[f64], x: &[f64]) -> Vec<f64> {
        let pooled = self.embed(w, x);
        let h = self.shape.hidden;
        (0..self.classes)
            .map(|c| {
                let row = &w[self.head_w.at + c * h..self.head_w.at + (c + 1) * h];
                row.iter()
                    .zip(&pooled)
                    .map(|(a, b)| a * f64::from(*b))
                    .sum::<f64>()
                    + w[self.head_b.at + c]
            })
            .collect()
    }
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
/// Each weight row is used for every token while it is in cache.
fn linear(x: &[f32], n_in: usize, w: &[f32], b: &[f32], out: &mut [f32]) {
    let n_out = b.len();
    for (o, (wr, bi)) in w.chunks(n_in).zip(b).enumerate() {
        for (t, xr) in x.chunks(n_in).enumerate() {
            out[t * n_out + o] = dot(xr, wr) + bi;
        }
    }
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
    /// Pretrained biases and LayerNorm vectors; the zero-shot head for two classes, else a
    /// head ~ N(0, 1/hidden); zero head bias.
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
        softmax_cross_entropy(&self.logits(w, x), y as usize, false).0
    }
    fn predict_class(&self, w: &[f64], x: &[f64]) -> Option<usize> {
        argmax(&self.logits(w, x))
    }
    fn parallel_chunk(&self) -> Option<usize> {
        Some(CHUNK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::WordPiece;

    /// The fetched `minilm` folder, or `None` (the test skips; CI does not fetch it).
    fn minilm_dir() -> Option<std::path::PathBuf> {
        let root = std::env::var_os("PRIVOPT_DATA")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| format!("{}/../../data", env!("CARGO_MANIFEST_DIR")).into());
        let dir = root.join("minilm");
        dir.join("model.safetensors").is_file().then_some(dir)
    }

    #[test]
    fn pretrained_embeddings_rank_paraphrases_above_unrelated_sentences() {
        let Some(dir) = minilm_dir() else {
            eprintln!("skipping: minilm not fetched");
            return;
        };
        let model = MiniLmClassifier::load(&dir, 32, 2).unwrap();
        let vocab = WordPiece::from_vocab_file(&dir.join("vocab.txt")).unwrap();
        let w = model.init_params(&mut privopt_math::SeedTree::new(0).stream("t", &[]));
        let embed = |t: &str| {
            let mut row: Vec<f64> = vocab.encode(t, 32).into_iter().map(f64::from).collect();
            row.resize(32, -1.0);
            model.sentence_embedding(&w, &row)
        };
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
}
