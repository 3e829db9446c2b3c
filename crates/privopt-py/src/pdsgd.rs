//! `privopt.protocols.pdsgd`: the agent of Paillier decentralized SGD's pairwise encrypted
//! exchange (the Paillier D-SGD paper, Fig. 1), driven by bytes. Each agent owns its Paillier key pair and
//! holds only its neighbours' public keys and its private weights towards them.

use numpy::PyArray1;
use privopt_math::sample::secret_rng;
use privopt_protocols::pdsgd::{Agent, KeyAnnouncement, MAX_DIM, Paillier, Schedule};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rand::Rng;

use crate::errors;
use crate::numpy_io::{Exact, array, exact_vec};
use crate::paillier::generate_key_pair;

/// Agent ``id`` with a fresh Paillier key pair of ``bits`` (1024 only with ``insecure=True``).
///
/// An exchange over the edge (i, j) in an iteration: i sends :meth:`initiate` (its negated
/// quantized state under its own key); j answers with :meth:`respond` (its own state and its
/// private weight applied under i's key); i calls :meth:`finish` and gets
/// ``w_ij · w_ji · (x_j − x_i)`` per coordinate, learning neither j's state nor j's weight.
#[pyclass(module = "privopt.protocols.pdsgd", name = "Agent")]
pub struct PyAgent(Agent<Paillier>);

#[pymethods]
impl PyAgent {
    #[new]
    #[pyo3(signature = (id, bits = 2048, insecure = false))]
    fn new(py: Python<'_>, id: usize, bits: u32, insecure: bool) -> PyResult<Self> {
        let pair = generate_key_pair(py, bits, insecure)?;
        Ok(Self(Agent::new(id, pair.public.clone(), pair)))
    }

    /// The agent's id.
    #[getter]
    fn id(&self) -> usize {
        self.0.id()
    }

    /// The agent's whole state (key pair, neighbours' keys, private weights, open exchanges)
    /// as bytes, so another process can :meth:`restore` it: keep them as secret as the agent.
    fn save<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.save())
    }

    /// The agent :meth:`save` wrote; raises on damaged or inconsistent bytes.
    #[staticmethod]
    fn restore(state: &[u8]) -> PyResult<Self> {
        Ok(Self(Agent::restore(state).map_err(errors::decode)?))
    }

    /// The agent's public key, for its neighbours' :meth:`add_neighbour`.
    #[getter]
    fn announcement<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.announcement().to_bytes::<Paillier>())
    }

    /// Accepts a neighbour by its announcement, with this agent's private weight integer
    /// ``k_ij >= 1`` towards it (the weight is ``k_ij · delta``).
    fn add_neighbour(&mut self, announcement: &[u8], weight: i64) -> PyResult<()> {
        let key = KeyAnnouncement::from_bytes::<Paillier>(announcement).map_err(errors::decode)?;
        self.0.add_neighbour(key, weight).map_err(errors::protocol)
    }

    /// Step 1 towards neighbour ``to`` in ``iteration``: the request bytes for the quantized
    /// state ``q`` (``int64``, units of delta).
    fn initiate<'py>(
        &mut self,
        py: Python<'py>,
        to: usize,
        iteration: u64,
        q: Exact<'_, i64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let q = exact_vec(&q);
        let agent = &mut self.0;
        let bytes = py
            .detach(|| {
                agent
                    .initiate(to, iteration, &q, &mut secret_rng(None))
                    .map(|r| agent.encode_request(&r))
            })
            .map_err(errors::protocol)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Step 2: the response bytes to a neighbour's request, with this agent's own quantized
    /// state ``q``.
    fn respond<'py>(
        &self,
        py: Python<'py>,
        request: &[u8],
        q: Exact<'_, i64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let q = exact_vec(&q);
        let request = self.0.decode_request(request).map_err(errors::decode)?;
        let bytes = py
            .detach(|| {
                self.0
                    .respond(&request, &q, &mut secret_rng(None))
                    .and_then(|r| self.0.encode_response(&r))
            })
            .map_err(errors::protocol)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Step 3: decrypts the neighbour's response to the open exchange: ``w_ij · w_ji ·
    /// (x_j − x_i)`` per coordinate for quantization step ``delta``. A bad response raises
    /// and leaves the exchange open for the right one.
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
        response: &[u8],
        delta: f64,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        if !(delta > 0.0 && delta.is_finite()) {
            return Err(errors::parameter(format!("delta must be > 0, got {delta}")));
        }
        let response = self.0.decode_response(response).map_err(errors::decode)?;
        let agent = &mut self.0;
        let out = py
            .detach(|| agent.finish(&response, delta))
            .map_err(errors::protocol)?;
        Ok(array(py, out))
    }

    fn __repr__(&self) -> String {
        format!("Agent(id={}, <secret redacted>)", self.0.id())
    }
}

/// Algorithm 1's schedules, iterations counted from ``k = 1``: the attenuation
/// ``γ^k = 1/(1 + a·k^b)`` of the mixing term and the private random stepsize
/// ``λ₀·k^{−p}·(1 + ζ/k^q)`` per coordinate, ``ζ ~ U[0, 1]``. The defaults are the paper's §4
/// values (``DEFAULTS``; ``lambda0`` is for its sensor problem: scale it to yours).
#[pyclass(module = "privopt.protocols.pdsgd", name = "Schedule", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PySchedule(Schedule);

/// Refuses an iteration before the first.
fn iteration(k: u64) -> PyResult<f64> {
    if k == 0 {
        return Err(errors::parameter("iterations count from 1, got 0"));
    }
    Ok(k as f64)
}

#[pymethods]
impl PySchedule {
    #[new]
    #[pyo3(signature = (
        lambda0 = Schedule::default().lambda0,
        lambda_decay = Schedule::default().lambda_decay,
        zeta_decay = Schedule::default().zeta_decay,
        attenuation_a = Schedule::default().attenuation_a,
        attenuation_b = Schedule::default().attenuation_b,
    ))]
    fn new(
        lambda0: f64,
        lambda_decay: f64,
        zeta_decay: f64,
        attenuation_a: f64,
        attenuation_b: f64,
    ) -> PyResult<Self> {
        let s = Schedule {
            lambda0,
            lambda_decay,
            zeta_decay,
            attenuation_a,
            attenuation_b,
        };
        s.check().map_err(errors::protocol)?;
        Ok(Self(s))
    }

    #[getter]
    fn lambda0(&self) -> f64 {
        self.0.lambda0
    }
    #[getter]
    fn lambda_decay(&self) -> f64 {
        self.0.lambda_decay
    }
    #[getter]
    fn zeta_decay(&self) -> f64 {
        self.0.zeta_decay
    }
    #[getter]
    fn attenuation_a(&self) -> f64 {
        self.0.attenuation_a
    }
    #[getter]
    fn attenuation_b(&self) -> f64 {
        self.0.attenuation_b
    }

    /// ``γ^k``.
    fn attenuation(&self, k: u64) -> PyResult<f64> {
        Ok(self.0.attenuation(iteration(k)?))
    }

    /// One stepsize at iteration ``k`` for the draw ``zeta`` in [0, 1] (0: the deterministic
    /// part, the conventional algorithm's stepsize).
    fn stepsize(&self, k: u64, zeta: f64) -> PyResult<f64> {
        if !(0.0..=1.0).contains(&zeta) {
            return Err(errors::parameter(format!(
                "zeta must be in [0, 1], got {zeta}"
            )));
        }
        Ok(self.0.stepsize(iteration(k)?, zeta))
    }

    /// ``size`` stepsizes of iteration ``k``, each with its own ``ζ`` from the operating
    /// system's entropy (an agent's private draw: nobody can recompute it).
    fn stepsizes<'py>(
        &self,
        py: Python<'py>,
        k: u64,
        size: usize,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let k = iteration(k)?;
        if size > MAX_DIM {
            return Err(errors::parameter(format!(
                "size must be at most {MAX_DIM}, got {size}"
            )));
        }
        let mut rng = secret_rng(None);
        let steps = (0..size)
            .map(|_| self.0.stepsize(k, rng.random::<f64>()))
            .collect();
        Ok(array(py, steps))
    }

    fn __repr__(&self) -> String {
        let s = &self.0;
        format!(
            "Schedule(lambda0={}, lambda_decay={}, zeta_decay={}, attenuation_a={}, attenuation_b={})",
            s.lambda0, s.lambda_decay, s.zeta_decay, s.attenuation_a, s.attenuation_b
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAgent>()?;
    m.add_class::<PySchedule>()?;
    let d = Schedule::default();
    crate::add_defaults(
        m,
        &[
            ("lambda0", d.lambda0),
            ("lambda_decay", d.lambda_decay),
            ("zeta_decay", d.zeta_decay),
            ("attenuation_a", d.attenuation_a),
            ("attenuation_b", d.attenuation_b),
        ],
    )?;
    Ok(())
}
