//! Binding of BPE-dropout (`crate::encode::Encoder::encode_dropout`): a batch of texts, each
//! encoded with its merges skipped at random, on all cores.

use pyo3::prelude::*;
use pyo3::types::PyList;
use rayon::prelude::*;

use super::encoder::{allowed_of, disallowed_of, strs_of, texts_of, Encoder};
use super::{no_panic, threads, value_error};

/// Ids of each text with BPE-dropout: each merge skipped with probability `p` (as
/// `tokenizers`' `BPE(dropout=p)`), reproducibly from `seed` and the text alone (never the
/// batch or the threads). Without a seed, every text draws its own (equal texts differ too).
/// Specials as in `Encoder.encode`. GIL released.
#[pyfunction]
#[pyo3(signature = (encoder, texts, p, seed, allowed_special=None, disallowed_special=None, num_threads=None))]
#[allow(clippy::too_many_arguments)]
pub fn encode_batch_dropout<'py>(
    py: Python<'py>,
    encoder: PyRef<'_, Encoder>,
    texts: &Bound<'py, PyAny>,
    p: f32,
    seed: Option<u64>,
    allowed_special: Option<&Bound<'_, PyAny>>,
    disallowed_special: Option<&Bound<'_, PyAny>>,
    num_threads: Option<isize>,
) -> PyResult<Bound<'py, PyList>> {
    let allowed = allowed_of(allowed_special)?;
    let disallowed = disallowed_of(disallowed_special)?;
    let held = texts_of(texts)?;
    let texts = strs_of(&held)?;
    let n = threads(num_threads)?;
    let enc = encoder.inner.clone();
    let drawn = {
        use std::hash::{BuildHasher, Hasher};
        std::collections::hash_map::RandomState::new().build_hasher().finish()
    };
    let one = |(i, t): (usize, &std::borrow::Cow<'_, str>)| -> Result<Vec<u32>, String> {
        let mut out = Vec::with_capacity(t.len() / 2 + 4);
        let s = seed.unwrap_or_else(|| drawn ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        enc.encode_dropout(t, &allowed, &disallowed, p, s, &mut out)?;
        Ok(out)
    };
    let lists: Vec<Vec<u32>> = py
        .allow_threads(|| {
            no_panic(|| match (texts.len() > 1).then(|| crate::pool::get(n)).flatten() {
                Some(pool) => pool.install(|| texts.par_iter().enumerate().map(one).collect()),
                None => texts.iter().enumerate().map(one).collect(),
            })
        })
        .map_err(value_error)?;
    PyList::new(py, lists.iter().map(|l| PyList::new(py, l)).collect::<PyResult<Vec<_>>>()?)
}
