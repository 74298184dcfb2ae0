//! hf_bpe's core. One module per concept of the pipeline (see `docs/architecture.md`):
//! `corpus` (reading corpus files, and where text may be cut), `specials` (split at special
//! tokens), `pretok` (pre-tokenize), `count` (distinct words) with `counts` (word counts as
//! data), `train` (the merge loop), `pipeline` (a `tokenizer.json`'s components, parsed),
//! `encode` (encode by rank, and the general path through a pipeline) with `cache` (the word
//! cache), `batch` and `files` (parallel batches and files) on `pool` (fork-aware thread
//! pools), `decode`; `alphabet` (GPT-2's byte alphabet, a leaf), `keys`, `outbuf` and `radix`
//! (a radix sort) are shared helpers. The Python bindings live apart, in `bindings`.

pub mod alphabet;
pub mod batch;
mod bindings;
pub mod cache;
pub mod corpus;
pub mod count;
pub mod counts;
pub mod decode;
pub mod encode;
pub mod files;
pub mod keys;
pub mod memory;
pub mod outbuf;
pub mod pipeline;
pub mod pool;
pub mod pretok;
pub mod radix;
pub mod spans;
pub mod specials;
pub mod train;
pub mod unicode_tables;
pub mod varint;

use pyo3::prelude::*;

/// The extension module `hf_bpe._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    bindings::_core(m)
}
