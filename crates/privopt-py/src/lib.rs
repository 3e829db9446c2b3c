//! Python bindings of privopt (the extension module `privopt._native`).
//!
//! Each class declares the public Python module it belongs to (`privopt.ckks`,
//! `privopt.paillier`, …), whose `__init__.py` re-exports it; the
//! native module has one submodule per public module. Heavy work
//! runs with the interpreter released ([`Python::detach`]), so other Python threads proceed and
//! batch operations use every core.

use pyo3::prelude::*;

/// Rust's allocations (not Python's) go through mimalloc, which keeps freed pages for reuse:
/// a CKKS product allocates and drops megabyte buffers, and the system allocator hands them
/// back to the kernel and faults them in again, tripling the time of a product.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bootstrap;
mod ckks;
mod dome;
mod dp;
mod dpfhe;
mod dpfhe_fit;
mod eezofl;
mod errors;
mod model_arrays;
mod multiparty;
mod numpy_io;
mod paillier;
mod pdsgd;
mod problem;
mod scalar_fl;
mod secagg;
mod text;

/// Adds `DEFAULTS`, a dict of a method's constants from its Rust crate, to its native submodule
/// (the Python module re-exports it; tests hold the stubs and the Flower app to it).
fn add_defaults(m: &Bound<'_, PyModule>, defaults: &[(&str, f64)]) -> PyResult<()> {
    let d = pyo3::types::PyDict::new(m.py());
    for (key, value) in defaults {
        d.set_item(key, value)?;
    }
    m.add("DEFAULTS", d)
}

/// Adds one public module's classes and functions to its native submodule.
type Register = fn(&Bound<'_, PyModule>) -> PyResult<()>;

/// The native module: one submodule per public module, whose classes the Python package
/// re-exports.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The bootstrapper shares `privopt.ckks` with the leveled classes but lives in a module of its own.
    let registrations: [(&str, &[Register]); 13] = [
        ("ckks", &[ckks::register, bootstrap::register]),
        ("multiparty", &[multiparty::register]),
        ("paillier", &[paillier::register]),
        ("secagg", &[secagg::register]),
        ("dp", &[dp::register]),
        ("scalar_fl", &[scalar_fl::register]),
        ("pdsgd", &[pdsgd::register]),
        ("dome", &[dome::register]),
        ("eezofl", &[eezofl::register]),
        ("dpfhe", &[dpfhe::register]),
        ("dpfhe_fit", &[dpfhe_fit::register]),
        ("problem", &[problem::register]),
        ("text", &[text::register]),
    ];
    for (name, registers) in registrations {
        let sub = PyModule::new(m.py(), name)?;
        for register in registers {
            register(&sub)?;
        }
        m.add_submodule(&sub)?;
    }
    Ok(())
}
