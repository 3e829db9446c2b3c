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
use privopt_ckks::eval::bootstrap::BootstrapPreset;
use privopt_ckks::eval::{BootstrapConfig, Bootstrapper, EvalContext, GaloisKeys};
use privopt_ckks::params::CkksParamsBuilder;
use privopt_dp::GaussianMechanism;
use privopt_ml::data::Dataset;
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

pub use privopt_protocols::dpfhe::{Bootstrappers, ClipCircuit, Layout, StageDepths};
use privopt_protocols::dpfhe::{
    ComputeServer, DataOwner, EncryptedStep, Refresh, StepStatus, TrainingCircuit, Weights,
    galois_key_from_bytes, galois_keys_to_messages, relin_key_from_bytes, relin_key_to_bytes,
};

use super::algorithms::GdSpec;
use super::logreg::Link;
use super::plan::{Plan, PlanNumbers};
use crate::error::{DpfheError, Result};
use privopt_math::progress::{NoProgress, Progress};
use privopt_ml::data::minibatch;

/// The parameters of the encrypted runs: n = 2^15, log QP ≈ 866 (≤ 881 of the 128-bit
/// standard), 16 levels at scale 2^40, 5 key-switching digits.
pub fn encrypted_params() -> Result<Arc<CkksParams>> {
    CkksParamsBuilder::leveled(1 << 15, 50, 40, 16, &[44, 44, 44, 44])
        .build()
        .map_err(DpfheError::from)
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

impl EncryptedRun {
    /// Seconds per step in the steady state: the first step starts from fresh weights (no
    /// refresh or bootstrap of them yet), so it is left out when there are more.
    pub fn steady_seconds_per_step(&self) -> f64 {
        let timed = match self.seconds_per_step.as_slice() {
            [only] => std::slice::from_ref(only),
            [_, rest @ ..] => rest,
            [] => &[],
        };
        timed.iter().sum::<f64>() / timed.len().max(1) as f64
    }
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
            if progress.should_stop() {
                return Err(DpfheError::Interrupted);
            }
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
    backend: &EncryptedBackend,
    data: &Dataset,
    spec: &GdSpec,
    sigmoid: &ChebPoly,
    clip: Option<&ClipCircuit>,
    inputs: &[StepInputs],
    threads: usize,
    key_rng: ChaCha20Rng,
    through_bytes: bool,
) -> Result<EncryptedRun> {
    let ctx = &backend.ctx;
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

/// The algorithms an encrypted run can execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncryptedAlgorithm {
    /// Algorithm 5: the no-clip barrier method.
    Alg5,
    /// Algorithm 4: DP-GD with polynomial clipping.
    Alg4,
    /// Output perturbation's SGD step (the noise is added once to the decrypted output).
    OutputSgd,
}

impl EncryptedAlgorithm {
    /// A name for progress lines.
    pub fn label(self) -> &'static str {
        match self {
            Self::Alg5 => "Algorithm 5",
            Self::Alg4 => "Algorithm 4",
            Self::OutputSgd => "Output-SGD",
        }
    }

    /// The paper's number (Output-SGD: 0).
    pub fn number(self) -> u8 {
        match self {
            Self::Alg5 => 5,
            Self::Alg4 => 4,
            Self::OutputSgd => 0,
        }
    }
}

/// A bootstrapping preset, by name in configs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BootstrapChoice {
    /// [`BootstrapPreset::N15`].
    N15,
    /// [`BootstrapPreset::N16`].
    N16,
    /// [`BootstrapPreset::N16StcFirst`].
    #[serde(rename = "n16-stc-first")]
    N16StcFirst,
}

impl BootstrapChoice {
    /// The preset.
    pub fn preset(self) -> BootstrapPreset {
        match self {
            Self::N15 => BootstrapPreset::N15,
            Self::N16 => BootstrapPreset::N16,
            Self::N16StcFirst => BootstrapPreset::N16StcFirst,
        }
    }
}

/// How the compute server keeps its ciphertexts alive. The default asks the data owner to
/// refresh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerSetup {
    /// Bootstrap with this 128-bit preset; `None`: ask the data owner to refresh, at the
    /// n = 2^15 parameters of [`encrypted_params`].
    pub bootstrap: Option<BootstrapChoice>,
    /// Bootstrap the weights (whose slots repeat with the block width) by sparse packing of
    /// that period, cheaper than a full-slot bootstrap.
    pub sparse_weights: bool,
}

impl Default for ServerSetup {
    fn default() -> Self {
        Self {
            bootstrap: None,
            sparse_weights: true,
        }
    }
}

/// The smallest period the weights are bootstrapped with by sparse packing.
const MIN_SPARSE_PERIOD: usize = 1024;

/// The CKKS context and (when bootstrapping) the full-slot bootstrapper, shared by the
/// trainers of several datasets.
pub struct EncryptedBackend {
    ctx: Arc<EvalContext>,
    setup: ServerSetup,
    boot: Option<Arc<Bootstrapper>>,
}

impl std::fmt::Debug for EncryptedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptedBackend")
            .field("setup", &self.setup)
            .finish_non_exhaustive()
    }
}

impl EncryptedBackend {
    /// Builds the parameters and, for a bootstrapping server, the bootstrapping transforms.
    pub fn new(setup: ServerSetup, progress: &dyn Progress) -> Result<Self> {
        let preset = setup.bootstrap.map(BootstrapChoice::preset);
        let params = match preset {
            Some(p) => p.params().build()?,
            None => encrypted_params()?,
        };
        let ctx = EvalContext::new(&params)?;
        let boot = match preset {
            Some(p) => {
                progress.start("preparing the bootstrapping transforms", 1);
                let boot = Bootstrapper::new(&ctx, &p.config())?;
                progress.finish();
                Some(Arc::new(boot))
            }
            None => None,
        };
        Ok(Self { ctx, setup, boot })
    }

    /// The CKKS parameters.
    pub fn params(&self) -> &Arc<CkksParams> {
        self.ctx.params()
    }

    /// Levels a fresh (or freshly bootstrapped) ciphertext can spend before the next refresh.
    pub fn levels(&self) -> usize {
        self.boot.as_ref().map_or(self.params().max_level(), |b| {
            b.output_level() - b.input_level()
        })
    }

    /// The weights' sparse-packing bootstrapper for a dataset's block width: a period of at
    /// least 1024 slots (weights that repeat every block repeat every multiple of it). A
    /// sparse message's coefficients grow like 1/√(2s), and with them the sine's cubic error
    /// at the presets' message ratios: 15.3 bits at s = 1024 and 10.8 at s = 64 for N15, 25.9
    /// and 16.8 (s = 32) for N16 (docs/ckks-eval.md).
    fn weights_bootstrapper(&self, block: usize) -> Result<Option<Arc<Bootstrapper>>> {
        let (Some(choice), true) = (self.setup.bootstrap, self.setup.sparse_weights) else {
            return Ok(None);
        };
        let period = block.max(MIN_SPARSE_PERIOD);
        if period >= self.ctx.slots() {
            return Ok(None);
        }
        let cfg = BootstrapConfig {
            slots: Some(period),
            ..choice.preset().config()
        };
        Ok(Some(Arc::new(Bootstrapper::new(&self.ctx, &cfg)?)))
    }

    /// A trainer for `plan` on `train` (its no-clip sigmoid is the polynomial every encrypted
    /// algorithm uses), whose data owner draws its keys from `key_rng` when the first run
    /// starts. `name` labels its progress lines.
    pub fn trainer(
        &self,
        name: &str,
        train: &Dataset,
        plan: &Plan,
        key_rng: ChaCha20Rng,
    ) -> Result<EncryptedTrainer<'_>> {
        let Link::Poly(sigmoid) = plan.noclip.link.clone() else {
            return Err(DpfheError::Infeasible(
                "the no-clip method needs a polynomial sigmoid".into(),
            ));
        };
        let layout = Layout::new(train.n_features(), plan.batch, self.ctx.slots())?;
        let weights = self.weights_bootstrapper(layout.block)?;
        let bootstrappers = self.boot.as_ref().map(|any| Bootstrappers {
            any: Arc::clone(any),
            weights,
        });
        Ok(EncryptedTrainer {
            backend: self,
            name: name.to_owned(),
            layout,
            bootstrappers,
            sigmoid,
            plan: plan.clone(),
            key_rng: Some(key_rng),
            session: None,
        })
    }
}

/// The encrypted runs of one plan on one training set: one data owner's keys, one server.
pub struct EncryptedTrainer<'a> {
    backend: &'a EncryptedBackend,
    name: String,
    layout: Layout,
    bootstrappers: Option<Bootstrappers>,
    /// The plan's no-clip sigmoid, the polynomial every encrypted algorithm uses.
    sigmoid: ChebPoly,
    plan: Plan,
    key_rng: Option<ChaCha20Rng>,
    session: Option<EncryptedSession>,
}

impl std::fmt::Debug for EncryptedTrainer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptedTrainer")
            .field("name", &self.name)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl EncryptedTrainer<'_> {
    /// The period of the weights' sparse bootstrap, if they get one.
    pub fn sparse_weights_period(&self) -> Option<usize> {
        let weights = self.bootstrappers.as_ref()?.weights.as_ref()?;
        weights.slots()
    }

    /// What `steps` steps of `alg` compute, as a plaintext spec: the plan's spec with the
    /// polynomial sigmoid (Algorithm 4's clipping is polynomial too, see [`Self::run`]);
    /// Output-SGD takes plain steps at output perturbation's step size.
    pub fn spec(&self, alg: EncryptedAlgorithm, steps: u64) -> GdSpec {
        let plan = &self.plan;
        let mut spec = match alg {
            EncryptedAlgorithm::Alg5 => plan.noclip.clone(),
            EncryptedAlgorithm::Alg4 => plan.dpgd.clone(),
            EncryptedAlgorithm::OutputSgd => GdSpec {
                lr: plan.lr_out,
                clip: None,
                noise_std: 0.0,
                barrier: None,
                ..plan.noclip.clone()
            },
        };
        spec.link = Link::Poly(self.sigmoid.clone());
        spec.steps = steps;
        spec
    }

    /// Runs `alg` on ciphertexts for `inputs.len()` steps of `spec` (from [`Self::spec`])
    /// from w₀ = 0 with `threads` server threads; the keys are made on the first run. Reports
    /// the key generation and then the steps to `progress`, each as its own piece of work.
    pub fn run(
        &mut self,
        train: &Dataset,
        alg: EncryptedAlgorithm,
        spec: &GdSpec,
        inputs: &[StepInputs],
        threads: usize,
        progress: &dyn Progress,
    ) -> Result<EncryptedRun> {
        let m = self.layout.d as f64;
        let clip = match (alg, spec.clip) {
            // ‖(p̃(z) − y)·x‖² ≤ (1 + e_f)² · m for features in [−1, 1].
            (EncryptedAlgorithm::Alg4, Some(c)) => Some(ClipCircuit::new(c, 1.21 * m)?),
            _ => None,
        };
        let bound = weight_bound(spec, &self.plan.numbers, m, alg);
        let circuit = training_circuit(self.layout, spec, &self.sigmoid, clip.as_ref(), bound);
        let session = match (&mut self.session, self.key_rng.take()) {
            (Some(s), _) => s,
            (None, Some(keys)) => {
                progress.start(&format!("{}: generating the keys", self.name), 1);
                let made = EncryptedSession::new(
                    &self.backend.ctx,
                    circuit.clone(),
                    keys,
                    self.bootstrappers.clone(),
                    true,
                )?;
                progress.finish();
                self.session.insert(made)
            }
            (None, None) => {
                return Err(DpfheError::Infeasible(
                    "the encrypted trainer lost its keys in a failed key generation".into(),
                ));
            }
        };
        let label = format!("{}: {} on {threads} thread(s)", self.name, alg.label());
        progress.start(&label, inputs.len() as u64);
        let run = session.run(train, circuit, inputs, threads, progress);
        progress.finish();
        run
    }
}

/// A bound on every weight through `spec`'s run, which a bootstrapping server divides the
/// weights by: Theorem 3's radius `R` for a certified Algorithm 5; otherwise the sum of the
/// steps' largest moves, `T·η·(G + 6σ√m)` with `G` the clipping bound (Algorithm 4) or
/// `(1 + e_f)√m` (features in [−1, 1]), plus the barrier's pull (never outward).
fn weight_bound(spec: &GdSpec, plan: &PlanNumbers, m: f64, alg: EncryptedAlgorithm) -> f64 {
    if alg == EncryptedAlgorithm::Alg5 && plan.noclip_certified {
        return plan.noclip_r;
    }
    let gradient = spec.clip.unwrap_or((1.0 + plan.noclip_e_f) * m.sqrt());
    spec.steps as f64 * spec.lr * (gradient + 6.0 * spec.noise_std * m.sqrt())
}
