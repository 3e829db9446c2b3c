//! What the compute server evaluates: the slot layout of a batch, the sigmoid and barrier
//! polynomials of Algorithm 5, the clipping circuit of Algorithm 4, and the levels each stage
//! consumed.

use privopt_approx::functions::{Method as Fit, approximate};
use privopt_approx::{ChebPoly, Interval};

use crate::error::{ProtocolError, Result, check_param};

/// Slot layout of one batch: example `i` occupies slots `[i·D, (i+1)·D)` (`D` = the feature
/// count rounded up to a power of two); weights are replicated in every block, so `X ∘ W`
/// followed by a rotate-and-add over `D` slots puts each margin `⟨w, x_i⟩` at slot `i·D`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
        let block = d.max(1).next_power_of_two();
        check_param(
            d >= 1 && batch >= 1 && batch.saturating_mul(block) <= slots,
            || {
                format!(
                    "a batch of {batch} examples of {d} features (blocks of {block}) does not fit in {slots} slots"
                )
            },
        )?;
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
    pub(crate) fn within_block(&self) -> impl Iterator<Item = i64> {
        (0..self.block.trailing_zeros()).map(|i| 1i64 << i)
    }

    /// `D, 2D, 4D, …` below the slot count.
    pub(crate) fn across_blocks(&self) -> impl Iterator<Item = i64> {
        let block = self.block as i64;
        (0..(self.slots / self.block).trailing_zeros()).map(move |i| block << i)
    }

    /// `v` replicated in every block (zero past `d`).
    pub fn replicated(&self, v: &[f64]) -> Vec<f64> {
        (0..self.slots)
            .map(|k| {
                let j = k % self.block;
                if j < self.d {
                    v.get(j).copied().unwrap_or(0.0)
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// `c` at the first slot of each of the batch's blocks, zero elsewhere.
    pub(crate) fn block_starts(&self, c: f64) -> Vec<f64> {
        let mut v = vec![0.0; self.slots];
        for i in 0..self.batch {
            v[i * self.block] = c;
        }
        v
    }
}

/// The barrier term of Algorithm 3: λ, Θ and P_κ ≈ 1/x on [κΘ, Θ].
#[derive(Clone, Debug)]
pub struct Barrier {
    /// Penalty weight λ.
    pub lambda: f64,
    /// Threshold Θ on ‖w‖².
    pub theta: f64,
    /// P_κ, the polynomial standing in for 1/x.
    pub reciprocal: ChebPoly,
}

impl Barrier {
    /// The barrier's gradient is this factor times w: 2λ·P_κ(Θ − ‖w‖²).
    pub fn gradient_factor(&self, w: &[f64]) -> f64 {
        let norm2: f64 = w.iter().map(|x| x * x).sum();
        2.0 * self.lambda * self.reciprocal.eval(self.theta - norm2)
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
        check_param(clip > 0.0 && root > clip, || {
            format!("clipping bound {clip} must lie inside (0, √{s_max})")
        })?;
        let fit = |f: &dyn Fn(f64) -> f64, lo: f64, hi: f64, deg: usize| {
            let iv = Interval::new(lo, hi)?;
            Ok::<_, ProtocolError>(approximate(f, iv, deg, Fit::LeastSquares)?)
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

/// One training step's circuit: Algorithm 5 (`barrier` set, no `clip`) or Algorithm 4
/// (`clip` set).
#[derive(Clone, Debug)]
pub struct TrainingCircuit {
    /// The batch layout.
    pub layout: Layout,
    /// The polynomial sigmoid.
    pub sigmoid: ChebPoly,
    /// Learning rate η.
    pub lr: f64,
    /// Algorithm 5's barrier.
    pub barrier: Option<Barrier>,
    /// Algorithm 4's clipping.
    pub clip: Option<ClipCircuit>,
    /// A bound on every weight's magnitude through the run (Algorithm 5: the certified
    /// radius `R ≥ ‖w_t‖`). A bootstrapping server divides the weights by it first, as
    /// bootstrapping is accurate for slots of about 1 only.
    pub weight_bound: f64,
}

impl TrainingCircuit {
    /// Levels the weights need at the start of a step (an upper bound from the polynomials'
    /// degrees): margins (1), sigmoid, masked error and gradient (2); the barrier path takes
    /// ‖w‖² (1), the inverse and the product with w (1). Algorithm 4's clipping asks for
    /// its own levels stage by stage.
    pub fn step_depth(&self) -> usize {
        let gradient = 3 + poly_levels(self.sigmoid.degree());
        let barrier = self
            .barrier
            .as_ref()
            .map_or(0, |b| 2 + poly_levels(b.reciprocal.degree()));
        gradient.max(barrier)
    }
}

/// Levels each stage of one step consumed (read off the ciphertexts).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StageDepths {
    /// (stage, levels) in execution order; barrier stages are prefixed `barrier/`.
    pub stages: Vec<(String, usize)>,
}

impl StageDepths {
    pub(crate) fn push(&mut self, name: &str, before: usize, after: usize) {
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

/// Levels a Chebyshev evaluation of `degree` may take (affine map, products, leaf constants).
pub(crate) fn poly_levels(degree: usize) -> usize {
    (degree + 1).next_power_of_two().trailing_zeros() as usize + 2
}
