//! `privopt.ckks.dp` — placeholder until written.
use pyo3::prelude::*;
pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> { Ok(()) }
