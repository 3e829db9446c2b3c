//! Python bindings of privopt (the extension module `privopt._native`).
//!
//! Each class declares the public Python module it belongs to (`privopt.ckks`,
//! `privopt.paillier`, …), whose `__init__.py` re-exports it; the
//! native module has one submodule per public module. Heavy work
//! runs with the interpreter released ([`Python::detach`]), so other Python threads proceed and
//! batch operations use every core.

use pyo3::prelude::*;

mod ckks;
mod dp;
mod errors;
mod multiparty;
mod numpy_io;
mod paillier;
mod scalar_fl;
mod secagg;

/// The native module: one submodule per public module, whose classes the Python package
/// re-exports.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    let registrations: [(&str, fn(&Bound<'_, PyModule>) -> PyResult<()>); 6] = [
        ("ckks", ckks::register),
        ("multiparty", multiparty::register),
        ("paillier", paillier::register),
        ("secagg", secagg::register),
        ("dp", dp::register),
        ("scalar_fl", scalar_fl::register),
    ];
    for (name, register) in registrations {
        let sub = PyModule::new(m.py(), name)?;
        register(&sub)?;
        m.add_submodule(&sub)?;
    }
    Ok(())
}
