//! `privopt.problem`: the data, client partition and model of an experiment config's `[data]`
//! and `[model]` tables, built by privopt's loaders and partitioners, so a Python driver (the
//! Flower app, a notebook) trains on exactly what `privopt run` would.

use std::path::PathBuf;

use numpy::{PyArray1, PyArray2};
use privopt_data::problem::{DataConfig, Problem};
use privopt_math::SeedTree;
use privopt_ml::data::Dataset;
use privopt_ml::model::ModelSpec;
use privopt_protocols::scalar_fl::local_batch;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::errors;
use crate::numpy_io::{Exact, Reals, array, exact_vec, to_vec};

/// A table given as a Python mapping, read by the same serde code as the TOML config (so
/// unknown keys and wrong types are refused the same way).
fn table<T: serde::de::DeserializeOwned>(
    py: Python<'_>,
    name: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<T> {
    let json: String = py
        .import("json")?
        .call_method1("dumps", (value,))?
        .extract()?;
    serde_json::from_str(&json).map_err(|e| errors::parameter(format!("[{name}]: {e}")))
}

/// Features (one row per example) and labels.
type Rows<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>);

/// The rows `idx` of `data` (checked indices).
fn rows_of<'py>(py: Python<'py>, data: &Dataset, idx: &[usize]) -> PyResult<Rows<'py>> {
    let d = data.n_features();
    let mut x = Vec::with_capacity(idx.len() * d);
    for &i in idx {
        x.extend_from_slice(data.row(i));
    }
    let y = idx.iter().map(|&i| data.label(i)).collect();
    let x = numpy::ndarray::Array2::from_shape_vec((idx.len(), d), x)
        .map_err(|e| errors::parameter(e.to_string()))?;
    Ok((PyArray2::from_owned_array(py, x), array(py, y)))
}

/// The training and test sets, each client's share of the training set, and the model.
/// ``data`` and ``model`` are the ``[data]`` and ``[model]`` tables of a privopt config as
/// dicts (e.g. ``{"dataset": "synthetic_logistic", "clients": 5}`` and ``{"kind":
/// "logistic"}``); catalog datasets are read from ``data_dir`` (fetch them first with
/// ``privopt data fetch NAME``). ``seed`` fixes synthetic data, subsets and the partition.
#[pyclass(module = "privopt.problem", name = "Problem", frozen)]
pub struct PyProblem(Problem);

impl PyProblem {
    fn check_params(&self, w: &[f64]) -> PyResult<()> {
        let want = self.0.model.num_params();
        if w.len() != want || w.iter().any(|v| !v.is_finite()) {
            return Err(errors::parameter(format!(
                "parameters must be {want} finite values, got {} values",
                w.len()
            )));
        }
        Ok(())
    }

    fn check_indices(&self, idx: &[u64]) -> PyResult<Vec<usize>> {
        let n = self.0.train.len();
        idx.iter()
            .map(|&i| {
                usize::try_from(i).ok().filter(|&i| i < n).ok_or_else(|| {
                    errors::parameter(format!("index {i} is outside the {n} training examples"))
                })
            })
            .collect()
    }
}

#[pymethods]
impl PyProblem {
    #[new]
    #[pyo3(signature = (data, model, data_dir = None, seed = 0))]
    fn new(
        py: Python<'_>,
        data: &Bound<'_, PyDict>,
        model: &Bound<'_, PyDict>,
        data_dir: Option<PathBuf>,
        seed: u64,
    ) -> PyResult<Self> {
        let data: DataConfig = table(py, "data", data.as_any())?;
        let model: ModelSpec = table(py, "model", model.as_any())?;
        data.validate()
            .map_err(|e| errors::parameter(e.to_string()))?;
        let dir = data_dir.unwrap_or_else(|| PathBuf::from("data"));
        let problem = py
            .detach(|| Problem::build(&data, &model, &dir, &SeedTree::new(seed)))
            .map_err(|e| errors::parameter(e.to_string()))?;
        Ok(Self(problem))
    }

    /// Number of clients the training set is split across.
    #[getter]
    fn clients(&self) -> usize {
        self.0.clients.len()
    }

    /// Number of model parameters.
    #[getter]
    fn num_params(&self) -> usize {
        self.0.model.num_params()
    }

    /// Features per example.
    #[getter]
    fn n_features(&self) -> usize {
        self.0.train.n_features()
    }

    /// Training and test examples.
    #[getter]
    fn sizes(&self) -> (usize, usize) {
        (self.0.train.len(), self.0.test.len())
    }

    /// Client ``client``'s examples, as indices into the training set.
    fn client_indices<'py>(
        &self,
        py: Python<'py>,
        client: usize,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let idx = self.0.clients.get(client).ok_or_else(|| {
            errors::parameter(format!(
                "client {client} is not below the {} clients",
                self.0.clients.len()
            ))
        })?;
        Ok(array(py, idx.iter().map(|&i| i as u64).collect()))
    }

    /// The minibatches (indices into the training set) client ``client`` trains on in the
    /// ``local_steps`` local steps of ``round`` in a ``privopt run`` of method ``scalar_fl``
    /// with this ``seed`` and ``batch_size`` (0: all its examples), so a Python driver can
    /// replay that run.
    #[pyo3(signature = (client, round, *, local_steps, batch_size, seed))]
    fn scalar_fl_batches<'py>(
        &self,
        py: Python<'py>,
        client: usize,
        round: u64,
        local_steps: usize,
        batch_size: usize,
        seed: u64,
    ) -> PyResult<Vec<Bound<'py, PyArray1<u64>>>> {
        let pool = self.0.clients.get(client).ok_or_else(|| {
            errors::parameter(format!(
                "client {client} is not below the {} clients",
                self.0.clients.len()
            ))
        })?;
        privopt_math::limits::count("local_steps", local_steps as u64, 1 << 16)
            .map_err(errors::parameter)?;
        let seeds = SeedTree::new(seed);
        Ok((0..local_steps)
            .map(|k| {
                let batch = local_batch(pool, batch_size, &seeds, round, client, k);
                array(py, batch.into_iter().map(|i| i as u64).collect())
            })
            .collect())
    }

    /// The training examples ``indices``: features (one row each) and labels.
    fn rows<'py>(&self, py: Python<'py>, indices: Exact<'_, u64>) -> PyResult<Rows<'py>> {
        let idx = self.check_indices(&exact_vec(&indices))?;
        rows_of(py, &self.0.train, &idx)
    }

    /// The test set's features and labels.
    fn test_rows<'py>(&self, py: Python<'py>) -> PyResult<Rows<'py>> {
        let test = &self.0.test;
        rows_of(py, test, &(0..test.len()).collect::<Vec<_>>())
    }

    /// The model's initial parameters, drawn from ``seed``.
    fn init_params<'py>(&self, py: Python<'py>, seed: u64) -> Bound<'py, PyArray1<f64>> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        array(py, self.0.model.init_params(&mut rng))
    }

    /// The mean loss at ``w`` over the training examples ``indices`` (all if omitted).
    #[pyo3(signature = (w, indices = None))]
    fn loss(&self, py: Python<'_>, w: Reals<'_>, indices: Option<Exact<'_, u64>>) -> PyResult<f64> {
        let w = to_vec(&w);
        self.check_params(&w)?;
        let idx = indices
            .map(|i| self.check_indices(&exact_vec(&i)))
            .transpose()?;
        let p = &self.0;
        Ok(py.detach(|| p.model.loss(&w, &p.train, idx.as_deref())))
    }

    /// The mean loss at ``w`` over the training examples ``indices`` (all if omitted) and its
    /// gradient.
    #[pyo3(signature = (w, indices = None))]
    fn loss_grad<'py>(
        &self,
        py: Python<'py>,
        w: Reals<'_>,
        indices: Option<Exact<'_, u64>>,
    ) -> PyResult<(f64, Bound<'py, PyArray1<f64>>)> {
        let w = to_vec(&w);
        self.check_params(&w)?;
        let p = &self.0;
        if !p.model.has_gradient() {
            return Err(errors::parameter(format!(
                "model `{}` has no gradient (zeroth-order methods only)",
                p.model.name()
            )));
        }
        let idx = indices
            .map(|i| self.check_indices(&exact_vec(&i)))
            .transpose()?;
        let (loss, grad) = py.detach(|| {
            let mut g = vec![0.0; w.len()];
            let loss = p.model.loss_grad(&w, &p.train, idx.as_deref(), &mut g);
            (loss, g)
        });
        Ok((loss, array(py, grad)))
    }

    /// Test-set loss and accuracy at ``w`` (accuracy is ``None`` for regression).
    fn evaluate(&self, py: Python<'_>, w: Reals<'_>) -> PyResult<(f64, Option<f64>)> {
        let w = to_vec(&w);
        self.check_params(&w)?;
        let p = &self.0;
        Ok(py.detach(|| {
            (
                p.model.loss(&w, &p.test, None),
                p.model.accuracy(&w, &p.test),
            )
        }))
    }

    fn __repr__(&self) -> String {
        let (n, m) = (self.0.train.len(), self.0.test.len());
        format!(
            "Problem(model={}, params={}, clients={}, train={n}, test={m})",
            self.0.model.name(),
            self.0.model.num_params(),
            self.0.clients.len()
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProblem>()
}
