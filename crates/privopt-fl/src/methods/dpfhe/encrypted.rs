//! Algorithms 4 and 5 of the FHE paper (App. F) on ciphertexts: the client (data owner) holds
//! the secret key and encrypts each step's batch, labels and pre-sampled DP noise; the server
//! runs the training step on ciphertexts only.
//!
//! **Packing.** Example `i` of a batch occupies slots `[i·D, (i+1)·D)` of one ciphertext
//! (`D` = the feature count rounded up to a power of two); the weights are replicated in every
//! block, so `X ∘ W` followed by a rotate-and-add over `D` slots puts each margin `⟨w, x_i⟩`
//! at slot `i·D`. The paper encrypts one example per ciphertext; packing a whole batch into
//! one ciphertext does the same arithmetic with ~100× fewer ciphertext operations. Because
//! the packed batch is built by the client, the client also draws the batch indices (with the
//! same generator calls as the plaintext run), where the paper's server picks per-example
//! ciphertexts.
//!
//! **Refreshes.** Until bootstrapping exists, a ciphertext that lacks the levels its next stage
//! needs goes back to the client, who decrypts and re-encrypts it at the top level. Each such
//! round trip is counted. The client owns the data, so it learns nothing it did not have; the
//! server still sees ciphertexts only.

use std::sync::Arc;
use std::time::Instant;

use privopt_approx::functions::{Method as Fit, approximate};
use privopt_approx::{ChebPoly, Interval};
use privopt_ckks::CkksParams;
use privopt_ckks::eval::{
    Ciphertext, EvalContext, Evaluator, PolyBasis, PublicKey, SecretKey, encode,
};
use privopt_ckks::params::CkksParamsBuilder;
use privopt_dp::GaussianMechanism;
use privopt_ml::data::Dataset;
use rand::Rng;
use rand_chacha::ChaCha20Rng;

use super::algorithms::{Barrier, GdSpec};
use crate::error::{Error, Result};
use crate::methods::minibatch;

fn he(e: privopt_ckks::CkksError) -> Error {
    Error::Config(format!("CKKS: {e}"))
}

/// Slot layout of one batch.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Features per example (bias included).
    pub d: usize,
    /// Block width `D ≥ d`, a power of two.
    pub block: usize,
    /// Slots per ciphertext.
    pub slots: usize,
    /// Examples per batch.
    pub batch: usize,
}

impl Layout {
    /// The layout of `batch` examples of `d` features in `slots` slots.
    pub fn new(d: usize, batch: usize, slots: usize) -> Result<Self> {
        let block = d.next_power_of_two();
        if batch == 0 || batch * block > slots {
            return Err(Error::Config(format!(
                "a batch of {batch} examples of {d} features (blocks of {block}) does not fit in {slots} slots"
            )));
        }
        Ok(Self {
            d,
            block,
            slots,
            batch,
        })
    }

    /// Rotations the circuits use: within a block (left), broadcasts (right), across blocks.
    pub fn rotations(&self) -> Vec<i64> {
        self.within_block()
            .flat_map(|s| [s, -s])
            .chain(self.across_blocks())
            .collect()
    }

    /// `1, 2, 4, …` below the block width.
    fn within_block(&self) -> impl Iterator<Item = i64> {
        (0..self.block.trailing_zeros()).map(|i| 1i64 << i)
    }

    /// `D, 2D, 4D, …` below the slot count.
    fn across_blocks(&self) -> impl Iterator<Item = i64> {
        let block = self.block as i64;
        (0..(self.slots / self.block).trailing_zeros()).map(move |i| block << i)
    }

    /// A vector with `value(j)` replicated in every block.
    fn replicated(&self, v: &[f64]) -> Vec<f64> {
        (0..self.slots)
            .map(|k| {
                let j = k % self.block;
                if j < self.d { v[j] } else { 0.0 }
            })
            .collect()
    }

    /// `c` at the first slot of each of the batch's blocks, zero elsewhere.
    fn block_starts(&self, c: f64) -> Vec<f64> {
        let mut v = vec![0.0; self.slots];
        for i in 0..self.batch {
            v[i * self.block] = c;
        }
        v
    }
}

/// The parameters of the encrypted runs: n = 2^15, log QP ≈ 866 (≤ 881 of the 128-bit
/// standard), 16 levels at scale 2^40, 5 key-switching digits.
pub fn encrypted_params() -> Result<Arc<CkksParams>> {
    CkksParamsBuilder::leveled(1 << 15, 50, 40, 16, &[44, 44, 44, 44])
        .build()
        .map_err(he)
}

/// What the client pre-samples for one step: the batch and the noise `η·χ_t`.
#[derive(Clone, Debug)]
pub struct StepInputs {
    /// Batch indices.
    pub batch: Vec<usize>,
    /// `η·χ_t` (zero when the run has no noise).
    pub scaled_noise: Vec<f64>,
}

/// The batches and noise of `steps` steps, drawn with exactly the generator calls of
/// [`super::algorithms::train`] (mini-batch first, then noise), so a plaintext run from the
/// same seed sees the same batches and noise.
pub fn presample(data: &Dataset, spec: &GdSpec, steps: u64, rng: &mut impl Rng) -> Vec<StepInputs> {
    let all: Vec<usize> = (0..data.len()).collect();
    let d = data.n_features();
    let noise = (spec.noise_std > 0.0)
        .then(|| GaussianMechanism::new(spec.noise_std, 1.0))
        .transpose()
        .ok()
        .flatten();
    (0..steps)
        .map(|_| {
            let batch = match spec.batch {
                Some(b) => minibatch(&all, b, rng),
                None => all.clone(),
            };
            let chi = noise
                .as_ref()
                .map_or_else(|| vec![0.0; d], |m| m.noise(d, rng));
            StepInputs {
                batch,
                scaled_noise: chi.iter().map(|c| spec.lr * c).collect(),
            }
        })
        .collect()
}

/// The data owner: keys, encryption of inputs, refreshes and the final decryption.
pub struct Client {
    ctx: Arc<EvalContext>,
    sk: SecretKey,
    pk: PublicKey,
    layout: Layout,
    rng: ChaCha20Rng,
    refreshes: usize,
}

impl Client {
    /// Generates the keys (`rng` must be a cryptographic generator; seeded only in experiments).
    pub fn new(ctx: &Arc<EvalContext>, layout: Layout, mut rng: ChaCha20Rng) -> Self {
        let sk = SecretKey::generate(ctx, &mut rng);
        let pk = sk.public_key(&mut rng);
        Self {
            ctx: Arc::clone(ctx),
            sk,
            pk,
            layout,
            rng,
            refreshes: 0,
        }
    }

    /// The server's evaluator: relinearization key and the Galois keys of the layout.
    pub fn evaluator(&mut self, threads: usize) -> Result<Evaluator> {
        let relin = self.sk.relin_key(&mut self.rng);
        let galois = self
            .sk
            .galois_keys(&self.layout.rotations(), false, &mut self.rng);
        Evaluator::new(&self.ctx, Some(relin), galois)
            .with_threads(threads)
            .map_err(he)
    }

    fn encrypt(&mut self, values: &[f64]) -> Result<Ciphertext> {
        let pt = encode(&self.ctx, values, self.ctx.max_level()).map_err(he)?;
        Ok(self.pk.encrypt(&pt, &mut self.rng))
    }

    /// The batch's features (block `i` = example `i`) and labels (at block starts).
    pub fn encrypt_batch(
        &mut self,
        data: &Dataset,
        batch: &[usize],
    ) -> Result<(Ciphertext, Ciphertext)> {
        let l = self.layout;
        let mut x = vec![0.0; l.slots];
        let mut y = vec![0.0; l.slots];
        for (i, &row) in batch.iter().enumerate() {
            x[i * l.block..i * l.block + l.d].copy_from_slice(data.row(row));
            y[i * l.block] = data.label(row);
        }
        Ok((self.encrypt(&x)?, self.encrypt(&y)?))
    }

    /// A vector replicated in every block (weights, noise).
    pub fn encrypt_replicated(&mut self, v: &[f64]) -> Result<Ciphertext> {
        let r = self.layout.replicated(v);
        self.encrypt(&r)
    }

    /// Decrypt-and-re-encrypt round trip at the top level (counted).
    pub fn refresh(&mut self, ct: &Ciphertext) -> Result<Ciphertext> {
        self.refreshes += 1;
        let v = self.sk.decrypt_values(ct).map_err(he)?;
        self.encrypt(&v)
    }

    /// The weights: block 0 of a replicated ciphertext.
    pub fn decrypt_weights(&self, ct: &Ciphertext) -> Result<Vec<f64>> {
        let v = self.sk.decrypt_values(ct).map_err(he)?;
        Ok(v[..self.layout.d].to_vec())
    }

    /// Round trips so far.
    pub fn refreshes(&self) -> usize {
        self.refreshes
    }
}

/// The polynomial clipping of Algorithm 4: `g ↦ g · C / max(C, √‖g‖²)`, built from
/// a square root on `[0, s_max]`, a max on `[0, √s_max]` and an inverse on `[C, √s_max]`.
#[derive(Clone, Debug)]
pub struct ClipCircuit {
    /// Clipping bound C.
    pub clip: f64,
    /// √x on `[0, s_max]`.
    pub sqrt: ChebPoly,
    /// max(C, t) on `[0, √s_max]`.
    pub max: ChebPoly,
    /// C / x on `[C, √s_max]`.
    pub inverse: ChebPoly,
}

impl ClipCircuit {
    /// Least-squares fits for gradients with `‖g‖² ≤ s_max` (degrees 15, 31 and 7).
    pub fn new(clip: f64, s_max: f64) -> Result<Self> {
        let root = s_max.sqrt();
        if !(clip > 0.0 && root > clip) {
            return Err(Error::Config(format!(
                "clipping bound {clip} must lie inside (0, √{s_max})"
            )));
        }
        let fit = |f: &dyn Fn(f64) -> f64, lo: f64, hi: f64, deg: usize| {
            let iv = Interval::new(lo, hi).map_err(|e| Error::Config(e.to_string()))?;
            approximate(f, iv, deg, Fit::LeastSquares).map_err(|e| Error::Config(e.to_string()))
        };
        Ok(Self {
            clip,
            sqrt: fit(&|x: f64| x.max(0.0).sqrt(), 0.0, s_max, 15)?,
            max: fit(&|t: f64| t.max(clip), 0.0, root, 31)?,
            inverse: fit(&|x: f64| clip / x, clip, root, 7)?,
        })
    }

    /// The clipping factor this circuit computes for a squared norm (plaintext mirror).
    pub fn factor(&self, norm2: f64) -> f64 {
        self.inverse.eval(self.max.eval(self.sqrt.eval(norm2)))
    }
}

/// Levels each stage of one step consumed (read off the ciphertexts).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StageDepths {
    /// (stage, levels) in execution order; `path` B stages are prefixed `barrier/`.
    pub stages: Vec<(String, usize)>,
}

impl StageDepths {
    fn push(&mut self, name: &str, before: usize, after: usize) {
        self.stages
            .push((name.to_string(), before.saturating_sub(after)));
    }

    /// Critical-path depth: gradient path (+ clipping) vs barrier path, plus the update.
    pub fn critical(&self) -> usize {
        let sum = |barrier: bool| -> usize {
            self.stages
                .iter()
                .filter(|(n, _)| n.starts_with("barrier/") == barrier && n != "update")
                .map(|(_, d)| d)
                .sum()
        };
        let update: usize = self
            .stages
            .iter()
            .filter(|(n, _)| n == "update")
            .map(|(_, d)| d)
            .sum();
        sum(false).max(sum(true)) + update
    }
}

/// The server: evaluation keys only.
pub struct Server<'a> {
    ev: &'a Evaluator,
    layout: Layout,
    sigmoid: &'a ChebPoly,
    lr: f64,
    barrier: Option<&'a Barrier>,
    clip: Option<&'a ClipCircuit>,
}

/// Levels a Chebyshev evaluation of `degree` may take (affine map, products, leaf constants).
fn poly_levels(degree: usize) -> usize {
    (degree + 1).next_power_of_two().trailing_zeros() as usize + 2
}

impl<'a> Server<'a> {
    /// A server for Algorithm 5 (`barrier` set, `clip` none) or Algorithm 4 (`clip` set).
    pub fn new(
        ev: &'a Evaluator,
        layout: Layout,
        sigmoid: &'a ChebPoly,
        lr: f64,
        barrier: Option<&'a Barrier>,
        clip: Option<&'a ClipCircuit>,
    ) -> Self {
        Self {
            ev,
            layout,
            sigmoid,
            lr,
            barrier,
            clip,
        }
    }

    fn poly(&self, x: &Ciphertext, p: &ChebPoly) -> Result<Ciphertext> {
        let iv = p.interval();
        self.ev
            .evaluate_polynomial(
                x,
                p.coeffs(),
                PolyBasis::Chebyshev {
                    lo: iv.lo,
                    hi: iv.hi,
                },
            )
            .map_err(he)
    }

    /// Copies the value at each block start to the whole block (right rotate-and-add).
    fn broadcast(&self, x: &Ciphertext) -> Result<Ciphertext> {
        let steps: Vec<i64> = self.layout.within_block().map(|s| -s).collect();
        self.ev.rotate_and_add(x, &steps).map_err(he)
    }

    /// Sum over all blocks, left in every block.
    fn sum_blocks(&self, x: &Ciphertext) -> Result<Ciphertext> {
        let steps: Vec<i64> = self.layout.across_blocks().collect();
        self.ev.rotate_and_add(x, &steps).map_err(he)
    }

    fn mask(&self, x: &Ciphertext, c: f64) -> Result<Ciphertext> {
        let pt = self
            .ev
            .encode_for_product(&self.layout.block_starts(c), x.level())
            .map_err(he)?;
        self.ev.mul_plain(x, &pt).map_err(he)
    }

    /// Refreshes `x` through the client when fewer than `levels` remain.
    fn ensure(&self, x: Ciphertext, levels: usize, client: &mut Client) -> Result<Ciphertext> {
        if x.level() >= levels {
            Ok(x)
        } else {
            client.refresh(&x)
        }
    }

    /// One training step: returns the new weights and the levels each stage used.
    pub fn step(
        &self,
        w: &Ciphertext,
        x: &Ciphertext,
        y: &Ciphertext,
        scaled_noise: &Ciphertext,
        client: &mut Client,
    ) -> Result<(Ciphertext, StageDepths)> {
        let ev = self.ev;
        let mut depths = StageDepths::default();
        let b = self.layout.batch as f64;
        let top = w.level();
        // Path A: margins, sigmoid, per-example gradients.
        let products = ev.multiply(x, w).map_err(he)?;
        let margins = ev.sum_slots(&products, self.layout.block).map_err(he)?;
        depths.push("inner product", top, margins.level());
        let before = margins.level();
        let pred = self.poly(&margins, self.sigmoid)?;
        depths.push("sigmoid", before, pred.level());
        let before = pred.level();
        let err = ev.sub(&pred, y).map_err(he)?;
        // Alg. 5 folds the step η/B into the mask; Alg. 4 clips first.
        let scale = if self.clip.is_some() {
            1.0
        } else {
            self.lr / b
        };
        let spread = self.broadcast(&self.mask(&err, scale)?)?;
        let grads = ev.multiply(x, &spread).map_err(he)?;
        depths.push("gradient", before, grads.level());
        let grads = match self.clip {
            None => grads,
            Some(c) => self.clip_gradients(grads, c, &mut depths, client)?,
        };
        let before = grads.level();
        let grad_sum = self.sum_blocks(&grads)?;
        depths.push("average", before, grad_sum.level());
        // Path B: the barrier term 2λη·w·P_κ(Θ − ‖w‖²).
        let mut next = w.clone();
        if let Some(barrier) = self.barrier {
            let sq = ev.square(w).map_err(he)?;
            let norm2 = ev.sum_slots(&sq, self.layout.block).map_err(he)?;
            depths.push("barrier/squared norm", top, norm2.level());
            let before = norm2.level();
            let gap = ev
                .add_const(&ev.negate(&norm2), barrier.theta)
                .map_err(he)?;
            let inv = self.poly(&gap, &barrier.reciprocal)?;
            depths.push("barrier/inverse", before, inv.level());
            let before = inv.level();
            let scaled_w = ev
                .mul_const(w, 2.0 * barrier.lambda * self.lr)
                .map_err(he)?;
            let term = ev.multiply(&scaled_w, &inv).map_err(he)?;
            depths.push("barrier/term", before, term.level());
            next = ev.sub(&next, &term).map_err(he)?;
        }
        let before = next.level().min(grad_sum.level());
        next = ev.sub(&next, &grad_sum).map_err(he)?;
        next = ev.sub(&next, scaled_noise).map_err(he)?;
        depths.push("update", before, next.level());
        Ok((next, depths))
    }

    /// Algorithm 4's clipping of the per-example gradients in `grads` (block `i` = example
    /// `i`), scaled by η/B for the update.
    fn clip_gradients(
        &self,
        grads: Ciphertext,
        c: &ClipCircuit,
        depths: &mut StageDepths,
        client: &mut Client,
    ) -> Result<Ciphertext> {
        let ev = self.ev;
        // Norm: one product, a block sum, a mask and a broadcast (+2).
        let grads = self.ensure(grads, 3 + poly_levels(c.sqrt.degree()), client)?;
        let before = grads.level();
        let sq = ev.square(&grads).map_err(he)?;
        let norm2 =
            self.broadcast(&self.mask(&ev.sum_slots(&sq, self.layout.block).map_err(he)?, 1.0)?)?;
        depths.push("clip/norm", before, norm2.level());
        let norm2 = self.ensure(norm2, poly_levels(c.sqrt.degree()), client)?;
        let before = norm2.level();
        let root = self.poly(&norm2, &c.sqrt)?;
        depths.push("clip/sqrt", before, root.level());
        let root = self.ensure(root, poly_levels(c.max.degree()), client)?;
        let before = root.level();
        let m = self.poly(&root, &c.max)?;
        depths.push("clip/max", before, m.level());
        let m = self.ensure(m, poly_levels(c.inverse.degree()), client)?;
        let before = m.level();
        // The step η/B rides on the inverse's coefficients: no extra level.
        let step = self.lr / self.layout.batch as f64;
        let scaled_inverse = ChebPoly::new(
            c.inverse.coeffs().iter().map(|x| x * step).collect(),
            c.inverse.interval(),
        )
        .map_err(|e| Error::Config(e.to_string()))?;
        let factor = self.poly(&m, &scaled_inverse)?;
        depths.push("clip/inverse", before, factor.level());
        let factor = self.ensure(factor, 1, client)?;
        let grads = self.ensure(grads, 1, client)?;
        let before = factor.level().min(grads.level());
        let out = ev.multiply(&grads, &factor).map_err(he)?;
        depths.push("clip/scale", before, out.level());
        Ok(out)
    }
}

/// The outcome of an encrypted run.
#[derive(Clone, Debug)]
pub struct EncryptedRun {
    /// Decrypted final weights.
    pub w: Vec<f64>,
    /// Seconds of server computation per step.
    pub seconds_per_step: Vec<f64>,
    /// Levels per stage of the first step.
    pub depths: StageDepths,
    /// Client round trips.
    pub refreshes: usize,
}

/// Runs `inputs.len()` steps of Algorithm 5 (`spec.barrier` set) or 4 (`clip` set) on
/// ciphertexts from w₀ = 0, with `threads` server threads.
#[allow(clippy::too_many_arguments)]
pub fn run_encrypted(
    ctx: &Arc<EvalContext>,
    data: &Dataset,
    spec: &GdSpec,
    sigmoid: &ChebPoly,
    clip: Option<&ClipCircuit>,
    inputs: &[StepInputs],
    threads: usize,
    key_rng: ChaCha20Rng,
) -> Result<EncryptedRun> {
    let batch = inputs.first().map_or(0, |s| s.batch.len());
    let layout = Layout::new(data.n_features(), batch, ctx.slots())?;
    let mut client = Client::new(ctx, layout, key_rng);
    let ev = client.evaluator(threads)?;
    let server = Server::new(&ev, layout, sigmoid, spec.lr, spec.barrier.as_ref(), clip);
    let mut w = client.encrypt_replicated(&vec![0.0; layout.d])?;
    let mut seconds = Vec::with_capacity(inputs.len());
    let mut first_depths = None;
    let mut needed = 0;
    for step in inputs {
        if w.level() < needed {
            w = client.refresh(&w)?;
        }
        let (x, y) = client.encrypt_batch(data, &step.batch)?;
        let noise = client.encrypt_replicated(&step.scaled_noise)?;
        let start = Instant::now();
        let level = w.level();
        let (next, depths) = server.step(&w, &x, &y, &noise, &mut client)?;
        seconds.push(start.elapsed().as_secs_f64());
        needed = needed.max(level - next.level() + 1);
        first_depths.get_or_insert(depths);
        w = next;
    }
    Ok(EncryptedRun {
        w: client.decrypt_weights(&w)?,
        seconds_per_step: seconds,
        depths: first_depths.unwrap_or_default(),
        refreshes: client.refreshes(),
    })
}
