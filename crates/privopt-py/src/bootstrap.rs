//! `privopt.ckks.Bootstrapper`: CKKS bootstrapping from Python — a ciphertext out of levels
//! back to a fresh level, its slots kept — with the 128-bit presets, keys as bytes.

use std::sync::Arc;

use privopt_ckks::eval::bootstrap::BootstrapPreset;
use privopt_ckks::eval::{
    BootstrapConfig, Bootstrapper, EncapsulationKeys, EvalContext, EvaluationKeys, Evaluator,
    GaloisKeys, KeyRequest, RelinKey,
};
use privopt_math::sample::secret_rng;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::ckks::{PyCiphertext, PyContext, PyParams, PySecretKey, log2_product, same};
use crate::errors;

/// Refreshes ciphertexts that ran out of levels: ``bootstrap(ct, keys)`` returns a ciphertext
/// at :attr:`output_level` with the same slots (to the bootstrap's precision: about 17 bits
/// at ``"n15"``, 24 at ``"n16"``, for slots of magnitude up to 1).
///
/// ``Bootstrapper("n15")`` (n = 2^15, 16 384 slots, 3 levels left, 2–7 s and 2.7 GB),
/// ``Bootstrapper("n16")`` (n = 2^16, 32 768 slots, 9 levels of 45 bits left, 7–30 s and
/// 5.7 GB; the time depends on the CPU: AVX-512 IFMA or not) and
/// ``Bootstrapper("n16-stc-first")`` (the same 9 levels, about 10% faster and 1 bit more
/// precise at full packing, 15–30% faster and 1.4 bits less precise at ``slots=1024``:
/// SlotsToCoeffs runs first, so inputs come at :attr:`input_level` 3 rather than 0, and
/// the circuit between bootstraps runs three primes higher, which costs it more) are
/// 128-bit parameter sets
/// with a dense secret, bootstrapped through a sparse encapsulation key (certified too). ``compact=True`` keeps the keys with seeded halves (about
/// half the memory, a little slower); ``slots=k`` bootstraps ``k`` slots that repeat every
/// ``k`` (sparse packing: cheaper); ``failure_bits=b`` widens EvalMod's range until one
/// bootstrap fails (a wrong slot) with probability at most ``2^-b`` (default: about
/// ``2^-20``, :attr:`failure_probability`). Measured: ``"n15"`` at 40, 16.6 bits instead of
/// 16.9; ``"n16"`` at 39, 23.0 bits instead of 23.7, and at 40 one level fewer left. Build the parameters' :attr:`context` from it, the keys
/// with :meth:`keys` (the secret key's owner), and give the keys to whoever bootstraps.
#[pyclass(module = "privopt.ckks", name = "Bootstrapper", frozen)]
pub struct PyBootstrapper {
    boot: Arc<Bootstrapper>,
    ctx: PyContext,
    preset: Option<&'static str>,
}

/// The keys :meth:`Bootstrapper.bootstrap` uses (relinearization, the transforms' rotations,
/// sparse-secret encapsulation), made by the secret key's owner with
/// :meth:`Bootstrapper.keys`. Large: gigabytes at ``"n16"`` (:attr:`nbytes`).
#[pyclass(module = "privopt.ckks", name = "BootstrapKeys", frozen)]
pub struct PyBootstrapKeys {
    ev: Arc<Evaluator>,
    ctx: PyContext,
}

fn preset_named(name: &str) -> PyResult<BootstrapPreset> {
    BootstrapPreset::named(name).ok_or_else(|| {
        let known: Vec<String> = BootstrapPreset::names()
            .iter()
            .map(|n| format!("'{n}'"))
            .collect();
        errors::parameter(format!(
            "preset must be one of {}, got {name:?}",
            known.join(", ")
        ))
    })
}

impl PyBootstrapper {
    fn build(
        py: Python<'_>,
        ctx: Arc<EvalContext>,
        cfg: BootstrapConfig,
        preset: Option<&'static str>,
    ) -> PyResult<Self> {
        let boot = py
            .detach(|| Bootstrapper::new(&ctx, &cfg))
            .map_err(|e| match e {
                // At construction, too few levels is the parameters' fault.
                privopt_ckks::CkksError::LevelExhausted(why) => errors::parameter(format!(
                    "these parameters have too few levels to bootstrap: {why}"
                )),
                other => errors::ckks(other),
            })?;
        Ok(Self {
            boot: Arc::new(boot),
            ctx: PyContext::with_operators(ctx),
            preset,
        })
    }
}

#[pymethods]
impl PyBootstrapper {
    #[new]
    #[pyo3(signature = (preset = "n15", *, compact = false, slots = None, failure_bits = None))]
    fn new(
        py: Python<'_>,
        preset: &str,
        compact: bool,
        slots: Option<usize>,
        failure_bits: Option<f64>,
    ) -> PyResult<Self> {
        let p = preset_named(preset)?;
        let params = p.params().build().map_err(errors::ckks)?;
        let ctx = py
            .detach(|| EvalContext::new(&params))
            .map_err(errors::ckks)?;
        let cfg = BootstrapConfig {
            compact,
            slots,
            failure_bits,
            ..p.config()
        };
        Self::build(py, ctx, cfg, Some(p.name()))
    }

    /// A bootstrapper for parameters of your own (enough levels for the transforms and
    /// EvalMod: about 14 at the default configuration; a sparse ``secret_weight`` unless the
    /// parameters are a preset's). Small insecure parameters make quick tests.
    /// ``slots_to_coeffs_first=True`` runs SlotsToCoeffs first, on the input at the bottom
    /// levels (one level fewer between bootstraps here, as these defaults have no arcsine
    /// correction to fold EvalMod's output factor into).
    #[staticmethod]
    #[pyo3(signature = (params, *, slots = None, failure_bits = None, slots_to_coeffs_first = false))]
    fn with_params(
        py: Python<'_>,
        params: &PyParams,
        slots: Option<usize>,
        failure_bits: Option<f64>,
        slots_to_coeffs_first: bool,
    ) -> PyResult<Self> {
        let params = Arc::clone(&params.0);
        let ctx = py
            .detach(|| EvalContext::new(&params))
            .map_err(errors::ckks)?;
        let cfg = BootstrapConfig {
            slots,
            failure_bits,
            slots_to_coeffs_first,
            ..BootstrapConfig::default()
        };
        Self::build(py, ctx, cfg, None)
    }

    /// The context of the parameters (for keys, encryption, decryption).
    #[getter]
    fn context(&self) -> PyContext {
        self.ctx.clone()
    }

    /// ``"n15"``, ``"n16"``, ``"n16-stc-first"`` or ``None`` (parameters of your own).
    #[getter]
    fn preset(&self) -> Option<&'static str> {
        self.preset
    }

    /// The level a bootstrapped ciphertext comes out at.
    #[getter]
    fn output_level(&self) -> usize {
        self.boot.output_level()
    }

    /// The level :meth:`bootstrap` takes ciphertexts at (or above: they are dropped to it):
    /// 0, or SlotsToCoeffs' levels when it runs first. A circuit between two bootstraps has
    /// ``output_level - input_level`` levels.
    #[getter]
    fn input_level(&self) -> usize {
        self.boot.input_level()
    }

    /// Bits of modulus a bootstrapped ciphertext has to compute with before the next
    /// bootstrap: ``log2`` of the primes of the levels from :attr:`output_level` down to
    /// :attr:`input_level`.
    #[getter]
    fn output_bits(&self) -> f64 {
        let primes = self.ctx.0.params().basis().moduli();
        log2_product(&primes[self.boot.input_level() + 1..=self.boot.output_level()])
    }

    /// The probability that one bootstrap gives a wrong slot (not merely an imprecise one):
    /// ModRaise's overflow beyond EvalMod's range in some coefficient, union-bounded (exact
    /// for the presets' weight-32 encapsulation). About ``2^-20.5`` at ``"n16"``.
    #[getter]
    fn failure_probability(&self) -> f64 {
        self.boot.failure_probability()
    }

    /// Slots bootstrapped: all of the context's, or the sparse-packing period.
    #[getter]
    fn slots(&self) -> usize {
        self.boot.slots().unwrap_or_else(|| self.ctx.0.slots())
    }

    /// The keys a bootstrap needs, made from ``sk`` (their owner's), plus Galois keys for
    /// ``rotations`` of your own circuit. Bootstraps with them run on ``threads`` threads
    /// (default: every core; the result is the same to the bit).
    #[pyo3(signature = (sk, rotations = Vec::new(), *, threads = None))]
    fn keys(
        &self,
        py: Python<'_>,
        sk: &PySecretKey,
        rotations: Vec<i64>,
        threads: Option<usize>,
    ) -> PyResult<PyBootstrapKeys> {
        same(&self.ctx.0, sk.1.0.as_ref())?;
        let top = self.ctx.0.params().max_level();
        let extra: Vec<KeyRequest> = rotations
            .into_iter()
            .map(|steps| KeyRequest::Rotation { steps, level: top })
            .collect();
        let (boot, secret) = (&self.boot, &sk.0);
        let keys = py
            .detach(|| boot.keys(secret, &extra, &mut secret_rng(None)))
            .map_err(errors::ckks)?;
        Ok(PyBootstrapKeys {
            ev: Arc::new(with_threads(keys.evaluator(&self.ctx.0), threads)?),
            ctx: self.ctx.clone(),
        })
    }

    /// ``ct`` at :attr:`output_level` with the same slots (from :attr:`input_level` or above;
    /// higher levels are dropped first; below it raises ``ComputationError``). Raises if
    /// ``keys`` are another secret's or another context's.
    fn bootstrap(
        &self,
        py: Python<'_>,
        ct: &PyCiphertext,
        keys: &PyBootstrapKeys,
    ) -> PyResult<PyCiphertext> {
        same(&self.ctx.0, &ct.ctx.0)?;
        same(&self.ctx.0, &keys.ctx.0)?;
        let (boot, ev, input) = (&self.boot, &keys.ev, &ct.ct);
        let out = py
            .detach(|| boot.bootstrap(ev, input))
            .map_err(errors::ckks)?;
        Ok(PyCiphertext::new(out, &self.ctx, ct.length))
    }

    fn __repr__(&self) -> String {
        let preset = self.preset.map_or("None".to_owned(), |p| format!("'{p}'"));
        format!(
            "Bootstrapper(preset={preset}, n={}, slots={}, input_level={}, output_level={})",
            self.ctx.0.n(),
            self.slots(),
            self.boot.input_level(),
            self.boot.output_level()
        )
    }
}

/// `ev` on `threads` threads (rayon's global pool, every core, when `None`).
fn with_threads(ev: Evaluator, threads: Option<usize>) -> PyResult<Evaluator> {
    match threads {
        Some(0) => Err(errors::parameter("threads must be >= 1")),
        Some(t) => ev.with_threads(t).map_err(errors::ckks),
        None => Ok(ev),
    }
}

/// Appends one length-prefixed part.
fn put(out: &mut Vec<u8>, part: &[u8]) {
    out.extend_from_slice(&(part.len() as u64).to_le_bytes());
    out.extend_from_slice(part);
}

/// Takes one length-prefixed part.
fn take<'a>(data: &mut &'a [u8], what: &str) -> PyResult<&'a [u8]> {
    let bad = || errors::MalformedMessage::new_err(format!("bootstrap keys: {what} truncated"));
    let (len, rest) = data.split_first_chunk::<8>().ok_or_else(bad)?;
    let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|_| bad())?;
    if rest.len() < len {
        return Err(bad());
    }
    let (part, rest) = rest.split_at(len);
    *data = rest;
    Ok(part)
}

/// The format's first bytes.
const KEYS_MAGIC: &[u8; 8] = b"POBOOTK1";

#[pymethods]
impl PyBootstrapKeys {
    /// Bytes the keys take in memory.
    #[getter]
    fn nbytes(&self) -> usize {
        let relin = self.ev.relin().map_or(0, RelinKey::byte_len);
        let enc = self
            .ev
            .encapsulation()
            .map_or(0, EncapsulationKeys::byte_len);
        relin + self.ev.galois_keys().byte_len() + enc
    }

    /// The secret the keys belong to.
    #[getter]
    fn key_id(&self) -> Option<u64> {
        self.ev.key_id().map(|k| k.get())
    }

    /// Their encoding (for storage or to hand them to the bootstrapping party).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let params = self.ctx.0.params();
        let ev = &self.ev;
        let bytes = py.detach(|| {
            let mut out = KEYS_MAGIC.to_vec();
            put(
                &mut out,
                &ev.relin().map(|k| k.to_bytes(params)).unwrap_or_default(),
            );
            put(&mut out, &ev.galois_keys().to_bytes(params));
            put(
                &mut out,
                &ev.encapsulation()
                    .map(|k| k.to_bytes(params))
                    .unwrap_or_default(),
            );
            out
        });
        Ok(PyBytes::new(py, &bytes))
    }

    /// Keys from :meth:`to_bytes`, for ``bootstrapper``'s parameters, bootstrapping on
    /// ``threads`` threads (default: every core).
    #[staticmethod]
    #[pyo3(signature = (bootstrapper, data, *, threads = None))]
    fn from_bytes(
        py: Python<'_>,
        bootstrapper: &PyBootstrapper,
        data: &[u8],
        threads: Option<usize>,
    ) -> PyResult<Self> {
        let ctx = &bootstrapper.ctx;
        let mut rest = data
            .strip_prefix(KEYS_MAGIC.as_slice())
            .ok_or_else(|| errors::MalformedMessage::new_err("not bootstrap keys (bad magic)"))?;
        let relin = take(&mut rest, "relinearization key")?;
        let galois = take(&mut rest, "Galois keys")?;
        let enc = take(&mut rest, "encapsulation keys")?;
        if !rest.is_empty() {
            return Err(errors::MalformedMessage::new_err(
                "bootstrap keys: trailing bytes",
            ));
        }
        let eval_ctx = Arc::clone(&ctx.0);
        let keys = py
            .detach(|| -> Result<EvaluationKeys, privopt_ckks::CkksError> {
                let params = eval_ctx.params();
                Ok(EvaluationKeys {
                    relin: RelinKey::from_bytes(params, relin)?,
                    galois: GaloisKeys::from_bytes(&eval_ctx, galois)?,
                    encapsulation: if enc.is_empty() {
                        None
                    } else {
                        Some(EncapsulationKeys::from_bytes(params, enc)?)
                    },
                })
            })
            .map_err(errors::ckks)?;
        let ev = with_threads(keys.evaluator(&ctx.0), threads)?;
        ev.check_keys().map_err(errors::ckks)?;
        Ok(Self {
            ev: Arc::new(ev),
            ctx: ctx.clone(),
        })
    }

    fn __repr__(&self) -> String {
        format!("BootstrapKeys(nbytes={})", self.nbytes())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBootstrapper>()?;
    m.add_class::<PyBootstrapKeys>()?;
    Ok(())
}
