//! `privopt.dpfhe`'s engine: one DP logistic regression fit (plaintext, or on CKKS ciphertexts
//! with the data owner's keys and the compute server in this process), the privacy plan chosen
//! and certified as `privopt run` chooses it, and the FHE paper's datasets as numpy arrays.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use numpy::{PyArray1, PyArray2, PyReadonlyArray2};
use privopt_data::fhe_tasks::load_task as load_paper_task;
use privopt_dpfhe::encrypted::{BootstrapChoice, ServerSetup};
use privopt_dpfhe::estimator::{Algorithm, EncryptedFit, FitSpec, Fitted, fit};
use privopt_dpfhe::plan::PlanTargets;
use privopt_dpfhe::theorem::BarrierShape;
use privopt_math::SeedTree;
use privopt_math::progress::Progress;
use privopt_ml::data::Dataset;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors;
use crate::numpy_io::{Reals, array, to_vec};

/// A fit's failure as a Python exception: bad settings or data are a `ParameterError`; an
/// interrupted fit re-raises what interrupted it.
fn fit_error(e: privopt_dpfhe::DpfheError) -> PyErr {
    match e {
        privopt_dpfhe::DpfheError::Roles(p) => errors::protocol(p),
        privopt_dpfhe::DpfheError::Dp(d) => errors::dp(d),
        other => errors::parameter(other.to_string()),
    }
}

/// Progress lines on stderr (when `verbose`) at most every few seconds, and Ctrl-C between
/// encrypted steps: the signal check needs the interpreter, which the fit has released.
struct PyProgress {
    verbose: bool,
    state: Mutex<ProgressState>,
}

#[derive(Default)]
struct ProgressState {
    label: String,
    total: u64,
    done: u64,
    started: Option<Instant>,
    last_line: Option<Instant>,
    interrupt: Option<PyErr>,
}

/// How often a progress line is written.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

impl PyProgress {
    fn state(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        // A panic while holding the lock leaves counters only; keep going.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Progress for PyProgress {
    fn start(&self, label: &str, total: u64) {
        let now = Instant::now();
        let mut s = self.state();
        (s.label, s.total, s.done) = (label.to_owned(), total, 0);
        (s.started, s.last_line) = (Some(now), Some(now));
        if self.verbose {
            eprintln!("privopt.dpfhe: {label}: 0/{total}");
        }
    }

    fn advance(&self, n: u64) {
        let mut s = self.state();
        s.done += n;
        let now = Instant::now();
        let due = s.last_line.is_none_or(|t| now - t >= PROGRESS_EVERY);
        if self.verbose && (due || s.done == s.total) {
            let elapsed = s.started.map_or(0.0, |t| (now - t).as_secs_f64());
            let left = elapsed / s.done.max(1) as f64 * s.total.saturating_sub(s.done) as f64;
            eprintln!(
                "privopt.dpfhe: {}: {}/{} after {elapsed:.0} s, about {left:.0} s left",
                s.label, s.done, s.total
            );
            s.last_line = Some(now);
        }
    }

    fn finish(&self) {}

    fn should_stop(&self) -> bool {
        let err = Python::attach(|py| py.check_signals().err());
        match err {
            Some(e) => {
                self.state().interrupt = Some(e);
                true
            }
            None => false,
        }
    }
}

/// `value` as a Python dict, through its serde form (the field names are the keys, as in
/// `privopt run`'s summary).
fn to_dict<'py>(py: Python<'py>, value: &impl serde::Serialize) -> PyResult<Bound<'py, PyDict>> {
    let json = serde_json::to_string(value).map_err(|e| errors::parameter(e.to_string()))?;
    Ok(py
        .import("json")?
        .call_method1("loads", (json,))?
        .cast_into()?)
}

/// What a fit reports besides the weights.
fn report_dict<'py>(py: Python<'py>, f: &Fitted) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("plan", to_dict(py, &f.plan)?)?;
    d.set_item("steps_run", f.steps_run)?;
    d.set_item("diverged", f.diverged)?;
    if let Some(e) = &f.encrypted {
        d.set_item("encrypted", to_dict(py, e)?)?;
    }
    Ok(d)
}

/// Fits a DP logistic regression on ``x`` (rows in [-1, 1], the bias column included) and
/// ``y`` (0 or 1); returns the weights and a report dict (``plan``, ``steps_run``,
/// ``diverged``, ``encrypted``). See ``privopt.dpfhe.LogisticRegression``.
#[pyfunction]
#[pyo3(signature = (
    x, y, *, algorithm, epsilon, delta, clip, steps, steps_noclip, batch_size, lr,
    sigmoid_degrees, e_f_target, barrier, release_d, stop_after, encrypted, bootstrap,
    sparse_weights, threads, seed, verbose
))]
#[allow(clippy::too_many_arguments)]
fn fit_logistic<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'_, f64>,
    y: Reals<'_>,
    algorithm: &str,
    epsilon: f64,
    delta: f64,
    clip: f64,
    steps: u64,
    steps_noclip: Option<u64>,
    batch_size: Option<usize>,
    lr: f64,
    sigmoid_degrees: Vec<usize>,
    e_f_target: f64,
    barrier: &str,
    release_d: bool,
    stop_after: Option<u64>,
    encrypted: bool,
    bootstrap: Option<&str>,
    sparse_weights: bool,
    threads: usize,
    seed: Option<u64>,
    verbose: bool,
) -> PyResult<(Bound<'py, PyArray1<f64>>, Bound<'py, PyDict>)> {
    let algorithm = match algorithm {
        "noclip" => Algorithm::NoClip,
        "dpgd" => Algorithm::DpGd,
        "output" => Algorithm::Output,
        other => {
            return Err(errors::parameter(format!(
                "algorithm must be 'noclip', 'dpgd' or 'output', got {other:?}"
            )));
        }
    };
    let barrier = match barrier {
        "least_squares" => BarrierShape::LeastSquares,
        "wall" => BarrierShape::Wall,
        other => {
            return Err(errors::parameter(format!(
                "barrier must be 'least_squares' or 'wall', got {other:?}"
            )));
        }
    };
    let bootstrap = match bootstrap {
        None => None,
        Some("n15") => Some(BootstrapChoice::N15),
        Some("n16") => Some(BootstrapChoice::N16),
        Some("n16-stc-first") => Some(BootstrapChoice::N16StcFirst),
        Some(other) => {
            return Err(errors::parameter(format!(
                "bootstrap must be None (the owner refreshes), 'n15', 'n16' or \
                 'n16-stc-first', got {other:?}"
            )));
        }
    };
    let x = x.as_array();
    let (rows, cols) = x.dim();
    let labels = to_vec(&y);
    if labels.len() != rows {
        return Err(errors::parameter(format!(
            "x has {rows} rows but y has {} labels",
            labels.len()
        )));
    }
    let data = Dataset::new(x.iter().copied().collect(), labels, cols, None)
        .map_err(|e| errors::parameter(e.to_string()))?;
    let spec = FitSpec {
        algorithm,
        targets: PlanTargets {
            epsilon,
            delta,
            clip,
            steps,
            steps_noclip: steps_noclip.unwrap_or(steps),
            batch: batch_size,
            lr_dpgd: lr,
            sigmoid_degrees,
            e_f_target,
            barrier,
            release_d,
        },
        stop_after,
        encrypted: encrypted.then_some(EncryptedFit {
            setup: ServerSetup {
                bootstrap,
                sparse_weights,
            },
            threads,
        }),
        seed,
    };
    let progress = PyProgress {
        verbose,
        state: Mutex::default(),
    };
    // The fit runs with the interpreter released and re-attaches only to check for signals.
    let outcome = py.detach(|| fit(&data, &spec, &progress));
    if let Some(interrupt) = progress.state().interrupt.take() {
        return Err(interrupt);
    }
    let fitted = outcome.map_err(fit_error)?;
    let report = report_dict(py, &fitted)?;
    Ok((array(py, fitted.w), report))
}

/// Features (one row per example, no bias column) and labels.
type Split<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>);

/// Training and test features and labels.
type Task<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<f64>>,
);

/// The rows of `ds` without its last (bias) column, and its labels.
fn without_bias<'py>(py: Python<'py>, ds: &Dataset) -> PyResult<Split<'py>> {
    let d = ds.n_features() - 1;
    let rows: Vec<Vec<f64>> = (0..ds.len()).map(|i| ds.row(i)[..d].to_vec()).collect();
    let x = PyArray2::from_vec2(py, &rows).map_err(|e| errors::parameter(e.to_string()))?;
    Ok((x, array(py, ds.labels().to_vec())))
}

/// One of the FHE paper's tasks (``"mnist"``, ``"adult"``, ``"compas"``, ``"credit"``, or the
/// built-in ``"synthetic"``) preprocessed exactly as ``privopt run`` does for seed ``seed``
/// (features in [-1, 1], labels 0/1, the 80/20 split of COMPAS and Credit drawn from the
/// seed), without the bias column: ``(x_train, y_train, x_test, y_test)``. Catalog datasets
/// are read from ``data_dir`` (``$PRIVOPT_DATA``, else ``data``; fetch them first with
/// ``privopt data fetch NAME``).
#[pyfunction]
#[pyo3(signature = (name, data_dir = None, seed = 0))]
fn load_task<'py>(
    py: Python<'py>,
    name: &str,
    data_dir: Option<PathBuf>,
    seed: u64,
) -> PyResult<Task<'py>> {
    let dir = data_dir
        .or_else(|| std::env::var_os("PRIVOPT_DATA").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("data"));
    let seeds = SeedTree::new(seed);
    let tt = py
        .detach(|| load_paper_task(name, &dir, &seeds, &Default::default()))
        .map_err(|e| errors::parameter(e.to_string()))?;
    let (x_train, y_train) = without_bias(py, &tt.train)?;
    let (x_test, y_test) = without_bias(py, &tt.test)?;
    Ok((x_train, y_train, x_test, y_test))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fit_logistic, m)?)?;
    m.add_function(wrap_pyfunction!(load_task, m)?)?;
    Ok(())
}
