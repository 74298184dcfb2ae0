//! Bindings of counting and training: `WordCounter`, word counts as arrays (`merge_counts`,
//! `check_counts`), `train_merges`.

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::{no_panic, threads, value_error, with_progress};
use crate::count::{Counter, Gathering, Utf8Errors};
use crate::counts::{self, rising, Flat, FlatRef};
use crate::pretok::Pattern;
use crate::train::{self, TieBreak, TrainConfig};

/// Counts distinct pre-tokens of a corpus, on all cores.
#[pyclass(module = "hf_bpe._core")]
pub struct WordCounter {
    inner: Counter,
}

impl WordCounter {
    /// An error for a counter that only `split_spans` reads.
    fn check_flat(&self) -> PyResult<()> {
        if self.inner.is_split_only() {
            return Err(value_error("this WordCounter was made with split_only=True: read it with split_spans".to_string()));
        }
        Ok(())
    }
}

#[pymethods]
impl WordCounter {
    #[new]
    /// `split_only=True` (a span pattern): only `split_spans` reads the counts, so the spans of a
    /// pattern of up to 4 words are counted as their words' ids (superword training from text).
    #[pyo3(signature = (pattern="gpt2", special_tokens=Vec::new(), num_threads=None, split_only=false))]
    fn new(pattern: &str, special_tokens: Vec<String>, num_threads: Option<isize>, split_only: bool) -> PyResult<Self> {
        let p = Pattern::from_spec(pattern).map_err(value_error)?;
        let mut inner = Counter::new(p, special_tokens, threads(num_threads)?).map_err(value_error)?;
        if split_only {
            inner.split_only().map_err(value_error)?;
        }
        Ok(WordCounter { inner })
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
    /// `range=(start, end)`: only those bytes of a plain file, a shard from `shard_cuts`.
    #[pyo3(signature = (path, errors="strict", text_field="text", progress=None, range=None))]
    fn add_file(
        &mut self,
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        errors: &str,
        text_field: &str,
        progress: Option<PyObject>,
        range: Option<(u64, u64)>,
    ) -> PyResult<()> {
        let path = super::os_path(path)?;
        let errors = Utf8Errors::parse(errors).map_err(value_error)?;
        let inner = &mut self.inner;
        with_progress(py, progress, |cb| inner.add_file(&path, errors, text_field, range, cb))
    }

    /// Where shards of `path` start for the byte offsets `targets`: the first place at or after
    /// each where the reader may cut (the file's end when there is none).
    fn shard_cuts(&self, py: Python<'_>, path: &Bound<'_, PyAny>, targets: Vec<u64>) -> PyResult<Vec<u64>> {
        let path = super::os_path(path)?;
        let inner = &self.inner;
        py.allow_threads(|| inner.shard_cuts(&path, &targets)).map_err(value_error)
    }

    /// The distinct pre-tokens and their counts, sorted by bytes.
    fn words<'py>(&self, py: Python<'py>) -> PyResult<Vec<(Bound<'py, PyBytes>, u64)>> {
        self.check_flat()?;
        let f = py.allow_threads(|| self.inner.flat());
        Ok((0..f.counts.len()).map(|i| (PyBytes::new(py, f.as_ref().word(i)), f.counts[i])).collect())
    }

    /// The distinct pre-tokens and their counts as flat arrays sorted by bytes: `(bytes,
    /// offsets, counts)` (`hf_bpe.WordCounts`' form). With `release=True` the counter's tables
    /// are freed as they are gathered (the counter is then empty), so the two are never whole
    /// at once.
    #[pyo3(signature = (release=false))]
    fn arrays<'py>(&mut self, py: Python<'py>, release: bool) -> PyResult<Arrays<'py>> {
        self.check_flat()?;
        let inner = &mut self.inner;
        let flat = py.allow_threads(|| if release { inner.take_flat() } else { inner.flat() });
        Ok(to_arrays(py, flat))
    }

    /// The counted spans (counted with a span pattern) split by the word `pattern`, as
    /// [`split_spans`] splits their arrays, straight from the tables (freed as they are read:
    /// the counter is then empty): `(word counts, span_words, span_ends, span_counts)`, the spans
    /// in no order and never gathered into bytes of their own. ValueError naming a span that is
    /// not UTF-8.
    #[allow(clippy::type_complexity)]
    fn split_spans<'py>(&mut self, py: Python<'py>, pattern: &str) -> PyResult<(Arrays<'py>, Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u64>>)> {
        let p = Pattern::from_spec(pattern).map_err(value_error)?;
        let inner = &mut self.inner;
        let (s, counts) = py.allow_threads(|| no_panic(|| inner.take_split(&p))).map_err(value_error)?;
        Ok((to_arrays(py, s.words), PyArray1::from_vec(py, s.span_words), PyArray1::from_vec(py, s.span_ends), PyArray1::from_vec(py, counts)))
    }

    /// [`split_spans`](Self::split_spans), the word counts first: the spans come from
    /// `SpanGather.take()`, gathered meanwhile on threads of their own (a counter made with
    /// `split_only=True`; any other has them ready).
    fn split_words<'py>(&mut self, py: Python<'py>, pattern: &str) -> PyResult<(Arrays<'py>, SpanGather)> {
        let p = Pattern::from_spec(pattern).map_err(value_error)?;
        let inner = &mut self.inner;
        let (words, spans) = py.allow_threads(|| no_panic(|| inner.take_split_words(&p, true))).map_err(value_error)?;
        Ok((to_arrays(py, words), SpanGather { inner: Some(spans) }))
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

/// The spans of `WordCounter.split_words`, being gathered.
#[pyclass(module = "hf_bpe._core")]
pub struct SpanGather {
    inner: Option<Gathering>,
}

#[pymethods]
impl SpanGather {
    /// `(span_words, span_ends, span_counts)`, as `WordCounter.split_spans` gives them (waits
    /// until they are gathered); once.
    #[allow(clippy::type_complexity)]
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u64>>)> {
        let spans = self.inner.take().ok_or_else(|| value_error("SpanGather.take: the spans were taken already".to_string()))?;
        let (w, e, c) = py.allow_threads(|| no_panic(|| spans.wait())).map_err(value_error)?;
        Ok((PyArray1::from_vec(py, w), PyArray1::from_vec(py, e), PyArray1::from_vec(py, c)))
    }
}

type Arrays<'py> = (Bound<'py, PyArray1<u8>>, Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u64>>);
type ArraysIn<'py> = (PyReadonlyArray1<'py, u8>, PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, u64>);

fn to_arrays(py: Python<'_>, f: Flat) -> Arrays<'_> {
    (PyArray1::from_vec(py, f.bytes), PyArray1::from_vec(py, f.offsets), PyArray1::from_vec(py, f.counts))
}

fn flat_ref<'a>(a: &'a ArraysIn<'_>) -> PyResult<FlatRef<'a>> {
    Ok(FlatRef { bytes: a.0.as_slice()?, offsets: a.1.as_slice()?, counts: a.2.as_slice()? })
}

/// Checks word counts in the flat form (`(bytes, offsets, counts)`); ValueError naming the word.
#[pyfunction]
pub fn check_counts(py: Python<'_>, arrays: ArraysIn<'_>) -> PyResult<()> {
    let f = flat_ref(&arrays)?;
    py.allow_threads(|| counts::check(f)).map_err(value_error)
}

/// Merges word counts in the flat form, each already checked: every word once, counts summed.
#[pyfunction]
pub fn merge_counts<'py>(py: Python<'py>, runs: Vec<ArraysIn<'py>>) -> PyResult<Arrays<'py>> {
    let refs = runs.iter().map(flat_ref).collect::<PyResult<Vec<_>>>()?;
    let merged = py.allow_threads(|| no_panic(|| counts::merge(&refs))).map_err(value_error)?;
    Ok(to_arrays(py, merged))
}

/// Span counts split by the word `pattern` (`crate::count::split`): `(word counts, span_words,
/// span_ends)`, span `i`'s words being `span_words[span_ends[i]:span_ends[i + 1]]` (indices into
/// the word counts); ValueError naming a span that is not UTF-8.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn split_spans<'py>(py: Python<'py>, arrays: ArraysIn<'py>, pattern: &str) -> PyResult<(Arrays<'py>, Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>)> {
    let p = Pattern::from_spec(pattern).map_err(value_error)?;
    let f = flat_ref(&arrays)?;
    let s = py.allow_threads(|| no_panic(|| crate::count::split(f, &p))).map_err(value_error)?;
    Ok((to_arrays(py, s.words), PyArray1::from_vec(py, s.span_words), PyArray1::from_vec(py, s.span_ends)))
}

/// The words of word counts (flat `bytes`, `offsets`) cut into `encoder`'s tokens by its merges
/// alone (`crate::encode::segment::words`): `(ids, offsets)`. With `max_rank`, only pairs of
/// lower rank merge and no piece is looked up whole.
#[pyfunction]
#[pyo3(signature = (encoder, bytes, offsets, max_rank=None))]
#[allow(clippy::type_complexity)]
pub fn segment_words<'py>(
    py: Python<'py>,
    encoder: PyRef<'py, super::encoder::Encoder>,
    bytes: PyReadonlyArray1<'py, u8>,
    offsets: PyReadonlyArray1<'py, i64>,
    max_rank: Option<u64>,
) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>)> {
    let (b, o) = flat_words(&bytes, &offsets, "segment_words")?;
    let enc = encoder.inner.clone();
    let (ids, offs) = py.allow_threads(|| crate::encode::segment::words(&enc, b, o, max_rank));
    Ok((PyArray1::from_vec(py, ids), PyArray1::from_vec(py, offs)))
}

/// Superword spans cut into stage 1's tokens from their words (`crate::encode::segment::spans`,
/// the words and `span_words`/`span_ends` as [`split_spans`] gives them), equal to
/// [`segment_words`]; ValueError for an encoder of another pattern than gpt2 (or not in merges
/// mode) or arrays that do not fit together (a span's words must spell it; with `checked`, the
/// caller vouches for that and only their lengths are checked). Without `bytes` and `offsets`
/// (both None) a span is its words (as `WordCounter.split_spans` gives them).
#[pyfunction]
#[pyo3(signature = (encoder, bytes, offsets, word_bytes, word_offsets, span_words, span_ends, checked=false))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub fn segment_spans<'py>(
    py: Python<'py>,
    encoder: PyRef<'py, super::encoder::Encoder>,
    bytes: Option<PyReadonlyArray1<'py, u8>>,
    offsets: Option<PyReadonlyArray1<'py, i64>>,
    word_bytes: PyReadonlyArray1<'py, u8>,
    word_offsets: PyReadonlyArray1<'py, i64>,
    span_words: PyReadonlyArray1<'py, u32>,
    span_ends: PyReadonlyArray1<'py, i64>,
    checked: bool,
) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>)> {
    let spans = match (&bytes, &offsets) {
        (Some(b), Some(o)) => Some(flat_words(b, o, "segment_spans")?),
        (None, None) => None,
        _ => return Err(value_error("segment_spans: give both bytes and offsets of the spans, or neither".to_string())),
    };
    let words = (word_bytes.as_slice()?, word_offsets.as_slice()?);
    let (sw, se) = (span_words.as_slice()?, span_ends.as_slice()?);
    let enc = encoder.inner.clone();
    let (ids, offs) = py.allow_threads(|| no_panic(|| crate::encode::segment::spans(&enc, spans, words, sw, se, !checked))).map_err(value_error)?;
    Ok((PyArray1::from_vec(py, ids), PyArray1::from_vec(py, offs)))
}

/// The spans of [`segment_spans`] (without their bytes; `span_counts` their counts,
/// `word_counts` the words') cut where no stage-2 merge of `merges` can cross, each distinct
/// piece once (`crate::encode::segment::pieces`): `(ids, offsets, counts, floor)`, the pieces
/// in [`segment_spans`]' form; train them with `floor` ([`train_merges_extending`]). None where
/// no cut can pay.
#[pyfunction]
#[pyo3(signature = (encoder, word_bytes, word_offsets, word_counts, span_words, span_ends, span_counts, merges))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub fn segment_pieces<'py>(
    py: Python<'py>,
    encoder: PyRef<'py, super::encoder::Encoder>,
    word_bytes: PyReadonlyArray1<'py, u8>,
    word_offsets: PyReadonlyArray1<'py, i64>,
    word_counts: PyReadonlyArray1<'py, u64>,
    span_words: PyReadonlyArray1<'py, u32>,
    span_ends: PyReadonlyArray1<'py, i64>,
    span_counts: PyReadonlyArray1<'py, u64>,
    merges: usize,
) -> PyResult<Option<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u64>>, u64)>> {
    let words = (word_bytes.as_slice()?, word_offsets.as_slice()?);
    let (wc, sw, se, sc) = (word_counts.as_slice()?, span_words.as_slice()?, span_ends.as_slice()?, span_counts.as_slice()?);
    let enc = encoder.inner.clone();
    let out = py.allow_threads(|| no_panic(|| crate::encode::segment::pieces::pieces(&enc, words, wc, sw, se, sc, merges))).map_err(value_error)?;
    Ok(out.map(|p| (PyArray1::from_vec(py, p.ids), PyArray1::from_vec(py, p.offsets), PyArray1::from_vec(py, p.counts), p.floor)))
}

/// The words' flat `bytes` and `offsets`, checked (offsets rise from 0 to `len(bytes)`).
fn flat_words<'a>(bytes: &'a PyReadonlyArray1<'_, u8>, offsets: &'a PyReadonlyArray1<'_, i64>, who: &str) -> PyResult<(&'a [u8], &'a [i64])> {
    let (b, o) = (bytes.as_slice()?, offsets.as_slice()?);
    if !rising(o, b.len()) {
        return Err(value_error(format!("{who}: offsets must rise from 0 to len(bytes)")));
    }
    Ok((b, o))
}

/// Learns merges extending a vocabulary (`crate::train::train_extending`): `base` its tokens of
/// two bytes or more in id order (internal ids 256..), the words cut into internal ids (or into
/// vocabulary ids that `internal` maps to them). With a `floor` ([`segment_pieces`]): None if
/// the best pair fell below it or a merge reused a token (train the whole spans then).
#[pyfunction]
#[pyo3(signature = (base, base_merges, syms, offsets, counts, max_new_tokens, tie_break="lexicographic", min_frequency=0, max_token_length=None, progress=None, merge_filter=None, internal=None, floor=0))]
#[allow(clippy::too_many_arguments)]
pub fn train_merges_extending<'py>(
    py: Python<'py>,
    base: Vec<Vec<u8>>,
    base_merges: Vec<(Vec<u8>, Vec<u8>)>,
    syms: PyReadonlyArray1<'py, u32>,
    offsets: PyReadonlyArray1<'py, i64>,
    counts: PyReadonlyArray1<'py, u64>,
    max_new_tokens: usize,
    tie_break: &str,
    min_frequency: u64,
    max_token_length: Option<usize>,
    progress: Option<PyObject>,
    merge_filter: Option<PyObject>,
    internal: Option<PyReadonlyArray1<'py, u32>>,
    floor: u64,
) -> PyResult<Option<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>>> {
    let (filter, failed) = merge_filter_of(merge_filter)?;
    let cfg = TrainConfig { max_new_tokens, tie_break: tie_break_of(tie_break)?, min_frequency, max_token_length, filter };
    let (ids, o, c) = (syms.as_slice()?, offsets.as_slice()?, counts.as_slice()?);
    if o.len() != c.len() + 1 || !rising(o, ids.len()) {
        return Err(value_error("train_merges_extending: offsets must rise from 0 to len(syms), one more than counts".into()));
    }
    let words = train::Segmented { ids, internal: internal.as_ref().map(|t| t.as_slice()).transpose()?, offsets: o, counts: c };
    let base: Vec<Box<[u8]>> = base.into_iter().map(Vec::into_boxed_slice).collect();
    let merges = with_progress(py, progress, |cb| train::train_extending(&base, &base_merges, words, &cfg, floor, &mut |n| cb(n as u64)))?;
    raise_filter_error(&failed)?;
    Ok(merges.map(|m| m.iter().map(|(a, b)| (PyBytes::new(py, a), PyBytes::new(py, b))).collect()))
}

/// Learns parity-aware merges (`crate::train::train_parity`): `corpora` one word table per
/// language (flat arrays), `dev` per language its dev words and optionally its reference's.
#[pyfunction]
#[pyo3(signature = (corpora, dev, max_new_tokens, tie_break="lexicographic", min_frequency=0, max_token_length=None, variant="base", window_size=100, alpha=2.0, global_merges=0, progress=None, merge_filter=None, num_threads=None))]
#[allow(clippy::too_many_arguments)]
pub fn train_parity_merges<'py>(
    py: Python<'py>,
    corpora: Vec<ArraysIn<'py>>,
    dev: Vec<(ArraysIn<'py>, Option<ArraysIn<'py>>)>,
    max_new_tokens: usize,
    tie_break: &str,
    min_frequency: u64,
    max_token_length: Option<usize>,
    variant: &str,
    window_size: usize,
    alpha: f64,
    global_merges: usize,
    progress: Option<PyObject>,
    merge_filter: Option<PyObject>,
    num_threads: Option<isize>,
) -> PyResult<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
    let n_threads = threads(num_threads)?;
    let variant = match variant {
        "base" => train::Variant::Base,
        "window" => train::Variant::Window { size: window_size, alpha },
        other => return Err(value_error(format!("variant must be 'base' or 'window', not {other:?}"))),
    };
    let (filter, failed) = merge_filter_of(merge_filter)?;
    let train = TrainConfig { max_new_tokens, tie_break: tie_break_of(tie_break)?, min_frequency, max_token_length, filter };
    let cfg = train::ParityConfig { train, variant, global_merges };
    let corpora = corpora.iter().map(flat_ref).collect::<PyResult<Vec<_>>>()?;
    let dev = dev
        .iter()
        .map(|(t, r)| Ok(train::DevText { text: flat_ref(t)?, reference: r.as_ref().map(flat_ref).transpose()? }))
        .collect::<PyResult<Vec<_>>>()?;
    py.allow_threads(|| corpora.iter().chain(dev.iter().flat_map(|d| std::iter::once(&d.text).chain(&d.reference))).try_for_each(|&f| counts::check(f)))
        .map_err(value_error)?;
    let merges = with_progress(py, progress, |cb| {
        let pool = crate::pool::get(n_threads);
        train::train_parity(&corpora, &dev, &cfg, pool.as_deref(), &mut |n| cb(n as u64))
    })?;
    raise_filter_error(&failed)?;
    Ok(merges.iter().map(|(a, b)| (PyBytes::new(py, a), PyBytes::new(py, b))).collect())
}

fn tie_break_of(s: &str) -> PyResult<TieBreak> {
    match s {
        "lexicographic" => Ok(TieBreak::Lexicographic),
        "hf" => Ok(TieBreak::Hf),
        other => Err(value_error(format!("tie_break must be 'lexicographic' or 'hf', not {other:?}"))),
    }
}

pub enum Words<'a> {
    Counter(PyRefMut<'a, WordCounter>),
    Arrays(ArraysIn<'a>),
    List(Vec<(Vec<u8>, u64)>),
}

impl<'a> FromPyObject<'a> for Words<'a> {
    fn extract_bound(ob: &Bound<'a, PyAny>) -> PyResult<Self> {
        if let Ok(c) = ob.downcast::<WordCounter>() {
            let c = c.try_borrow_mut()?;
            c.check_flat()?;
            return Ok(Words::Counter(c));
        }
        if let Ok(a) = ob.extract::<ArraysIn<'a>>() {
            return Ok(Words::Arrays(a));
        }
        Ok(Words::List(ob.extract()?))
    }
}

/// Learns BPE merges from a `WordCounter`, checked flat arrays `(bytes, offsets, counts)` or a
/// list of `(word_bytes, count)`.
/// Returns the merges in training order as `(left_bytes, right_bytes)`. With
/// `release_counts=True` the counter's tables are freed before the merge loop starts (the
/// counter is then empty), so the two phases' memory does not add up.
#[pyfunction]
#[pyo3(signature = (words, max_new_tokens, tie_break="lexicographic", min_frequency=0, max_token_length=None, progress=None, release_counts=false, merge_filter=None))]
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
    merge_filter: Option<PyObject>,
) -> PyResult<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
    let (filter, failed) = merge_filter_of(merge_filter)?;
    let cfg = TrainConfig { max_new_tokens, tie_break: tie_break_of(tie_break)?, min_frequency, max_token_length, filter };
    let merges = match words {
        Words::Counter(mut c) => {
            let counter = &mut c.inner;
            with_progress(py, progress, |cb| {
                let words = if release_counts { counter.take_flat() } else { counter.flat() };
                // The merge loop's parallel part runs on the counter's pool, never on rayon's
                // global one (which a forked child could not use).
                Ok(train::train_owned(words, &cfg, counter.pool(), &mut |n| cb(n as u64)))
            })?
        }
        Words::Arrays(a) => {
            let f = flat_ref(&a)?;
            py.allow_threads(|| counts::check(f)).map_err(value_error)?; // (a direct call may pass anything)
            with_progress(py, progress, |cb| {
                let pool = crate::pool::get(0);
                Ok(train::train(f, &cfg, pool.as_deref(), &mut |n| cb(n as u64)))
            })?
        }
        Words::List(list) => with_progress(py, progress, |cb| {
            let mut words = Flat { bytes: Vec::new(), offsets: vec![0], counts: Vec::with_capacity(list.len()) };
            for (w, c) in list {
                words.push(&w, c);
            }
            let pool = crate::pool::get(0);
            Ok(train::train_owned(words, &cfg, pool.as_deref(), &mut |n| cb(n as u64)))
        })?,
    };
    raise_filter_error(&failed)?;
    Ok(merges.iter().map(|(a, b)| (PyBytes::new(py, a), PyBytes::new(py, b))).collect())
}

/// Where a Python merge filter's exception waits until training has stopped.
type FilterError = std::sync::Arc<std::sync::Mutex<Option<PyErr>>>;

/// The core's filter for a trainer's `merge_filter`: a `str` is a regex over the merged bytes
/// (a match vetoes, run in the core), a callable `(left: bytes, right: bytes) -> bool` says
/// whether the merge may happen (asked with the GIL; an exception stops training and is raised).
fn merge_filter_of(f: Option<PyObject>) -> PyResult<(Option<train::MergeFilter>, FilterError)> {
    let failed: FilterError = Default::default();
    let Some(f) = f else { return Ok((None, failed)) };
    let filter = Python::with_gil(|py| -> PyResult<train::MergeFilter> {
        if let Ok(pattern) = f.extract::<String>(py) {
            return train::regex_filter(&pattern).map_err(value_error);
        }
        if !f.bind(py).is_callable() {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "merge_filter must be a callable (left: bytes, right: bytes) -> bool or a regex str, not {}",
                f.bind(py).get_type().name()?
            )));
        }
        let slot = failed.clone();
        Ok(Box::new(move |a: &[u8], b: &[u8]| {
            Python::with_gil(|py| match f.call1(py, (PyBytes::new(py, a), PyBytes::new(py, b))).and_then(|r| r.is_truthy(py)) {
                Ok(ok) => Some(ok),
                Err(e) => {
                    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    None
                }
            })
        }))
    })?;
    Ok((Some(filter), failed))
}

/// The exception a Python merge filter raised, if any.
fn raise_filter_error(failed: &FilterError) -> PyResult<()> {
    match failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

