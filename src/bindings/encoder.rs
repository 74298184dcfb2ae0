//! Bindings of the encoder: the `Encoder` class (encode, batches, offsets, files, decode,
//! cache, serialized form) and `IdBuffer`, the owner of a batch's ids behind numpy arrays.

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use super::{no_panic, threads, value_error, with_progress};
use crate::specials::{AddedToken, SpecialSet};
use crate::spans::{self, CharPolicy};
use crate::corpus::read::Utf8Errors;
use crate::{batch, encode, files, outbuf};

/// Owner of a batch's ids behind a numpy array (its `base`): when the array and all its views
/// are gone, the buffer goes back to `outbuf::POOL` for the next batch.
#[pyclass(module = "hf_bpe._core", frozen)]
pub struct IdBuffer {
    ids: Vec<u32>,
}

impl Drop for IdBuffer {
    fn drop(&mut self) {
        outbuf::POOL.give(std::mem::take(&mut self.ids));
    }
}

/// `ids` as a numpy uint32 array. A buffer worth recycling stays owned by an [`IdBuffer`] (the
/// array is a view of it), a small one is handed to numpy as is.
pub(super) fn ids_array(py: Python<'_>, ids: Vec<u32>) -> PyResult<Bound<'_, PyArray1<u32>>> {
    if !outbuf::keepable(ids.capacity()) {
        return Ok(PyArray1::from_vec(py, ids));
    }
    let (ptr, len) = (ids.as_ptr(), ids.len());
    let owner = Bound::new(py, IdBuffer { ids })?;
    // SAFETY: `ptr..ptr + len` are initialized ids in a heap buffer that moving the Vec into
    // `owner` did not move; `owner` never touches it again until it drops, and the array keeps
    // `owner` alive (as its base) as long as the array or any view of it exists.
    unsafe {
        let view = numpy::ndarray::ArrayView1::from_shape_ptr(len, ptr);
        Ok(PyArray1::borrow_from_array(&view, owner.into_any()))
    }
}


/// Borrows `text` as UTF-8. A str with lone surrogates (not encodable as UTF-8) is repaired
/// the way tiktoken does: each surrogate becomes U+FFFD.
pub(super) fn text_of<'a>(ob: &'a Bound<'_, PyAny>) -> PyResult<std::borrow::Cow<'a, str>> {
    let s = ob
        .downcast::<PyString>()
        .map_err(|_| pyo3::exceptions::PyTypeError::new_err(format!("expected str, got {}", ob.get_type().name().map(|n| n.to_string()).unwrap_or_default())))?;
    match s.to_str() {
        Ok(t) => Ok(std::borrow::Cow::Borrowed(t)),
        Err(_) => {
            let fixed = s
                .call_method1("encode", ("utf-16", "surrogatepass"))?
                .call_method1("decode", ("utf-16", "replace"))?;
            Ok(std::borrow::Cow::Owned(fixed.extract::<String>()?))
        }
    }
}

/// Holds a reference to every text of a batch so their UTF-8 can be borrowed without copies
/// while the GIL is released (CPython str objects are immutable).
pub(super) fn texts_of<'py>(ob: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if ob.is_instance_of::<PyString>() {
        return Err(pyo3::exceptions::PyTypeError::new_err("expected a list of str, got a single str"));
    }
    ob.try_iter()?.collect()
}

pub(super) fn strs_of<'a>(held: &'a [Bound<'_, PyAny>]) -> PyResult<Vec<std::borrow::Cow<'a, str>>> {
    held.iter().map(|t| text_of(t)).collect()
}

/// `allowed_special`: "all" or a collection of str.
pub(super) fn allowed_of(ob: Option<&Bound<'_, PyAny>>) -> PyResult<SpecialSet> {
    let Some(ob) = ob else { return Ok(SpecialSet::None) };
    if let Ok(s) = ob.downcast::<PyString>() {
        return if s.to_str()? == "all" {
            Ok(SpecialSet::All)
        } else {
            Err(value_error(format!("allowed_special must be 'all' or a collection of str, not the string {:?}", s.to_str()?)))
        };
    }
    let mut v: Vec<String> = Vec::new();
    for t in ob.try_iter()? {
        v.push(t?.extract()?);
    }
    v.sort();
    Ok(if v.is_empty() { SpecialSet::None } else { SpecialSet::Some(v) })
}

/// `disallowed_special`: "all" (= every special not allowed) or a collection of str.
pub(super) fn disallowed_of(ob: Option<&Bound<'_, PyAny>>) -> PyResult<Option<SpecialSet>> {
    let Some(ob) = ob else { return Ok(None) };
    if let Ok(s) = ob.downcast::<PyString>() {
        return if s.to_str()? == "all" {
            Ok(None)
        } else {
            Err(value_error(format!("disallowed_special must be 'all' or a collection of str, not the string {:?}", s.to_str()?)))
        };
    }
    Ok(Some(allowed_of(Some(ob))?))
}

/// Token ids from a list/sequence of int or a 1-D integer numpy array.
fn ids_of(ob: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    if let Ok(a) = ob.extract::<PyReadonlyArray1<u32>>() {
        return Ok(a.as_array().iter().map(|&x| x as i64).collect());
    }
    if let Ok(a) = ob.extract::<PyReadonlyArray1<i64>>() {
        return Ok(a.as_array().to_vec());
    }
    if let Ok(a) = ob.extract::<PyReadonlyArray1<i32>>() {
        return Ok(a.as_array().iter().map(|&x| x as i64).collect());
    }
    if let Ok(a) = ob.extract::<PyReadonlyArray1<u16>>() {
        return Ok(a.as_array().iter().map(|&x| x as i64).collect());
    }
    if let Ok(a) = ob.extract::<PyReadonlyArray1<u64>>() {
        return Ok(a.as_array().iter().map(|&x| x.min(i64::MAX as u64) as i64).collect());
    }
    let mut v = Vec::new();
    for x in ob.try_iter()? {
        let x = x?;
        match x.extract::<i64>() {
            Ok(i) => v.push(i),
            Err(_) => return Err(value_error(format!("token id {} is not a valid id", x.repr()?))),
        }
    }
    Ok(v)
}

/// Byte-level BPE encoder/decoder (GPT-2/HF merges or tiktoken ranks), see `src/encode/`.
///
/// `Encoder(vocab, merges, special_tokens, pattern, cache_bytes=256 MiB)`:
/// * `vocab`: `{id: bytes}`, must hold all 256 one-byte tokens;
/// * `merges`: `[(left_bytes, right_bytes), ...]` in rank order (GPT-2/HF semantics), or
///   `None` for tiktoken semantics (ids are ranks, merging by the rank of concatenated bytes);
/// every input is checked (`src/encode/vocab.rs`), a problem raises ValueError naming it;
/// * `special_tokens`: `{str: id}`; never split, allowed/disallowed like tiktoken;
/// * `pattern`: `"gpt2"`, `"cl100k"`, `"o200k"` or a regex;
/// * `cache_bytes`: total memory budget of the per-thread word caches (0 disables them).
#[pyclass(module = "hf_bpe._core", name = "Encoder", frozen)]
pub struct Encoder {
    pub(super) inner: std::sync::Arc<encode::Encoder>,
}

/// A batch's ids and its int64 offsets (n + 1: text i is `ids[offsets[i]:offsets[i+1]]`).
#[allow(clippy::type_complexity)]
pub(super) fn flat_arrays(py: Python<'_>, flat: batch::Flat) -> PyResult<(Bound<'_, PyArray1<u32>>, Bound<'_, PyArray1<i64>>)> {
    let mut offsets = Vec::with_capacity(flat.lens.len() + 1);
    let mut acc = 0i64;
    offsets.push(0);
    for &l in &flat.lens {
        acc += l as i64;
        offsets.push(acc);
    }
    Ok((ids_array(py, flat.ids)?, PyArray1::from_vec(py, offsets)))
}

fn flat_of(
    py: Python<'_>,
    enc: &encode::Encoder,
    texts: &[std::borrow::Cow<'_, str>],
    allowed: &SpecialSet,
    disallowed: &Option<SpecialSet>,
    num_threads: Option<isize>,
) -> PyResult<batch::Flat> {
    let n = threads(num_threads)?;
    py.allow_threads(|| {
        let refs: Vec<&str> = texts.iter().map(|s| s.as_ref()).collect();
        no_panic(|| batch::encode_docs(enc, &refs, allowed, disallowed, None, n))
    })
    .map_err(value_error)
}

#[pymethods]
impl Encoder {
    #[new]
    #[pyo3(signature = (vocab, merges, special_tokens, pattern, cache_bytes=encode::DEFAULT_CACHE_BYTES, added_tokens=None, pipeline=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        vocab: std::collections::HashMap<u32, Bound<'_, PyBytes>>,
        merges: Option<Vec<(Bound<'_, PyBytes>, Bound<'_, PyBytes>)>>,
        special_tokens: std::collections::HashMap<String, u32>,
        pattern: &str,
        cache_bytes: usize,
        added_tokens: Option<Vec<(String, u32, bool, bool, bool, bool, bool)>>,
        pipeline: Option<&str>,
    ) -> PyResult<Self> {
        // (Bytes objects, copied as slices: extracting a `Vec<u8>` walks them element by element.)
        let vocab: Vec<(u32, Box<[u8]>)> = vocab.into_iter().map(|(k, v)| (k, v.as_bytes().into())).collect();
        let merges = merges.map(|m| encode::Merges::Bytes(m.iter().map(|(a, b)| (a.as_bytes().into(), b.as_bytes().into())).collect()));
        // `added_tokens`: (content, id, special, lstrip, rstrip, single_word, normalized); a
        // special token given in both places must agree.
        let mut added: Vec<AddedToken> = added_tokens
            .unwrap_or_default()
            .into_iter()
            .map(|(content, id, special, lstrip, rstrip, single_word, normalized)| AddedToken { content, id, special, lstrip, rstrip, single_word, normalized })
            .collect();
        for (s, id) in special_tokens {
            match added.iter().find(|t| t.content == s) {
                Some(t) if t.id == id => {}
                Some(t) => return Err(value_error(format!("special token {s:?} has id {id} and, as an added token, id {}", t.id))),
                None => added.push(AddedToken::special(s, id)),
            }
        }
        let inner = py
            .allow_threads(|| encode::Encoder::build(vocab, merges, added, pattern, pipeline, cache_bytes))
            .map_err(value_error)?;
        Ok(Encoder { inner: std::sync::Arc::new(inner) })
    }

    /// This encoder with more added tokens (same tuples as the constructor's), checked against
    /// its own, and with `pipeline` (the constructor's) in place of its own when given.
    #[pyo3(signature = (added_tokens, pipeline=None))]
    fn derive(&self, py: Python<'_>, added_tokens: Vec<(String, u32, bool, bool, bool, bool, bool)>, pipeline: Option<&str>) -> PyResult<Self> {
        let e = &self.inner;
        let mut added: Vec<AddedToken> = e.specials().tokens().to_vec();
        for (content, id, special, lstrip, rstrip, single_word, normalized) in added_tokens {
            match added.iter().find(|t| t.content == content) {
                Some(t) if t.id == id => {}
                Some(t) => return Err(value_error(format!("added token {content:?} has id {}, not {id}", t.id))),
                None => added.push(AddedToken { content, id, special, lstrip, rstrip, single_word, normalized }),
            }
        }
        let vocab = e.vocab().to_vec();
        let merges = e.merges().map(|m| encode::Merges::Ids(m.to_vec()));
        let pipeline = pipeline.or(e.pipeline_json()).map(str::to_string);
        let (pattern, budget) = (e.pattern_spec().to_string(), e.cache_bytes());
        let inner = py
            .allow_threads(|| encode::Encoder::build(vocab, merges, added, &pattern, pipeline.as_deref(), budget))
            .map_err(value_error)?;
        Ok(Encoder { inner: std::sync::Arc::new(inner) })
    }

    /// Ids of `text` with special tokens treated as ordinary text.
    fn encode_ordinary(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let t = text_of(text)?;
        Ok(flat_of(py, &self.inner, std::slice::from_ref(&t), &SpecialSet::None, &Some(SpecialSet::None), Some(0))?.ids)
    }

    /// Ids of `text`. Specials in `allowed_special` ("all" or a set) become their id; any other
    /// special found in the text raises ValueError unless `disallowed_special` excludes it.
    #[pyo3(signature = (text, allowed_special=None, disallowed_special=None))]
    fn encode(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        allowed_special: Option<&Bound<'_, PyAny>>,
        disallowed_special: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<u32>> {
        let allowed = allowed_of(allowed_special)?;
        let disallowed = disallowed_of(disallowed_special)?;
        let t = text_of(text)?;
        Ok(flat_of(py, &self.inner, std::slice::from_ref(&t), &allowed, &disallowed, Some(0))?.ids)
    }

    /// Like `encode`, as a numpy uint32 array (no Python list of ints).
    #[pyo3(signature = (text, allowed_special=None, disallowed_special=None))]
    fn encode_to_numpy<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        allowed_special: Option<&Bound<'_, PyAny>>,
        disallowed_special: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let allowed = allowed_of(allowed_special)?;
        let disallowed = disallowed_of(disallowed_special)?;
        let t = text_of(text)?;
        let flat = flat_of(py, &self.inner, std::slice::from_ref(&t), &allowed, &disallowed, Some(0))?;
        ids_array(py, flat.ids)
    }

    /// Ids of each text, on all cores (GIL released).
    #[pyo3(signature = (texts, allowed_special=None, disallowed_special=None, num_threads=None))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        allowed_special: Option<&Bound<'_, PyAny>>,
        disallowed_special: Option<&Bound<'_, PyAny>>,
        num_threads: Option<isize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let allowed = allowed_of(allowed_special)?;
        let disallowed = disallowed_of(disallowed_special)?;
        let held = texts_of(texts)?;
        let texts = strs_of(&held)?;
        let flat = flat_of(py, &self.inner, &texts, &allowed, &disallowed, num_threads)?;
        let mut at = 0;
        let lists = flat.lens.iter().map(|&l| {
            let s = &flat.ids[at..at + l];
            at += l;
            PyList::new(py, s)
        });
        let lists: Vec<Bound<'py, PyList>> = lists.collect::<PyResult<_>>()?;
        outbuf::POOL.give(flat.ids);
        PyList::new(py, lists)
    }

    /// Like `encode_ordinary` for each text.
    #[pyo3(signature = (texts, num_threads=None))]
    fn encode_ordinary_batch<'py>(&self, py: Python<'py>, texts: &Bound<'py, PyAny>, num_threads: Option<isize>) -> PyResult<Bound<'py, PyList>> {
        let none = PyTuple::empty(py);
        self.encode_batch(py, texts, None, Some(none.as_any()), num_threads)
    }

    /// All ids of all texts in one numpy uint32 array, plus int64 offsets (len n+1): text i
    /// is `ids[offsets[i]:offsets[i+1]]`.
    #[pyo3(signature = (texts, allowed_special=None, disallowed_special=None, num_threads=None))]
    #[allow(clippy::type_complexity)]
    fn encode_batch_flat<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        allowed_special: Option<&Bound<'_, PyAny>>,
        disallowed_special: Option<&Bound<'_, PyAny>>,
        num_threads: Option<isize>,
    ) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>)> {
        let allowed = allowed_of(allowed_special)?;
        let disallowed = disallowed_of(disallowed_special)?;
        let held = texts_of(texts)?;
        let texts = strs_of(&held)?;
        let flat = flat_of(py, &self.inner, &texts, &allowed, &disallowed, num_threads)?;
        flat_arrays(py, flat)
    }

    /// `(ids, [(start, end), ...])` with character offsets into `text`. A character belongs to
    /// the token holding its first byte; a token made only of continuation bytes gets an empty
    /// range `(k, k)`. So `text[s:e]` is the token's text whenever it is whole characters.
    #[pyo3(signature = (text, allowed_special=None, disallowed_special=None))]
    fn encode_with_offsets(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        allowed_special: Option<&Bound<'_, PyAny>>,
        disallowed_special: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Vec<u32>, Vec<(usize, usize)>)> {
        let allowed = allowed_of(allowed_special)?;
        let disallowed = disallowed_of(disallowed_special)?;
        let t = text_of(text)?;
        let enc = &self.inner;
        let s = py.allow_threads(|| no_panic(|| spans::encode_spans(enc, &[&t], &allowed, &disallowed, CharPolicy::FirstByte)));
        s.map(|s| (s.ids, s.ranges)).map_err(value_error)
    }

    /// `(ids, offsets, words, row_offsets)` of a batch, flat: uint32 ids, int64 `(n, 2)` char
    /// ranges (every char a token's bytes touch, as `tokenizers`), uint32 word index of each
    /// token (the pre-tokenizer piece, or special token, it came from, numbered per text), and
    /// int64 row offsets (len texts + 1).
    #[pyo3(signature = (texts, allowed_special=None, disallowed_special=None))]
    #[allow(clippy::type_complexity)]
    fn encode_spans<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        allowed_special: Option<&Bound<'_, PyAny>>,
        disallowed_special: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray2<i64>>, Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>)> {
        let allowed = allowed_of(allowed_special)?;
        let disallowed = disallowed_of(disallowed_special)?;
        let held = texts_of(texts)?;
        let texts = strs_of(&held)?;
        let docs: Vec<&str> = texts.iter().map(|t| t.as_ref()).collect();
        let enc = &self.inner;
        let s = py
            .allow_threads(|| no_panic(|| spans::encode_spans(enc, &docs, &allowed, &disallowed, CharPolicy::Touched)))
            .map_err(value_error)?;
        let rows: Vec<i64> = std::iter::once(0).chain(s.lens.iter().scan(0i64, |a, &l| { *a += l as i64; Some(*a) })).collect();
        let flat: Vec<i64> = s.ranges.iter().flat_map(|&(a, b)| [a as i64, b as i64]).collect();
        let n = s.ids.len();
        let offsets = PyArray1::from_vec(py, flat).reshape([n, 2])?;
        Ok((PyArray1::from_vec(py, s.ids), offsets, PyArray1::from_vec(py, s.words), PyArray1::from_vec(py, rows)))
    }

    /// Streams a text/.gz/.jsonl file into a .npy of ids (uint16 if n_vocab <= 65536, else
    /// uint32), written atomically. Specials in `allowed_special` (default: all) become their
    /// ids; `separator` (a special token) is appended after each JSON-lines document.
    /// Returns `(num_tokens, num_text_bytes)`.
    #[pyo3(signature = (path_in, path_out, allowed_special=None, disallowed_special=None, separator=None, text_field="text", errors="strict", num_threads=None, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn encode_file(
        &self,
        py: Python<'_>,
        path_in: &Bound<'_, PyAny>,
        path_out: &Bound<'_, PyAny>,
        allowed_special: Option<&Bound<'_, PyAny>>,
        disallowed_special: Option<&Bound<'_, PyAny>>,
        separator: Option<&str>,
        text_field: &str,
        errors: &str,
        num_threads: Option<isize>,
        progress: Option<PyObject>,
    ) -> PyResult<(u64, u64)> {
        let allowed = match allowed_special {
            None => SpecialSet::All,
            Some(a) => allowed_of(Some(a))?,
        };
        let disallowed = disallowed_of(disallowed_special)?;
        let errors = Utf8Errors::parse(errors).map_err(value_error)?;
        let separator = match separator {
            None => None,
            Some(s) => Some(self.inner.specials().id(s).ok_or_else(|| value_error(format!("separator {s:?} is not a special token")))?),
        };
        let opt = files::FileOptions {
            allowed,
            disallowed,
            separator,
            text_field,
            errors,
            num_threads: threads(num_threads)?,
        };
        let (pin, pout) = (super::os_path(path_in)?, super::os_path(path_out)?);
        let enc = &self.inner;
        with_progress(py, progress, |cb| no_panic(|| files::encode_file(enc, &pin, &pout, &opt, cb)))
    }

    /// The concatenated bytes of `ids` (any bytes, valid UTF-8 or not).
    fn decode_bytes<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let ids = ids_of(ids)?;
        let mut out = Vec::new();
        self.inner.decode_bytes(ids, &mut out).map_err(super::tiktoken::unknown_token)?;
        Ok(PyBytes::new(py, &out))
    }

    /// `decode_bytes(ids).decode("utf-8", errors)`.
    #[pyo3(signature = (ids, errors="replace"))]
    fn decode<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>, errors: &str) -> PyResult<Bound<'py, PyAny>> {
        let b = self.decode_bytes(py, ids)?;
        b.call_method1("decode", ("utf-8", errors))
    }

    /// `decode` of each id sequence.
    #[pyo3(signature = (batch, errors="replace"))]
    fn decode_batch<'py>(&self, py: Python<'py>, batch: &Bound<'py, PyAny>, errors: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
        batch.try_iter()?.map(|ids| self.decode(py, &ids?, errors)).collect()
    }

    /// The bytes of one token (special tokens included).
    fn token_bytes<'py>(&self, py: Python<'py>, id: i64) -> PyResult<Bound<'py, PyBytes>> {
        match u32::try_from(id).ok().and_then(|i| self.inner.token_bytes(i)) {
            Some(b) => Ok(PyBytes::new(py, b)),
            None => Err(super::tiktoken::unknown_token(format!("unknown token id {id}"))),
        }
    }

    /// One more than the largest id (vocab and special tokens).
    #[getter]
    fn n_vocab(&self) -> usize {
        self.inner.n_vocab()
    }

    /// The added tokens marked special, `{content: id}`.
    #[getter]
    fn special_tokens<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for t in self.inner.specials().tokens().iter().filter(|t| t.special) {
            d.set_item(&t.content, t.id)?;
        }
        Ok(d)
    }

    /// Every added token as (content, id, special, lstrip, rstrip, single_word, normalized),
    /// sorted by id.
    #[getter]
    fn added_tokens(&self) -> Vec<(String, u32, bool, bool, bool, bool, bool)> {
        self.inner.specials().tokens().iter().map(|t| (t.content.clone(), t.id, t.special, t.lstrip, t.rstrip, t.single_word, t.normalized)).collect()
    }

    /// The imported tokenizer.json components as JSON (None for a vocabulary of our own).
    #[getter]
    fn pipeline(&self) -> Option<&str> {
        self.inner.pipeline_json()
    }

    /// Whether text takes the general path (normalizer, several pre-tokenizer steps, ...).
    #[getter]
    fn is_generic(&self) -> bool {
        self.inner.is_generic()
    }

    #[getter]
    fn pattern(&self) -> &str {
        self.inner.pattern_spec()
    }

    /// True when built with `merges=None` (tiktoken rank semantics).
    #[getter]
    fn is_tiktoken(&self) -> bool {
        self.inner.is_tiktoken()
    }

    #[getter]
    fn cache_bytes(&self) -> usize {
        self.inner.cache_bytes()
    }

    /// Every id and its bytes (special tokens as their UTF-8 bytes).
    #[getter]
    fn vocab<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (id, b) in self.inner.vocab() {
            d.set_item(id, PyBytes::new(py, b))?;
        }
        for (s, id) in self.inner.specials().list() {
            d.set_item(id, PyBytes::new(py, s.as_bytes()))?;
        }
        Ok(d)
    }

    /// The merges as byte pairs in rank order; None for tiktoken ranks.
    #[getter]
    fn merges<'py>(&self, py: Python<'py>) -> Option<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        let m = self.inner.merges()?;
        let b = |id: u32| PyBytes::new(py, self.inner.token_bytes(id).unwrap_or_default());
        Some(m.iter().map(|&(x, y)| (b(x), b(y))).collect())
    }

    /// `{"hits", "misses", "bytes"}` of the word caches (idle slots only).
    fn cache_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (h, m, b) = self.inner.cache_stats();
        let d = PyDict::new(py);
        d.set_item("hits", h)?;
        d.set_item("misses", m)?;
        d.set_item("bytes", b)?;
        d.set_item("budget", self.inner.cache_bytes())?;
        // Output buffers kept for reuse (process-wide, see `clear_cache`): bytes of capacity.
        d.set_item("kept_output_bytes", outbuf::POOL.kept().iter().sum::<usize>() * 4)?;
        Ok(d)
    }

    /// Empties the word cache, and frees the output buffers kept for reuse by later batches.
    fn clear_cache(&self) {
        self.inner.clear_cache();
        outbuf::POOL.clear();
    }

    /// Deterministic serialized tables (no cache): identical bytes in every process.
    fn to_state<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_state())
    }

    /// The encoder of `to_state()`'s bytes; `cache_bytes` replaces the saved cache budget.
    #[staticmethod]
    #[pyo3(signature = (state, cache_bytes=None))]
    fn from_state(py: Python<'_>, state: &[u8], cache_bytes: Option<usize>) -> PyResult<Self> {
        let inner = py.allow_threads(|| encode::Encoder::from_state_with_budget(state, cache_bytes)).map_err(value_error)?;
        Ok(Encoder { inner: std::sync::Arc::new(inner) })
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let f = py.import("hf_bpe._core")?.getattr("_encoder_from_state")?;
        Ok((f, (self.to_state(py),)))
    }

    /// Benchmark helper: pre-tokenizes `text` (single thread), then, if `encode`, runs the cache
    /// + merge core on the pieces. Returns the number of pieces or tokens. Time two calls with
    /// `time.thread_time()` to separate the pre-tokenizer from the core.
    #[pyo3(signature = (text, encode=true))]
    fn _time_core(&self, py: Python<'_>, text: &Bound<'_, PyAny>, encode: bool) -> PyResult<usize> {
        let t = text_of(text)?;
        let enc = &self.inner;
        py.allow_threads(|| {
            let b = t.as_bytes();
            let mut pieces: Vec<(usize, usize)> = Vec::new();
            enc.pattern.for_each_piece_dyn(&t, &mut |s, e| pieces.push((s, e)))?;
            if !encode {
                return Ok(pieces.len());
            }
            let mut cache = enc.cache(0);
            let mut out = Vec::with_capacity(b.len() / 3);
            for &(s, e) in &pieces {
                enc.encode_piece(&mut cache, &b[s..e], &mut out);
            }
            Ok(out.len())
        })
        .map_err(value_error)
    }

    fn __repr__(&self) -> String {
        format!(
            "Encoder(n_vocab={}, {}, specials={}, pattern={:?})",
            self.inner.n_vocab(),
            if self.inner.is_tiktoken() { "tiktoken ranks" } else { "merges" },
            self.inner.specials().list().len(),
            self.inner.pattern_spec()
        )
    }
}

/// Unpickling entry point for `Encoder` (see `Encoder.__reduce__`).
#[pyfunction]
pub fn _encoder_from_state(py: Python<'_>, state: &[u8]) -> PyResult<Encoder> {
    Encoder::from_state(py, state, None)
}
