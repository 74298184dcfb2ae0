//! Python bindings of the hf_bpe core. Only glue lives here: every algorithm is in its own
//! module, and every long-running call releases the GIL.

use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

pub mod count;
pub mod pretok;
pub mod train;
pub mod unicode_tables;

use count::{Counter, Utf8Errors, INTERRUPTED};
use pretok::Pattern;
use train::{TieBreak, TrainConfig};

fn value_error(e: String) -> PyErr {
    PyValueError::new_err(e)
}

fn threads(n: Option<usize>) -> usize {
    n.filter(|&n| n > 0).unwrap_or(0) // 0 lets rayon pick (RAYON_NUM_THREADS or all cores)
}

/// Runs `f` without the GIL, giving it a progress callback that calls the Python `progress`
/// (if any) with the GIL held and stops the work on a Python exception (e.g. Ctrl-C).
fn with_progress<T: Send>(
    py: Python<'_>,
    progress: Option<PyObject>,
    f: impl FnOnce(&mut dyn FnMut(u64) -> bool) -> Result<T, String> + Send,
) -> PyResult<T> {
    let mut failure: Option<PyErr> = None;
    let out = py.allow_threads(|| {
        let mut cb = |done: u64| -> bool {
            Python::with_gil(|py| {
                let r = py.check_signals().and_then(|_| match &progress {
                    Some(p) => p.call1(py, (done,)).map(|_| ()),
                    None => Ok(()),
                });
                match r {
                    Ok(()) => true,
                    Err(e) => {
                        failure = Some(e);
                        false
                    }
                }
            })
        };
        f(&mut cb)
    });
    match (out, failure) {
        (_, Some(e)) => Err(e),
        (Ok(v), None) => Ok(v),
        (Err(e), None) if e == INTERRUPTED => Err(PyKeyboardInterrupt::new_err("interrupted")),
        (Err(e), None) => Err(value_error(e)),
    }
}

/// Splits `text` into pre-tokens with a built-in pattern name or a regex.
#[pyfunction]
fn pretokenize<'py>(py: Python<'py>, pattern: &str, text: &str) -> PyResult<Bound<'py, PyList>> {
    let p = Pattern::from_spec(pattern).map_err(value_error)?;
    // Split without the GIL into byte ranges, then build the Python strings straight from
    // slices of `text` (no intermediate Rust `String` per piece).
    let ranges = py
        .allow_threads(|| {
            let mut out: Vec<(usize, usize)> = Vec::new();
            p.for_each_piece(text, |s, e| out.push((s, e)))?;
            Ok(out)
        })
        .map_err(value_error)?;
    PyList::new(py, ranges.iter().map(|&(s, e)| PyString::new(py, &text[s..e])))
}

/// Number of pre-tokens of `text`, without building Python strings (for benchmarks).
#[pyfunction]
fn count_pieces(py: Python<'_>, pattern: &str, text: &str) -> PyResult<usize> {
    let p = Pattern::from_spec(pattern).map_err(value_error)?;
    py.allow_threads(|| {
        let mut n = 0usize;
        p.for_each_piece(text, |_, _| n += 1)?;
        Ok(n)
    })
    .map_err(value_error)
}

/// The regex source that a pattern name stands for.
#[pyfunction]
fn pattern_source(pattern: &str) -> PyResult<String> {
    Ok(Pattern::from_spec(pattern).map_err(value_error)?.regex_source().to_string())
}

/// Counts distinct pre-tokens of a corpus, on all cores.
#[pyclass(module = "hf_bpe._core")]
struct WordCounter {
    inner: Counter,
}

#[pymethods]
impl WordCounter {
    #[new]
    #[pyo3(signature = (pattern="gpt2", special_tokens=Vec::new(), num_threads=None))]
    fn new(pattern: &str, special_tokens: Vec<String>, num_threads: Option<usize>) -> PyResult<Self> {
        let p = Pattern::from_spec(pattern).map_err(value_error)?;
        Ok(WordCounter { inner: Counter::new(p, special_tokens, threads(num_threads)).map_err(value_error)? })
    }

    /// Counts a batch of documents (each split on special tokens, then pre-tokenized).
    fn add_texts(&mut self, py: Python<'_>, texts: Vec<String>) -> PyResult<()> {
        let inner = &mut self.inner;
        py.allow_threads(|| {
            let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
            inner.add_texts(&refs)
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
}

enum Words<'a> {
    Counter(PyRef<'a, WordCounter>),
    List(Vec<(Vec<u8>, u64)>),
}

impl<'a> FromPyObject<'a> for Words<'a> {
    fn extract_bound(ob: &Bound<'a, PyAny>) -> PyResult<Self> {
        if let Ok(c) = ob.downcast::<WordCounter>() {
            return Ok(Words::Counter(c.borrow()));
        }
        Ok(Words::List(ob.extract()?))
    }
}

/// Learns BPE merges from a `WordCounter` or a list of `(word_bytes, count)`.
/// Returns the merges in training order as `(left_bytes, right_bytes)`.
#[pyfunction]
#[pyo3(signature = (words, max_new_tokens, tie_break="lexicographic", min_frequency=0, max_token_length=None, progress=None))]
fn train_merges<'py>(
    py: Python<'py>,
    words: Words<'_>,
    max_new_tokens: usize,
    tie_break: &str,
    min_frequency: u64,
    max_token_length: Option<usize>,
    progress: Option<PyObject>,
) -> PyResult<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
    let tie_break = match tie_break {
        "lexicographic" => TieBreak::Lexicographic,
        "hf" => TieBreak::Hf,
        other => return Err(value_error(format!("tie_break must be 'lexicographic' or 'hf', not {other:?}"))),
    };
    let cfg = TrainConfig { max_new_tokens, tie_break, min_frequency, max_token_length };
    let merges = match words {
        Words::Counter(c) => {
            let counter = &c.inner;
            with_progress(py, progress, |cb| {
                let words = counter.words();
                Ok(train::train(&words, &cfg, &mut |n| cb(n as u64)))
            })?
        }
        Words::List(list) => with_progress(py, progress, |cb| {
            let words: Vec<(Box<[u8]>, u64)> = list.into_iter().map(|(w, c)| (w.into_boxed_slice(), c)).collect();
            Ok(train::train(&words, &cfg, &mut |n| cb(n as u64)))
        })?,
    };
    Ok(merges.iter().map(|(a, b)| (PyBytes::new(py, a), PyBytes::new(py, b))).collect())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pretokenize, m)?)?;
    m.add_function(wrap_pyfunction!(pattern_source, m)?)?;
    m.add_function(wrap_pyfunction!(count_pieces, m)?)?;
    m.add_function(wrap_pyfunction!(train_merges, m)?)?;
    m.add_class::<WordCounter>()?;
    Ok(())
}
