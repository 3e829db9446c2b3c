//! `privopt.ckks`: parameters, keys, encryption of real vectors and leveled evaluation.

use std::sync::{Arc, PoisonError, RwLock};

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
    // `smudging_bits`: privopt_ckks::params::DEFAULT_SMUDGING_LOG2, written out so that
    // Python's signature shows it.
    #[pyo3(signature = (
        n, prime_bits, special_bits = Vec::new(), scale_bits = 40, insecure = false,
        smudging_bits = 20.0
    ))]
    fn new(
        n: usize,
        prime_bits: Vec<u32>,
        special_bits: Vec<u32>,
        scale_bits: u32,
        insecure: bool,
        smudging_bits: f64,
    ) -> PyResult<Self> {
        CkksParamsBuilder::new(n, &prime_bits)
            .special_primes(&special_bits)
            .scale_log2(scale_bits)
            .smudging_log2(smudging_bits)
            .insecure_for_testing(insecure)
            .build()
            .map(Self)
            .map_err(errors::ckks)
    }

    /// A leveled set: a ``base_bits`` base prime, ``levels`` rescaling primes chosen so that
    /// every level's scale stays at ``2**scale_bits``, and key-switching primes
    /// ``special_bits``. ``Params.leveled(8192, 60, 40, 2, (60,))`` is TenSEAL's
    /// ``[60, 40, 40, 60]``. ``secret_weight`` draws secrets with that many nonzero
    /// coefficients (a sparse secret, which bootstrapping without encapsulation needs; the
    /// 128-bit table is for dense secrets, so it needs ``insecure=True``).
    #[staticmethod]
    #[pyo3(signature = (
        n, base_bits, scale_bits, levels, special_bits = vec![60], insecure = false,
        secret_weight = None
    ))]
    fn leveled(
        n: usize,
        base_bits: u32,
        scale_bits: u32,
        levels: usize,
        special_bits: Vec<u32>,
        insecure: bool,
        secret_weight: Option<usize>,
    ) -> PyResult<Self> {
        let mut builder =
            CkksParamsBuilder::leveled(n, base_bits, scale_bits, levels, &special_bits)
                .insecure_for_testing(insecure);
        if let Some(weight) = secret_weight {
            builder = builder.secret(privopt_ckks::SecretDistribution::Sparse(weight));
        }
        builder.build().map(Self).map_err(errors::ckks)
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

    /// ``log2`` of the smudging σ* on every multiparty decryption share.
    #[getter]
    fn smudging_bits(&self) -> f64 {
        self.0.smudging_log2()
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
pub(crate) fn log2_product(moduli: &[u64]) -> f64 {
    moduli.iter().map(|&q| (q as f64).log2()).sum()
}

/// The evaluator a context's ciphertexts use for their operators (``ct * ct`` and the
/// rest), shared by the context and every key, evaluator and ciphertext made from it.
/// Until :meth:`Context.set_keys` it holds no keys, which serves everything but products of
/// two ciphertexts and rotations.
#[derive(Clone)]
struct Operators(Arc<RwLock<Arc<Engine>>>);

impl Operators {
    fn keyless(ctx: &Arc<EvalContext>) -> Self {
        let engine = Engine::new(ctx, None, Galois::default());
        Self(Arc::new(RwLock::new(Arc::new(engine))))
    }

    fn get(&self) -> Arc<Engine> {
        Arc::clone(&self.0.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn set(&self, engine: Arc<Engine>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = engine;
    }
}

/// The precomputed tables of one parameter set (NTTs, base conversions, the slot encoder).
/// Build it once and share it: every key, ciphertext and evaluator is tied to one. Give it
/// evaluation keys with :meth:`set_keys` and its ciphertexts take operators (``a * b``,
/// ``a + 2.0``, ``a.dot(x)``), as TenSEAL's do.
#[pyclass(module = "privopt.ckks", name = "Context", frozen)]
#[derive(Clone)]
pub struct PyContext(pub Arc<EvalContext>, Operators);

impl PyContext {
    pub(crate) fn with_operators(ctx: Arc<EvalContext>) -> Self {
        let ops = Operators::keyless(&ctx);
        Self(ctx, ops)
    }
}

#[pymethods]
impl PyContext {
    #[new]
    fn new(py: Python<'_>, params: &PyParams) -> PyResult<Self> {
        let params = Arc::clone(&params.0);
        py.detach(|| EvalContext::new(&params))
            .map(Self::with_operators)
            .map_err(errors::ckks)
    }

    /// The evaluation keys (and threads) the operators of this context's ciphertexts use:
    /// ``relin_key`` for ``a * b`` of two ciphertexts, ``galois_keys`` for rotations,
    /// :meth:`Ciphertext.sum` and :meth:`Ciphertext.dot` (the rotations ``1, 2, 4, …,
    /// slots/2``). Replaces the keys given before; ciphertexts already made use the new ones.
    #[pyo3(signature = (relin_key = None, galois_keys = None, threads = None))]
    fn set_keys(
        &self,
        relin_key: Option<&PyRelinKey>,
        galois_keys: Option<&PyGaloisKeys>,
        threads: Option<usize>,
    ) -> PyResult<()> {
        let engine = build_engine(&self.0, relin_key, galois_keys, threads)?;
        self.1.set(Arc::new(engine));
        Ok(())
    }

    /// The evaluator the operators use (the keys of :meth:`set_keys`).
    #[getter]
    fn evaluator(&self) -> PyEvaluator {
        PyEvaluator(self.1.get(), self.clone())
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
    ctx: &PyContext,
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
        let pt = encode(&ctx.0, &values, level)?;
        let ct = encrypt(&pt, &mut secret_rng(None)).map_err(errors::ckks)?;
        Ok(PyCiphertext::new(ct, ctx, values.len()))
    })
}

/// The secret key. Keep it with its owner: :meth:`to_bytes` is for the owner's storage.
#[pyclass(module = "privopt.ckks", name = "SecretKey", frozen)]
pub struct PySecretKey(pub(crate) Secret, pub(crate) PyContext);

#[pymethods]
impl PySecretKey {
    /// A fresh key from the operating system's randomness.
    #[staticmethod]
    fn generate(py: Python<'_>, ctx: &PyContext) -> Self {
        let eval_ctx = Arc::clone(&ctx.0);
        let sk = py.detach(|| Secret::generate(&eval_ctx, &mut secret_rng(None)));
        Self(sk, ctx.clone())
    }

    /// The identifier every key and ciphertext made from this secret carries.
    #[getter]
    fn key_id(&self) -> u64 {
        self.0.key_id().get()
    }

    /// The public key (anyone may encrypt with it).
    fn public_key(&self, py: Python<'_>) -> PyPublicKey {
        let pk = py.detach(|| self.0.public_key(&mut secret_rng(None)));
        PyPublicKey(pk, self.1.clone())
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
        encrypt_values(py, &self.1, &values, level, |pt, rng| {
            self.0.encrypt(pt, rng)
        })
    }

    /// The values of ``ct``: as many as were encrypted (see :meth:`Ciphertext.__len__`), or
    /// the first ``length`` slots.
    #[pyo3(signature = (ct, length = None))]
    fn decrypt<'py>(
        &self,
        py: Python<'py>,
        ct: &PyCiphertext,
        length: Option<usize>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        same(self.0.context(), &ct.ctx.0)?;
        let mut v = py
            .detach(|| self.0.decrypt_values(&ct.ct))
            .map_err(errors::ckks)?;
        v.truncate(length.unwrap_or(ct.length));
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
        let sk = Secret::from_bytes(&ctx.0, data).map_err(errors::ckks)?;
        Ok(Self(sk, ctx.clone()))
    }

    fn __repr__(&self) -> &'static str {
        "SecretKey(<redacted>)"
    }
}

/// Refuses an object made under another context's parameters.
pub(crate) fn same(ours: &EvalContext, theirs: &EvalContext) -> PyResult<()> {
    if ours.params().fingerprint() != theirs.params().fingerprint() {
        return Err(errors::parameter(
            "made under other parameters (the context fingerprints differ)",
        ));
    }
    Ok(())
}

impl PyCiphertext {
    pub(crate) fn new(ct: EvalCiphertext, ctx: &PyContext, length: usize) -> Self {
        Self {
            ct,
            ctx: ctx.clone(),
            length: length.min(ctx.0.slots()),
        }
    }
}

/// The public encryption key.
#[pyclass(module = "privopt.ckks", name = "PublicKey", frozen)]
pub struct PyPublicKey(Public, PyContext);

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
        encrypt_values(py, &self.1, &values, level, |pt, rng| {
            self.0.encrypt(pt, rng)
        })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.to_bytes())
    }

    #[staticmethod]
    fn from_bytes(ctx: &PyContext, data: &[u8]) -> PyResult<Self> {
        let pk = Public::from_bytes(&ctx.0, data).map_err(errors::ckks)?;
        Ok(Self(pk, ctx.clone()))
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

/// A CKKS ciphertext of a real vector: as many values as were encrypted (``len(ct)``), in a
/// context's slots.
///
/// Operators follow TenSEAL's and numpy's habits, with the keys its context was given by
/// :meth:`Context.set_keys`: ``a + b``, ``a - b``, ``a * b`` with another ciphertext, a
/// number or an array (products use one level), ``-a``, ``a.dot(b)``, ``a.sum()``. An
/// :class:`Evaluator` gives the same operations with explicit keys and threads.
#[pyclass(module = "privopt.ckks", name = "Ciphertext", frozen)]
pub struct PyCiphertext {
    pub(crate) ct: EvalCiphertext,
    pub(crate) ctx: PyContext,
    /// Values that mean something (the length of the encrypted vector, or of a result).
    pub(crate) length: usize,
}

/// The other operand of a ciphertext operator.
enum Operand<'py> {
    Cipher(Bound<'py, PyCiphertext>),
    Scalar(f64),
    Values(Reals<'py>),
}

impl<'py> Operand<'py> {
    /// `None` for anything that is not a ciphertext, a real number or a 1-d array of reals
    /// (Python then tries the other operand's method, and raises `TypeError`). Arrays are
    /// tried before numbers: numpy would convert a one-element array to a float, with a
    /// deprecation warning.
    fn of(other: &Bound<'py, PyAny>) -> Option<Self> {
        if let Ok(ct) = other.cast::<PyCiphertext>() {
            return Some(Self::Cipher(ct.clone()));
        }
        if let Ok(values) = other.extract::<Reals<'py>>() {
            return Some(Self::Values(values));
        }
        other.extract::<f64>().ok().map(Self::Scalar)
    }

    /// An array operand of `self` broadcast as numpy would: one value acts on every value,
    /// otherwise the lengths must agree.
    fn broadcast(self, ct: &PyCiphertext) -> PyResult<Self> {
        let Self::Values(values) = self else {
            return Ok(self);
        };
        let array = values.as_array();
        match array.len() {
            1 => Ok(Self::Scalar(array[0])),
            n if n == ct.length => Ok(Self::Values(values)),
            n => Err(errors::parameter(format!(
                "operands could not be broadcast together: a ciphertext of length {} and an \
                 array of length {n}",
                ct.length
            ))),
        }
    }
}

impl PyCiphertext {
    /// `self (op) other` with the context's operators; `NotImplemented` for another type.
    fn binary(&self, py: Python<'_>, other: &Bound<'_, PyAny>, op: Arith) -> PyResult<Py<PyAny>> {
        let Some(operand) = Operand::of(other) else {
            return Ok(py.NotImplemented());
        };
        let operand = operand.broadcast(self)?;
        let ev = self.ctx.evaluator();
        let out = match (operand, op) {
            (Operand::Cipher(b), Arith::Add) => ev.add(py, self, b.get()),
            (Operand::Cipher(b), Arith::Sub) => ev.sub(py, self, b.get()),
            (Operand::Cipher(b), Arith::Mul) => ev.multiply(py, self, b.get()),
            (Operand::Scalar(c), Arith::Add) => ev.add_scalar(py, self, c),
            (Operand::Scalar(c), Arith::Sub) => ev.add_scalar(py, self, -c),
            (Operand::Scalar(c), Arith::Mul) => ev.mul_scalar(py, self, c),
            (Operand::Values(v), Arith::Add) => ev.add_plain(py, self, v),
            (Operand::Values(v), Arith::Sub) => {
                let negated: Vec<f64> = to_vec(&v).iter().map(|x| -x).collect();
                ev.add_values(py, self, negated)
            }
            (Operand::Values(v), Arith::Mul) => ev.mul_plain(py, self, v),
        }?;
        Ok(Py::new(py, out)?.into_any())
    }
}

/// The arithmetic of the operators.
#[derive(Clone, Copy)]
enum Arith {
    Add,
    Sub,
    Mul,
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

    /// The context it was made in.
    #[getter]
    fn context(&self) -> PyContext {
        self.ctx.clone()
    }

    /// Values of the vector it holds (what :meth:`SecretKey.decrypt` returns).
    fn __len__(&self) -> usize {
        self.length
    }

    // numpy hands `ndarray + ct` to `ct.__radd__` instead of looping over the array.
    #[classattr]
    fn __array_ufunc__(py: Python<'_>) -> Py<PyAny> {
        py.None()
    }

    fn __add__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, Arith::Add)
    }

    fn __radd__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, Arith::Add)
    }

    fn __sub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, Arith::Sub)
    }

    /// ``other - self``: ``-(self - other)``.
    fn __rsub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let diff = self.binary(py, other, Arith::Sub)?;
        match diff.bind(py).cast::<PyCiphertext>() {
            Ok(d) => Ok(Py::new(py, self.ctx.evaluator().negate(py, d.get())?)?.into_any()),
            Err(_) => Ok(diff),
        }
    }

    fn __mul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, Arith::Mul)
    }

    fn __rmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, Arith::Mul)
    }

    fn __neg__(&self, py: Python<'_>) -> PyResult<PyCiphertext> {
        self.ctx.evaluator().negate(py, self)
    }

    /// The inner product with another ciphertext or an array, in slot 0 (one level; needs
    /// the context's rotations ``1, 2, …, slots/2``).
    fn dot(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyCiphertext> {
        self.ctx.evaluator().dot(py, self, other, None)
    }

    /// The sum of the values, in slot 0 (needs the rotations ``1, 2, …, slots/2``).
    fn sum(&self, py: Python<'_>) -> PyResult<PyCiphertext> {
        self.ctx.evaluator().sum(py, self, None)
    }

    /// The ciphertext's encoding (with its parameters' fingerprint and its length) in a
    /// checksummed frame, so a damaged copy is refused instead of decrypting to wrong values.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let inner = self.ct.to_bytes(self.ctx.0.params());
        let framed = wire::encode(Method::Standalone, standalone::CKKS_CIPHERTEXT, |w| {
            w.bytes(&inner);
            w.u32(self.length as u32);
        });
        PyBytes::new(py, &framed)
    }

    #[staticmethod]
    fn from_bytes(ctx: &PyContext, data: &[u8]) -> PyResult<Self> {
        let params = ctx.0.params();
        let slots = ctx.0.slots();
        let (ct, length) = wire::decode(
            data,
            "ckks ciphertext",
            Method::Standalone,
            standalone::CKKS_CIPHERTEXT,
            |r| {
                let inner = r.bytes()?;
                let ct = EvalCiphertext::from_bytes(params, inner)
                    .map_err(|e| r.invalid(e.to_string()))?;
                let length = r.u32()? as usize;
                if length > slots {
                    return Err(r.invalid(format!("length {length} exceeds {slots} slots")));
                }
                Ok((ct, length))
            },
        )
        .map_err(errors::decode)?;
        Ok(Self::new(ct, ctx, length))
    }

    fn __repr__(&self) -> String {
        format!(
            "Ciphertext(len={}, level={}, scale=2**{:.2})",
            self.length,
            self.ct.level(),
            self.ct.scale().log2()
        )
    }
}

/// Homomorphic operations under one context, with the evaluation keys they need. Every
/// product rescales (one level); ``threads`` pins the work to that many threads (default:
/// all cores).
#[pyclass(module = "privopt.ckks", name = "Evaluator", frozen)]
pub struct PyEvaluator(Arc<Engine>, PyContext);

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

/// An evaluator over `ctx` with the given keys (checked to be of `ctx` and of one secret).
fn build_engine(
    ctx: &Arc<EvalContext>,
    relin_key: Option<&PyRelinKey>,
    galois_keys: Option<&PyGaloisKeys>,
    threads: Option<usize>,
) -> PyResult<Engine> {
    for key_ctx in [relin_key.map(|k| &k.1), galois_keys.map(|k| &k.1)]
        .into_iter()
        .flatten()
    {
        same(ctx, key_ctx)?;
    }
    let engine = Engine::new(
        ctx,
        relin_key.map(|k| k.0.clone()),
        galois_keys.map(|k| k.0.clone()).unwrap_or_default(),
    );
    engine.check_keys().map_err(errors::ckks)?;
    match threads {
        Some(0) => Err(errors::parameter("threads must be at least 1")),
        Some(t) => engine.with_threads(t).map_err(errors::ckks),
        None => Ok(engine),
    }
}

impl PyEvaluator {
    /// `f` on the evaluator's threads with the interpreter released, after checking that the
    /// operands were made under the evaluator's parameters; the result holds `length` values.
    fn run(
        &self,
        py: Python<'_>,
        operands: &[&PyCiphertext],
        length: usize,
        f: impl FnOnce(&Engine) -> Result<EvalCiphertext, CkksError> + Send,
    ) -> PyResult<PyCiphertext> {
        let ctx = self.0.context();
        for op in operands {
            same(ctx, &op.ctx.0)?;
        }
        let ct = py
            .detach(|| self.0.install(|| f(&self.0)))
            .map_err(errors::ckks)?;
        Ok(PyCiphertext::new(ct, &self.1, length))
    }

    fn slots_width(&self, width: Option<usize>) -> usize {
        width.unwrap_or(self.0.context().slots())
    }

    /// Values in a window sum's result: one if the window is every slot, else the windows'.
    fn summed_length(&self, a: &PyCiphertext, width: usize) -> usize {
        if width >= self.0.context().slots() {
            1
        } else {
            a.length
        }
    }

    /// ``a + values`` for values already copied out of Python.
    fn add_values(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        values: Vec<f64>,
    ) -> PyResult<PyCiphertext> {
        let ctx = self.0.context();
        let length = a.length.max(values.len());
        self.run(py, &[a], length, |e| {
            let pt = eval::encode_at(ctx, &values, a.ct.level(), a.ct.scale())?;
            e.add_plain(&a.ct, &pt)
        })
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
        let engine = build_engine(&ctx.0, relin_key, galois_keys, threads)?;
        Ok(Self(Arc::new(engine), ctx.clone()))
    }

    /// ``a + b`` slot-wise (at the lower of their levels).
    fn add(&self, py: Python<'_>, a: &PyCiphertext, b: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.run(py, &[a, b], a.length.max(b.length), |e| e.add(&a.ct, &b.ct))
    }

    /// ``a − b`` slot-wise.
    fn sub(&self, py: Python<'_>, a: &PyCiphertext, b: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.run(py, &[a, b], a.length.max(b.length), |e| e.sub(&a.ct, &b.ct))
    }

    /// ``−a``.
    fn negate(&self, py: Python<'_>, a: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.run(py, &[a], a.length, |e| e.negate(&a.ct))
    }

    /// ``a + values`` slot-wise (no level used).
    fn add_plain(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        values: Reals<'_>,
    ) -> PyResult<PyCiphertext> {
        self.add_values(py, a, to_vec(&values))
    }

    /// ``a · values`` slot-wise, rescaled (one level).
    fn mul_plain(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        values: Reals<'_>,
    ) -> PyResult<PyCiphertext> {
        let values = to_vec(&values);
        self.run(py, &[a], a.length.max(values.len()), |e| {
            let pt = e.encode_for_product(&values, a.ct.level())?;
            e.mul_plain(&a.ct, &pt)
        })
    }

    /// ``a + c`` in every slot.
    fn add_scalar(&self, py: Python<'_>, a: &PyCiphertext, c: f64) -> PyResult<PyCiphertext> {
        self.run(py, &[a], a.length, |e| e.add_const(&a.ct, c))
    }

    /// ``c · a``, rescaled (one level).
    fn mul_scalar(&self, py: Python<'_>, a: &PyCiphertext, c: f64) -> PyResult<PyCiphertext> {
        self.run(py, &[a], a.length, |e| e.mul_const(&a.ct, c))
    }

    /// ``a · b`` slot-wise: tensor, relinearize, rescale (one level; needs the relin key).
    fn multiply(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        b: &PyCiphertext,
    ) -> PyResult<PyCiphertext> {
        self.run(py, &[a, b], a.length.max(b.length), |e| {
            e.multiply(&a.ct, &b.ct)
        })
    }

    /// ``a²`` slot-wise (one level).
    fn square(&self, py: Python<'_>, a: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.run(py, &[a], a.length, |e| e.square(&a.ct))
    }

    /// ``a`` brought down to ``level`` without changing its values.
    fn drop_to_level(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        level: usize,
    ) -> PyResult<PyCiphertext> {
        self.run(py, &[a], a.length, |e| e.drop_to_level(&a.ct, level))
    }

    /// The slots rotated left by ``k`` (right for negative ``k``); needs its Galois key. A
    /// right rotation lengthens the vector by ``|k|`` (the slots it moves values into).
    fn rotate(&self, py: Python<'_>, a: &PyCiphertext, k: i64) -> PyResult<PyCiphertext> {
        let length = match usize::try_from(-k) {
            Ok(right) => a.length.saturating_add(right),
            Err(_) => a.length,
        };
        self.run(py, &[a], length, |e| e.rotate(&a.ct, k))
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
        let length = self.summed_length(a, width);
        self.run(py, &[a], length, |e| e.sum_slots(&a.ct, width))
    }

    /// Inner products of ``a`` and ``b`` (a ciphertext or an array) over windows of ``width``
    /// slots (default: all), each in its window's first slot (one level).
    #[pyo3(signature = (a, b, width = None))]
    fn dot(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        b: &Bound<'_, PyAny>,
        width: Option<usize>,
    ) -> PyResult<PyCiphertext> {
        let width = self.slots_width(width);
        let length = self.summed_length(a, width);
        match Operand::of(b) {
            Some(Operand::Cipher(b)) => {
                let b = b.get();
                self.run(py, &[a, b], length, |e| {
                    e.inner_product(&a.ct, &b.ct, width)
                })
            }
            Some(Operand::Values(v)) => {
                let values = to_vec(&v);
                self.run(py, &[a], length, |e| {
                    let pt = e.encode_for_product(&values, a.ct.level())?;
                    e.sum_slots(&e.mul_plain(&a.ct, &pt)?, width)
                })
            }
            _ => Err(pyo3::exceptions::PyTypeError::new_err(
                "dot takes a Ciphertext or a 1-d array of reals",
            )),
        }
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
        self.run(py, &[a], a.length, |e| {
            e.evaluate_polynomial(&a.ct, &coeffs, basis)
        })
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
