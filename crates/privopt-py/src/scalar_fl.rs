//! `privopt.protocols.scalar_fl`: DeComFL/HiSo server and client driven by bytes, with the
//! client's loss a Python callable (numpy, torch, anything that returns a float).

use std::sync::Mutex;

use numpy::PyArray1;
use privopt_math::sample::secret_rng;
use privopt_ml::zo::Difference;
use privopt_protocols::Message;
use privopt_protocols::scalar_fl::{
    CatchUp, Client, ModelState, Probe, ReplaySpec, Reply, RoundPlan, Rule, Server,
};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::errors;
use crate::numpy_io::{Reals, array, to_vec};

/// What server and clients must agree on to replay a round: learning rate, local steps,
/// perturbations per step, weight decay (``x ← x − lr·(Δx + weight_decay·x)``), and the rule (``"decomfl"``: ``u ~ N(0, I)``; ``"hiso"``:
/// directions shaped by a learned diagonal Hessian with EMA weight ``nu`` and floor ``eps``).
#[pyclass(module = "privopt.protocols.scalar_fl", name = "Spec", frozen)]
#[derive(Clone)]
pub struct PySpec(ReplaySpec);

#[pymethods]
impl PySpec {
    #[new]
    #[pyo3(signature = (lr, local_steps = 1, perturbations = 1, rule = "decomfl", nu = 0.01, eps = 1e-8, weight_decay = 0.0))]
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

    fn __repr__(&self) -> String {
        format!("Spec({:?})", self.0)
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
    rng: ChaCha20Rng,
    accepted: Vec<Reply>,
}

#[pymethods]
impl PyServer {
    /// A server for ``clients`` clients starting from ``x0``. A client more than
    /// ``staleness_bound`` rounds behind gets the full model instead of a replay. ``seed``
    /// makes participant and direction sampling reproducible.
    #[new]
    #[pyo3(signature = (spec, x0, clients, staleness_bound = None, seed = None))]
    fn new(
        spec: &PySpec,
        x0: Reals<'_>,
        clients: usize,
        staleness_bound: Option<u64>,
        seed: Option<u64>,
    ) -> PyResult<Self> {
        let state = initial(&x0, &spec.0)?;
        let server =
            Server::new(spec.0, state, clients, staleness_bound).map_err(errors::protocol)?;
        Ok(Self {
            server,
            rng: seed.map_or_else(|| secret_rng(None), ChaCha20Rng::seed_from_u64),
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

    /// Opens a round with ``per_round`` participants: ``(plan bytes, participant ids)``.
    fn begin_round<'py>(
        &mut self,
        py: Python<'py>,
        per_round: usize,
    ) -> PyResult<(Bound<'py, PyBytes>, Vec<usize>)> {
        let plan = self
            .server
            .begin_round(per_round, &mut self.rng)
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
    #[pyo3(signature = (id, spec, x0, mu = 1e-3, difference = "forward"))]
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
            .local_update(&plan, &self.spec, self.probe, &call);
        if let Some(e) = failure.into_inner().ok().flatten() {
            return Err(e);
        }
        let reply = result.map_err(errors::protocol)?;
        Ok(bytes(py, &reply))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySpec>()?;
    m.add_class::<PyServer>()?;
    m.add_class::<PyClient>()?;
    Ok(())
}
