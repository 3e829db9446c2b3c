//! `privopt.ckks`: parameters, keys, encryption of real vectors and leveled evaluation.

use std::sync::Arc;

use numpy::PyArray1;
use privopt_ckks::eval::{
    self, Ciphertext as EvalCiphertext, EvalContext, Evaluator as Engine, GaloisKeys as Galois,
    PolyBasis, PublicKey as Public, RelinKey as Relin, SecretKey as Secret,
};
use privopt_ckks::{CkksError, CkksParams, CkksParamsBuilder};
use privopt_math::sample::secret_rng;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use privopt_protocols::wire::{self, Method, standalone};

use crate::errors;
use crate::numpy_io::{Reals, array, to_vec};

/// A CKKS parameter set, checked against the homomorphic-encryption standard's 128-bit table
/// unless ``insecure=True``.
///
/// ``Params(n, prime_bits, special_bits=(), scale_bits=40, insecure=False)`` takes the bit
/// sizes of the ciphertext primes (the first is the base prime) and of the key-switching
/// primes; :meth:`leveled` picks rescaling primes matched to the scale, which keeps the scale
/// exact through many multiplications and is what most users want.
#[pyclass(module = "privopt.ckks", name = "Params", frozen)]
#[derive(Clone)]
pub struct PyParams(pub Arc<CkksParams>);

#[pymethods]
impl PyParams {
    #[new]
    #[pyo3(signature = (n, prime_bits, special_bits = Vec::new(), scale_bits = 40, insecure = false))]
    fn new(
        n: usize,
        prime_bits: Vec<u32>,
        special_bits: Vec<u32>,
        scale_bits: u32,
        insecure: bool,
    ) -> PyResult<Self> {
        CkksParamsBuilder::new(n, &prime_bits)
            .special_primes(&special_bits)
            .scale_log2(scale_bits)
            .insecure_for_testing(insecure)
            .build()
            .map(Self)
            .map_err(errors::ckks)
    }

    /// A leveled set: a ``base_bits`` base prime, ``levels`` rescaling primes chosen so that
    /// every level's scale stays at ``2**scale_bits``, and key-switching primes
    /// ``special_bits``. ``Params.leveled(8192, 60, 40, 2, (60,))`` is TenSEAL's
    /// ``[60, 40, 40, 60]``.
    #[staticmethod]
    #[pyo3(signature = (n, base_bits, scale_bits, levels, special_bits = vec![60], insecure = false))]
    fn leveled(
        n: usize,
        base_bits: u32,
        scale_bits: u32,
        levels: usize,
        special_bits: Vec<u32>,
        insecure: bool,
    ) -> PyResult<Self> {
        CkksParamsBuilder::leveled(n, base_bits, scale_bits, levels, &special_bits)
            .insecure_for_testing(insecure)
            .build()
            .map(Self)
            .map_err(errors::ckks)
    }

    /// Ring degree.
    #[getter]
    fn n(&self) -> usize {
        self.0.n()
    }

    /// Real slots of a ciphertext (``n / 2``).
    #[getter]
    fn slots(&self) -> usize {
        self.0.n() / 2
    }

    /// Rescalings a fresh ciphertext allows.
    #[getter]
    fn max_level(&self) -> usize {
        self.0.max_level()
    }

    /// ``log2`` of the default scale.
    #[getter]
    fn scale_bits(&self) -> u32 {
        self.0.scale_log2()
    }

    /// ``log2`` of the ciphertext modulus ``q``.
    #[getter]
    fn log_q(&self) -> f64 {
        log2_product(self.0.basis().moduli())
    }

    /// ``log2`` of the key modulus ``q·p``: what the 128-bit table bounds.
    #[getter]
    fn log_qp(&self) -> f64 {
        log2_product(self.0.key_basis().moduli())
    }

    /// Whether the set was built with ``insecure=True`` and misses the 128-bit bound.
    #[getter]
    fn is_insecure(&self) -> bool {
        self.0.is_insecure()
    }

    /// A digest of every parameter: keys and ciphertexts carry it and refuse other sets.
    #[getter]
    fn fingerprint<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.0.fingerprint())
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.0.fingerprint() == other.0.fingerprint()
    }

    fn __hash__(&self) -> u64 {
        let f = self.0.fingerprint();
        u64::from_le_bytes([f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]])
    }

    fn __repr__(&self) -> String {
        format!(
            "Params(n={}, levels={}, scale_bits={}, log_qp={:.1}{})",
            self.0.n(),
            self.0.max_level(),
            self.0.scale_log2(),
            self.log_qp(),
            if self.0.is_insecure() {
                ", insecure=True"
            } else {
                ""
            }
        )
    }
}

/// `log2` of the product of `moduli`.
fn log2_product(moduli: &[u64]) -> f64 {
    moduli.iter().map(|&q| (q as f64).log2()).sum()
}

/// The precomputed tables of one parameter set (NTTs, base conversions, the slot encoder).
/// Build it once and share it: every key, ciphertext and evaluator is tied to one.
#[pyclass(module = "privopt.ckks", name = "Context", frozen)]
#[derive(Clone)]
pub struct PyContext(pub Arc<EvalContext>);

#[pymethods]
impl PyContext {
    #[new]
    fn new(py: Python<'_>, params: &PyParams) -> PyResult<Self> {
        let params = Arc::clone(&params.0);
        py.detach(|| EvalContext::new(&params))
            .map(Self)
            .map_err(errors::ckks)
    }

    /// The parameter set.
    #[getter]
    fn params(&self) -> PyParams {
        PyParams(Arc::clone(self.0.params()))
    }

    /// Real slots per ciphertext.
    #[getter]
    fn slots(&self) -> usize {
        self.0.slots()
    }

    /// Level of a fresh ciphertext.
    #[getter]
    fn max_level(&self) -> usize {
        self.0.max_level()
    }

    fn __repr__(&self) -> String {
        format!(
            "Context({})",
            PyParams(Arc::clone(self.0.params())).__repr__()
        )
    }
}

/// Encodes `values` at `level` (default: the top); the encoder refuses more values than slots.
fn encode(ctx: &EvalContext, values: &[f64], level: Option<usize>) -> PyResult<eval::Plaintext> {
    eval::encode(ctx, values, level.unwrap_or(ctx.max_level())).map_err(errors::ckks)
}

/// Encodes `values` at `level` and encrypts them with `encrypt` (public or secret key), the
/// interpreter released.
fn encrypt_values(
    py: Python<'_>,
    ctx: &Arc<EvalContext>,
    values: &Reals<'_>,
    level: Option<usize>,
    encrypt: impl Fn(
        &eval::Plaintext,
        &mut rand_chacha::ChaCha20Rng,
    ) -> Result<EvalCiphertext, CkksError>
    + Sync,
) -> PyResult<PyCiphertext> {
    let values = to_vec(values);
    py.detach(|| {
        let pt = encode(ctx, &values, level)?;
        let ct = encrypt(&pt, &mut secret_rng(None)).map_err(errors::ckks)?;
        Ok(PyCiphertext::new(ct, ctx))
    })
}

/// The secret key. Keep it with its owner: :meth:`to_bytes` is for the owner's storage.
#[pyclass(module = "privopt.ckks", name = "SecretKey", frozen)]
pub struct PySecretKey(Secret);

#[pymethods]
impl PySecretKey {
    /// A fresh key from the operating system's randomness.
    #[staticmethod]
    fn generate(py: Python<'_>, ctx: &PyContext) -> Self {
        let ctx = Arc::clone(&ctx.0);
        Self(py.detach(|| Secret::generate(&ctx, &mut secret_rng(None))))
    }

    /// The identifier every key and ciphertext made from this secret carries.
    #[getter]
    fn key_id(&self) -> u64 {
        self.0.key_id().get()
    }

    /// The public key (anyone may encrypt with it).
    fn public_key(&self, py: Python<'_>) -> PyPublicKey {
        PyPublicKey(py.detach(|| self.0.public_key(&mut secret_rng(None))))
    }

    /// The relinearization key :meth:`Evaluator.multiply` needs.
    fn relin_key(&self, py: Python<'_>) -> PyRelinKey {
        PyRelinKey(
            py.detach(|| self.0.relin_key(&mut secret_rng(None))),
            Arc::clone(self.0.context()),
        )
    }

    /// Galois keys for the given left rotations (negative: right), and for conjugation if
    /// ``conjugate``. :meth:`Evaluator.sum` and :meth:`Evaluator.dot` over ``w`` slots need
    /// the rotations ``1, 2, 4, …, w/2``.
    #[pyo3(signature = (rotations, conjugate = false))]
    fn galois_keys(&self, py: Python<'_>, rotations: Vec<i64>, conjugate: bool) -> PyGaloisKeys {
        let keys = py.detach(|| {
            self.0
                .galois_keys(&rotations, conjugate, &mut secret_rng(None))
        });
        PyGaloisKeys(keys, Arc::clone(self.0.context()))
    }

    /// Symmetric encryption of up to ``slots`` reals (the rest of the slots are zero).
    #[pyo3(signature = (values, level = None))]
    fn encrypt(
        &self,
        py: Python<'_>,
        values: Reals<'_>,
        level: Option<usize>,
    ) -> PyResult<PyCiphertext> {
        encrypt_values(py, self.0.context(), &values, level, |pt, rng| {
            self.0.encrypt(pt, rng)
        })
    }

    /// The slots of ``ct`` (all of them, or the first ``length``).
    #[pyo3(signature = (ct, length = None))]
    fn decrypt<'py>(
        &self,
        py: Python<'py>,
        ct: &PyCiphertext,
        length: Option<usize>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        same(self.0.context(), &ct.ctx)?;
        let mut v = py
            .detach(|| self.0.decrypt_values(&ct.ct))
            .map_err(errors::ckks)?;
        if let Some(len) = length {
            v.truncate(len);
        }
        Ok(array(py, v))
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut bytes = self.0.to_bytes();
        let out = PyBytes::new(py, &bytes);
        zeroize::Zeroize::zeroize(&mut bytes);
        out
    }

    #[staticmethod]
    fn from_bytes(ctx: &PyContext, data: &[u8]) -> PyResult<Self> {
        Secret::from_bytes(&ctx.0, data)
            .map(Self)
            .map_err(errors::ckks)
    }

    fn __repr__(&self) -> &'static str {
        "SecretKey(<redacted>)"
    }
}

/// Refuses an object made under another context's parameters.
fn same(ours: &EvalContext, theirs: &EvalContext) -> PyResult<()> {
    if ours.params().fingerprint() != theirs.params().fingerprint() {
        return Err(errors::parameter(
            "made under other parameters (the context fingerprints differ)",
        ));
    }
    Ok(())
}

impl PyCiphertext {
    fn new(ct: EvalCiphertext, ctx: &Arc<EvalContext>) -> Self {
        Self {
            ct,
            ctx: Arc::clone(ctx),
        }
    }
}

/// The public encryption key.
#[pyclass(module = "privopt.ckks", name = "PublicKey", frozen)]
pub struct PyPublicKey(Public);

#[pymethods]
impl PyPublicKey {
    /// Encrypts up to ``slots`` reals at ``level`` (default: the top).
    #[pyo3(signature = (values, level = None))]
    fn encrypt(
        &self,
        py: Python<'_>,
        values: Reals<'_>,
        level: Option<usize>,
    ) -> PyResult<PyCiphertext> {
        encrypt_values(py, self.0.context(), &values, level, |pt, rng| {
            self.0.encrypt(pt, rng)
        })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.to_bytes())
    }

    #[staticmethod]
    fn from_bytes(ctx: &PyContext, data: &[u8]) -> PyResult<Self> {
        Public::from_bytes(&ctx.0, data)
            .map(Self)
            .map_err(errors::ckks)
    }
}

/// The relinearization (key-switching) key for products.
#[pyclass(module = "privopt.ckks", name = "RelinKey", frozen)]
pub struct PyRelinKey(Relin, Arc<EvalContext>);

#[pymethods]
impl PyRelinKey {
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.to_bytes(self.1.params()))
    }

    #[staticmethod]
    fn from_bytes(ctx: &PyContext, data: &[u8]) -> PyResult<Self> {
        let key = Relin::from_bytes(ctx.0.params(), data).map_err(errors::ckks)?;
        Ok(Self(key, Arc::clone(&ctx.0)))
    }
}

/// Key-switching keys for rotations (and conjugation).
#[pyclass(module = "privopt.ckks", name = "GaloisKeys", frozen)]
pub struct PyGaloisKeys(Galois, Arc<EvalContext>);

#[pymethods]
impl PyGaloisKeys {
    /// The Galois elements the keys cover.
    #[getter]
    fn elements(&self) -> Vec<usize> {
        self.0.elements().collect()
    }

    /// Bytes these keys take in memory and on the wire.
    #[getter]
    fn nbytes(&self) -> usize {
        self.0.byte_len()
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.to_bytes(self.1.params()))
    }

    #[staticmethod]
    fn from_bytes(ctx: &PyContext, data: &[u8]) -> PyResult<Self> {
        let keys = Galois::from_bytes(&ctx.0, data).map_err(errors::ckks)?;
        Ok(Self(keys, Arc::clone(&ctx.0)))
    }
}

/// A ciphertext of ``slots`` reals at some level and scale.
#[pyclass(module = "privopt.ckks", name = "Ciphertext", frozen)]
pub struct PyCiphertext {
    ct: EvalCiphertext,
    ctx: Arc<EvalContext>,
}

#[pymethods]
impl PyCiphertext {
    /// Rescalings left.
    #[getter]
    fn level(&self) -> usize {
        self.ct.level()
    }

    /// The scale ``Δ`` the slots are multiplied by.
    #[getter]
    fn scale(&self) -> f64 {
        self.ct.scale()
    }

    /// Bytes in memory.
    #[getter]
    fn nbytes(&self) -> usize {
        self.ct.byte_len()
    }

    /// The identifier of the secret key it decrypts under (an evaluator or secret key of
    /// another secret refuses it).
    #[getter]
    fn key_id(&self) -> u64 {
        self.ct.key_id().get()
    }

    /// The ciphertext's encoding (with its parameters' fingerprint) in a checksummed frame, so
    /// a damaged copy is refused instead of decrypting to wrong values.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let inner = self.ct.to_bytes(self.ctx.params());
        let framed = wire::encode(Method::Standalone, standalone::CKKS_CIPHERTEXT, |w| {
            w.bytes(&inner);
        });
        PyBytes::new(py, &framed)
    }

    #[staticmethod]
    fn from_bytes(ctx: &PyContext, data: &[u8]) -> PyResult<Self> {
        let params = ctx.0.params();
        let ct = wire::decode(
            data,
            "ckks ciphertext",
            Method::Standalone,
            standalone::CKKS_CIPHERTEXT,
            |r| {
                let inner = r.bytes()?;
                EvalCiphertext::from_bytes(params, inner).map_err(|e| r.invalid(e.to_string()))
            },
        )
        .map_err(errors::decode)?;
        Ok(Self {
            ct,
            ctx: Arc::clone(&ctx.0),
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "Ciphertext(level={}, scale=2**{:.2})",
            self.ct.level(),
            self.ct.scale().log2()
        )
    }
}

/// Homomorphic operations under one context, with the evaluation keys they need. Every
/// product rescales (one level); ``threads`` pins the work to that many threads (default:
/// all cores).
#[pyclass(module = "privopt.ckks", name = "Evaluator", frozen)]
pub struct PyEvaluator(Engine);

/// The polynomial basis named by `domain`: power basis, or Chebyshev on `[lo, hi]`.
fn basis(domain: Option<(f64, f64)>) -> PyResult<PolyBasis> {
    match domain {
        None => Ok(PolyBasis::Power),
        Some((lo, hi)) if lo.is_finite() && hi.is_finite() && lo < hi => {
            Ok(PolyBasis::Chebyshev { lo, hi })
        }
        Some((lo, hi)) => Err(errors::parameter(format!(
            "domain ({lo}, {hi}) is not a finite interval with lo < hi"
        ))),
    }
}

impl PyEvaluator {
    /// `f` on the evaluator's threads with the interpreter released.
    /// `f` on the evaluator's threads with the interpreter released, after checking that the
    /// operands were made under the evaluator's parameters.
    fn run(
        &self,
        py: Python<'_>,
        operands: &[&PyCiphertext],
        f: impl FnOnce(&Engine) -> Result<EvalCiphertext, CkksError> + Send,
    ) -> PyResult<PyCiphertext> {
        let ctx = self.0.context();
        for op in operands {
            same(ctx, &op.ctx)?;
        }
        let ct = py
            .detach(|| self.0.install(|| f(&self.0)))
            .map_err(errors::ckks)?;
        Ok(PyCiphertext::new(ct, ctx))
    }

    fn slots_width(&self, width: Option<usize>) -> usize {
        width.unwrap_or(self.0.context().slots())
    }
}

#[pymethods]
impl PyEvaluator {
    #[new]
    #[pyo3(signature = (ctx, relin_key = None, galois_keys = None, threads = None))]
    fn new(
        ctx: &PyContext,
        relin_key: Option<&PyRelinKey>,
        galois_keys: Option<&PyGaloisKeys>,
        threads: Option<usize>,
    ) -> PyResult<Self> {
        for key_ctx in [relin_key.map(|k| &k.1), galois_keys.map(|k| &k.1)]
            .into_iter()
            .flatten()
        {
            same(&ctx.0, key_ctx)?;
        }
        let engine = Engine::new(
            &ctx.0,
            relin_key.map(|k| k.0.clone()),
            galois_keys.map(|k| k.0.clone()).unwrap_or_default(),
        );
        engine.check_keys().map_err(errors::ckks)?;
        match threads {
            Some(0) => Err(errors::parameter("threads must be at least 1")),
            Some(t) => engine.with_threads(t).map(Self).map_err(errors::ckks),
            None => Ok(Self(engine)),
        }
    }

    /// ``a + b`` slot-wise (at the lower of their levels).
    fn add(&self, py: Python<'_>, a: &PyCiphertext, b: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.run(py, &[a, b], |e| e.add(&a.ct, &b.ct))
    }

    /// ``a − b`` slot-wise.
    fn sub(&self, py: Python<'_>, a: &PyCiphertext, b: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.run(py, &[a, b], |e| e.sub(&a.ct, &b.ct))
    }

    /// ``−a``.
    fn negate(&self, py: Python<'_>, a: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.run(py, &[a], |e| e.negate(&a.ct))
    }

    /// ``a + values`` slot-wise (no level used).
    fn add_plain(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        values: Reals<'_>,
    ) -> PyResult<PyCiphertext> {
        let values = to_vec(&values);
        let ctx = self.0.context();
        self.run(py, &[a], |e| {
            let pt = eval::encode_at(ctx, &values, a.ct.level(), a.ct.scale())?;
            e.add_plain(&a.ct, &pt)
        })
    }

    /// ``a · values`` slot-wise, rescaled (one level).
    fn mul_plain(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        values: Reals<'_>,
    ) -> PyResult<PyCiphertext> {
        let values = to_vec(&values);
        self.run(py, &[a], |e| {
            let pt = e.encode_for_product(&values, a.ct.level())?;
            e.mul_plain(&a.ct, &pt)
        })
    }

    /// ``a + c`` in every slot.
    fn add_scalar(&self, py: Python<'_>, a: &PyCiphertext, c: f64) -> PyResult<PyCiphertext> {
        self.run(py, &[a], |e| e.add_const(&a.ct, c))
    }

    /// ``c · a``, rescaled (one level).
    fn mul_scalar(&self, py: Python<'_>, a: &PyCiphertext, c: f64) -> PyResult<PyCiphertext> {
        self.run(py, &[a], |e| e.mul_const(&a.ct, c))
    }

    /// ``a · b`` slot-wise: tensor, relinearize, rescale (one level; needs the relin key).
    fn multiply(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        b: &PyCiphertext,
    ) -> PyResult<PyCiphertext> {
        self.run(py, &[a, b], |e| e.multiply(&a.ct, &b.ct))
    }

    /// ``a²`` slot-wise (one level).
    fn square(&self, py: Python<'_>, a: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.run(py, &[a], |e| e.square(&a.ct))
    }

    /// ``a`` brought down to ``level`` without changing its values.
    fn drop_to_level(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        level: usize,
    ) -> PyResult<PyCiphertext> {
        self.run(py, &[a], |e| e.drop_to_level(&a.ct, level))
    }

    /// The slots rotated left by ``k`` (right for negative ``k``); needs its Galois key.
    fn rotate(&self, py: Python<'_>, a: &PyCiphertext, k: i64) -> PyResult<PyCiphertext> {
        self.run(py, &[a], |e| e.rotate(&a.ct, k))
    }

    /// Sums of windows of ``width`` slots (a power of two; default: all slots), each sum in
    /// its window's first slot. Needs the rotations ``1, 2, …, width/2``.
    #[pyo3(signature = (a, width = None))]
    fn sum(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        width: Option<usize>,
    ) -> PyResult<PyCiphertext> {
        let width = self.slots_width(width);
        self.run(py, &[a], |e| e.sum_slots(&a.ct, width))
    }

    /// Inner products of ``a`` and ``b`` over windows of ``width`` slots (one level).
    #[pyo3(signature = (a, b, width = None))]
    fn dot(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        b: &PyCiphertext,
        width: Option<usize>,
    ) -> PyResult<PyCiphertext> {
        let width = self.slots_width(width);
        self.run(py, &[a, b], |e| e.inner_product(&a.ct, &b.ct, width))
    }

    /// ``p(a)`` in every slot for ``p = Σ coeffs[i]·x**i``, or, with ``domain=(lo, hi)``,
    /// ``Σ coeffs[i]·T_i`` in the Chebyshev basis of ``[lo, hi]``. Uses ``⌈log2 deg⌉ + 1``
    /// levels or so; :class:`~privopt.errors.ComputationError` if ``a`` has too few.
    #[pyo3(signature = (a, coeffs, domain = None))]
    fn polynomial(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        coeffs: Reals<'_>,
        domain: Option<(f64, f64)>,
    ) -> PyResult<PyCiphertext> {
        let coeffs = to_vec(&coeffs);
        let basis = basis(domain)?;
        self.run(py, &[a], |e| e.evaluate_polynomial(&a.ct, &coeffs, basis))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyParams>()?;
    m.add_class::<PyContext>()?;
    m.add_class::<PySecretKey>()?;
    m.add_class::<PyPublicKey>()?;
    m.add_class::<PyRelinKey>()?;
    m.add_class::<PyGaloisKeys>()?;
    m.add_class::<PyCiphertext>()?;
    m.add_class::<PyEvaluator>()?;
    Ok(())
}
