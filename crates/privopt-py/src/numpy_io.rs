//! numpy arrays in and out: inputs accept any array-like (lists included) that converts
//! without loss; outputs are freshly allocated 1-D arrays.

use std::borrow::Cow;

use numpy::{AllowTypeChange, Element, PyArray1, PyArrayLike1, PyReadonlyArray1, TypeMustMatch};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// An array-like argument: what numpy cannot convert to the element type (strings, a NaN for
/// integers) is a `TypeError` naming the value's type, not numpy's `ValueError`.
pub struct ArrayArg<A>(A);

impl<'a, 'py, A> FromPyObject<'a, 'py> for ArrayArg<A>
where
    A: FromPyObject<'a, 'py, Error = PyErr>,
{
    type Error = PyErr;

    fn extract(ob: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match ob.extract::<A>() {
            Ok(a) => Ok(Self(a)),
            Err(e) if e.is_instance_of::<PyValueError>(ob.py()) => {
                Err(PyTypeError::new_err(format!(
                    "expected an array of numbers, got {}: {e}",
                    ob.get_type().name()?
                )))
            }
            Err(e) => Err(e),
        }
    }
}

impl<A> std::ops::Deref for ArrayArg<A> {
    type Target = A;

    fn deref(&self) -> &A {
        &self.0
    }
}

/// Reals: any array-like numpy can turn into `float64`.
pub type Reals<'py> = ArrayArg<PyArrayLike1<'py, f64, AllowTypeChange>>;

/// Integers of exactly the element type `T` (a float array is refused, never truncated).
pub type Exact<'py, T> = ArrayArg<PyArrayLike1<'py, T, TypeMustMatch>>;

/// The reals, copied (contiguous or not).
pub fn to_vec(a: &Reals<'_>) -> Vec<f64> {
    slice_or_copy(a).into_owned()
}

/// The integers, copied (contiguous or not).
pub fn exact_vec<T: Element + Copy>(a: &Exact<'_, T>) -> Vec<T> {
    slice_or_copy(a).into_owned()
}

/// The elements, borrowed when the array is contiguous (a masked input is millions of
/// words), copied otherwise.
pub fn slice_or_copy<'a, T: Element + Copy>(a: &'a PyReadonlyArray1<'_, T>) -> Cow<'a, [T]> {
    match a.as_slice() {
        Ok(words) => Cow::Borrowed(words),
        Err(_) => Cow::Owned(a.as_array().iter().copied().collect()),
    }
}

/// A new 1-D array owning `v`.
pub fn array<T: Element>(py: Python<'_>, v: Vec<T>) -> Bound<'_, PyArray1<T>> {
    PyArray1::from_vec(py, v)
}

/// One real or an array-like of reals.
pub fn scalar_or_reals(obj: &Bound<'_, PyAny>) -> PyResult<Vec<f64>> {
    if let Ok(x) = obj.extract::<f64>() {
        return Ok(vec![x]);
    }
    let reals: Reals<'_> = obj.extract()?;
    Ok(to_vec(&reals))
}
