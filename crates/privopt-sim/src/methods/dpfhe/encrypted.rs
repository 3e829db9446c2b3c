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

pub use privopt_protocols::dpfhe::{ClipCircuit, Layout, StageDepths};
use privopt_protocols::dpfhe::{
    ComputeServer, DataOwner, EncryptedStep, Refresh, StepStatus, TrainingCircuit, Weights,
    galois_key_from_bytes, galois_keys_to_messages, relin_key_from_bytes, relin_key_to_bytes,
};

use super::algorithms::GdSpec;
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
}

/// Runs `inputs.len()` steps of Algorithm 5 (`spec.barrier` set) or 4 (`clip` set) on
/// ciphertexts from w₀ = 0, with `threads` server threads. With `through_bytes`, every message
/// (evaluation keys, inputs, refreshes, weights) crosses as its encoding.
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
    let mut owner = DataOwner::new(ctx, layout, key_rng);
    let (mut relin, mut galois) = owner.evaluation_keys();
    if through_bytes {
        relin = relin_key_from_bytes(ctx, &relin_key_to_bytes(&relin, ctx))?;
        let parts = galois_keys_to_messages(galois, ctx)
            .iter()
            .map(|m| Ok(galois_key_from_bytes(ctx, m)?))
            .collect::<Result<Vec<_>>>()?;
        galois = GaloisKeys::merge(parts)?;
    }
    let circuit = TrainingCircuit {
        layout,
        sigmoid: sigmoid.clone(),
        lr: spec.lr,
        barrier: spec.barrier.clone(),
        clip: clip.cloned(),
    };
    let server = ComputeServer::new(ctx, relin, galois, threads, circuit)?;
    let mut w = owner.encrypt_replicated(&vec![0.0; layout.d])?;
    if through_bytes {
        let msg = Weights { step: 0, w };
        w = Weights::from_bytes(ctx, &msg.to_bytes(ctx))?.w;
    }
    let mut seconds = Vec::with_capacity(inputs.len());
    let mut first_depths = None;
    let mut needed = 0;
    for (t, step) in inputs.iter().enumerate() {
        let t = t as u64;
        if w.level() < needed {
            w = ask_owner(&mut owner, Refresh { step: t, ct: w }, ctx, through_bytes)?.ct;
        }
        let mut enc = owner.encrypt_step(t, data, &step.batch, &step.scaled_noise)?;
        if through_bytes {
            enc = EncryptedStep::from_bytes(ctx, &enc.to_bytes(ctx))?;
        }
        let start = Instant::now();
        let level = w.level();
        let mut running = server.begin_step(w, enc);
        let (next, depths) = loop {
            match server.advance(&mut running)? {
                StepStatus::NeedsRefresh(request) => {
                    running.resume(ask_owner(&mut owner, request, ctx, through_bytes)?)?;
                }
                StepStatus::Done { w, depths } => break (w, depths),
            }
        };
        seconds.push(start.elapsed().as_secs_f64());
        needed = needed.max(level - next.level() + 1);
        first_depths.get_or_insert(depths);
        w = next;
    }
    if through_bytes {
        let msg = Weights {
            step: inputs.len() as u64,
            w,
        };
        w = Weights::from_bytes(ctx, &msg.to_bytes(ctx))?.w;
    }
    Ok(EncryptedRun {
        w: owner.decrypt_weights(&w)?,
        seconds_per_step: seconds,
        depths: first_depths.unwrap_or_default(),
        refreshes: owner.refreshes(),
    })
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
