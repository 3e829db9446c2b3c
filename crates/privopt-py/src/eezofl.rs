//! `privopt.protocols.eezofl`: EEZOFL's digital path (the EEZOFL paper): devices send one
//! xMK-CKKS-encrypted scalar per round, the server sums them and fuses the devices' decryption
//! shares. Driven by bytes.

use std::sync::Arc;

use numpy::PyArray1;
use privopt_ckks::CkksParams;
use privopt_ckks::multiparty::{ActiveSet, DealingAnswer, DealingCheck, PublicKeyShare};
use privopt_math::sample::secret_rng;
use privopt_ml::zo::{add_direction, gaussian_fill};
use privopt_protocols::eezofl::{
    DigitalDevice, DigitalServer, KeyRelay, ShareUpload, SumBroadcast, Upload, default_threshold,
    encode_scalar,
};
use privopt_protocols::eezofl::{Schedule, direction_key};
use privopt_protocols::threshold::{SealedShare, SealingKey};
use privopt_protocols::wire::Message;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rand::RngCore;
use std::collections::BTreeMap;

use crate::ckks::PyParams;
use crate::errors;
use crate::model_arrays::{borrow_parts, for_each_chunk, parts};
use crate::multiparty::PyCommonPoly;
use crate::numpy_io::array;

/// A device: its own xMK-CKKS secret. Setup: send :attr:`key_share`, then :meth:`set_key`
/// with the server's relay. Each round: :meth:`encrypt` its scalar, then
/// :meth:`decryption_share` of the server's sum.
///
/// For a threshold key (any ``t`` members decrypt, so a round survives ``N − t`` dropouts),
/// after :meth:`set_key`: :meth:`start_threshold` (send the sealing key), :meth:`deal_threshold`
/// with every member's sealing key (send each member its sealed share), :meth:`finish_threshold`
/// with the shares sealed to this device; each round then answers with
/// :meth:`threshold_share` for the round's active set.
#[pyclass(module = "privopt.protocols.eezofl", name = "Device")]
pub struct PyDevice {
    device: DigitalDevice,
    params: Arc<CkksParams>,
    crs: privopt_ckks::multiparty::CommonPoly,
}

#[pymethods]
impl PyDevice {
    #[new]
    fn new(py: Python<'_>, id: u32, params: &PyParams, crs: &PyCommonPoly) -> Self {
        let params = Arc::clone(&params.0);
        let crs = crs.0.clone();
        let device =
            py.detach(|| DigitalDevice::generate(id, &params, &crs, &mut secret_rng(None)));
        Self {
            device,
            params,
            crs,
        }
    }

    /// The device's id.
    #[getter]
    fn id(&self) -> u32 {
        self.device.id()
    }

    /// The device's whole state (its xMK-CKKS secret included) as bytes, so another process
    /// can :meth:`restore` it: keep them as secret as the device.
    fn save<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.device.save())
    }

    /// The device :meth:`save` wrote, its collective key rebuilt under ``crs``.
    #[staticmethod]
    fn restore(
        py: Python<'_>,
        params: &PyParams,
        crs: &PyCommonPoly,
        state: &[u8],
    ) -> PyResult<Self> {
        let params = Arc::clone(&params.0);
        let crs = crs.0.clone();
        let device = py
            .detach(|| DigitalDevice::restore(&params, &crs, state))
            .map_err(errors::protocol)?;
        Ok(Self {
            device,
            params,
            crs,
        })
    }

    /// The key share for the server (setup).
    #[getter]
    fn key_share<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.device.key_share().to_bytes(&self.params))
    }

    /// Aggregates the collective key from the server's relay of every member's share.
    fn set_key(&mut self, relay: &[u8]) -> PyResult<()> {
        let relay = KeyRelay::from_bytes(&self.params, relay).map_err(errors::decode)?;
        self.device
            .set_key(&self.crs, &relay)
            .map_err(errors::protocol)
    }

    /// The upload of round ``round``: ``x`` encrypted under the collective key.
    fn encrypt<'py>(
        &mut self,
        py: Python<'py>,
        round: u64,
        x: f64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let m = encode_scalar(x, &self.params).map_err(errors::protocol)?;
        let device = &mut self.device;
        let up = py
            .detach(|| device.encrypt(round, m, &mut secret_rng(None)))
            .map_err(errors::protocol)?;
        Ok(PyBytes::new(py, &up.to_bytes()))
    }

    /// The threshold of the device's key once re-shared; ``None`` while every member is needed.
    #[getter]
    fn threshold(&self) -> Option<usize> {
        self.device.threshold()
    }

    /// Threshold setup, step 1: re-share this device's secret so that any ``threshold`` of the
    /// key's members decrypt, in setup ``session`` (fresh per setup). Returns the sealing key
    /// for the server to relay to every member.
    fn start_threshold<'py>(
        &mut self,
        py: Python<'py>,
        threshold: usize,
        session: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let key = self
            .device
            .start_threshold(threshold, session, &mut secret_rng(None))
            .map_err(errors::protocol)?;
        Ok(PyBytes::new(py, &key.to_bytes()))
    }

    /// Threshold setup, step 2: with every member's sealing key, this device's share for each
    /// member, sealed to it (the server relays them and can read none), by recipient. Deals
    /// once per setup: save the device after this call.
    fn deal_threshold<'py>(
        &mut self,
        py: Python<'py>,
        sealing_keys: Vec<Vec<u8>>,
    ) -> PyResult<BTreeMap<u32, Bound<'py, PyBytes>>> {
        let keys = sealing_keys
            .iter()
            .map(|b| SealingKey::from_bytes(b).map_err(errors::decode))
            .collect::<PyResult<Vec<_>>>()?;
        let device = &mut self.device;
        let sealed = py
            .detach(|| device.deal_threshold(&keys, &mut secret_rng(None)))
            .map_err(errors::protocol)?;
        Ok(sealed
            .iter()
            .map(|s| (s.to, PyBytes::new(py, &s.to_bytes())))
            .collect())
    }

    /// Threshold setup, step 3: the shares sealed to this device, one from every member.
    fn finish_threshold(&mut self, py: Python<'_>, sealed: Vec<Vec<u8>>) -> PyResult<()> {
        let sealed = sealed
            .iter()
            .map(|b| SealedShare::from_bytes(b).map_err(errors::decode))
            .collect::<PyResult<Vec<_>>>()?;
        let device = &mut self.device;
        py.detach(|| device.finish_threshold(&sealed))
            .map_err(errors::protocol)
    }

    /// Threshold setup, step 4: this device's answers to the server's dealing ``check`` (bytes
    /// from :meth:`Server.dealing_check`), once per setup: save the device after this call.
    fn answer_dealing_check<'py>(
        &mut self,
        py: Python<'py>,
        check: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        let check = DealingCheck::from_bytes(&self.params, check).map_err(errors::ckks)?;
        let (device, crs) = (&mut self.device, &self.crs);
        let answer = py
            .detach(|| device.answer_dealing_check(&check, crs, &mut secret_rng(None)))
            .map_err(errors::protocol)?;
        Ok(PyBytes::new(py, &answer.to_bytes(&self.params)))
    }

    /// This device's share of the server's sum as a member of the round's ``active_set``
    /// (:meth:`Server.active_set`). Given once per ciphertext, whatever the set or the server
    /// asking (:class:`~privopt.errors.PeerMisbehaved` otherwise): save the device after this
    /// call, before sending the share.
    fn threshold_share<'py>(
        &mut self,
        py: Python<'py>,
        sum: &[u8],
        active_set: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        let sum = SumBroadcast::from_bytes(&self.params, sum).map_err(errors::decode)?;
        let active = ActiveSet::from_bytes(&self.params, active_set).map_err(errors::ckks)?;
        let device = &mut self.device;
        let share = py
            .detach(|| device.threshold_share(&sum, &active, &mut secret_rng(None)))
            .map_err(errors::protocol)?;
        Ok(PyBytes::new(py, &share.to_bytes(&self.params)))
    }

    /// This device's decryption share of the server's summed ciphertext (N-of-N key).
    /// Given once per round, for the round's sum only (:class:`~privopt.errors.PeerMisbehaved`
    /// otherwise): save the device after this call, before sending the share.
    fn decryption_share<'py>(
        &mut self,
        py: Python<'py>,
        sum: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        let sum = SumBroadcast::from_bytes(&self.params, sum).map_err(errors::decode)?;
        let device = &mut self.device;
        let share = py
            .detach(|| device.decryption_share(&sum, &mut secret_rng(None)))
            .map_err(errors::protocol)?;
        Ok(PyBytes::new(py, &share.to_bytes(&self.params)))
    }
}

/// The server: aggregates the collective key from the members' shares (its :attr:`relay`
/// goes to every device), then per round sums the uploads and fuses the shares. On an N-of-N
/// key a member that sends no upload or no share fails the round with a
/// :class:`~privopt.errors.ProtocolError` naming it. With :meth:`use_threshold` (once the
/// devices have re-shared), a round sums any ``t`` uploads and :meth:`active_set` picks the
/// ``t`` devices to ask; a round that cannot finish is :meth:`abandon`-ed, never re-asked.
#[pyclass(module = "privopt.protocols.eezofl", name = "Server")]
pub struct PyServer {
    server: DigitalServer,
    params: Arc<CkksParams>,
    crs: privopt_ckks::multiparty::CommonPoly,
    relay: Vec<u8>,
}

#[pymethods]
impl PyServer {
    #[new]
    fn new(
        params: &PyParams,
        crs: &PyCommonPoly,
        members: Vec<u32>,
        key_shares: Vec<Vec<u8>>,
    ) -> PyResult<Self> {
        let params = Arc::clone(&params.0);
        let shares = key_shares
            .iter()
            .map(|b| PublicKeyShare::from_bytes(&params, b))
            .collect::<Result<Vec<_>, _>>()
            .map_err(errors::ckks)?;
        let (server, relay) =
            DigitalServer::setup(&params, &crs.0, &members, shares).map_err(errors::protocol)?;
        let relay = relay.to_bytes(&params);
        Ok(Self {
            server,
            params,
            crs: crs.0.clone(),
            relay,
        })
    }

    /// The members' key shares, for every device's :meth:`Device.set_key`.
    #[getter]
    fn relay<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.relay)
    }

    /// The round whose uploads the server expects.
    #[getter]
    fn round(&self) -> u64 {
        self.server.round()
    }

    /// Rounds are decrypted by any ``threshold`` members from now on (call once every member
    /// has finished its threshold setup).
    fn use_threshold(&mut self, threshold: usize) -> PyResult<()> {
        self.server
            .use_threshold(threshold)
            .map_err(errors::protocol)
    }

    /// The check of the members' dealings for a ``threshold`` key set up in ``session``, among
    /// the members ``present``, as bytes for each of them: call once every dealing has arrived
    /// (its seed is drawn now).
    fn dealing_check<'py>(
        &self,
        py: Python<'py>,
        threshold: usize,
        session: u64,
        present: Vec<u32>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut seed = [0u8; 32];
        secret_rng(None).fill_bytes(&mut seed);
        let check = self
            .server
            .dealing_check(threshold, session, seed, &present)
            .map_err(errors::protocol)?;
        Ok(PyBytes::new(py, &check.to_bytes(&self.params)))
    }

    /// The members whose dealing fails ``check`` (sorted; empty when all are sound), from the
    /// devices' answers (:meth:`Device.answer_dealing_check`): key again without them.
    fn failed_dealers(
        &self,
        py: Python<'_>,
        threshold: usize,
        check: &[u8],
        answers: Vec<Vec<u8>>,
    ) -> PyResult<Vec<u32>> {
        let check = DealingCheck::from_bytes(&self.params, check).map_err(errors::ckks)?;
        let answers = answers
            .iter()
            .map(|b| DealingAnswer::from_bytes(&self.params, b))
            .collect::<Result<Vec<_>, _>>()
            .map_err(errors::ckks)?;
        let (server, crs) = (&self.server, &self.crs);
        py.detach(|| server.failed_dealers(threshold, crs, &check, &answers))
            .map_err(errors::protocol)
    }

    /// The key's threshold; ``None`` while every member decrypts.
    #[getter]
    fn threshold(&self) -> Option<usize> {
        self.server.threshold()
    }

    /// The members whose uploads are in the open round's sum (``None`` between rounds).
    #[getter]
    fn contributors(&self) -> Option<Vec<u32>> {
        self.server.contributors().map(<[u32]>::to_vec)
    }

    /// The open round's active set: the first ``t`` of the ``present`` members, as bytes for
    /// each of them with the sum (:class:`privopt.ckks.multiparty.ActiveSet` reads them).
    /// Fixed once per round.
    fn active_set<'py>(
        &mut self,
        py: Python<'py>,
        present: Vec<u32>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let active = self.server.active_set(&present).map_err(errors::protocol)?;
        Ok(PyBytes::new(py, &active.to_bytes(&self.params)))
    }

    /// Gives up the open round (its sum is never decrypted nor asked about again); the next
    /// round is a fresh encryption. Returns the abandoned round.
    fn abandon(&mut self) -> u64 {
        self.server.abandon()
    }

    /// Sums the round's uploads (one per member): the broadcast for the decryption shares.
    fn sum<'py>(
        &mut self,
        py: Python<'py>,
        uploads: Vec<Vec<u8>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let uploads = uploads
            .iter()
            .map(|b| Upload::from_bytes(&self.params, b).map_err(errors::decode))
            .collect::<PyResult<Vec<_>>>()?;
        let server = &mut self.server;
        let sum = py
            .detach(|| server.sum(&uploads))
            .map_err(errors::protocol)?;
        Ok(PyBytes::new(py, &sum.to_bytes()))
    }

    /// Fuses the members' decryption shares: the sum of the round's scalars.
    fn fuse(&mut self, py: Python<'_>, shares: Vec<Vec<u8>>) -> PyResult<f64> {
        let shares = shares
            .iter()
            .map(|b| ShareUpload::from_bytes(&self.params, b).map_err(errors::decode))
            .collect::<PyResult<Vec<_>>>()?;
        let server = &mut self.server;
        py.detach(|| server.fuse(&shares)).map_err(errors::protocol)
    }
}

/// The threshold a key of ``members`` devices gets by default: two thirds, rounded up (at
/// least 2). Any ``t`` members can decrypt anything under the key; ``members − t`` dropouts
/// are survived.
#[pyfunction]
#[pyo3(name = "default_threshold")]
fn py_default_threshold(members: usize) -> usize {
    default_threshold(members)
}

/// Round ``round``'s public perturbation φ ~ N(0, I) for a model of ``d`` parameters under the
/// run's ``seed``: privopt's counter-based stream, the direction :func:`perturb` moves a model
/// by (a device's two-point scalar is taken along it; the server steps along it).
#[pyfunction]
fn direction<'py>(py: Python<'py>, seed: u64, round: u64, d: usize) -> Bound<'py, PyArray1<f64>> {
    let mut u = vec![0.0; d];
    py.detach(|| gaussian_fill(&direction_key(seed, round), &mut u));
    array(py, u)
}

/// ``x += t · φ`` in place over a model held as ``float64``/``float32`` arrays in order (views
/// of a module's tensors), from coordinate ``offset``: the same values as adding ``t`` times
/// :func:`direction`, without storing φ.
#[pyfunction]
#[pyo3(signature = (seed, round, t, xs, offset = 0))]
fn perturb(
    py: Python<'_>,
    seed: u64,
    round: u64,
    t: f64,
    xs: Vec<Bound<'_, PyAny>>,
    offset: usize,
) -> PyResult<()> {
    let mut guards = borrow_parts(&xs)?;
    let mut parts = parts(&mut guards)?;
    let key = direction_key(seed, round);
    let mut buf = Vec::new();
    py.detach(|| {
        for_each_chunk(&mut parts, offset, &mut buf, |pos, x| {
            add_direction(&key, pos, x, t, None);
        });
    });
    Ok(())
}

/// The paper's sequences over rounds ``k`` (from 0): the step size
/// ``η_k = eta0·(1+k)^(−eta_decay)`` and the two-point radius
/// ``γ_k = gamma0·(1+k)^(−gamma_decay)`` (``gamma_decay = 0``: a constant radius). The
/// defaults (``DEFAULTS``) are the paper's §VI values, which meet its Theorem 1.
#[pyclass(module = "privopt.protocols.eezofl", name = "Schedule", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PySchedule(Schedule);

#[pymethods]
impl PySchedule {
    #[new]
    #[pyo3(signature = (
        eta0 = Schedule::default().eta0,
        eta_decay = Schedule::default().eta_decay,
        gamma0 = Schedule::default().gamma0,
        gamma_decay = Schedule::default().gamma_decay,
    ))]
    fn new(eta0: f64, eta_decay: f64, gamma0: f64, gamma_decay: f64) -> PyResult<Self> {
        let s = Schedule {
            eta0,
            eta_decay,
            gamma0,
            gamma_decay,
        };
        s.check().map_err(errors::protocol)?;
        Ok(Self(s))
    }

    #[getter]
    fn eta0(&self) -> f64 {
        self.0.eta0
    }
    #[getter]
    fn eta_decay(&self) -> f64 {
        self.0.eta_decay
    }
    #[getter]
    fn gamma0(&self) -> f64 {
        self.0.gamma0
    }
    #[getter]
    fn gamma_decay(&self) -> f64 {
        self.0.gamma_decay
    }

    /// ``η_k``.
    fn eta(&self, k: u64) -> f64 {
        self.0.eta(k)
    }

    /// ``γ_k``.
    fn gamma(&self, k: u64) -> f64 {
        self.0.gamma(k)
    }

    fn __repr__(&self) -> String {
        let s = &self.0;
        format!(
            "Schedule(eta0={}, eta_decay={}, gamma0={}, gamma_decay={})",
            s.eta0, s.eta_decay, s.gamma0, s.gamma_decay
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDevice>()?;
    m.add_class::<PySchedule>()?;
    let d = Schedule::default();
    crate::add_defaults(
        m,
        &[
            ("eta0", d.eta0),
            ("eta_decay", d.eta_decay),
            ("gamma0", d.gamma0),
            ("gamma_decay", d.gamma_decay),
        ],
    )?;
    m.add_class::<PyServer>()?;
    m.add_function(wrap_pyfunction!(direction, m)?)?;
    m.add_function(wrap_pyfunction!(py_default_threshold, m)?)?;
    m.add_function(wrap_pyfunction!(perturb, m)?)?;
    Ok(())
}
