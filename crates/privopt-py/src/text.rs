//! `privopt.text`: BERT's uncased WordPiece tokenizer (the one privopt's MiniLM runs use), so
//! a PyTorch model sees exactly the token ids the Rust engine's model sees.

use std::path::PathBuf;

use numpy::{PyArray1, PyArray2};
use privopt_ml::text::WordPiece;
use pyo3::prelude::*;

use crate::errors;

/// Most ids a BERT-style encoder reads (its position table's length); the signatures below
/// spell it as a literal so Python sees the default.
const MAX_LEN: usize = 512;
const _: () = assert!(MAX_LEN == 512);

/// Token ids padded with 0, each row's length, and the rows that were cut to fit.
type Batch<'py> = (
    Bound<'py, PyArray2<i64>>,
    Bound<'py, PyArray1<i64>>,
    Vec<usize>,
);

/// A WordPiece vocabulary (``vocab.txt``: one token per line, the line number is its id).
#[pyclass(name = "WordPiece", module = "privopt.text", frozen)]
pub struct PyWordPiece(WordPiece);

fn check_len(max_len: usize) -> PyResult<()> {
    if (2..=MAX_LEN).contains(&max_len) {
        Ok(())
    } else {
        Err(errors::parameter(format!(
            "max_len must be in 2..={MAX_LEN} ([CLS] and [SEP] included), got {max_len}"
        )))
    }
}

#[pymethods]
impl PyWordPiece {
    #[new]
    fn new(vocab: PathBuf) -> PyResult<Self> {
        WordPiece::from_vocab_file(&vocab)
            .map(Self)
            .map_err(|e| errors::parameter(e.to_string()))
    }

    fn __len__(&self) -> usize {
        self.0.len()
    }

    /// ``[CLS] tokens… [SEP]`` of ``text``, at most ``max_len`` ids.
    #[pyo3(signature = (text, max_len = 512))]
    fn encode(&self, text: &str, max_len: usize) -> PyResult<Vec<u32>> {
        check_len(max_len)?;
        Ok(self.0.encode(text, max_len))
    }

    /// Every text's ids in one ``(n, longest)`` ``int64`` array padded with 0, the lengths,
    /// and the indices of the texts cut to ``max_len``.
    #[pyo3(signature = (texts, max_len = 512))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        max_len: usize,
    ) -> PyResult<Batch<'py>> {
        check_len(max_len)?;
        let rows: Vec<(Vec<u32>, bool)> = py.detach(|| {
            texts
                .iter()
                .map(|t| self.0.encode_checked(t, max_len))
                .collect()
        });
        let longest = rows.iter().map(|(r, _)| r.len()).max().unwrap_or(0);
        let mut ids = numpy::ndarray::Array2::<i64>::zeros((rows.len(), longest));
        for (mut out, (row, _)) in ids.rows_mut().into_iter().zip(&rows) {
            out.iter_mut()
                .zip(row)
                .for_each(|(o, &id)| *o = i64::from(id));
        }
        let lengths = rows.iter().map(|(r, _)| r.len() as i64).collect::<Vec<_>>();
        let cut = (rows.iter().enumerate())
            .filter(|(_, (_, t))| *t)
            .map(|(i, _)| i)
            .collect();
        Ok((
            PyArray2::from_owned_array(py, ids),
            PyArray1::from_vec(py, lengths),
            cut,
        ))
    }

    fn __repr__(&self) -> String {
        format!("WordPiece({} tokens)", self.0.len())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyWordPiece>()
}
