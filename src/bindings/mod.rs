//! The Python bindings (`hf_bpe._core`): argument parsing, GIL release and conversions only;
//! every algorithm lives in its own module of the crate. Long calls release the GIL, run under
//! [`no_panic`] (a Rust panic becomes a ValueError naming it as an internal error), and report
//! progress through [`with_progress`], which also stops the work on Ctrl-C.

mod columns;
mod dropout;
mod encoder;
mod tiktoken;
mod training;

use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::pretok::Pattern;
use crate::corpus::read::INTERRUPTED;

pub(crate) fn value_error(e: String) -> PyErr {
    // (an OS error: `OSError(errno, message)`, which Python makes the errno's subclass)
    let os = e.strip_prefix(crate::files::OS_ERROR).and_then(|r| r.split_once(':'));
    match os.and_then(|(n, msg)| Some((n.parse::<i32>().ok()?, msg))) {
        Some((n, msg)) => pyo3::exceptions::PyOSError::new_err((n, msg.to_string())),
        None => PyValueError::new_err(e),
    }
}

/// A file path from Python (str, bytes or path-like) by its bytes, as `os.fsencode` gives them:
/// on Unix any name, UTF-8 or not, opens that very file (a lossy conversion could open another).
pub(crate) fn os_path(path: &Bound<'_, PyAny>) -> PyResult<std::path::PathBuf> {
    let b: Vec<u8> = path.py().import("os")?.call_method1("fsencode", (path,))?.extract()?;
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Ok(std::path::PathBuf::from(std::ffi::OsString::from_vec(b)))
    }
    #[cfg(not(unix))]
    {
        String::from_utf8(b).map(Into::into).map_err(|e| value_error(format!("the path {:?} is not UTF-8", e.as_bytes())))
    }
}

/// A `num_threads` argument: None or 0 for the default (RAYON_NUM_THREADS or all cores); an
/// absurd count is refused at once.
pub(crate) fn threads(n: Option<isize>) -> PyResult<usize> {
    match n {
        Some(k) if k < 0 => Err(value_error(format!("num_threads={k} must be 0 or more (0 or None: all cores)"))),
        n => crate::pool::check_threads(n.unwrap_or(0) as usize).map_err(value_error),
    }
}

/// Runs `f` without the GIL, giving it a progress callback that calls the Python `progress`
/// (if any) with the GIL held and stops the work on a Python exception (e.g. Ctrl-C).
pub(crate) fn with_progress<T: Send>(
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
        no_panic(|| f(&mut cb))
    });
    match (out, failure) {
        (_, Some(e)) => Err(e),
        (Ok(v), None) => Ok(v),
        (Err(e), None) if e == INTERRUPTED => Err(PyKeyboardInterrupt::new_err("interrupted")),
        (Err(e), None) => Err(value_error(e)),
    }
}

/// Turns a Rust panic (a bug) into a ValueError instead of letting it reach Python as
/// PanicException. Every long call (counting, training, encoding) runs under it.
pub(crate) fn no_panic<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(format!("internal error in hf_bpe (please report): {msg}"))
        }
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
            p.for_each_piece_dyn(text, &mut |s, e| out.push((s, e)))?;
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
        p.for_each_piece_dyn(text, &mut |_, _| n += 1)?;
        Ok(n)
    })
    .map_err(value_error)
}

/// GPT-2's byte-level alphabet: `[b]` is the printable character that stands for byte `b`.
#[pyfunction]
fn byte_alphabet() -> Vec<String> {
    crate::alphabet::byte_alphabet().iter().map(|c| c.to_string()).collect()
}

/// The regex source that a pattern name stands for.
#[pyfunction]
fn pattern_source(pattern: &str) -> PyResult<String> {
    Ok(Pattern::from_spec(pattern).map_err(value_error)?.regex_source().to_string())
}

/// The superword span pattern over `pattern` (`crate::pretok::spans`).
#[pyfunction]
fn span_pattern(pattern: &str, max_words: usize) -> PyResult<String> {
    crate::pretok::spans::span_pattern(pattern, max_words).map_err(value_error)
}

/// `(word pattern, max_words)` of a superword span pattern, else None.
#[pyfunction]
fn span_words(pattern: &str) -> Option<(&'static str, usize)> {
    crate::pretok::spans::span_of(pattern)
}

/// Which engine splits text for a pattern: `"builtin"` (a hand-written scanner), `"spans"` (a
/// superword span pattern: gpt2's scanner, its pieces grouped), `"dfa"` or `"fancy-regex"` (see
/// `pretok/regex.rs`).
#[pyfunction]
fn pattern_engine(pattern: &str) -> PyResult<&'static str> {
    Ok(match Pattern::from_spec(pattern).map_err(value_error)? {
        Pattern::Custom { regex, .. } => regex.engine(),
        Pattern::Spans { .. } => "spans",
        Pattern::Builtin(_) => "builtin",
    })
}

/// The regexes of the Sequence of `Isolated` splits a pattern stands for (one but for
/// DeepSeek-V3's three).
#[pyfunction]
fn pattern_splits(pattern: &str) -> PyResult<Vec<String>> {
    Ok(Pattern::from_spec(pattern).map_err(value_error)?.split_sources().into_iter().map(str::to_string).collect())
}

/// The built-in pattern's name that a Sequence of `Isolated` splits with these regexes
/// amounts to, or None.
#[pyfunction]
fn pattern_from_splits(regexes: Vec<String>) -> Option<&'static str> {
    let r: Vec<&str> = regexes.iter().map(String::as_str).collect();
    Pattern::from_splits(&r).and_then(|p| p.name())
}

/// A `tokenizer.json` regex (Oniguruma's reading) in the dialect of `pattern=`; a construct
/// with no exact rewrite raises ValueError naming it.
#[pyfunction]
fn from_oniguruma(regex: &str) -> PyResult<String> {
    crate::pretok::from_oniguruma(regex).map_err(value_error)
}

/// Whether a regex of ours may match the empty string somewhere (conservative).
#[pyfunction]
fn regex_may_match_empty(regex: &str) -> PyResult<bool> {
    Ok(crate::pretok::Regex::new(regex).map_err(value_error)?.may_be_empty())
}

/// Fills the extension module.
pub fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pretokenize, m)?)?;
    m.add_function(wrap_pyfunction!(pattern_source, m)?)?;
    m.add_function(wrap_pyfunction!(span_pattern, m)?)?;
    m.add_function(wrap_pyfunction!(span_words, m)?)?;
    m.add_function(wrap_pyfunction!(pattern_engine, m)?)?;
    m.add_function(wrap_pyfunction!(pattern_splits, m)?)?;
    m.add_function(wrap_pyfunction!(pattern_from_splits, m)?)?;
    m.add_function(wrap_pyfunction!(from_oniguruma, m)?)?;
    m.add_function(wrap_pyfunction!(regex_may_match_empty, m)?)?;
    m.add_function(wrap_pyfunction!(byte_alphabet, m)?)?;
    m.add_function(wrap_pyfunction!(count_pieces, m)?)?;
    m.add_function(wrap_pyfunction!(training::train_merges, m)?)?;
    m.add_function(wrap_pyfunction!(training::merge_counts, m)?)?;
    m.add_function(wrap_pyfunction!(training::check_counts, m)?)?;
    m.add_function(wrap_pyfunction!(training::segment_words, m)?)?;
    m.add_function(wrap_pyfunction!(training::split_spans, m)?)?;
    m.add_function(wrap_pyfunction!(training::segment_spans, m)?)?;
    m.add_function(wrap_pyfunction!(training::segment_pieces, m)?)?;
    m.add_function(wrap_pyfunction!(training::train_merges_extending, m)?)?;
    m.add_function(wrap_pyfunction!(training::train_parity_merges, m)?)?;
    m.add_class::<training::WordCounter>()?;
    m.add_class::<training::SpanGather>()?;
    m.add_class::<encoder::Encoder>()?;
    m.add_function(wrap_pyfunction!(columns::encode_utf8_column, m)?)?;
    m.add_function(wrap_pyfunction!(columns::pad_rows, m)?)?;
    m.add_class::<encoder::IdBuffer>()?;
    m.add_function(wrap_pyfunction!(encoder::_encoder_from_state, m)?)?;
    m.add_function(wrap_pyfunction!(dropout::encode_batch_dropout, m)?)?;
    m.add_function(wrap_pyfunction!(tiktoken::encode_bytes, m)?)?;
    m.add("UnknownTokenError", tiktoken::unknown_token_type(m.py())?)?;
    Ok(())
}

