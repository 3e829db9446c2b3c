//! `privopt.protocols.dpfhe`: DP training under FHE (the FHE paper, Algorithms 4 and 5): the data
//! owner (secret key, encrypts its batches and pre-sampled noise) and the compute server
//! (evaluation keys only, runs each step on ciphertexts), driven by bytes. Until
//! bootstrapping lands, the server's step pauses with a refresh request when a ciphertext runs
//! out of levels; the owner answers it.

use std::sync::Arc;

use numpy::{PyArray1, PyReadonlyArray2};
use privopt_approx::functions::sigmoid;
use privopt_approx::{ChebPoly, Interval, least_squares};
use privopt_ckks::eval::{EvalContext, GaloisKeys};
use privopt_math::sample::secret_rng;
use privopt_ml::data::Dataset;
use privopt_protocols::dpfhe::{
    Barrier, ClipCircuit, ComputeServer, DataOwner, EncryptedStep, Layout, Refresh, Step,
    StepStatus, TrainingCircuit, Weights, galois_key_from_bytes, galois_keys_to_messages,
    relin_key_from_bytes, relin_key_to_bytes,
};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::ckks::PyContext;
use crate::errors;
use crate::numpy_io::{Reals, array, to_vec};

/// A least-squares Chebyshev fit of `f` on `[lo, hi]`.
fn fit(f: impl Fn(f64) -> f64, lo: f64, hi: f64, degree: usize) -> PyResult<ChebPoly> {
    Interval::new(lo, hi)
        .and_then(|interval| least_squares(f, interval, degree))
        .map_err(|e| errors::parameter(e.to_string()))
}

/// One training step's circuit, which owner and server must agree on: ``d`` features (bias
/// included) and ``batch`` examples per step packed in ``ctx``'s slots, learning rate ``lr``,
/// the sigmoid fitted by a degree-``sigmoid_degree`` polynomial on ``[-sigmoid_bound,
/// sigmoid_bound]``, and either Algorithm 5's barrier (``barrier=(lambda, theta, kappa,
/// degree)``: penalty ``λ``, threshold ``Θ`` on ``‖w‖²``, ``1/x`` fitted on ``[κΘ, Θ]``) or
/// Algorithm 4's polynomial clipping (``clip=(C, s_max)``), or neither (plain encrypted GD).
#[pyclass(module = "privopt.protocols.dpfhe", name = "Circuit", frozen)]
pub struct PyCircuit(TrainingCircuit);

#[pymethods]
impl PyCircuit {
    #[new]
    #[pyo3(signature = (
        ctx, d, batch, lr, sigmoid_degree = 7, sigmoid_bound = 8.0, barrier = None, clip = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        ctx: &PyContext,
        d: usize,
        batch: usize,
        lr: f64,
        sigmoid_degree: usize,
        sigmoid_bound: f64,
        barrier: Option<(f64, f64, f64, usize)>,
        clip: Option<(f64, f64)>,
    ) -> PyResult<Self> {
        if !(lr > 0.0 && lr.is_finite()) {
            return Err(errors::parameter(format!("lr must be > 0, got {lr}")));
        }
        if barrier.is_some() && clip.is_some() {
            return Err(errors::parameter(
                "choose Algorithm 5 (barrier) or Algorithm 4 (clip), not both",
            ));
        }
        let layout = Layout::new(d, batch, ctx.0.slots()).map_err(errors::protocol)?;
        let barrier = match barrier {
            None => None,
            Some((lambda, theta, kappa, degree)) => {
                if !(lambda >= 0.0 && theta > 0.0 && kappa > 0.0 && kappa < 1.0) {
                    return Err(errors::parameter(format!(
                        "barrier needs λ ≥ 0, Θ > 0 and κ in (0, 1); got ({lambda}, {theta}, {kappa})"
                    )));
                }
                Some(Barrier {
                    lambda,
                    theta,
                    reciprocal: fit(|x| 1.0 / x, kappa * theta, theta, degree)?,
                })
            }
        };
        let clip = clip
            .map(|(c, s_max)| ClipCircuit::new(c, s_max).map_err(errors::protocol))
            .transpose()?;
        Ok(Self(TrainingCircuit {
            layout,
            sigmoid: fit(sigmoid, -sigmoid_bound, sigmoid_bound, sigmoid_degree)?,
            lr,
            barrier,
            clip,
            // Bootstrapping is not exposed to Python yet: the bound is never used.
            weight_bound: f64::INFINITY,
        }))
    }

    /// Real slots per example block.
    #[getter]
    fn block(&self) -> usize {
        self.0.layout.block
    }
}

/// The data owner: generates the keys, sends the server the evaluation keys
/// (:meth:`evaluation_keys`), the initial weights and each step's encrypted batch; answers
/// refresh requests; decrypts the final weights.
#[pyclass(module = "privopt.protocols.dpfhe", name = "DataOwner")]
pub struct PyDataOwner {
    owner: DataOwner,
    ctx: Arc<EvalContext>,
    layout: Layout,
}

#[pymethods]
impl PyDataOwner {
    #[new]
    fn new(py: Python<'_>, ctx: &PyContext, circuit: &PyCircuit) -> Self {
        let ctx = Arc::clone(&ctx.0);
        let layout = circuit.0.layout;
        let owner = py.detach(|| DataOwner::new(&ctx, layout, secret_rng(None)));
        Self { owner, ctx, layout }
    }

    /// The owner's keys as bytes, so another process can :meth:`restore` it: they hold the
    /// secret key, keep them as secret as the owner.
    fn save<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.owner.save())
    }

    /// The owner :meth:`save` wrote, for ``ctx`` and ``circuit``.
    #[staticmethod]
    fn restore(
        py: Python<'_>,
        ctx: &PyContext,
        circuit: &PyCircuit,
        state: &[u8],
    ) -> PyResult<Self> {
        let ctx = Arc::clone(&ctx.0);
        let layout = circuit.0.layout;
        let owner = py
            .detach(|| DataOwner::restore(&ctx, layout, state, secret_rng(None)))
            .map_err(errors::decode)?;
        Ok(Self { owner, ctx, layout })
    }

    /// ``(relinearization key, [Galois key messages])`` for the server.
    fn evaluation_keys<'py>(
        &mut self,
        py: Python<'py>,
    ) -> (Bound<'py, PyBytes>, Vec<Bound<'py, PyBytes>>) {
        let (owner, ctx) = (&mut self.owner, &self.ctx);
        let (relin, galois) = py.detach(|| {
            let (relin, galois) = owner.evaluation_keys();
            (
                relin_key_to_bytes(&relin, ctx),
                galois_keys_to_messages(galois, ctx),
            )
        });
        (
            PyBytes::new(py, &relin),
            galois.iter().map(|g| PyBytes::new(py, g)).collect(),
        )
    }

    /// The encrypted initial weights ``w0`` (length ``d``).
    fn encrypt_weights<'py>(
        &mut self,
        py: Python<'py>,
        w0: Reals<'_>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let w0 = to_vec(&w0);
        if w0.len() != self.layout.d {
            return Err(errors::parameter(format!(
                "{} weights for {} features",
                w0.len(),
                self.layout.d
            )));
        }
        let w = self
            .owner
            .encrypt_replicated(&w0)
            .map_err(errors::protocol)?;
        Ok(PyBytes::new(
            py,
            &Weights { step: 0, w }.to_bytes(&self.ctx),
        ))
    }

    /// Step ``step``'s inputs: the batch ``x`` (``batch × d``), its labels ``y`` and the
    /// step's pre-scaled noise ``lr · χ_t`` (length ``d``; zeros for no privacy).
    fn encrypt_step<'py>(
        &mut self,
        py: Python<'py>,
        step: u64,
        x: PyReadonlyArray2<'_, f64>,
        y: Reals<'_>,
        scaled_noise: Reals<'_>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let x = x.as_array();
        let (rows, d) = x.dim();
        let y = to_vec(&y);
        let noise = to_vec(&scaled_noise);
        if d != self.layout.d || rows != self.layout.batch || y.len() != rows || noise.len() != d {
            return Err(errors::parameter(format!(
                "x of {rows} × {d}, {} labels and {} noise values for batches of {} × {}",
                y.len(),
                noise.len(),
                self.layout.batch,
                self.layout.d
            )));
        }
        let data = Dataset::new(x.iter().copied().collect(), y, d, None)
            .map_err(|e| errors::parameter(e.to_string()))?;
        let batch: Vec<usize> = (0..rows).collect();
        let (owner, ctx) = (&mut self.owner, &self.ctx);
        let bytes = py
            .detach(|| {
                owner
                    .encrypt_step(step, &data, &batch, &noise)
                    .map(|s| s.to_bytes(ctx))
            })
            .map_err(errors::protocol)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Answers the server's refresh request (decrypt and re-encrypt at the top level).
    fn refresh<'py>(&mut self, py: Python<'py>, request: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let request = Refresh::from_bytes(&self.ctx, request).map_err(errors::decode)?;
        let (owner, ctx) = (&mut self.owner, &self.ctx);
        let reply = py
            .detach(|| owner.refresh(&request).map(|r| r.to_bytes(ctx)))
            .map_err(errors::protocol)?;
        Ok(PyBytes::new(py, &reply))
    }

    /// The weights in the server's final message.
    fn decrypt_weights<'py>(
        &self,
        py: Python<'py>,
        weights: &[u8],
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let w = Weights::from_bytes(&self.ctx, weights).map_err(errors::decode)?;
        let v = self.owner.decrypt_weights(&w.w).map_err(errors::protocol)?;
        Ok(array(py, v))
    }

    /// Refresh requests answered so far.
    #[getter]
    fn refreshes(&self) -> usize {
        self.owner.refreshes()
    }
}

/// The compute server: evaluation keys and the circuit; never a secret. Per step:
/// :meth:`begin_step` with the current weights and the owner's step message, then call
/// :meth:`advance` until it returns ``("done", weights)``; on ``("refresh", request)`` send the
/// request to the owner and :meth:`resume` with its answer. Weights with fewer levels than a
/// step needs are the first such request.
#[pyclass(module = "privopt.protocols.dpfhe", name = "ComputeServer")]
pub struct PyComputeServer {
    server: ComputeServer,
    ctx: Arc<EvalContext>,
    /// The step in progress and its number.
    current: Option<(Step, u64)>,
}

#[pymethods]
impl PyComputeServer {
    #[new]
    #[pyo3(signature = (ctx, circuit, relin_key, galois_keys, threads = 1))]
    fn new(
        py: Python<'_>,
        ctx: &PyContext,
        circuit: &PyCircuit,
        relin_key: &[u8],
        galois_keys: Vec<Vec<u8>>,
        threads: usize,
    ) -> PyResult<Self> {
        let ctx = Arc::clone(&ctx.0);
        let relin = relin_key_from_bytes(&ctx, relin_key).map_err(errors::decode)?;
        let parts = py
            .detach(|| {
                galois_keys
                    .iter()
                    .map(|m| galois_key_from_bytes(&ctx, m))
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(errors::decode)?;
        let galois = GaloisKeys::merge(parts).map_err(errors::ckks)?;
        let server = ComputeServer::new(&ctx, relin, galois, threads.max(1), circuit.0.clone())
            .map_err(errors::protocol)?;
        Ok(Self {
            server,
            ctx,
            current: None,
        })
    }

    /// Starts a step from the weights message and the owner's step message.
    fn begin_step(&mut self, weights: &[u8], step: &[u8]) -> PyResult<()> {
        if self.current.is_some() {
            return Err(errors::ProtocolError::new_err(
                "a step is still in progress",
            ));
        }
        let w = Weights::from_bytes(&self.ctx, weights).map_err(errors::decode)?;
        let inputs = EncryptedStep::from_bytes(&self.ctx, step).map_err(errors::decode)?;
        let number = inputs.step;
        let step = self
            .server
            .begin_step(w.w, inputs)
            .map_err(errors::protocol)?;
        self.current = Some((step, number));
        Ok(())
    }

    /// Runs the step as far as it can: ``("refresh", request bytes)`` or ``("done", weights
    /// bytes)`` (the next step's weights message).
    fn advance<'py>(&mut self, py: Python<'py>) -> PyResult<(&'static str, Bound<'py, PyBytes>)> {
        let Some((mut step, number)) = self.current.take() else {
            return Err(errors::ProtocolError::new_err(
                "no step in progress: call begin_step",
            ));
        };
        let server = &self.server;
        let status = py.detach(|| server.advance(&mut step));
        match status {
            Err(e) => {
                self.current = Some((step, number));
                Err(errors::protocol(e))
            }
            Ok(StepStatus::NeedsRefresh(request)) => {
                let bytes = request.to_bytes(&self.ctx);
                self.current = Some((step, number));
                Ok(("refresh", PyBytes::new(py, &bytes)))
            }
            Ok(StepStatus::Done { w, .. }) => {
                let msg = Weights {
                    step: number + 1,
                    w,
                };
                Ok(("done", PyBytes::new(py, &msg.to_bytes(&self.ctx))))
            }
        }
    }

    /// Hands the owner's answer to the last refresh request back to the step.
    fn resume(&mut self, reply: &[u8]) -> PyResult<()> {
        let reply = Refresh::from_bytes(&self.ctx, reply).map_err(errors::decode)?;
        match &mut self.current {
            Some((step, _)) => step.resume(reply).map_err(errors::protocol),
            None => Err(errors::ProtocolError::new_err("no refresh was requested")),
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCircuit>()?;
    m.add_class::<PyDataOwner>()?;
    m.add_class::<PyComputeServer>()?;
    Ok(())
}
