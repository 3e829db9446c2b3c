//! `privopt.protocols.dome`: DOME's server (debiased Adam on a learned sketch) and a client's
//! release (project, clip, noise, quantize), by bytes; the sum between them is a SecAgg+ round
//! of `privopt.secagg` over the sketch dimension.

use numpy::PyArray1;
use privopt_math::sample::secret_rng;
use privopt_protocols::Message;
use privopt_protocols::dome::check_broadcast as client_check;
use privopt_protocols::dome::{Basis, defaults};
use privopt_protocols::dome::{
    BasisAssembler, BasisChunk, DomeServer, RoundBroadcast, ServerSettings, Sketch, SketchKind,
    basis_chunks, quantizer, release,
};
use privopt_protocols::noise::SharedNoise;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::errors;
use crate::numpy_io::{Exact, Reals, array, exact_vec, to_vec};

/// The sketch kind named in Python.
fn sketch_kind(name: &str, energy: f64) -> PyResult<SketchKind> {
    match name {
        "learned" => Ok(SketchKind::Learned { energy }),
        "learned_no_probes" => Ok(SketchKind::LearnedNoProbes),
        "random" => Ok(SketchKind::Random),
        "identity" => Ok(SketchKind::Identity),
        other => Err(errors::parameter(format!(
            "sketch must be 'learned', 'learned_no_probes', 'random' or 'identity', got {other:?}"
        ))),
    }
}

/// The DOME server: model, debiased Adam, sketch. Per round: :meth:`open_round` → send the
/// broadcast and the sketch chunks to the participants → run a SecAgg+ round of their
/// :func:`release` vectors (length :attr:`dim`) → :meth:`close_round` with the sum.
///
/// ``gamma_prime`` floors the debiased second moment (the shipped configs' 1e-6; at 1e-8 a
/// coordinate whose second moment is all noise takes steps 10⁴ times the learning rate).
/// ``noise_total`` is the variance of the Gaussian noise in a round's sum, shared among the
/// participants; for client-level DP with noise multiplier ``σ`` (see
/// :func:`privopt.dp.noise_multiplier`) and clip ``C`` it is ``σ²·C²``; 0 turns privacy off.
/// ``noise_floor`` ``f`` (in (0, 1]) sizes each participant's noise share for ``⌈f·B⌉``
/// contributors, so up to that many dropouts keep the full noise; rounds with fewer
/// contributors are refused (:attr:`required_contributors`). ``None`` shares it among all ``B``.
#[pyclass(module = "privopt.protocols.dome", name = "Server")]
pub struct PyServer {
    server: DomeServer,
    rng: ChaCha20Rng,
}

#[pymethods]
impl PyServer {
    #[new]
    #[pyo3(signature = (
        w0, k, clip, noise_total, lr = defaults::LR, beta1 = defaults::BETA1,
        beta2 = defaults::BETA2, gamma_prime = defaults::GAMMA_PRIME, sketch = "learned",
        energy = defaults::ENERGY, seed = None, noise_floor = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        w0: Reals<'_>,
        k: usize,
        clip: f64,
        noise_total: f64,
        lr: f64,
        beta1: f64,
        beta2: f64,
        gamma_prime: f64,
        sketch: &str,
        energy: f64,
        seed: Option<u64>,
        noise_floor: Option<f64>,
    ) -> PyResult<Self> {
        let w0 = to_vec(&w0);
        let d = w0.len();
        let kind = sketch_kind(sketch, energy)?;
        // The server checks its settings and w0; the sketch is built here, so its rank and
        // energy are checked here.
        if kind != SketchKind::Identity && !(1..=d).contains(&k) {
            return Err(errors::parameter(format!(
                "the sketch rank k must be in 1..=len(w0) = {d}, got {k}"
            )));
        }
        if !(energy > 0.0 && energy <= 1.0) {
            return Err(errors::parameter(format!(
                "energy must be in (0, 1], got {energy}"
            )));
        }
        let mut rng = seed.map_or_else(|| secret_rng(None), ChaCha20Rng::seed_from_u64);
        let settings = ServerSettings {
            lr,
            beta1,
            beta2,
            gamma_prime,
            clip,
            noise_total,
            noise_floor,
            learned_sketch: matches!(
                kind,
                SketchKind::Learned { .. } | SketchKind::LearnedNoProbes
            ),
        };
        let sketch = Sketch::new(kind, d, k, &mut rng).map_err(errors::protocol)?;
        let server = DomeServer::new(settings, w0, sketch).map_err(errors::protocol)?;
        Ok(Self { server, rng })
    }

    /// The model.
    #[getter]
    fn model<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        array(py, self.server.model().to_vec())
    }

    /// The released (sketch) dimension: the SecAgg+ vector length.
    #[getter]
    fn dim(&self) -> usize {
        self.server.basis().dim()
    }

    /// Opens a round for ``participants`` clients: ``(broadcast, chunks)``, the bytes every
    /// participant needs (the chunks carry the sketch; none for the identity sketch).
    fn open_round<'py>(
        &mut self,
        py: Python<'py>,
        round: u64,
        participants: usize,
    ) -> PyResult<(Bound<'py, PyBytes>, Vec<Bound<'py, PyBytes>>)> {
        let broadcast = self
            .server
            .open_round(round, participants)
            .map_err(errors::protocol)?;
        let chunks = match self.server.basis() {
            Basis::Matrix(s) => basis_chunks(round, s),
            Basis::Identity { .. } => Vec::new(),
        };
        Ok((
            PyBytes::new(py, &broadcast.to_bytes()),
            chunks
                .iter()
                .map(|c| PyBytes::new(py, &c.to_bytes()))
                .collect(),
        ))
    }

    /// Abandons the open round (its secure sum failed): nothing of it is applied and the
    /// next round may open. Returns whether a round was open.
    fn abort_round(&mut self) -> bool {
        self.server.abort_round()
    }

    /// The fewest contributors the open round may close with (1 without a noise floor;
    /// ``None`` when no round is open). Check it before SecAgg+ unmasks the sum.
    #[getter]
    fn required_contributors(&self) -> Option<usize> {
        self.server.required_contributors()
    }

    /// Closes the round with the SecAgg+ sum (``uint32``) of the releases of its
    /// ``contributors`` (those whose masked input is in the sum); takes the Adam step and
    /// updates the sketch. Returns the decompressed mean gradient.
    fn close_round<'py>(
        &mut self,
        py: Python<'py>,
        total: Exact<'_, u32>,
        contributors: usize,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let total = exact_vec(&total);
        let (server, rng) = (&mut self.server, &mut self.rng);
        let g = py
            .detach(|| server.close_round(&total, contributors, rng))
            .map_err(errors::protocol)?;
        Ok(array(py, g))
    }
}

/// A participant's release for one round: ``grad`` (the client's gradient at the broadcast
/// model) minus the broadcast mean, projected on the sketch, clipped, with the client's share
/// of the noise, quantized for SecAgg+. Returns the ``uint32`` SecAgg+ input.
#[pyfunction]
fn client_release<'py>(
    py: Python<'py>,
    broadcast: &[u8],
    chunks: Vec<Vec<u8>>,
    grad: Reals<'_>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let round = RoundBroadcast::from_bytes(broadcast).map_err(errors::decode)?;
    let mut grad = to_vec(&grad);
    let d = round.m_hat.len();
    let chunks = chunks
        .iter()
        .map(|c| BasisChunk::from_bytes(c).map_err(errors::decode))
        .collect::<PyResult<Vec<_>>>()?;
    let sketch = match chunks.first() {
        None => None,
        Some(first) => {
            let mut assembler = BasisAssembler::new(round.round, d, first.k as usize);
            for c in &chunks {
                assembler.add(c).map_err(errors::protocol)?;
            }
            Some(assembler.finish().map_err(errors::protocol)?)
        }
    };
    let basis = match &sketch {
        Some(s) => Basis::Matrix(s.as_ref()),
        None => Basis::Identity { d },
    };
    let words = py
        .detach(|| {
            let out = release(&mut grad, &round, basis, &mut secret_rng(None))?;
            Ok::<_, privopt_protocols::ProtocolError>(quantizer(&round)?.encode(&out.vector)?)
        })
        .map_err(errors::protocol)?;
    Ok(array(py, words))
}

/// Checks a round's broadcast against the client's own terms (the run's ``clip`` and its
/// ``noise_total`` variance, ``noise_floor`` as the server's): a broadcast asking for a larger
/// clip or a thinner noise share than those give for its participants raises
/// :class:`PeerMisbehaved`. Returns the participants it names and the fewest survivors the
/// client may help unmask a sum of (``Client.unmask(…, min_survivors=)``).
#[pyfunction]
#[pyo3(signature = (broadcast, *, clip, noise_total, noise_floor = None))]
fn check_broadcast(
    broadcast: &[u8],
    clip: f64,
    noise_total: f64,
    noise_floor: Option<f64>,
) -> PyResult<(usize, usize)> {
    let round = RoundBroadcast::from_bytes(broadcast).map_err(errors::decode)?;
    let noise = SharedNoise {
        variance: noise_total,
        floor: noise_floor,
    };
    let floor = client_check(&round, clip, &noise).map_err(errors::protocol)?;
    Ok((round.participants as usize, floor))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_broadcast, m)?)?;
    m.add_class::<PyServer>()?;
    crate::add_defaults(
        m,
        &[
            ("lr", defaults::LR),
            ("beta1", defaults::BETA1),
            ("beta2", defaults::BETA2),
            ("gamma_prime", defaults::GAMMA_PRIME),
            ("energy", defaults::ENERGY),
            ("delta", defaults::DELTA),
            ("dropout_rate", defaults::DROPOUT_RATE),
            ("corrupt_rate", defaults::CORRUPT_RATE),
        ],
    )?;
    m.add_function(wrap_pyfunction!(client_release, m)?)?;
    Ok(())
}
