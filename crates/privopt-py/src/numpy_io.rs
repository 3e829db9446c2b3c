//! numpy arrays in and out: inputs accept any array-like (lists included) that converts
//! without loss; outputs are freshly allocated 1-D arrays.

use numpy::{AllowTypeChange, Element, PyArray1, PyArrayLike1, TypeMustMatch};
use pyo3::prelude::*;

/// Reals: any array-like numpy can turn into `float64`.
pub type Reals<'py> = PyArrayLike1<'py, f64, AllowTypeChange>;

/// Integers of exactly the element type `T` (a float array is refused, never truncated).
pub type Exact<'py, T> = PyArrayLike1<'py, T, TypeMustMatch>;

/// The reals, copied (contiguous or not).
pub fn to_vec(a: &Reals<'_>) -> Vec<f64> {
    a.as_array().iter().copied().collect()
}

/// The integers, copied (contiguous or not).
pub fn exact_vec<T: Element + Copy>(a: &Exact<'_, T>) -> Vec<T> {
    a.as_array().iter().copied().collect()
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
