//! A model handed over from Python as numpy arrays in order (views of a PyTorch module's
//! tensors, ``float64`` or ``float32``), worked on by the protocols' window functions one
//! chunk at a time.

use numpy::{PyReadonlyArray1, PyReadwriteArray1};
use pyo3::prelude::*;

use crate::errors;

/// Coordinates a window operation gathers at a time: a whole number of direction blocks, so
/// every chunk after the first starts on a block and no sample is generated twice.
pub(crate) const CHUNK: usize = 1 << 20;

/// One piece of a model's storage as the caller hands it over.
pub(crate) enum Part<'a> {
    F64(&'a mut [f64]),
    F32(&'a mut [f32]),
}

impl Part<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Part::F64(x) => x.len(),
            Part::F32(x) => x.len(),
        }
    }

    /// Copies `self[from..from + out.len()]` into `out` (or back, with `back`).
    fn copy(&mut self, from: usize, out: &mut [f64], back: bool) {
        let n = out.len();
        match self {
            Part::F64(x) if back => x[from..from + n].copy_from_slice(out),
            Part::F64(x) => out.copy_from_slice(&x[from..from + n]),
            Part::F32(x) if back => {
                for (xi, o) in x[from..from + n].iter_mut().zip(out.iter()) {
                    *xi = *o as f32;
                }
            }
            Part::F32(x) => {
                for (o, xi) in out.iter_mut().zip(&x[from..from + n]) {
                    *o = f64::from(*xi);
                }
            }
        }
    }
}

/// A borrowed array of a model's storage.
pub(crate) enum Borrowed<'py> {
    F64(PyReadwriteArray1<'py, f64>),
    F32(PyReadwriteArray1<'py, f32>),
}

/// The model's storage: writable 1-D ``float64`` or ``float32`` numpy arrays in order (views
/// of a module's tensors). Arrays that overlap are refused by numpy's borrow checking.
pub(crate) fn borrow_parts<'py>(xs: &[Bound<'py, PyAny>]) -> PyResult<Vec<Borrowed<'py>>> {
    xs.iter()
        .map(|x| {
            if let Ok(a) = x.extract::<PyReadwriteArray1<'py, f64>>() {
                Ok(Borrowed::F64(a))
            } else if let Ok(a) = x.extract::<PyReadwriteArray1<'py, f32>>() {
                Ok(Borrowed::F32(a))
            } else {
                Err(errors::parameter(format!(
                    "expected writable 1-D float64 or float32 numpy arrays that do not overlap, \
                     got {}",
                    x.get_type().name()?
                )))
            }
        })
        .collect()
}

/// The borrowed arrays as slices (each must be contiguous).
pub(crate) fn parts<'a>(guards: &'a mut [Borrowed<'_>]) -> PyResult<Vec<Part<'a>>> {
    let contiguous = || errors::parameter("the model's arrays must be contiguous");
    guards
        .iter_mut()
        .map(|g| match g {
            Borrowed::F64(a) => a.as_slice_mut().map(Part::F64).map_err(|_| contiguous()),
            Borrowed::F32(a) => a.as_slice_mut().map(Part::F32).map_err(|_| contiguous()),
        })
        .collect()
}

/// Runs `op(offset, x)` over the model stored in `parts` from coordinate `start` on, one
/// chunk at a time: each chunk gathered into `buf` as ``float64``, operated on, and written
/// back (a ``float32`` part rounds once per write).
pub(crate) fn for_each_chunk(
    parts: &mut [Part<'_>],
    start: usize,
    buf: &mut Vec<f64>,
    mut op: impl FnMut(usize, &mut [f64]),
) {
    let end = start + parts.iter().map(Part::len).sum::<usize>();
    let (mut part, mut within) = (0, 0);
    let mut pos = start;
    while pos < end {
        let stop = ((pos / CHUNK + 1) * CHUNK).min(end);
        buf.resize(stop - pos, 0.0);
        for back in [false, true] {
            if back {
                op(pos, buf);
            }
            let (mut q, mut j, mut k) = (part, within, 0);
            while k < buf.len() {
                let take = (parts[q].len() - j).min(buf.len() - k);
                parts[q].copy(j, &mut buf[k..k + take], back);
                (j, k) = (j + take, k + take);
                if j == parts[q].len() {
                    (q, j) = (q + 1, 0);
                }
            }
            if back {
                (part, within) = (q, j);
            }
        }
        pos = stop;
    }
}

pub(crate) fn readonly<'a>(
    h: &'a Option<PyReadonlyArray1<'_, f64>>,
) -> PyResult<Option<&'a [f64]>> {
    h.as_ref()
        .map(|h| {
            h.as_slice()
                .map_err(|_| errors::parameter("h must be a contiguous float64 array"))
        })
        .transpose()
}
