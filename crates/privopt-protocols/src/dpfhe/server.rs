//! The compute server: evaluation keys only. A training step is resumable: it runs until a
//! ciphertext lacks the levels its next stage needs, hands that ciphertext out as a
//! [`StepStatus::NeedsRefresh`] request, and continues from there once
//! [`Step::resume`] gets the refreshed ciphertext back. It never calls the data owner.
//! With bootstrapping ([`ComputeServer::bootstrapping`]) it refreshes such a ciphertext
//! itself and never asks: the owner encrypts its data once and decrypts only the result.

use std::collections::BTreeMap;
use std::sync::Arc;

use privopt_approx::ChebPoly;
use privopt_ckks::eval::{
    Bootstrapper, Ciphertext, EvalContext, EvaluationKeys, Evaluator, GaloisKeys, KeyId, PolyBasis,
    RelinKey,
};

use super::circuit::{ClipCircuit, StageDepths, TrainingCircuit, poly_levels};
use super::messages::{EncryptedStep, Refresh};
use crate::error::{ProtocolError, Result};

/// The intermediate values a step keeps (and may hand out for refresh).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Weights,
    Grads,
    Norm2,
    Root,
    Max,
    Factor,
    Clipped,
}

/// One training step in progress.
#[derive(Debug)]
pub struct Step {
    step: u64,
    inputs: EncryptedStep,
    /// The weights (under [`Slot::Weights`]) and the intermediate values computed so far.
    values: BTreeMap<Slot, Ciphertext>,
    awaiting: Option<Slot>,
    depths: StageDepths,
    bootstraps: usize,
    /// The secret the server's keys belong to: a refreshed ciphertext must be under it.
    key: Option<KeyId>,
}

/// Where a step stands after [`ComputeServer::advance`].
#[derive(Debug)]
pub enum StepStatus {
    /// Send this ciphertext to the data owner and [`Step::resume`] with its answer.
    NeedsRefresh(Refresh),
    /// The step is over: the new weights and the levels each stage used.
    Done {
        /// `w_{t+1}`.
        w: Ciphertext,
        /// Levels per stage.
        depths: StageDepths,
    },
}

impl Step {
    /// Hands back the refreshed ciphertext the last [`StepStatus::NeedsRefresh`] asked for.
    pub fn resume(&mut self, reply: Refresh) -> Result<()> {
        let slot = self
            .awaiting
            .ok_or_else(|| ProtocolError::OutOfOrder("no refresh was requested".into()))?;
        if reply.step != self.step {
            return Err(crate::error::misbehaved(
                crate::error::Peer::DataOwner,
                crate::error::Misbehavior::WrongRound,
                format!(
                    "refreshed a ciphertext of step {}, the step is {}",
                    reply.step, self.step
                ),
            ));
        }
        check_owner(self.key, &reply.ct, "the refreshed ciphertext")?;
        self.values.insert(slot, reply.ct);
        self.awaiting = None;
        Ok(())
    }

    fn get(&self, slot: Slot) -> Result<&Ciphertext> {
        value(&self.values, slot)
    }

    /// Bootstraps the server ran in this step.
    pub fn bootstraps(&self) -> usize {
        self.bootstraps
    }
}

/// Refuses a ciphertext the data owner sent under another secret than the one the server's
/// keys belong to (it would decrypt to noise after the first key switch, or be refused
/// mid-step by the evaluator with a less useful message).
fn check_owner(key: Option<KeyId>, ct: &Ciphertext, what: &str) -> Result<()> {
    match key {
        Some(key) if ct.key_id() != key => Err(crate::error::misbehaved(
            crate::error::Peer::DataOwner,
            crate::error::Misbehavior::Malformed,
            format!(
                "{what} is under key {}, the server's evaluation keys are of key {key}",
                ct.key_id()
            ),
        )),
        _ => Ok(()),
    }
}

/// `slot`'s ciphertext among a step's values.
fn value(values: &BTreeMap<Slot, Ciphertext>, slot: Slot) -> Result<&Ciphertext> {
    values
        .get(&slot)
        .ok_or_else(|| ProtocolError::OutOfOrder(format!("{slot:?} is not computed")))
}

/// What a bootstrapping server bootstraps with.
#[derive(Clone, Debug)]
pub struct Bootstrappers {
    /// For any ciphertext (full packing).
    pub any: Arc<Bootstrapper>,
    /// For the weights, whose slots repeat with the block width: sparse packing of that period
    /// (or a multiple of it), which costs less (`BootstrapConfig::slots`). `None`: the
    /// weights use `any`.
    pub weights: Option<Arc<Bootstrapper>>,
}

impl Bootstrappers {
    /// The bootstrapper for `slot`'s ciphertexts.
    fn for_slot(&self, slot: Slot) -> &Bootstrapper {
        match (slot, &self.weights) {
            (Slot::Weights, Some(w)) => w,
            _ => &self.any,
        }
    }

    fn all(&self) -> impl Iterator<Item = &Arc<Bootstrapper>> {
        std::iter::once(&self.any).chain(&self.weights)
    }
}

impl From<Arc<Bootstrapper>> for Bootstrappers {
    fn from(any: Arc<Bootstrapper>) -> Self {
        Self { any, weights: None }
    }
}

/// The compute server: an evaluator over the data owner's evaluation keys, and the circuit.
pub struct ComputeServer {
    ev: Evaluator,
    circuit: TrainingCircuit,
    bootstrappers: Option<Bootstrappers>,
}

impl std::fmt::Debug for ComputeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComputeServer")
            .field("layout", &self.circuit.layout)
            .finish_non_exhaustive()
    }
}

impl ComputeServer {
    /// A server with the owner's evaluation keys; `threads` parallelize CKKS operations.
    /// Refuses keys of two secrets.
    pub fn new(
        ctx: &Arc<EvalContext>,
        relin: RelinKey,
        galois: GaloisKeys,
        threads: usize,
        circuit: TrainingCircuit,
    ) -> Result<Self> {
        let ev = Evaluator::new(ctx, Some(relin), galois).with_threads(threads)?;
        ev.check_keys()?;
        Ok(Self {
            ev,
            circuit,
            bootstrappers: None,
        })
    }

    /// A server that bootstraps where it would ask for a refresh, over the owner's
    /// [`EvaluationKeys`] for the bootstrappers (their key requests and the circuit's
    /// rotations). Fails when the weights have no bound to divide by, a step needs more
    /// levels than bootstrapping leaves, or the weights' bootstrapper packs a period that is
    /// not a multiple of the block width or encapsulates to another weight.
    pub fn bootstrapping(
        ctx: &Arc<EvalContext>,
        keys: EvaluationKeys,
        bootstrappers: impl Into<Bootstrappers>,
        threads: usize,
        circuit: TrainingCircuit,
    ) -> Result<Self> {
        let bootstrappers = bootstrappers.into();
        let bound = circuit.weight_bound;
        if !(bound.is_finite() && bound > 0.0) {
            return Err(ProtocolError::Parameters(format!(
                "bootstrapping needs a finite positive bound on the weights, got {bound}"
            )));
        }
        let need = circuit.step_depth();
        for have in bootstrappers
            .all()
            .map(|b| b.output_level() - b.input_level())
        {
            if need > have {
                return Err(ProtocolError::Parameters(format!(
                    "a training step needs {need} levels, bootstrapping leaves {have}"
                )));
            }
        }
        if let Some(w) = &bootstrappers.weights
            && w.encapsulation() != bootstrappers.any.encapsulation()
        {
            return Err(ProtocolError::Parameters(format!(
                "the weights' bootstrapper encapsulates to weight {:?} and the other to {:?}; \
                 one set of keys serves both only if they agree",
                w.encapsulation(),
                bootstrappers.any.encapsulation()
            )));
        }
        let block = circuit.layout.block;
        if let Some(period) = bootstrappers.weights.as_ref().and_then(|w| w.slots())
            && period % block != 0
        {
            return Err(ProtocolError::Parameters(format!(
                "the weights repeat every {block} slots; a sparse bootstrap of period {period} \
                 would average them"
            )));
        }
        let ev = keys.evaluator(ctx).with_threads(threads)?;
        ev.check_keys()?;
        Ok(Self {
            ev,
            circuit,
            bootstrappers: Some(bootstrappers),
        })
    }

    /// Runs CKKS operations on `threads` threads from now on.
    pub fn set_threads(&mut self, threads: usize) -> Result<()> {
        Ok(self.ev.set_threads(threads)?)
    }

    /// Trains with `circuit` from now on (another algorithm over the same keys): its layout
    /// must be the one the keys were made for.
    pub fn set_circuit(&mut self, circuit: TrainingCircuit) -> Result<()> {
        if circuit.layout != self.circuit.layout {
            return Err(ProtocolError::Parameters(format!(
                "the keys serve the layout {:?}, not {:?}",
                self.circuit.layout, circuit.layout
            )));
        }
        self.circuit = circuit;
        Ok(())
    }

    /// Starts step `inputs.step` from the weights `w`; refuses ciphertexts under another
    /// secret than the one the server's keys belong to.
    pub fn begin_step(&self, w: Ciphertext, inputs: EncryptedStep) -> Result<Step> {
        let key = self.ev.key_id();
        check_owner(key, &w, "the weights")?;
        check_owner(key, &inputs.x, "the features")?;
        check_owner(key, &inputs.y, "the labels")?;
        check_owner(key, &inputs.noise, "the noise")?;
        Ok(Step {
            step: inputs.step,
            inputs,
            values: BTreeMap::from([(Slot::Weights, w)]),
            awaiting: None,
            depths: StageDepths::default(),
            bootstraps: 0,
            key,
        })
    }

    /// A bound `2^k` on the slots of `slot` (features in [−1, 1]; the circuit's intervals),
    /// which bootstrapping divides by first.
    fn bound_log2(&self, slot: Slot) -> u32 {
        let c = &self.circuit;
        let bound = match (slot, &c.clip) {
            (Slot::Weights, _) => c.weight_bound,
            // |p̃(z) − y|·|x_j| ≤ 1 + e_f < 2, before any η/B.
            (Slot::Grads, _) => 2.0,
            (Slot::Norm2, Some(clip)) => clip.sqrt.interval().hi,
            (Slot::Root | Slot::Max, Some(clip)) => clip.max.interval().hi,
            _ => 1.0,
        };
        bound.log2().ceil().max(0.0) as u32
    }

    /// `None` if `slot` has `levels` levels left; otherwise bootstraps it in place (a
    /// bootstrapping server) or returns the refresh request to send.
    fn ensure(&self, step: &mut Step, slot: Slot, levels: usize) -> Result<Option<StepStatus>> {
        let ct = step.get(slot)?;
        let boot = self.bootstrappers.as_ref().map(|b| b.for_slot(slot));
        // A bootstrapper that runs SlotsToCoeffs first takes its inputs at its input level,
        // so a ciphertext keeps that many levels in reserve.
        let reserve = boot.map_or(0, |b| b.input_level());
        if ct.level() >= levels + reserve {
            return Ok(None);
        }
        let top = boot.map_or(self.ev.context().max_level(), |b| {
            b.output_level() - b.input_level()
        });
        if levels > top {
            return Err(ProtocolError::Parameters(format!(
                "{slot:?} needs {levels} levels, a refreshed ciphertext has {top}"
            )));
        }
        if let Some(boot) = boot {
            let fresh = boot.bootstrap_bounded(&self.ev, ct, self.bound_log2(slot))?;
            step.values.insert(slot, fresh);
            step.bootstraps += 1;
            return Ok(None);
        }
        let request = Refresh {
            step: step.step,
            ct: ct.clone(),
        };
        step.awaiting = Some(slot);
        Ok(Some(StepStatus::NeedsRefresh(request)))
    }

    fn poly(&self, x: &Ciphertext, p: &ChebPoly) -> Result<Ciphertext> {
        let iv = p.interval();
        Ok(self.ev.evaluate_polynomial(
            x,
            p.coeffs(),
            PolyBasis::Chebyshev {
                lo: iv.lo,
                hi: iv.hi,
            },
        )?)
    }

    /// Copies the value at each block start to the whole block (right rotate-and-add).
    fn broadcast(&self, x: &Ciphertext) -> Result<Ciphertext> {
        let steps: Vec<i64> = self.circuit.layout.within_block().map(|s| -s).collect();
        Ok(self.ev.rotate_and_add(x, &steps)?)
    }

    /// Sum over all blocks, left in every block.
    fn sum_blocks(&self, x: &Ciphertext) -> Result<Ciphertext> {
        let steps: Vec<i64> = self.circuit.layout.across_blocks().collect();
        Ok(self.ev.rotate_and_add(x, &steps)?)
    }

    fn mask(&self, x: &Ciphertext, c: f64) -> Result<Ciphertext> {
        let pt = self
            .ev
            .encode_for_product(&self.circuit.layout.block_starts(c), x.level())?;
        Ok(self.ev.mul_plain(x, &pt)?)
    }

    /// Runs `step` as far as it goes: to its end, or to the next ciphertext that must be
    /// refreshed first.
    pub fn advance(&self, step: &mut Step) -> Result<StepStatus> {
        if step.awaiting.is_some() {
            return Err(ProtocolError::OutOfOrder(
                "the step awaits a refreshed ciphertext".into(),
            ));
        }
        let ev = &self.ev;
        let c = &self.circuit;
        if !step.values.contains_key(&Slot::Grads) {
            if let Some(request) = self.ensure(step, Slot::Weights, c.step_depth())? {
                return Ok(request);
            }
            // Path A: margins, sigmoid, per-example gradients.
            let (x, y) = (&step.inputs.x, &step.inputs.y);
            let w = step.get(Slot::Weights)?;
            let top = w.level();
            let products = ev.multiply(x, w)?;
            let margins = ev.sum_slots(&products, c.layout.block)?;
            step.depths.push("inner product", top, margins.level());
            let before = margins.level();
            let pred = self.poly(&margins, &c.sigmoid)?;
            step.depths.push("sigmoid", before, pred.level());
            let before = pred.level();
            let err = ev.sub(&pred, y)?;
            // Alg. 5 folds the step η/B into the mask; Alg. 4 clips first.
            let scale = if c.clip.is_some() {
                1.0
            } else {
                c.lr / c.layout.batch as f64
            };
            let spread = self.broadcast(&self.mask(&err, scale)?)?;
            let grads = ev.multiply(x, &spread)?;
            step.depths.push("gradient", before, grads.level());
            step.values.insert(Slot::Grads, grads);
        }
        let grads = match &c.clip {
            None => step.get(Slot::Grads)?.clone(),
            Some(clip) => match self.clip(step, clip)? {
                Ok(clipped) => clipped,
                Err(request) => return Ok(request),
            },
        };
        let before = grads.level();
        let grad_sum = self.sum_blocks(&grads)?;
        step.depths.push("average", before, grad_sum.level());
        // Path B: the barrier term 2λη·w·P_κ(Θ − ‖w‖²).
        // Borrowed from the values alone, so the stage depths can be noted meanwhile.
        let w = value(&step.values, Slot::Weights)?;
        let top = w.level();
        let mut next = w.clone();
        if let Some(barrier) = &c.barrier {
            let sq = ev.square(w)?;
            let norm2 = ev.sum_slots(&sq, c.layout.block)?;
            step.depths.push("barrier/squared norm", top, norm2.level());
            let before = norm2.level();
            let gap = ev.add_const(&ev.negate(&norm2)?, barrier.theta)?;
            let inv = self.poly(&gap, &barrier.reciprocal)?;
            step.depths.push("barrier/inverse", before, inv.level());
            let before = inv.level();
            let scaled_w = ev.mul_const(w, 2.0 * barrier.lambda * c.lr)?;
            let term = ev.multiply(&scaled_w, &inv)?;
            step.depths.push("barrier/term", before, term.level());
            next = ev.sub(&next, &term)?;
        }
        let before = next.level().min(grad_sum.level());
        next = ev.sub(&next, &grad_sum)?;
        next = ev.sub(&next, &step.inputs.noise)?;
        step.depths.push("update", before, next.level());
        Ok(StepStatus::Done {
            w: next,
            depths: std::mem::take(&mut step.depths),
        })
    }

    /// Algorithm 4's clipping of the per-example gradients (block `i` = example `i`), scaled
    /// by η/B for the update; `Err(request)` when a refresh must come first.
    fn clip(
        &self,
        step: &mut Step,
        c: &ClipCircuit,
    ) -> Result<std::result::Result<Ciphertext, StepStatus>> {
        macro_rules! need {
            ($slot:expr, $levels:expr) => {
                if let Some(request) = self.ensure(step, $slot, $levels)? {
                    return Ok(Err(request));
                }
            };
        }
        let ev = &self.ev;
        let layout = self.circuit.layout;
        if !step.values.contains_key(&Slot::Clipped) {
            // Norm: one product, a block sum, a mask and a broadcast (+2).
            need!(Slot::Grads, 3 + poly_levels(c.sqrt.degree()));
            if !step.values.contains_key(&Slot::Norm2) {
                let grads = step.get(Slot::Grads)?;
                let before = grads.level();
                let sq = ev.square(grads)?;
                let norm2 = self.broadcast(&self.mask(&ev.sum_slots(&sq, layout.block)?, 1.0)?)?;
                step.depths.push("clip/norm", before, norm2.level());
                step.values.insert(Slot::Norm2, norm2);
            }
            for (input, output, poly, name, next_degree) in [
                (
                    Slot::Norm2,
                    Slot::Root,
                    &c.sqrt,
                    "clip/sqrt",
                    c.sqrt.degree(),
                ),
                (Slot::Root, Slot::Max, &c.max, "clip/max", c.max.degree()),
            ] {
                need!(input, poly_levels(next_degree));
                if !step.values.contains_key(&output) {
                    let x = step.get(input)?;
                    let before = x.level();
                    let y = self.poly(x, poly)?;
                    step.depths.push(name, before, y.level());
                    step.values.insert(output, y);
                }
            }
            need!(Slot::Max, poly_levels(c.inverse.degree()));
            if !step.values.contains_key(&Slot::Factor) {
                let m = step.get(Slot::Max)?;
                let before = m.level();
                // The step η/B rides on the inverse's coefficients: no extra level.
                let scale = self.circuit.lr / layout.batch as f64;
                let scaled_inverse = ChebPoly::new(
                    c.inverse.coeffs().iter().map(|x| x * scale).collect(),
                    c.inverse.interval(),
                )?;
                let factor = self.poly(m, &scaled_inverse)?;
                step.depths.push("clip/inverse", before, factor.level());
                step.values.insert(Slot::Factor, factor);
            }
            need!(Slot::Factor, 1);
            need!(Slot::Grads, 1);
            let (grads, factor) = (step.get(Slot::Grads)?, step.get(Slot::Factor)?);
            let before = factor.level().min(grads.level());
            let out = ev.multiply(grads, factor)?;
            step.depths.push("clip/scale", before, out.level());
            step.values.insert(Slot::Clipped, out);
        }
        Ok(Ok(step.get(Slot::Clipped)?.clone()))
    }
}
