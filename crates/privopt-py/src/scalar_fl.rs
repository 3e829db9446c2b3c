//! `privopt.protocols.scalar_fl`: DeComFL/HiSo server and client driven by bytes, with the
//! client's loss a Python callable (numpy, torch, anything that returns a float).

use std::sync::Mutex;

use numpy::PyArray1;
use numpy::{PyReadonlyArray1, PyReadwriteArray1};
use privopt_math::SeedTree;
use privopt_math::sample::secret_rng;
use privopt_ml::zo::Difference;
use privopt_protocols::Message;
use privopt_protocols::scalar_fl::plan_rng;
use privopt_protocols::scalar_fl::{
    Catch, CatchUp, Client, Invitation, ModelState, Participant, Privacy, Probe, ReplaySpec, Reply,
    RoundPlan, Rule, Scratch, Server, apply_record, defaults, load_preconditioner, perturb,
    step_delta,
};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rand_chacha::ChaCha20Rng;

use crate::errors;
use crate::model_arrays::{Part, borrow_parts, for_each_chunk, parts, readonly};
use crate::numpy_io::{Exact, Reals, array, exact_vec, to_vec};

/// What server and clients must agree on to replay a round: learning rate, local steps,
/// perturbations per step, weight decay (``x ← x − lr·(Δx + weight_decay·x)``), and the rule (``"decomfl"``: ``u ~ N(0, I)``; ``"hiso"``:
/// directions shaped by a learned diagonal Hessian with EMA weight ``nu`` and floor ``eps``).
#[pyclass(module = "privopt.protocols.scalar_fl", name = "Spec", frozen)]
#[derive(Clone)]
pub struct PySpec(ReplaySpec);

#[pymethods]
impl PySpec {
    #[new]
    #[pyo3(signature = (lr, local_steps = 1, perturbations = 1, rule = "decomfl", nu = defaults::NU, eps = defaults::HESSIAN_EPS, weight_decay = defaults::WEIGHT_DECAY))]
    fn new(
        lr: f64,
        local_steps: usize,
        perturbations: usize,
        rule: &str,
        nu: f64,
        eps: f64,
        weight_decay: f64,
    ) -> PyResult<Self> {
        let rule = match rule {
            "decomfl" => Rule::Decomfl,
            "hiso" => Rule::Hiso { nu, eps },
            other => {
                return Err(errors::parameter(format!(
                    "rule must be 'decomfl' or 'hiso', got {other:?}"
                )));
            }
        };
        let spec = ReplaySpec {
            lr,
            local_steps,
            perturbations,
            weight_decay,
            rule,
        };
        spec.validate().map_err(errors::protocol)?;
        Ok(Self(spec))
    }

    /// Scalars a participant sends per round.
    #[getter]
    fn scalars_per_round(&self) -> usize {
        self.0.scalars_per_round()
    }

    /// The learning rate.
    #[getter]
    fn lr(&self) -> f64 {
        self.0.lr
    }

    /// Local steps per round.
    #[getter]
    fn local_steps(&self) -> usize {
        self.0.local_steps
    }

    /// Perturbations per local step.
    #[getter]
    fn perturbations(&self) -> usize {
        self.0.perturbations
    }

    /// ``"decomfl"`` or ``"hiso"``.
    #[getter]
    fn rule(&self) -> &'static str {
        match self.0.rule {
            Rule::Decomfl => "decomfl",
            Rule::Hiso { .. } => "hiso",
        }
    }

    fn __repr__(&self) -> String {
        format!("Spec({:?})", self.0)
    }
}

/// Client-level DP on the scalar channel: each participant clips its round's scalars to L2
/// norm ``clip``, adds its share of Gaussian noise and quantizes them for SecAgg+, so the
/// released sum carries ``N(0, (noise_multiplier·clip)²)`` per scalar. Shares are sized for
/// ``⌈noise_floor·B⌉`` contributors of a round of ``B``; a round with fewer is never
/// released. ``noise_multiplier = 0`` clips and sums securely without noise.
#[pyclass(module = "privopt.protocols.scalar_fl", name = "Privacy", frozen)]
#[derive(Clone, Copy)]
pub struct PyPrivacy(Privacy);

#[pymethods]
impl PyPrivacy {
    #[new]
    #[pyo3(signature = (clip, noise_multiplier, noise_floor = 0.5))]
    fn new(clip: f64, noise_multiplier: f64, noise_floor: f64) -> PyResult<Self> {
        let p = Privacy {
            clip,
            noise_multiplier,
            noise_floor,
        };
        p.validate().map_err(errors::protocol)?;
        Ok(Self(p))
    }

    #[getter]
    fn clip(&self) -> f64 {
        self.0.clip
    }

    #[getter]
    fn noise_multiplier(&self) -> f64 {
        self.0.noise_multiplier
    }

    #[getter]
    fn noise_floor(&self) -> f64 {
        self.0.noise_floor
    }

    /// The fewest contributors a round of ``participants`` is released with.
    fn required_contributors(&self, participants: usize) -> usize {
        self.0.noise().required_contributors(participants)
    }

    /// The noise multiplier each contributor's scalars get in a sum of ``contributors`` from a
    /// round of ``participants`` (at least ``noise_multiplier`` in a released sum): what a
    /// privacy ledger records.
    fn effective_multiplier(&self, participants: usize, contributors: usize) -> f64 {
        self.0.effective_multiplier(participants, contributors)
    }

    fn __repr__(&self) -> String {
        format!(
            "Privacy(clip={}, noise_multiplier={}, noise_floor={})",
            self.0.clip, self.0.noise_multiplier, self.0.noise_floor
        )
    }
}

fn initial(x0: &Reals<'_>, spec: &ReplaySpec) -> PyResult<ModelState> {
    let x = to_vec(x0);
    if x.is_empty() || x.iter().any(|v| !v.is_finite()) {
        return Err(errors::parameter(
            "x0 must be a non-empty vector of finite values",
        ));
    }
    Ok(ModelState::initial(x, spec.rule))
}

fn bytes<'py>(py: Python<'py>, message: &impl Message) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &message.to_bytes())
}

/// The server: samples participants and seeds, catches clients up, averages their scalars.
/// Per round: :meth:`begin_round` → send the plan and each participant's :meth:`catch_up` →
/// :meth:`receive` each reply that arrives → :meth:`finish_round` (absent clients dropped).
#[pyclass(module = "privopt.protocols.scalar_fl", name = "Server")]
pub struct PyServer {
    server: Server,
    plans: PlanSource,
    accepted: Vec<Reply>,
}

/// Where the round plans' randomness comes from.
enum PlanSource {
    /// A run's seed: round `r` draws from the stream `privopt run` gives it.
    Run(SeedTree),
    /// The operating system's randomness.
    Secret(Box<ChaCha20Rng>),
}

#[pymethods]
impl PyServer {
    /// A server for ``clients`` clients starting from ``x0``. A client more than
    /// ``staleness_bound`` rounds behind gets the full model instead of a replay. ``seed``
    /// makes participant and direction sampling reproducible: round ``r`` draws the plan a
    /// ``privopt run`` of method ``scalar_fl`` with that seed draws (unseeded: secret).
    #[new]
    #[pyo3(signature = (spec, x0, clients, staleness_bound = None, seed = None, privacy = None))]
    fn new(
        spec: &PySpec,
        x0: Reals<'_>,
        clients: usize,
        staleness_bound: Option<u64>,
        seed: Option<u64>,
        privacy: Option<PyRef<'_, PyPrivacy>>,
    ) -> PyResult<Self> {
        let state = initial(&x0, &spec.0)?;
        let mut server =
            Server::new(spec.0, state, clients, staleness_bound).map_err(errors::protocol)?;
        if let Some(p) = privacy {
            server.set_privacy(p.0).map_err(errors::protocol)?;
        }
        Ok(Self {
            server,
            plans: match seed {
                Some(seed) => PlanSource::Run(SeedTree::new(seed)),
                None => PlanSource::Secret(Box::new(secret_rng(None))),
            },
            accepted: Vec::new(),
        })
    }

    /// The global model.
    #[getter]
    fn x<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        array(py, self.server.state().x.clone())
    }

    /// The round the next :meth:`begin_round` opens.
    #[getter]
    fn round(&self) -> u64 {
        self.server.state().round
    }

    /// Full-model catch-ups sent so far.
    #[getter]
    fn full_downloads(&self) -> u64 {
        self.server.full_downloads()
    }

    /// The privacy settings (``None``: scalars travel in the clear).
    #[getter]
    fn privacy(&self) -> Option<PyPrivacy> {
        self.server.privacy().map(PyPrivacy)
    }

    /// Opens a round with ``per_round`` participants drawn from ``eligible`` (increasing ids;
    /// every client when ``None``): ``(plan bytes, participant ids)``.
    #[pyo3(signature = (per_round, eligible = None))]
    fn begin_round<'py>(
        &mut self,
        py: Python<'py>,
        per_round: usize,
        eligible: Option<Vec<usize>>,
    ) -> PyResult<(Bound<'py, PyBytes>, Vec<usize>)> {
        let eligible = eligible.as_deref();
        let plan = match &mut self.plans {
            PlanSource::Run(seeds) => {
                let round = self.server.state().round;
                self.server
                    .begin_round_among(per_round, eligible, &mut plan_rng(seeds, round))
            }
            PlanSource::Secret(rng) => {
                self.server
                    .begin_round_among(per_round, eligible, rng.as_mut())
            }
        }
        .map_err(errors::protocol)?;
        self.accepted.clear();
        Ok((bytes(py, &plan), plan.clients))
    }

    /// Client ``client`` reports it holds the start of ``round``, older than the server's
    /// record (it restarted from an older save): its next catch-up starts there (a replay
    /// while the history reaches back, else the full model). Not once this round's catch-up
    /// went to it; never ahead of the server.
    fn rewind(&mut self, client: usize, round: u64) -> PyResult<()> {
        self.server.rewind(client, round).map_err(errors::protocol)
    }

    /// What participant ``client`` needs to hold the round's starting model: nothing, a
    /// replay of the rounds it missed, or the full model.
    fn catch_up<'py>(&mut self, py: Python<'py>, client: usize) -> PyResult<Bound<'py, PyBytes>> {
        let msg = self.server.catch_up(client).map_err(errors::protocol)?;
        Ok(bytes(py, &msg))
    }

    /// One participant's reply. A malformed, late, duplicated or wrong-size reply raises and
    /// is not kept; the round stays open for the others.
    fn receive(&mut self, message: &[u8]) -> PyResult<()> {
        let reply = Reply::from_bytes(message).map_err(errors::decode)?;
        let accepted: Vec<usize> = self.accepted.iter().map(|r| r.client).collect();
        self.server
            .check_reply(&reply, &accepted)
            .map_err(errors::protocol)?;
        self.accepted.push(reply);
        Ok(())
    }

    /// Closes the open round of a private server with SecAgg+'s ``sum`` (``uint32``) of the
    /// ``contributors``' private replies (:meth:`Participant.private_reply`) and advances the
    /// model; returns the contributors. Below the noise floor's contributor count, with a
    /// contributor outside the round or a sum of the wrong length it raises and the round
    /// stays open.
    fn finish_round_secure(
        &mut self,
        sum: Exact<'_, u32>,
        contributors: Vec<usize>,
    ) -> PyResult<Vec<usize>> {
        self.server
            .finish_round_secure(&exact_vec(&sum), &contributors)
            .map_err(errors::protocol)?;
        self.accepted.clear();
        Ok(contributors)
    }

    /// Closes the open round without moving the model (its secure sum failed or fell below
    /// the noise floor): the round's seeds are recorded with zero scalars, participants fall
    /// back to the round they held.
    fn skip_round(&mut self) -> PyResult<()> {
        self.server.skip_round().map_err(errors::protocol)?;
        self.accepted.clear();
        Ok(())
    }

    /// Closes the round with the replies received (the rest dropped out) and advances the
    /// model; returns the ids whose replies counted.
    fn finish_round(&mut self) -> PyResult<Vec<usize>> {
        let replies = std::mem::take(&mut self.accepted);
        match self.server.finish_round(&replies) {
            Ok(_) => Ok(replies.iter().map(|r| r.client).collect()),
            Err(e) => {
                self.accepted = replies;
                Err(errors::protocol(e))
            }
        }
    }
}

/// A client: replays what it missed and runs its local steps on its own loss, returning only
/// scalars. ``difference`` is ``"forward"`` or ``"central"``; ``mu`` the smoothing radius.
#[pyclass(module = "privopt.protocols.scalar_fl", name = "Client")]
pub struct PyClient {
    client: Client,
    spec: ReplaySpec,
    probe: Probe,
}

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(signature = (id, spec, x0, mu = defaults::MU, difference = "forward"))]
    fn new(id: usize, spec: &PySpec, x0: Reals<'_>, mu: f64, difference: &str) -> PyResult<Self> {
        let difference = match difference {
            "forward" => Difference::OneSided,
            "central" => Difference::TwoPoint,
            other => {
                return Err(errors::parameter(format!(
                    "difference must be 'forward' or 'central', got {other:?}"
                )));
            }
        };
        if !(mu > 0.0 && mu.is_finite()) {
            return Err(errors::parameter(format!("mu must be > 0, got {mu}")));
        }
        Ok(Self {
            client: Client::new(id, initial(&x0, &spec.0)?),
            spec: spec.0,
            probe: Probe { mu, difference },
        })
    }

    /// The client's id.
    #[getter]
    fn id(&self) -> usize {
        self.client.id()
    }

    /// The model the client holds (the start of the round it is at).
    #[getter]
    fn x<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        array(py, self.client.state().x.clone())
    }

    /// The round whose starting model the client holds.
    #[getter]
    fn round(&self) -> u64 {
        self.client.state().round
    }

    /// The held state (model, HiSo Hessian, round) as a catch-up message: :meth:`receive` it
    /// in a fresh client of the same spec and dimension to resume where this one stands.
    #[getter]
    fn state<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes(py, &self.client.saved())
    }

    /// Applies the server's catch-up message.
    fn receive(&mut self, message: &[u8]) -> PyResult<()> {
        let msg = CatchUp::from_bytes(message).map_err(errors::decode)?;
        self.client
            .receive(msg, &self.spec)
            .map_err(errors::protocol)
    }

    /// Runs the plan's local steps with ``loss(step, x) -> float`` (the minibatch loss of local
    /// step ``step`` at the numpy vector ``x``) and returns the reply bytes. An exception in
    /// ``loss`` propagates unchanged and leaves the client as it was.
    fn local_update<'py>(
        &mut self,
        py: Python<'py>,
        plan: &[u8],
        loss: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let plan = RoundPlan::from_bytes(plan).map_err(errors::decode)?;
        let reply = self.run_local_update(&plan, loss)?;
        Ok(bytes(py, &reply))
    }

    /// :meth:`local_update` for a private run: the round's scalars clipped, noised with this
    /// client's share and quantized (``privacy``, which must be the server's), as the
    /// ``uint32`` input of the round's SecAgg+ (see :meth:`Participant.private_reply`).
    #[pyo3(signature = (plan, loss, privacy, *, noise_seed = None))]
    fn private_update<'py>(
        &mut self,
        py: Python<'py>,
        plan: &[u8],
        loss: Bound<'py, PyAny>,
        privacy: &PyPrivacy,
        noise_seed: Option<u64>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let plan = RoundPlan::from_bytes(plan).map_err(errors::decode)?;
        let reply = self.run_local_update(&plan, loss)?;
        let invitation = Invitation {
            session: reply.session,
            round: reply.round,
            ticket: reply.ticket,
            participants: plan.clients.len(),
        };
        let words = privatize(
            &privacy.0,
            &invitation,
            self.client.id(),
            &reply.scalars,
            noise_seed,
        )?;
        Ok(PyArray1::from_vec(py, words))
    }
}

/// `privacy`'s SecAgg+ input for `client`'s `scalars` of `invitation`'s round: noise from the
/// operating system, or from `noise_seed` (experiments only).
fn privatize(
    privacy: &Privacy,
    invitation: &Invitation,
    client: usize,
    scalars: &[f32],
    noise_seed: Option<u64>,
) -> PyResult<Vec<u32>> {
    match noise_seed {
        Some(seed) => {
            let mut rng = SeedTree::new(seed).stream(
                "scalar_fl/privacy-noise",
                &[invitation.round, client as u64],
            );
            privacy.privatize(invitation, scalars, &mut rng)
        }
        None => privacy.privatize(invitation, scalars, &mut secret_rng(None)),
    }
    .map_err(errors::protocol)
}

impl PyClient {
    /// The plan's local steps with the Python ``loss``: the reply (an exception in ``loss``
    /// propagates unchanged and leaves the client as it was).
    fn run_local_update(&mut self, plan: &RoundPlan, loss: Bound<'_, PyAny>) -> PyResult<Reply> {
        let loss = loss.unbind();
        let failure: Mutex<Option<PyErr>> = Mutex::new(None);
        let call = |step: usize, x: &[f64]| -> f64 {
            Python::attach(|py| {
                let result = loss
                    .call1(py, (step, PyArray1::from_slice(py, x)))
                    .and_then(|v| v.extract::<f64>(py));
                match result {
                    Ok(v) => v,
                    Err(e) => {
                        if let Ok(mut slot) = failure.lock() {
                            slot.get_or_insert(e);
                        }
                        f64::NAN
                    }
                }
            })
        };
        let result = self
            .client
            .local_update(plan, &self.spec, self.probe, &call);
        if let Some(e) = failure.into_inner().ok().flatten() {
            return Err(e);
        }
        result.map_err(errors::protocol)
    }
}

/// What a :class:`Participant` must do to its model to hold a catch-up's round: ``kind`` is
/// ``"up_to_date"``, ``"replay"`` (apply :attr:`rounds` records with
/// :meth:`Participant.replay`) or ``"full"`` (load :attr:`x`, and :attr:`h` for HiSo).
#[pyclass(module = "privopt.protocols.scalar_fl", name = "Catch", frozen)]
pub struct PyCatch(Catch);

#[pymethods]
impl PyCatch {
    /// ``"up_to_date"``, ``"replay"`` or ``"full"``.
    #[getter]
    fn kind(&self) -> &'static str {
        match self.0 {
            Catch::UpToDate => "up_to_date",
            Catch::Replay(_) => "replay",
            Catch::Full(_) => "full",
        }
    }

    /// Rounds a replay advances (0 otherwise).
    #[getter]
    fn rounds(&self) -> usize {
        match &self.0 {
            Catch::Replay(records) => records.len(),
            _ => 0,
        }
    }

    /// The full state's parameters (``None`` unless ``kind == "full"``).
    #[getter]
    fn x<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray1<f64>>> {
        match &self.0 {
            Catch::Full(state) => Some(array(py, state.x.clone())),
            _ => None,
        }
    }

    /// The full state's HiSo Hessian diagonal (``None`` for DeComFL or unless ``"full"``).
    #[getter]
    fn h<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray1<f64>>> {
        match &self.0 {
            Catch::Full(state) => state.h.clone().map(|h| array(py, h)),
            _ => None,
        }
    }

    fn __repr__(&self) -> String {
        format!("Catch(kind={:?}, rounds={})", self.kind(), self.rounds())
    }
}

/// The protocol half of a client whose model lives outside privopt (``privopt.torch`` keeps it
/// in a module's tensors): it checks every message as :class:`Client` does and does the
/// arithmetic on windows of the model, so a model stored in pieces is trained, perturbed and
/// caught up piece by piece to :class:`Client`'s values. ``dim`` is the model's length.
///
/// The model is handed over as a list of contiguous ``float64`` or ``float32`` arrays in order
/// (views of a module's tensors; other dtypes as ``float64`` copies with ``offset`` saying
/// where they start), worked on in chunks of 2^20 coordinates.
///
/// Per round: :meth:`receive` the catch-up and apply it (:meth:`replay`, or load the full
/// state) → :meth:`accept` the plan → per local step and perturbation, :meth:`perturb`,
/// evaluate, perturb back → :meth:`local_step` between steps → :meth:`reply` with the
/// scalars.
#[pyclass(module = "privopt.protocols.scalar_fl", name = "Participant")]
pub struct PyParticipant {
    participant: Participant,
    spec: ReplaySpec,
    dim: usize,
    accepted: Option<(Invitation, Vec<u64>)>,
    scratch: Scratch,
    buf: Vec<f64>,
}

impl PyParticipant {
    fn hiso(&self) -> bool {
        matches!(self.spec.rule, Rule::Hiso { .. })
    }

    /// Checks that `parts` from `offset` lie inside the model and that `h` (the whole
    /// Hessian diagonal, HiSo only) is given exactly when the rule has one.
    fn check(&self, offset: usize, parts: &[Part<'_>], h: Option<usize>) -> PyResult<()> {
        let len: usize = parts.iter().map(Part::len).sum();
        if offset.checked_add(len).is_none_or(|end| end > self.dim) {
            return Err(errors::parameter(format!(
                "coordinates {offset}..{} are outside the model's {} parameters",
                offset.saturating_add(len),
                self.dim
            )));
        }
        match (h, self.hiso()) {
            (None, false) => Ok(()),
            (Some(n), true) if n == self.dim => Ok(()),
            (Some(n), true) => Err(errors::parameter(format!(
                "h has {n} values; the Hessian diagonal has the model's {}",
                self.dim
            ))),
            (None, true) => Err(errors::parameter(
                "the HiSo rule needs h, the Hessian diagonal",
            )),
            (Some(_), false) => Err(errors::parameter("the DeComFL rule takes no h")),
        }
    }

    /// The accepted plan's invitation and seeds.
    fn accepted(&self) -> PyResult<&(Invitation, Vec<u64>)> {
        self.accepted.as_ref().ok_or_else(|| {
            errors::protocol(privopt_protocols::ProtocolError::OutOfOrder(
                "no plan accepted: call accept(plan) first".into(),
            ))
        })
    }

    /// The accepted invitation and `scalars` in `f32`, checked: the round's count, finite.
    fn checked(&self, scalars: &[f64]) -> PyResult<(Invitation, Vec<f32>)> {
        let invitation = self.accepted()?.0;
        if scalars.len() != self.spec.scalars_per_round() {
            return Err(errors::parameter(format!(
                "a reply carries {} scalars, got {}",
                self.spec.scalars_per_round(),
                scalars.len()
            )));
        }
        if scalars.iter().any(|g| !g.is_finite()) {
            return Err(errors::protocol(
                privopt_protocols::ProtocolError::Diverged {
                    round: invitation.round,
                    what: format!("client {}'s directional derivative", self.participant.id()),
                },
            ));
        }
        Ok((invitation, scalars.iter().map(|&g| g as f32).collect()))
    }

    fn plan(&self, step: usize) -> PyResult<(u64, u64)> {
        let (invitation, seeds) = self.accepted()?;
        let seed = seeds.get(step).ok_or_else(|| {
            errors::parameter(format!(
                "step {step} is outside the plan's {} local steps",
                seeds.len()
            ))
        })?;
        Ok((*seed, invitation.round))
    }
}

#[pymethods]
impl PyParticipant {
    #[new]
    #[pyo3(signature = (id, spec, dim, round = 0))]
    fn new(id: usize, spec: &PySpec, dim: usize, round: u64) -> PyResult<Self> {
        if dim == 0 {
            return Err(errors::parameter("dim must be at least 1"));
        }
        Ok(Self {
            participant: Participant::new(id, round),
            spec: spec.0,
            dim,
            accepted: None,
            scratch: Scratch::default(),
            buf: Vec::new(),
        })
    }

    /// The client's id.
    #[getter]
    fn id(&self) -> usize {
        self.participant.id()
    }

    /// The round whose starting model the client holds.
    #[getter]
    fn round(&self) -> u64 {
        self.participant.round()
    }

    /// The model's length.
    #[getter]
    fn dim(&self) -> usize {
        self.dim
    }

    /// Checks the server's catch-up message and returns what to apply. The participant then
    /// holds the catch-up's round: apply the :class:`Catch` before anything else.
    fn receive(&mut self, message: &[u8]) -> PyResult<PyCatch> {
        let msg = CatchUp::from_bytes(message).map_err(errors::decode)?;
        let hiso = self.hiso();
        let catch = self
            .participant
            .receive(msg, &self.spec, self.dim, hiso)
            .map_err(errors::protocol)?;
        self.accepted = None;
        Ok(PyCatch(catch))
    }

    /// Advances the model stored in ``xs`` (``float64``/``float32`` arrays in order, from
    /// coordinate ``offset``; ``h`` the whole Hessian diagonal for HiSo, updated too) by every
    /// record of a replay, in place.
    #[pyo3(signature = (catch, xs, h = None, offset = 0))]
    fn replay(
        &mut self,
        py: Python<'_>,
        catch: &PyCatch,
        xs: Vec<Bound<'_, PyAny>>,
        mut h: Option<PyReadwriteArray1<'_, f64>>,
        offset: usize,
    ) -> PyResult<()> {
        let Catch::Replay(records) = &catch.0 else {
            return Ok(());
        };
        let mut guards = borrow_parts(&xs)?;
        let mut parts = parts(&mut guards)?;
        let mut h = match h.as_mut() {
            Some(h) => Some(
                h.as_slice_mut()
                    .map_err(|_| errors::parameter("h must be a contiguous float64 array"))?,
            ),
            None => None,
        };
        self.check(offset, &parts, h.as_ref().map(|h| h.len()))?;
        let (spec, scratch, buf) = (&self.spec, &mut self.scratch, &mut self.buf);
        py.detach(|| {
            for_each_chunk(&mut parts, offset, buf, |pos, x| {
                let mut hw = h.as_deref_mut().map(|h| &mut h[pos..pos + x.len()]);
                for rec in records {
                    apply_record(rec, spec, pos, x, hw.as_deref_mut(), scratch);
                }
            });
        });
        Ok(())
    }

    /// Checks that the plan asks this client to train the round it holds; returns the seeds of
    /// its local steps.
    fn accept(&mut self, plan: &[u8]) -> PyResult<Vec<u64>> {
        let plan = RoundPlan::from_bytes(plan).map_err(errors::decode)?;
        let invitation = self
            .participant
            .accept(&plan, &self.spec)
            .map_err(errors::protocol)?;
        self.accepted = Some((invitation, plan.seeds.clone()));
        Ok(plan.seeds)
    }

    /// ``x += t · H^{-1/2} u`` over the model stored in ``xs`` (as in :meth:`replay`), ``u``
    /// the direction of perturbation ``p`` of local step ``step`` of the accepted plan (``h``:
    /// the Hessian diagonal at the round's start, HiSo only). ``t = mu`` probes, ``t = -mu``
    /// restores.
    #[pyo3(signature = (step, p, t, xs, h = None, offset = 0))]
    #[allow(clippy::too_many_arguments)]
    fn perturb(
        &mut self,
        py: Python<'_>,
        step: usize,
        p: usize,
        t: f64,
        xs: Vec<Bound<'_, PyAny>>,
        h: Option<PyReadonlyArray1<'_, f64>>,
        offset: usize,
    ) -> PyResult<()> {
        let (seed, round) = self.plan(step)?;
        if p >= self.spec.perturbations {
            return Err(errors::parameter(format!(
                "perturbation {p} is outside the spec's {}",
                self.spec.perturbations
            )));
        }
        let (h, mut guards) = (readonly(&h)?, borrow_parts(&xs)?);
        let mut parts = parts(&mut guards)?;
        self.check(offset, &parts, h.map(<[f64]>::len))?;
        let (scratch, buf) = (&mut self.scratch, &mut self.buf);
        py.detach(|| {
            for_each_chunk(&mut parts, offset, buf, |pos, x| match h {
                Some(h) => {
                    scratch.ensure(x.len());
                    load_preconditioner(Some(&h[pos..pos + x.len()]), x.len(), scratch);
                    perturb(seed, round, step, p, t, pos, x, Some(&scratch.h_inv_sqrt));
                }
                None => perturb(seed, round, step, p, t, pos, x, None),
            });
        });
        Ok(())
    }

    /// Local step ``step``'s update of the model stored in ``xs`` (as in :meth:`replay`) from
    /// its ``P`` scalars (rounded to ``float32`` as the reply carries them):
    /// ``x ← x − lr·(Δx + λx)``, or back again with ``undo=True`` (to rounding), so a client
    /// that trained in place returns to the round's start.
    #[pyo3(signature = (step, scalars, xs, h = None, offset = 0, undo = false))]
    #[allow(clippy::too_many_arguments)]
    fn local_step(
        &mut self,
        py: Python<'_>,
        step: usize,
        scalars: Vec<f64>,
        xs: Vec<Bound<'_, PyAny>>,
        h: Option<PyReadonlyArray1<'_, f64>>,
        offset: usize,
        undo: bool,
    ) -> PyResult<()> {
        let (seed, round) = self.plan(step)?;
        if scalars.len() != self.spec.perturbations {
            return Err(errors::parameter(format!(
                "local step {step} takes {} scalars, got {}",
                self.spec.perturbations,
                scalars.len()
            )));
        }
        let scalars: Vec<f32> = scalars.iter().map(|&g| g as f32).collect();
        let (h, mut guards) = (readonly(&h)?, borrow_parts(&xs)?);
        let mut parts = parts(&mut guards)?;
        self.check(offset, &parts, h.map(<[f64]>::len))?;
        let (spec, scratch, buf) = (&self.spec, &mut self.scratch, &mut self.buf);
        py.detach(|| {
            for_each_chunk(&mut parts, offset, buf, |pos, x| {
                scratch.ensure(x.len());
                load_preconditioner(h.map(|h| &h[pos..pos + x.len()]), x.len(), scratch);
                step_delta(seed, round, step, &scalars, pos, scratch);
                if undo {
                    spec.unstep(x, &scratch.delta);
                } else {
                    spec.step(x, &scratch.delta);
                }
            });
        });
        Ok(())
    }

    /// The reply to the accepted plan with the round's ``local_steps · perturbations`` scalars
    /// (step-major); a scalar that is not finite raises :class:`~privopt.errors.ProtocolError`
    /// (the client diverged) and nothing is sent.
    fn reply<'py>(&mut self, py: Python<'py>, scalars: Vec<f64>) -> PyResult<Bound<'py, PyBytes>> {
        let (invitation, scalars) = self.checked(&scalars)?;
        let reply = self.participant.reply(invitation, scalars);
        self.accepted = None;
        Ok(bytes(py, &reply))
    }

    /// The private reply to the accepted plan: the scalars clipped, noised with this client's
    /// share and quantized (``privacy``, which must be the server's), as the ``uint32`` input
    /// of the round's SecAgg+. The noise comes from the operating system's randomness;
    /// ``noise_seed`` makes it reproducible, for experiments only (anyone who knows the seed
    /// can remove it).
    #[pyo3(signature = (scalars, privacy, *, noise_seed = None))]
    fn private_reply<'py>(
        &mut self,
        py: Python<'py>,
        scalars: Vec<f64>,
        privacy: &PyPrivacy,
        noise_seed: Option<u64>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let (invitation, scalars) = self.checked(&scalars)?;
        let words = privatize(
            &privacy.0,
            &invitation,
            self.participant.id(),
            &scalars,
            noise_seed,
        )?;
        self.accepted = None;
        Ok(PyArray1::from_vec(py, words))
    }
}

/// The participants a round plan names, ascending: a participant's private reply carries a
/// noise share sized for that many (see :meth:`Privacy.required_contributors`), so it checks
/// the SecAgg+ round it joins against them.
#[pyfunction]
fn round_participants(plan: &[u8]) -> PyResult<Vec<usize>> {
    Ok(RoundPlan::from_bytes(plan).map_err(errors::decode)?.clients)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(round_participants, m)?)?;
    m.add_class::<PySpec>()?;
    m.add_class::<PyServer>()?;
    m.add_class::<PyClient>()?;
    m.add_class::<PyCatch>()?;
    m.add_class::<PyParticipant>()?;
    m.add_class::<PyPrivacy>()?;
    crate::add_defaults(
        m,
        &[
            ("mu", defaults::MU),
            ("nu", defaults::NU),
            ("eps", defaults::HESSIAN_EPS),
            ("weight_decay", defaults::WEIGHT_DECAY),
        ],
    )
}
