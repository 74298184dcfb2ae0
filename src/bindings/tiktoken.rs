//! What tiktoken's `Encoding` has beyond the encoder's own calls: the error class of an unknown
//! id or token (both a `KeyError`, as tiktoken raises, and a `ValueError`, as hf_bpe always
//! has), and the encoding of bytes that need not be UTF-8 (`Encoding._encode_bytes`).

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyTuple, PyType};

use super::encoder::Encoder;
use super::{no_panic, value_error};

static UNKNOWN: GILOnceCell<Py<PyType>> = GILOnceCell::new();

/// `hf_bpe.UnknownTokenError`, made once: a subclass of `KeyError` and `ValueError` whose
/// message prints as it is (a `KeyError` would quote it).
pub(crate) fn unknown_token_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    let ty = UNKNOWN.get_or_try_init(py, || -> PyResult<Py<PyType>> {
        let builtins = py.import("builtins")?;
        let bases = PyTuple::new(py, [builtins.getattr("KeyError")?, builtins.getattr("ValueError")?])?;
        let body = PyDict::new(py);
        body.set_item("__str__", builtins.getattr("BaseException")?.getattr("__str__")?)?;
        body.set_item("__module__", "hf_bpe")?;
        body.set_item("__doc__", "An id or token the vocabulary does not have: a KeyError (as tiktoken raises) \
                                  and a ValueError.")?;
        let made = builtins.getattr("type")?.call1(("UnknownTokenError", bases, body))?;
        Ok(made.downcast_into::<PyType>()?.unbind())
    })?;
    Ok(ty.bind(py))
}

/// The error of an unknown id or token.
pub(crate) fn unknown_token(e: String) -> PyErr {
    Python::with_gil(|py| match unknown_token_type(py) {
        Ok(ty) => PyErr::from_type(ty.clone(), e),
        Err(err) => err,
    })
}

/// Ids of `data`, any bytes, as tiktoken's `_encode_bytes`: valid UTF-8 is `encode_ordinary`;
/// otherwise the valid prefix is encoded, the tokens of its last piece (and the whitespace
/// tokens before it, when that piece starts with one) are taken back, and their bytes with the
/// rest of `data` are merged as one piece. Needs a tokenizer of one pattern whose added tokens
/// are all special (ordinary text is then pieces of the pattern only).
#[pyfunction]
pub fn encode_bytes(py: Python<'_>, encoder: PyRef<'_, Encoder>, data: &[u8]) -> PyResult<Vec<u32>> {
    let enc = encoder.inner.clone();
    if enc.is_generic() || !enc.specials().matches_none(&crate::specials::SpecialSet::None) {
        return Err(value_error("encoding bytes that are not UTF-8 needs a tokenizer of one pattern whose added \
                                tokens are all special; this one runs a tokenizer.json's pipeline or matches \
                                added tokens in ordinary text".into()));
    }
    py.allow_threads(|| {
        no_panic(|| {
            let mut cache = enc.cache(data.len());
            let valid = match std::str::from_utf8(data) {
                Ok(_) => data.len(),
                Err(e) => e.valid_up_to(),
            };
            let text = std::str::from_utf8(&data[..valid]).expect("the valid prefix");
            let (mut ids, mut last) = (Vec::new(), 0usize);
            enc.encode_pieces(&mut cache, text, None, &mut |_, _, piece, _| {
                ids.extend_from_slice(piece);
                last = piece.len();
            })?;
            if valid == data.len() {
                return Ok(ids);
            }
            let spaces = |id: u32| enc.token_bytes(id).is_some_and(|b| b.iter().all(|c| b" \n\t".contains(c)));
            if last > 0 && spaces(ids[ids.len() - last]) {
                while last < ids.len() && spaces(ids[ids.len() - last - 1]) {
                    last += 1;
                }
            }
            let mut tail = Vec::new();
            enc.decode_bytes(ids[ids.len() - last..].iter().map(|&i| i as i64), &mut tail)?;
            tail.extend_from_slice(&data[valid..]);
            ids.truncate(ids.len() - last);
            enc.bpe_piece(&tail, &mut ids);
            Ok(ids)
        })
    })
    .map_err(value_error)
}
