//! Bindings of counting and training: `WordCounter`, `train_merges`.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::{no_panic, threads, value_error, with_progress};
use crate::count::{Counter, Utf8Errors};
use crate::pretok::Pattern;
use crate::train::{self, TieBreak, TrainConfig};

/// Counts distinct pre-tokens of a corpus, on all cores.
#[pyclass(module = "hf_bpe._core")]
pub struct WordCounter {
    inner: Counter,
}

#[pymethods]
impl WordCounter {
    #[new]
    #[pyo3(signature = (pattern="gpt2", special_tokens=Vec::new(), num_threads=None))]
    fn new(pattern: &str, special_tokens: Vec<String>, num_threads: Option<isize>) -> PyResult<Self> {
        let p = Pattern::from_spec(pattern).map_err(value_error)?;
        Ok(WordCounter { inner: Counter::new(p, special_tokens, threads(num_threads)?).map_err(value_error)? })
    }

    /// Counts a batch of documents (each split on special tokens, then pre-tokenized).
    /// Texts are borrowed as UTF-8; a lone surrogate becomes U+FFFD, as in `encode`.
    fn add_texts(&mut self, py: Python<'_>, texts: &Bound<'_, PyAny>) -> PyResult<()> {
        let held = super::encoder::texts_of(texts)?;
        let texts = super::encoder::strs_of(&held)?;
        let inner = &mut self.inner;
        py.allow_threads(|| {
            let refs: Vec<&str> = texts.iter().map(|s| s.as_ref()).collect();
            no_panic(|| inner.add_texts(&refs))
        })
        .map_err(value_error)
    }

    /// Streams a file (text, .gz, .jsonl) into the counts; `progress(bytes_read)` now and then.
    #[pyo3(signature = (path, errors="strict", text_field="text", progress=None))]
    fn add_file(
        &mut self,
        py: Python<'_>,
        path: &str,
        errors: &str,
        text_field: &str,
        progress: Option<PyObject>,
    ) -> PyResult<()> {
        let errors = Utf8Errors::parse(errors).map_err(value_error)?;
        let inner = &mut self.inner;
        with_progress(py, progress, |cb| inner.add_file(path, errors, text_field, cb))
    }

    /// The distinct pre-tokens and their counts, sorted by bytes.
    fn words<'py>(&self, py: Python<'py>) -> Vec<(Bound<'py, PyBytes>, u64)> {
        let words = py.allow_threads(|| self.inner.words());
        words.iter().map(|(w, c)| (PyBytes::new(py, w), *c)).collect()
    }

    /// Number of distinct pre-tokens (an upper bound while counts sit in per-thread shards).
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Bytes of text counted so far.
    #[getter]
    fn bytes(&self) -> u64 {
        self.inner.bytes
    }

    /// Documents counted so far.
    #[getter]
    fn documents(&self) -> u64 {
        self.inner.documents
    }

    /// What the reader did with the last file: `max_carry_bytes` (the most bytes held at once)
    /// and `rescanned_bytes` (bytes searched for a cut more than once).
    #[getter]
    fn read_stats(&self) -> (usize, u64) {
        (self.inner.last_read.max_carry, self.inner.last_read.rescanned)
    }
}

pub enum Words<'a> {
    Counter(PyRefMut<'a, WordCounter>),
    List(Vec<(Vec<u8>, u64)>),
}

impl<'a> FromPyObject<'a> for Words<'a> {
    fn extract_bound(ob: &Bound<'a, PyAny>) -> PyResult<Self> {
        if let Ok(c) = ob.downcast::<WordCounter>() {
            return Ok(Words::Counter(c.try_borrow_mut()?));
        }
        Ok(Words::List(ob.extract()?))
    }
}

/// Learns BPE merges from a `WordCounter` or a list of `(word_bytes, count)`.
/// Returns the merges in training order as `(left_bytes, right_bytes)`. With
/// `release_counts=True` the counter's tables are freed before the merge loop starts (the
/// counter is then empty), so the two phases' memory does not add up.
#[pyfunction]
#[pyo3(signature = (words, max_new_tokens, tie_break="lexicographic", min_frequency=0, max_token_length=None, progress=None, release_counts=false))]
#[allow(clippy::too_many_arguments)]
pub fn train_merges<'py>(
    py: Python<'py>,
    words: Words<'_>,
    max_new_tokens: usize,
    tie_break: &str,
    min_frequency: u64,
    max_token_length: Option<usize>,
    progress: Option<PyObject>,
    release_counts: bool,
) -> PyResult<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
    let tie_break = match tie_break {
        "lexicographic" => TieBreak::Lexicographic,
        "hf" => TieBreak::Hf,
        other => return Err(value_error(format!("tie_break must be 'lexicographic' or 'hf', not {other:?}"))),
    };
    let cfg = TrainConfig { max_new_tokens, tie_break, min_frequency, max_token_length };
    let merges = match words {
        Words::Counter(mut c) => {
            let counter = &mut c.inner;
            with_progress(py, progress, |cb| {
                let words = counter.words();
                if release_counts {
                    counter.release();
                }
                // The merge loop's parallel part runs on the counter's pool, never on rayon's
                // global one (which a forked child could not use).
                Ok(train::train(words, &cfg, counter.pool(), &mut |n| cb(n as u64)))
            })?
        }
        Words::List(list) => with_progress(py, progress, |cb| {
            let words: Vec<(Box<[u8]>, u64)> = list.into_iter().map(|(w, c)| (w.into_boxed_slice(), c)).collect();
            let pool = crate::pool::get(0);
            Ok(train::train(words, &cfg, pool.as_deref(), &mut |n| cb(n as u64)))
        })?,
    };
    Ok(merges.iter().map(|(a, b)| (PyBytes::new(py, a), PyBytes::new(py, b))).collect())
}

