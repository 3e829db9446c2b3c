//! `privopt.paillier`: keys, and encrypted arrays whose operations run on every core.
//!
//! An [`PyEncryptedArray`] carries a fixed-point exponent `e`: its plaintexts are integers that
//! stand for `m / 2**e` (0 for integers). Sums align exponents exactly (by multiplying the
//! lower one by a power of two); products with reals add the factor's fractional bits.

use std::sync::Arc;

use num_bigint::{BigInt, BigUint};
use numpy::PyArray1;
use privopt_math::sample::secret_rng;
use privopt_paillier::encoding::FixedPoint;
use privopt_paillier::{Ciphertext, KeyPair, PaillierError, PublicKey};
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PySlice};
use rayon::prelude::*;

use privopt_protocols::wire::{self, Method, standalone};

use crate::errors;
use crate::numpy_io::{Exact, Reals, array, exact_vec, scalar_or_reals, to_vec};

/// Largest fixed-point exponent an array may reach (keeps `2**e` an exact `f64`).
const MAX_EXPONENT: u32 = 1000;
/// Default fractional bits of encoded reals.
const DEFAULT_FRAC_BITS: u32 = 32;
/// What names a public key in an array's bytes: BLAKE3 of `n`.
fn key_fingerprint(pk: &PublicKey) -> [u8; 32] {
    *blake3::hash(&pk.n().to_bytes_le()).as_bytes()
}

/// A Paillier public key: anyone holding it encrypts and computes on ciphertexts.
#[pyclass(module = "privopt.paillier", name = "PublicKey", frozen)]
pub struct PyPublicKey(Arc<PublicKey>);

/// Encrypts `values` in parallel with `encrypt_one` (given a per-thread generator).
fn encrypt_all<F>(
    pk: &Arc<PublicKey>,
    values: Vec<BigInt>,
    exponent: u32,
    encrypt_one: F,
) -> PyResult<PyEncryptedArray>
where
    F: Fn(&BigInt, &mut rand_chacha::ChaCha20Rng) -> Result<Ciphertext, PaillierError> + Sync,
{
    let cts = values
        .par_iter()
        .map_init(|| secret_rng(None), |rng, m| encrypt_one(m, rng))
        .collect::<Result<Vec<_>, _>>()
        .map_err(errors::paillier)?;
    Ok(PyEncryptedArray {
        pk: Arc::clone(pk),
        cts,
        exponent,
        fresh: true,
    })
}

/// Reals as fixed-point integers with `frac_bits` fractional bits.
fn encode_reals(values: &[f64], frac_bits: u32) -> PyResult<Vec<BigInt>> {
    if frac_bits > MAX_EXPONENT {
        return Err(errors::parameter(format!(
            "frac_bits must be at most {MAX_EXPONENT}, got {frac_bits}"
        )));
    }
    let fixed = FixedPoint { frac_bits };
    values
        .iter()
        .map(|&x| fixed.encode(x).map_err(errors::paillier))
        .collect()
}

/// Encodes reals with `frac_bits` fractional bits and encrypts them with `encrypt_one`.
fn encrypt_reals<F>(
    py: Python<'_>,
    pk: &Arc<PublicKey>,
    values: &Reals<'_>,
    frac_bits: u32,
    encrypt_one: F,
) -> PyResult<PyEncryptedArray>
where
    F: Fn(&BigInt, &mut rand_chacha::ChaCha20Rng) -> Result<Ciphertext, PaillierError>
        + Send
        + Sync,
{
    let values = encode_reals(&to_vec(values), frac_bits)?;
    py.detach(|| encrypt_all(pk, values, frac_bits, encrypt_one))
}

#[pymethods]
impl PyPublicKey {
    /// Size of ``n`` in bits.
    #[getter]
    fn bits(&self) -> u32 {
        self.0.bits()
    }

    /// The modulus ``n``.
    #[getter]
    fn n(&self) -> BigUint {
        self.0.n().clone()
    }

    /// Encrypts an array of ``int64`` (DJN obfuscators, all cores).
    fn encrypt(&self, py: Python<'_>, values: Exact<'_, i64>) -> PyResult<PyEncryptedArray> {
        let values: Vec<BigInt> = exact_vec(&values).into_iter().map(BigInt::from).collect();
        py.detach(|| encrypt_all(&self.0, values, 0, |m, rng| self.0.encrypt(m, rng)))
    }

    /// Encrypts Python integers of any size below ``n / 2`` in magnitude.
    fn encrypt_ints(&self, py: Python<'_>, values: Vec<BigInt>) -> PyResult<PyEncryptedArray> {
        py.detach(|| encrypt_all(&self.0, values, 0, |m, rng| self.0.encrypt(m, rng)))
    }

    /// Encrypts reals as fixed-point numbers with ``frac_bits`` fractional bits.
    #[pyo3(signature = (values, frac_bits = DEFAULT_FRAC_BITS))]
    fn encrypt_floats(
        &self,
        py: Python<'_>,
        values: Reals<'_>,
        frac_bits: u32,
    ) -> PyResult<PyEncryptedArray> {
        encrypt_reals(py, &self.0, &values, frac_bits, |m, rng| {
            self.0.encrypt(m, rng)
        })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.to_bytes())
    }

    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        PublicKey::from_bytes(data)
            .map(|k| Self(Arc::new(k)))
            .map_err(errors::paillier)
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.0.n() == other.0.n()
    }

    fn __repr__(&self) -> String {
        format!("PublicKey(bits={})", self.0.bits())
    }
}

/// A fresh key pair of `bits` from the operating system's randomness; below 2048 bits only
/// with `insecure` (tests).
pub fn generate_key_pair(py: Python<'_>, bits: u32, insecure: bool) -> PyResult<KeyPair> {
    if bits < 2048 && !insecure {
        return Err(errors::InsecureParameters::new_err(format!(
            "a {bits}-bit Paillier modulus is below 112-bit security; use 2048 or more (or \
             pass insecure=True in tests)"
        )));
    }
    py.detach(|| KeyPair::generate_insecure_for_testing(bits, &mut secret_rng(None)))
        .map_err(errors::paillier)
}

/// A key pair. Decryption is constant-time in the secret primes and runs on every core for
/// arrays.
#[pyclass(module = "privopt.paillier", name = "KeyPair", frozen)]
pub struct PyKeyPair {
    pair: Arc<KeyPair>,
    public: Arc<PublicKey>,
}

impl PyKeyPair {
    fn new(pair: KeyPair) -> Self {
        let public = Arc::new(pair.public.clone());
        Self {
            pair: Arc::new(pair),
            public,
        }
    }

    /// The plaintext integers of `enc`, decrypted in parallel.
    fn decrypt_all(&self, py: Python<'_>, enc: &PyEncryptedArray) -> PyResult<Vec<BigInt>> {
        if enc.pk.n() != self.public.n() {
            return Err(errors::parameter(
                "the array was encrypted under another key",
            ));
        }
        Ok(py.detach(|| enc.cts.par_iter().map(|c| self.pair.decrypt(c)).collect()))
    }
}

#[pymethods]
impl PyKeyPair {
    /// A fresh key pair of ``bits`` (2048, 3072 or 4096; 1024 only with ``insecure=True``).
    #[staticmethod]
    #[pyo3(signature = (bits = 2048, insecure = false))]
    fn generate(py: Python<'_>, bits: u32, insecure: bool) -> PyResult<Self> {
        generate_key_pair(py, bits, insecure).map(Self::new)
    }

    /// The public half.
    #[getter]
    fn public_key(&self) -> PyPublicKey {
        PyPublicKey(Arc::clone(&self.public))
    }

    /// Encrypts ``int64`` values with the owner's CRT obfuscators: uniform ``n``-th residues,
    /// with no short-exponent assumption, but several times slower than
    /// :meth:`PublicKey.encrypt`'s DJN path (fixed-base tables).
    fn encrypt(&self, py: Python<'_>, values: Exact<'_, i64>) -> PyResult<PyEncryptedArray> {
        let values: Vec<BigInt> = exact_vec(&values).into_iter().map(BigInt::from).collect();
        py.detach(|| {
            encrypt_all(&self.public, values, 0, |m, rng| {
                self.pair.encrypt_owner(m, rng)
            })
        })
    }

    /// Encrypts reals as fixed-point numbers with the owner's CRT obfuscators.
    #[pyo3(signature = (values, frac_bits = DEFAULT_FRAC_BITS))]
    fn encrypt_floats(
        &self,
        py: Python<'_>,
        values: Reals<'_>,
        frac_bits: u32,
    ) -> PyResult<PyEncryptedArray> {
        encrypt_reals(py, &self.public, &values, frac_bits, |m, rng| {
            self.pair.encrypt_owner(m, rng)
        })
    }

    /// The integers of an exponent-0 array as ``int64``; a plaintext outside the ``int64``
    /// range raises :class:`~privopt.errors.ComputationError` (use :meth:`decrypt_ints`).
    fn decrypt<'py>(
        &self,
        py: Python<'py>,
        enc: &PyEncryptedArray,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        if enc.exponent != 0 {
            return Err(errors::parameter(format!(
                "the array holds fixed-point reals (exponent {}); use decrypt_floats",
                enc.exponent
            )));
        }
        let out = self
            .decrypt_all(py, enc)?
            .iter()
            .map(|m| {
                i64::try_from(m).map_err(|_| {
                    errors::ComputationError::new_err(format!(
                        "plaintext {m} does not fit in int64; use decrypt_ints"
                    ))
                })
            })
            .collect::<PyResult<Vec<i64>>>()?;
        Ok(array(py, out))
    }

    /// The plaintexts as Python integers (exponent-0 arrays).
    fn decrypt_ints(&self, py: Python<'_>, enc: &PyEncryptedArray) -> PyResult<Vec<BigInt>> {
        if enc.exponent != 0 {
            return Err(errors::parameter(
                "the array holds fixed-point reals; use decrypt_floats",
            ));
        }
        self.decrypt_all(py, enc)
    }

    /// The plaintexts as reals: each integer divided by ``2**exponent``.
    fn decrypt_floats<'py>(
        &self,
        py: Python<'py>,
        enc: &PyEncryptedArray,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let fixed = FixedPoint {
            frac_bits: enc.exponent,
        };
        let out = self
            .decrypt_all(py, enc)?
            .iter()
            .map(|m| fixed.decode(m, 1))
            .collect();
        Ok(array(py, out))
    }

    /// The public key's bytes and the two primes: for the owner's own storage.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut bytes = self.pair.to_bytes();
        let out = PyBytes::new(py, &bytes);
        zeroize::Zeroize::zeroize(&mut bytes);
        out
    }

    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        KeyPair::from_bytes(data)
            .map(Self::new)
            .map_err(errors::paillier)
    }

    fn __repr__(&self) -> String {
        format!("KeyPair(bits={}, <secret redacted>)", self.public.bits())
    }
}

/// Ciphertexts under one public key, with elementwise homomorphic operations: ``a + b``,
/// ``a - b``, ``-a``, ``a * k`` for ``int`` or ``int64`` arrays ``k`` (``|k| < n/2``),
/// :meth:`mul_floats`, :meth:`sum`, indexing and slicing. Plaintexts live modulo ``n``: sums
/// and products that leave ``(-n/2, n/2)`` wrap around. Computed arrays are re-randomized
/// when serialized (:meth:`to_bytes`), as python-paillier's ``obfuscate`` does.
#[pyclass(module = "privopt.paillier", name = "EncryptedArray", frozen)]
pub struct PyEncryptedArray {
    pk: Arc<PublicKey>,
    cts: Vec<Ciphertext>,
    exponent: u32,
    /// Every ciphertext was encrypted (or read) as it stands, not computed from others.
    fresh: bool,
}

impl PyEncryptedArray {
    /// A computed array (not fresh: re-randomized before it is serialized).
    fn with(&self, cts: Vec<Ciphertext>, exponent: u32) -> Self {
        Self {
            pk: Arc::clone(&self.pk),
            cts,
            exponent,
            fresh: false,
        }
    }

    /// `self`'s ciphertexts scaled to `exponent` (≥ its own) by `2**(exponent − own)`.
    fn aligned(&self, exponent: u32) -> Vec<Ciphertext> {
        if exponent == self.exponent {
            return self.cts.clone();
        }
        let factor = BigInt::from(1) << (exponent - self.exponent);
        self.cts
            .par_iter()
            .map(|c| self.pk.mul_scalar(c, &factor))
            .collect()
    }

    fn check_peer(&self, other: &Self) -> PyResult<()> {
        if self.pk.n() != other.pk.n() {
            return Err(errors::parameter("the arrays are under different keys"));
        }
        if self.cts.len() != other.cts.len() && other.cts.len() != 1 && self.cts.len() != 1 {
            return Err(errors::parameter(format!(
                "arrays of lengths {} and {} do not broadcast",
                self.cts.len(),
                other.cts.len()
            )));
        }
        Ok(())
    }

    /// Elementwise `f(a_i, b_i)` with length-1 operands broadcast.
    fn zip_with(
        a: &[Ciphertext],
        b: &[Ciphertext],
        f: impl Fn(&Ciphertext, &Ciphertext) -> Ciphertext + Sync,
    ) -> Vec<Ciphertext> {
        let len = a.len().max(b.len());
        (0..len)
            .into_par_iter()
            .map(|i| f(&a[i.min(a.len() - 1)], &b[i.min(b.len() - 1)]))
            .collect()
    }

    fn scaled(&self, py: Python<'_>, factors: Vec<BigInt>, exponent: u32) -> PyResult<Self> {
        if factors.len() != 1 && factors.len() != self.cts.len() {
            return Err(errors::parameter(format!(
                "{} factors for an array of length {}",
                factors.len(),
                self.cts.len()
            )));
        }
        if exponent > MAX_EXPONENT {
            return Err(errors::parameter(format!(
                "the product's exponent {exponent} exceeds {MAX_EXPONENT}"
            )));
        }
        for k in &factors {
            self.pk.check_factor(k).map_err(errors::paillier)?;
        }
        let cts = py.detach(|| {
            (0..self.cts.len())
                .into_par_iter()
                .map(|i| {
                    self.pk
                        .mul_scalar(&self.cts[i], &factors[i.min(factors.len() - 1)])
                })
                .collect()
        });
        Ok(self.with(cts, exponent))
    }
}

#[pymethods]
impl PyEncryptedArray {
    /// The public key the ciphertexts are under.
    #[getter]
    fn public_key(&self) -> PyPublicKey {
        PyPublicKey(Arc::clone(&self.pk))
    }

    /// Fixed-point exponent: plaintext integers stand for ``m / 2**exponent``.
    #[getter]
    fn exponent(&self) -> u32 {
        self.exponent
    }

    fn __len__(&self) -> usize {
        self.cts.len()
    }

    fn __getitem__(&self, index: &Bound<'_, PyAny>) -> PyResult<Self> {
        let len = self.cts.len();
        if let Ok(slice) = index.cast::<PySlice>() {
            let ind = slice.indices(len as isize)?;
            let mut picked = Vec::with_capacity(ind.slicelength);
            let mut i = ind.start;
            for _ in 0..ind.slicelength {
                picked.push(self.cts[i as usize].clone());
                i += ind.step;
            }
            return Ok(self.with(picked, self.exponent));
        }
        let i: isize = index.extract()?;
        let at = if i < 0 { i + len as isize } else { i };
        if at < 0 || at >= len as isize {
            return Err(PyIndexError::new_err(format!(
                "index {i} out of range for length {len}"
            )));
        }
        Ok(self.with(vec![self.cts[at as usize].clone()], self.exponent))
    }

    fn __add__(&self, py: Python<'_>, other: &Self) -> PyResult<Self> {
        self.check_peer(other)?;
        let exponent = self.exponent.max(other.exponent);
        let cts = py.detach(|| {
            let (a, b) = (self.aligned(exponent), other.aligned(exponent));
            Self::zip_with(&a, &b, |x, y| self.pk.add(x, y))
        });
        Ok(self.with(cts, exponent))
    }

    fn __sub__(&self, py: Python<'_>, other: &Self) -> PyResult<Self> {
        self.__add__(py, &other.__neg__(py))
    }

    fn __neg__(&self, py: Python<'_>) -> Self {
        let cts = py.detach(|| self.cts.par_iter().map(|c| self.pk.neg(c)).collect());
        self.with(cts, self.exponent)
    }

    /// ``self * k`` for a Python ``int``, or elementwise for an ``int64`` array (or list).
    fn __mul__(&self, py: Python<'_>, k: &Bound<'_, PyAny>) -> PyResult<Self> {
        let factors: Vec<BigInt> = if let Ok(one) = k.extract::<BigInt>() {
            vec![one]
        } else {
            let arr: Exact<'_, i64> = k.extract().map_err(|_| {
                errors::parameter("multiply by an int or an int64 array; use mul_floats for reals")
            })?;
            exact_vec(&arr).into_iter().map(BigInt::from).collect()
        };
        self.scaled(py, factors, self.exponent)
    }

    fn __rmul__(&self, py: Python<'_>, k: &Bound<'_, PyAny>) -> PyResult<Self> {
        self.__mul__(py, k)
    }

    /// ``self * x`` elementwise for reals ``x`` (one, or one per element) encoded with
    /// ``frac_bits`` fractional bits; the result's exponent grows by ``frac_bits``.
    #[pyo3(signature = (x, frac_bits = DEFAULT_FRAC_BITS))]
    fn mul_floats(&self, py: Python<'_>, x: &Bound<'_, PyAny>, frac_bits: u32) -> PyResult<Self> {
        let factors = encode_reals(&scalar_or_reals(x)?, frac_bits)?;
        self.scaled(py, factors, self.exponent.saturating_add(frac_bits))
    }

    /// The encrypted sum of the elements (an array of length 1).
    fn sum(&self, py: Python<'_>) -> PyResult<Self> {
        let first = self
            .cts
            .first()
            .ok_or_else(|| errors::parameter("the sum of an empty array"))?;
        let total = py.detach(|| {
            self.cts[1..]
                .par_iter()
                .cloned()
                .reduce_with(|a, b| self.pk.add(&a, &b))
                .map_or_else(|| first.clone(), |rest| self.pk.add(first, &rest))
        });
        Ok(self.with(vec![total], self.exponent))
    }

    /// The array as a checksummed frame naming its key (BLAKE3 of ``n``), its exponent, count
    /// and ciphertexts at the key's fixed width. A computed array's ciphertexts are first
    /// multiplied by fresh obfuscators (``rerandomize=False`` skips that, for bytes that never
    /// leave the process).
    #[pyo3(signature = (rerandomize = true))]
    fn to_bytes<'py>(&self, py: Python<'py>, rerandomize: bool) -> Bound<'py, PyBytes> {
        let refreshed: Option<Vec<Ciphertext>> = (rerandomize && !self.fresh).then(|| {
            py.detach(|| {
                self.cts
                    .par_iter()
                    .map_init(|| secret_rng(None), |rng, c| self.pk.rerandomize(c, rng))
                    .collect()
            })
        });
        let cts = refreshed.as_deref().unwrap_or(&self.cts);
        let bytes = wire::encode(Method::Standalone, standalone::PAILLIER_ARRAY, |w| {
            w.raw(&key_fingerprint(&self.pk));
            w.u32(self.exponent);
            w.len(cts.len());
            for c in cts {
                w.raw(&c.to_bytes(&self.pk));
            }
        });
        PyBytes::new(py, &bytes)
    }

    /// Parses :meth:`to_bytes` under ``public_key``, validating the checksum, the key and
    /// every ciphertext.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, public_key: &PyPublicKey, data: &[u8]) -> PyResult<Self> {
        let pk = &public_key.0;
        let width = pk.ciphertext_bytes();
        let (exponent, cts) = py
            .detach(|| {
                wire::decode(
                    data,
                    "paillier encrypted array",
                    Method::Standalone,
                    standalone::PAILLIER_ARRAY,
                    |r| {
                        if r.fixed(32)? != key_fingerprint(pk) {
                            return Err(r.invalid("encrypted under another public key"));
                        }
                        let exponent = r.u32()?;
                        if exponent > MAX_EXPONENT {
                            return Err(
                                r.invalid(format!("exponent {exponent} exceeds {MAX_EXPONENT}"))
                            );
                        }
                        let count = r.count(width)?;
                        let body = r.fixed(count * width)?;
                        let cts = body
                            .par_chunks(width)
                            .map(|chunk| Ciphertext::from_bytes(pk, chunk))
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|e| r.invalid(e.to_string()))?;
                        Ok((exponent, cts))
                    },
                )
            })
            .map_err(errors::decode)?;
        Ok(Self {
            pk: Arc::clone(pk),
            cts,
            exponent,
            fresh: true,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "EncryptedArray(len={}, exponent={}, bits={})",
            self.cts.len(),
            self.exponent,
            self.pk.bits()
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPublicKey>()?;
    m.add_class::<PyKeyPair>()?;
    m.add_class::<PyEncryptedArray>()?;
    Ok(())
}
