//! Algorithms 4 and 5 of the FHE paper (App. F) on ciphertexts, driven in one process over
//! the roles of [`privopt_protocols::dpfhe`]: the data owner encrypts each step's batch,
//! labels and pre-sampled DP noise; the compute server runs the step on ciphertexts only and
//! asks the owner for a refresh when a ciphertext runs out of levels (counted).
//!
//! The packed batch is built by the owner, so the owner also draws the batch indices (with the
//! same generator calls as the plaintext run), where the paper's server picks per-example
//! ciphertexts.

use std::sync::Arc;
use std::time::Instant;

use privopt_approx::ChebPoly;
use privopt_ckks::CkksParams;
use privopt_ckks::eval::{EvalContext, GaloisKeys};
use privopt_ckks::params::CkksParamsBuilder;
use privopt_dp::GaussianMechanism;
use privopt_ml::data::Dataset;
use rand::Rng;
use rand_chacha::ChaCha20Rng;

pub use privopt_protocols::dpfhe::{Bootstrappers, ClipCircuit, Layout, StageDepths};
use privopt_protocols::dpfhe::{
    ComputeServer, DataOwner, EncryptedStep, Refresh, StepStatus, TrainingCircuit, Weights,
    galois_key_from_bytes, galois_keys_to_messages, relin_key_from_bytes, relin_key_to_bytes,
};

use super::algorithms::GdSpec;
use crate::context::{NoProgress, Progress};
use crate::error::{Error, Result};
use crate::methods::minibatch;

/// The parameters of the encrypted runs: n = 2^15, log QP ≈ 866 (≤ 881 of the 128-bit
/// standard), 16 levels at scale 2^40, 5 key-switching digits.
pub fn encrypted_params() -> Result<Arc<CkksParams>> {
    CkksParamsBuilder::leveled(1 << 15, 50, 40, 16, &[44, 44, 44, 44])
        .build()
        .map_err(Error::from)
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
    /// Bootstraps the server ran.
    pub bootstraps: usize,
}

/// The step circuit of `spec` (Algorithm 5 if it has a barrier, 4 with `clip`, plain
/// polynomial GD otherwise).
pub fn training_circuit(
    layout: Layout,
    spec: &GdSpec,
    sigmoid: &ChebPoly,
    clip: Option<&ClipCircuit>,
    weight_bound: f64,
) -> TrainingCircuit {
    TrainingCircuit {
        layout,
        sigmoid: sigmoid.clone(),
        lr: spec.lr,
        barrier: spec.barrier.clone(),
        clip: clip.cloned(),
        weight_bound,
    }
}

/// A data owner and a compute server with its keys, for several runs over one layout.
/// Without a bootstrapper the server asks the owner to refresh ciphertexts (counted); with
/// one it bootstraps instead, the owner encrypts at the bootstrapper's output level and
/// never hears from the server until it decrypts the result.
pub struct EncryptedSession {
    ctx: Arc<EvalContext>,
    owner: DataOwner,
    server: ComputeServer,
    through_bytes: bool,
}

impl std::fmt::Debug for EncryptedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptedSession")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl EncryptedSession {
    /// Generates the owner's keys (from `key_rng`) and hands the evaluation keys to a
    /// server for `circuit`. With `through_bytes` every message crosses as its encoding,
    /// except a bootstrapping server's keys, handed over in memory: at n = 2^16 a top-level
    /// key is 220 MB, beyond the 64 MB message limit (they would need splitting by digit).
    pub fn new(
        ctx: &Arc<EvalContext>,
        circuit: TrainingCircuit,
        key_rng: ChaCha20Rng,
        bootstrapper: Option<Bootstrappers>,
        through_bytes: bool,
    ) -> Result<Self> {
        let mut owner = DataOwner::new(ctx, circuit.layout, key_rng);
        let server = match bootstrapper {
            None => {
                let (mut relin, mut galois) = owner.evaluation_keys();
                if through_bytes {
                    relin = relin_key_from_bytes(ctx, &relin_key_to_bytes(&relin, ctx))?;
                    let parts = galois_keys_to_messages(galois, ctx)
                        .iter()
                        .map(|m| Ok(galois_key_from_bytes(ctx, m)?))
                        .collect::<Result<Vec<_>>>()?;
                    galois = GaloisKeys::merge(parts)?;
                }
                ComputeServer::new(ctx, relin, galois, 1, circuit)?
            }
            Some(boot) => {
                owner = owner.with_level(boot.any.output_level())?;
                let keys = owner.bootstrapping_keys(&boot)?;
                ComputeServer::bootstrapping(ctx, keys, boot, 1, circuit)?
            }
        };
        Ok(Self {
            ctx: Arc::clone(ctx),
            owner,
            server,
            through_bytes,
        })
    }

    /// Runs `inputs.len()` steps of `circuit` on `data` from w₀ = 0 with `threads` server
    /// threads, advancing `progress` by one per step.
    pub fn run(
        &mut self,
        data: &Dataset,
        circuit: TrainingCircuit,
        inputs: &[StepInputs],
        threads: usize,
        progress: &dyn Progress,
    ) -> Result<EncryptedRun> {
        let ctx = &self.ctx;
        let layout = circuit.layout;
        self.server.set_circuit(circuit)?;
        self.server.set_threads(threads)?;
        let refreshes_before = self.owner.refreshes();
        let mut w = self.owner.encrypt_replicated(&vec![0.0; layout.d])?;
        if self.through_bytes {
            let msg = Weights { step: 0, w };
            w = Weights::from_bytes(ctx, &msg.to_bytes(ctx))?.w;
        }
        let mut seconds = Vec::with_capacity(inputs.len());
        let mut first_depths = None;
        let mut bootstraps = 0;
        for (t, step) in inputs.iter().enumerate() {
            let t = t as u64;
            let mut enc = self
                .owner
                .encrypt_step(t, data, &step.batch, &step.scaled_noise)?;
            if self.through_bytes {
                enc = EncryptedStep::from_bytes(ctx, &enc.to_bytes(ctx))?;
            }
            let start = Instant::now();
            let mut running = self.server.begin_step(w, enc)?;
            let (next, depths) = loop {
                match self.server.advance(&mut running)? {
                    StepStatus::NeedsRefresh(request) => {
                        let reply = ask_owner(&mut self.owner, request, ctx, self.through_bytes)?;
                        running.resume(reply)?;
                    }
                    StepStatus::Done { w, depths } => break (w, depths),
                }
            };
            seconds.push(start.elapsed().as_secs_f64());
            bootstraps += running.bootstraps();
            first_depths.get_or_insert(depths);
            w = next;
            progress.advance(1);
        }
        if self.through_bytes {
            let msg = Weights {
                step: inputs.len() as u64,
                w,
            };
            w = Weights::from_bytes(ctx, &msg.to_bytes(ctx))?.w;
        }
        Ok(EncryptedRun {
            w: self.owner.decrypt_weights(&w)?,
            seconds_per_step: seconds,
            depths: first_depths.unwrap_or_default(),
            refreshes: self.owner.refreshes() - refreshes_before,
            bootstraps,
        })
    }
}

/// Runs `inputs.len()` steps of Algorithm 5 (`spec.barrier` set) or 4 (`clip` set) on
/// ciphertexts from w₀ = 0, with `threads` server threads and the owner refreshing what
/// runs out of levels. With `through_bytes`, every message (evaluation keys, inputs,
/// refreshes, weights) crosses as its encoding.
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
    through_bytes: bool,
) -> Result<EncryptedRun> {
    let batch = inputs.first().map_or(0, |s| s.batch.len());
    let layout = Layout::new(data.n_features(), batch, ctx.slots())?;
    // Refreshing servers never bootstrap, so the weights need no bound.
    let circuit = training_circuit(layout, spec, sigmoid, clip, f64::INFINITY);
    let mut session = EncryptedSession::new(ctx, circuit.clone(), key_rng, None, through_bytes)?;
    session.run(data, circuit, inputs, threads, &NoProgress)
}

/// A refresh round trip with the data owner (through bytes both ways if asked).
fn ask_owner(
    owner: &mut DataOwner,
    mut request: Refresh,
    ctx: &Arc<EvalContext>,
    through_bytes: bool,
) -> Result<Refresh> {
    if through_bytes {
        request = Refresh::from_bytes(ctx, &request.to_bytes(ctx))?;
    }
    let reply = owner.refresh(&request)?;
    if through_bytes {
        return Ok(Refresh::from_bytes(ctx, &reply.to_bytes(ctx))?);
    }
    Ok(reply)
}
