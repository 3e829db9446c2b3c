//! `privopt.secagg`: SecAgg+ client and server state machines driven by bytes, the parameter
//! finder, the graph and the quantizer.

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};

use numpy::PyArray1;
use privopt_math::sample::secret_rng;
use privopt_protocols::Message;
use privopt_protocols::secagg::{MAX_CLIENTS, MAX_VECTOR};
use privopt_secagg::{
    AdvertiseKeys, Client, ClientConfig, ClientSnapshot, Context, Graph, IncomingShares,
    MaskedInput, NeighbourKeys, Quantizer, Server, ServerConfig, SessionId, ShareKeys, Stage,
    StochasticQuantizer, ThreatModel, UnmaskLedger, UnmaskRequest, UnmaskShares, find_parameters,
};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rand::RngCore;

use crate::errors;
use crate::numpy_io::{Exact, Reals, array, exact_vec, slice_or_copy, to_vec};

/// The stage's name in Python.
fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::AdvertiseKeys => "advertise_keys",
        Stage::ShareKeys => "share_keys",
        Stage::MaskedInput => "masked_input",
        Stage::Unmask => "unmask",
        Stage::Done => "done",
    }
}

/// The round's context from Python arguments.
fn context(session: &[u8], round: u64) -> PyResult<Context> {
    let session: [u8; 16] = session.try_into().map_err(|_| {
        errors::parameter(format!("session must be 16 bytes, got {}", session.len()))
    })?;
    Ok(Context {
        session: SessionId(session),
        round,
    })
}

fn check_vector_len(vector_len: usize) -> PyResult<()> {
    if !(1..=MAX_VECTOR).contains(&vector_len) {
        return Err(errors::parameter(format!(
            "vector_len must be in 1..={MAX_VECTOR}, got {vector_len}"
        )));
    }
    Ok(())
}

fn decode<T: Message>(data: &[u8]) -> PyResult<T> {
    T::from_bytes(data).map_err(errors::decode)
}

/// A degree and threshold for a number of clients: 2^-40 security against the corrupt
/// fraction, 2^-20 failure probability with the dropout fraction.
#[pyclass(module = "privopt.secagg", name = "GraphParameters", frozen, get_all)]
pub struct PyGraphParameters {
    /// Number of clients.
    clients: usize,
    /// Neighbours per client (``clients - 1``: the complete graph).
    degree: usize,
    /// Shares needed to reconstruct a secret.
    threshold: usize,
}

#[pymethods]
impl PyGraphParameters {
    fn __repr__(&self) -> String {
        format!(
            "GraphParameters(clients={}, degree={}, threshold={})",
            self.clients, self.degree, self.threshold
        )
    }
}

/// The smallest degree and its threshold that meet SecAgg+'s targets for ``clients`` clients
/// of which ``dropout_rate`` may drop and ``corrupt_rate`` may collude with the server.
#[pyfunction]
#[pyo3(signature = (clients, dropout_rate = 0.1, corrupt_rate = 0.1))]
fn parameters(clients: usize, dropout_rate: f64, corrupt_rate: f64) -> PyResult<PyGraphParameters> {
    let p = find_parameters(
        clients,
        ThreatModel {
            dropout_rate,
            corrupt_rate,
        },
    )
    .map_err(errors::secagg)?;
    Ok(PyGraphParameters {
        clients: p.clients,
        degree: p.degree,
        threshold: p.threshold,
    })
}

/// Who masks with whom: the complete graph (original SecAgg) or a Harary graph of even degree
/// over a random ring order (SecAgg+).
#[pyclass(module = "privopt.secagg", name = "Graph", frozen)]
pub struct PyGraph(Graph);

#[pymethods]
impl PyGraph {
    /// The complete graph on ``n`` clients.
    #[staticmethod]
    fn complete(n: usize) -> PyResult<Self> {
        Graph::complete(n).map(Self).map_err(errors::secagg)
    }

    /// A Harary graph of ``degree`` on ``n`` clients, its ring order drawn from the 32-byte
    /// ``seed`` (random if omitted; every party must use the server's).
    #[staticmethod]
    #[pyo3(signature = (n, degree, seed = None))]
    fn harary(n: usize, degree: usize, seed: Option<&[u8]>) -> PyResult<Self> {
        let seed: [u8; 32] = match seed {
            Some(s) => s.try_into().map_err(|_| {
                errors::parameter(format!("seed must be 32 bytes, got {}", s.len()))
            })?,
            None => {
                let mut s = [0u8; 32];
                secret_rng(None).fill_bytes(&mut s);
                s
            }
        };
        if n > MAX_CLIENTS as usize {
            return Err(errors::parameter(format!(
                "at most {MAX_CLIENTS} clients, got {n}"
            )));
        }
        Graph::harary(n, degree, seed)
            .map(Self)
            .map_err(errors::secagg)
    }

    /// Neighbours per client.
    #[getter]
    fn degree(&self) -> usize {
        self.0.degree()
    }

    fn __len__(&self) -> usize {
        self.0.len()
    }

    /// The neighbours of ``client``, increasing.
    fn neighbours(&self, client: u32) -> PyResult<Vec<u32>> {
        if client as usize >= self.0.len() {
            return Err(errors::parameter(format!(
                "client {client} is not in a graph of {}",
                self.0.len()
            )));
        }
        Ok(self.0.neighbours(client).to_vec())
    }
}

/// Flower's SecAgg+ quantization (``flwr.common.secure_aggregation.quantization.quantize``):
/// reals clipped to ``[-clipping_range, clipping_range]``, mapped onto
/// ``0..=quantization_range`` and rounded up with probability the fractional part.
#[pyclass(module = "privopt.secagg", name = "StochasticQuantizer", frozen)]
pub struct PyStochasticQuantizer(StochasticQuantizer);

#[pymethods]
impl PyStochasticQuantizer {
    #[new]
    #[pyo3(signature = (clipping_range, quantization_range))]
    fn new(clipping_range: f64, quantization_range: u32) -> PyResult<Self> {
        StochasticQuantizer::new(clipping_range, quantization_range)
            .map(Self)
            .map_err(errors::secagg)
    }

    /// ``uint32`` words of ``multiplier * values`` (the rounding's randomness from the
    /// operating system); a NaN or infinite value raises
    /// :class:`~privopt.errors.ParameterError` naming its index.
    #[pyo3(signature = (values, multiplier = 1.0))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        values: Reals<'_>,
        multiplier: f64,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let values = to_vec(&values);
        let words = py
            .detach(|| self.0.encode(&values, multiplier, &mut secret_rng(None)))
            .map_err(errors::secagg)?;
        Ok(array(py, words))
    }
}

/// Reals clipped to ``[-clip, clip]`` and mapped to ``uint32`` so that up to ``max_summands``
/// of them sum modulo 2^32 without wrapping; :meth:`decode_sum` maps the sum back.
#[pyclass(module = "privopt.secagg", name = "Quantizer", frozen)]
pub struct PyQuantizer(Quantizer);

#[pymethods]
impl PyQuantizer {
    #[new]
    fn new(clip: f64, max_summands: usize) -> PyResult<Self> {
        Quantizer::new(clip, max_summands)
            .map(Self)
            .map_err(errors::secagg)
    }

    /// The clipping bound.
    #[getter]
    fn clip(&self) -> f64 {
        self.0.clip()
    }

    /// Most summands the encoding leaves room for.
    #[getter]
    fn max_summands(&self) -> usize {
        self.0.max_summands()
    }

    /// ``uint32`` words of ``values``: clipped, scaled, rounded to nearest; a NaN or infinite
    /// value raises :class:`~privopt.errors.ParameterError` naming its index.
    fn encode<'py>(
        &self,
        py: Python<'py>,
        values: Reals<'_>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let words = self.0.encode(&to_vec(&values)).map_err(errors::secagg)?;
        Ok(array(py, words))
    }

    /// The reals whose encodings sum to ``total`` (modulo 2^32).
    fn decode_sum<'py>(&self, py: Python<'py>, total: Exact<'_, u32>) -> Bound<'py, PyArray1<f64>> {
        array(py, self.0.decode_sum(&exact_vec(&total)))
    }

    /// Largest error of a decoded sum of ``summands`` encodings, per coordinate.
    fn sum_error_bound(&self, summands: usize) -> f64 {
        self.0.sum_error_bound(summands)
    }
}

/// The unmask answers released by this process's clients, so that two clients restored from
/// one snapshot cannot answer two survivor lists (docs/security.md).
static UNMASK_LEDGER: LazyLock<Mutex<UnmaskLedger>> = LazyLock::new(Mutex::default);

/// One client in one SecAgg+ round. Construct it, send :attr:`advertisement` to the server,
/// then answer each server message with the method of the stage (or :meth:`handle`). A
/// refused message raises and leaves the client as it was.
#[pyclass(module = "privopt.secagg", name = "Client")]
pub struct PyClient {
    client: Client,
    input: Option<Vec<u32>>,
}

#[pymethods]
impl PyClient {
    /// Client ``id`` of the round ``(session, round)`` with its graph ``neighbours``
    /// (increasing), the reconstruction ``threshold`` and the input length.
    #[new]
    fn new(
        session: &[u8],
        round: u64,
        id: u32,
        neighbours: Vec<u32>,
        threshold: usize,
        vector_len: usize,
    ) -> PyResult<Self> {
        check_vector_len(vector_len)?;
        let config = ClientConfig {
            context: context(session, round)?,
            id,
            neighbours,
            threshold,
            vector_len,
        };
        let (client, _) = Client::new(config, &mut secret_rng(None)).map_err(errors::secagg)?;
        Ok(Self {
            client,
            input: None,
        })
    }

    /// The first message (the client's public keys), for the server.
    #[getter]
    fn advertisement<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.client.advertisement().to_bytes())
    }

    /// The client's whole state, so another process can :meth:`restore` it between stages.
    /// The bytes hold the round's private keys and the neighbours' shares: keep them as
    /// secret as the client (and note Python cannot wipe a ``bytes`` object).
    fn snapshot<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.client.snapshot().to_bytes())
    }

    /// The client a :meth:`snapshot` was taken of; raises on damaged or inconsistent bytes.
    #[staticmethod]
    fn restore(state: &[u8]) -> PyResult<Self> {
        let snapshot = decode::<ClientSnapshot>(state)?;
        Ok(Self {
            client: Client::restore(snapshot).map_err(errors::secagg)?,
            input: None,
        })
    }

    /// This client's id.
    #[getter]
    fn id(&self) -> u32 {
        self.client.id()
    }

    /// The stage whose server message the client expects next.
    #[getter]
    fn stage(&self) -> &'static str {
        stage_name(self.client.stage())
    }

    /// Stage 2: the neighbours' keys in, the encrypted shares out.
    fn share_keys<'py>(
        &mut self,
        py: Python<'py>,
        message: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        let msg: NeighbourKeys = decode(message)?;
        let out = self
            .client
            .share_keys(&msg, &mut secret_rng(None))
            .map_err(errors::secagg)?;
        Ok(PyBytes::new(py, &out.to_bytes()))
    }

    /// Stage 3: the shares addressed to this client in, the masked ``input`` (``uint32``,
    /// e.g. from :meth:`Quantizer.encode`) out.
    fn mask_input<'py>(
        &mut self,
        py: Python<'py>,
        message: &[u8],
        input: Exact<'_, u32>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let msg: IncomingShares = decode(message)?;
        let out = self
            .client
            .mask_input(&msg, &slice_or_copy(&input))
            .map_err(errors::secagg)?;
        Ok(PyBytes::new(py, &out.to_bytes()))
    }

    /// Stage 4: the survivors in, this client's shares for the unmasking out. Single-use: a
    /// client answers one survivor list per round, also across copies restored from one
    /// snapshot in this process (a second list raises :class:`PeerMisbehaved`); across
    /// processes, store the :meth:`snapshot` taken after this call before sending its reply.
    /// ``min_survivors``: refuse (:class:`ProtocolError`, nothing answered) a list of fewer
    /// survivors, e.g. when the input carries a noise share sized for that many contributors.
    #[pyo3(signature = (message, *, min_survivors = 0))]
    fn unmask<'py>(
        &mut self,
        py: Python<'py>,
        message: &[u8],
        min_survivors: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let msg: UnmaskRequest = decode(message)?;
        msg.require_survivors(min_survivors)
            .map_err(errors::secagg)?;
        let out = UNMASK_LEDGER
            .lock()
            .map_err(|_| errors::ProtocolError::new_err("the unmask ledger is poisoned"))?
            .unmask(&mut self.client, &msg)
            .map_err(errors::secagg)?;
        Ok(PyBytes::new(py, &out.to_bytes()))
    }

    /// The reply to whatever server message the current stage expects; ``input`` is needed
    /// (once, at or before the masking stage). The input is not part of a :meth:`snapshot`.
    #[pyo3(signature = (message, input = None))]
    fn handle<'py>(
        &mut self,
        py: Python<'py>,
        message: &[u8],
        input: Option<Exact<'_, u32>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        if let Some(v) = input {
            self.input = Some(exact_vec(&v));
        }
        match self.client.stage() {
            Stage::AdvertiseKeys => self.share_keys(py, message),
            Stage::ShareKeys => {
                let input = self.input.clone().ok_or_else(|| {
                    errors::ProtocolError::new_err("the masking stage needs the client's input")
                })?;
                let msg: IncomingShares = decode(message)?;
                let out = self
                    .client
                    .mask_input(&msg, &input)
                    .map_err(errors::secagg)?;
                Ok(PyBytes::new(py, &out.to_bytes()))
            }
            Stage::MaskedInput | Stage::Done => self.unmask(py, message, 0),
            Stage::Unmask => Err(errors::ProtocolError::new_err(
                "the client has finished its round",
            )),
        }
    }
}

/// The SecAgg+ server of one round. Feed it client messages with :meth:`receive`; close each
/// stage with :meth:`close_stage` (whoever has not answered has dropped), which returns the
/// next messages by recipient; :meth:`finish` returns the sum of the survivors' inputs.
#[pyclass(module = "privopt.secagg", name = "Server")]
pub struct PyServer(Server);

fn by_recipient<'py, T: Message>(
    py: Python<'py>,
    messages: Vec<T>,
    recipient: impl Fn(&T) -> u32,
) -> BTreeMap<u32, Bound<'py, PyBytes>> {
    messages
        .iter()
        .map(|m| (recipient(m), PyBytes::new(py, &m.to_bytes())))
        .collect()
}

#[pymethods]
impl PyServer {
    #[new]
    fn new(
        session: &[u8],
        round: u64,
        graph: &PyGraph,
        threshold: usize,
        vector_len: usize,
    ) -> PyResult<Self> {
        check_vector_len(vector_len)?;
        Server::new(ServerConfig {
            context: context(session, round)?,
            graph: graph.0.clone(),
            threshold,
            vector_len,
        })
        .map(Self)
        .map_err(errors::secagg)
    }

    /// The stage the server is collecting.
    #[getter]
    fn stage(&self) -> &'static str {
        stage_name(self.0.stage())
    }

    /// One client message of the current stage.
    fn receive(&mut self, message: &[u8]) -> PyResult<()> {
        let result = match self.0.stage() {
            Stage::AdvertiseKeys => self.0.receive_keys(decode::<AdvertiseKeys>(message)?),
            Stage::ShareKeys => self.0.receive_shares(decode::<ShareKeys>(message)?),
            Stage::MaskedInput => self.0.receive_masked(&decode::<MaskedInput>(message)?),
            Stage::Unmask => self.0.receive_unmask(decode::<UnmaskShares>(message)?),
            Stage::Done => {
                return Err(errors::ProtocolError::new_err("the round is finished"));
            }
        };
        result.map_err(errors::secagg)
    }

    /// Closes the current stage (one of the first three) and returns the next stage's
    /// messages as ``{client id: bytes}``.
    fn close_stage<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<BTreeMap<u32, Bound<'py, PyBytes>>> {
        match self.0.stage() {
            Stage::AdvertiseKeys => Ok(by_recipient(
                py,
                self.0.finish_advertising().map_err(errors::secagg)?,
                |m| m.recipient,
            )),
            Stage::ShareKeys => Ok(by_recipient(
                py,
                self.0.finish_sharing().map_err(errors::secagg)?,
                |m| m.recipient,
            )),
            Stage::MaskedInput => Ok(by_recipient(
                py,
                self.0.finish_masking().map_err(errors::secagg)?,
                |m| m.recipient,
            )),
            Stage::Unmask | Stage::Done => Err(errors::ProtocolError::new_err(
                "no stage to close: call finish() after the unmasking stage",
            )),
        }
    }

    /// Closes the unmasking stage: ``(sum, contributors)``, the ``uint32`` sum modulo 2^32 of
    /// the inputs of the clients in ``contributors``.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<(Bound<'py, PyArray1<u32>>, Vec<u32>)> {
        let aggregate = py.detach(|| self.0.finish()).map_err(errors::secagg)?;
        Ok((array(py, aggregate.sum), aggregate.contributors))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGraphParameters>()?;
    m.add_class::<PyGraph>()?;
    m.add_class::<PyQuantizer>()?;
    m.add_class::<PyStochasticQuantizer>()?;
    m.add_class::<PyClient>()?;
    m.add_class::<PyServer>()?;
    m.add_function(wrap_pyfunction!(parameters, m)?)?;
    Ok(())
}
