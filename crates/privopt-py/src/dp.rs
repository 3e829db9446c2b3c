//! `privopt.dp`: the privacy accountant of a Gaussian mechanism run, and its inverse.

use privopt_dp::{Accountant, GaussianRun, Sampling};
use pyo3::prelude::*;

use crate::errors;

/// The sampling named in Python: ``"poisson"`` or ``"without_replacement"`` at rate ``q``, or
/// full batches (``q == 1`` or ``"full"``).
fn sampling(q: f64, kind: &str) -> PyResult<Sampling> {
    if !(q > 0.0 && q <= 1.0) {
        return Err(errors::parameter(format!(
            "sampling rate q must be in (0, 1], got {q}"
        )));
    }
    match kind {
        "poisson" | "without_replacement" | "full" if q == 1.0 => Ok(Sampling::Full),
        "full" => Err(errors::parameter(format!(
            "sampling='full' with q = {q}; full batches have q = 1"
        ))),
        "poisson" => Ok(Sampling::Poisson { q }),
        "without_replacement" => Ok(Sampling::WithoutReplacement { q }),
        other => Err(errors::parameter(format!(
            "sampling must be 'poisson', 'without_replacement' or 'full', got {other:?}"
        ))),
    }
}

fn accountant(name: &str) -> PyResult<Accountant> {
    match name {
        "rdp" => Ok(Accountant::Rdp),
        "rdp_classic" => Ok(Accountant::RdpClassic),
        "zcdp" => Ok(Accountant::Zcdp),
        other => Err(errors::parameter(format!(
            "accountant must be 'rdp', 'rdp_classic' or 'zcdp', got {other:?}"
        ))),
    }
}

/// ε at ``delta`` of ``steps`` Gaussian steps with noise multiplier ``sigma`` (noise standard
/// deviation over L2 sensitivity), each on a batch drawn at rate ``q``.
///
/// ``accountant="rdp"`` is Rényi DP over a fixed grid of orders with the improved conversion
/// (Canonne–Kamath–Steinke; what dp-accounting's ``RdpAccountant`` does); ``"rdp_classic"``
/// uses ``ε = ρ(α) + log(1/δ)/(α − 1)``; ``"zcdp"`` is for full batches only.
#[pyfunction]
#[pyo3(signature = (sigma, steps, delta, q = 1.0, sampling = "poisson", accountant = "rdp"))]
fn epsilon(
    py: Python<'_>,
    sigma: f64,
    steps: u64,
    delta: f64,
    q: f64,
    sampling: &str,
    accountant: &str,
) -> PyResult<f64> {
    let run = GaussianRun {
        sigma,
        sampling: self::sampling(q, sampling)?,
        steps,
    };
    let accountant = self::accountant(accountant)?;
    py.detach(|| run.epsilon(delta, accountant))
        .map_err(errors::dp)
}

/// The smallest noise multiplier (relative precision 1e-6, rounded up) with which ``steps``
/// steps at rate ``q`` stay within ``(epsilon, delta)``.
#[pyfunction]
#[pyo3(signature = (epsilon, steps, delta, q = 1.0, sampling = "poisson", accountant = "rdp"))]
fn noise_multiplier(
    py: Python<'_>,
    epsilon: f64,
    steps: u64,
    delta: f64,
    q: f64,
    sampling: &str,
    accountant: &str,
) -> PyResult<f64> {
    let sampling = self::sampling(q, sampling)?;
    let accountant = self::accountant(accountant)?;
    py.detach(|| GaussianRun::calibrate(epsilon, delta, sampling, steps, accountant))
        .map_err(errors::dp)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(epsilon, m)?)?;
    m.add_function(wrap_pyfunction!(noise_multiplier, m)?)?;
    Ok(())
}
