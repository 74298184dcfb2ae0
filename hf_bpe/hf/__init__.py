"""The ``transformers`` and ``datasets`` adapter: :class:`BPETokenizer` (:mod:`~hf_bpe.hf.tokenizer`,
which imports ``transformers``) and :func:`map_fn` (:mod:`~hf_bpe.hf.arrow`, which does not), each
imported on first use, so that Ray workers and ``map_fn`` never pay for ``transformers``.

* :mod:`~hf_bpe.hf.tokenizer` — ``BPETokenizer``, ``register``;
* :mod:`~hf_bpe.hf.encoding` — token tables, the batch encoders, padding;
* :mod:`~hf_bpe.hf.building` — the engine from transformers' arguments, rebuilding, saving;
* :mod:`~hf_bpe.hf.rows`, :mod:`~hf_bpe.hf.spans` — rows (truncation, pairs, padding) and offsets;
* :mod:`~hf_bpe.hf.arrow` — Arrow columns and ``dataset.map``;
* :mod:`~hf_bpe.hf.post` — a ``tokenizer.json``'s post-processor as ids;
* :mod:`~hf_bpe.hf.hook` — ``AutoTokenizer`` learns ``BPETokenizer`` when transformers is imported.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BPETokenizer", "BPETokenizerConfig", "ArrowMapFn", "map_fn", "register"]


def __getattr__(name: str) -> Any:
    if name in ("ArrowMapFn", "map_fn"):
        from hf_bpe.hf import arrow

        return getattr(arrow, name)
    if name in ("BPETokenizer", "BPETokenizerConfig", "register"):
        from hf_bpe.hf import tokenizer

        return getattr(tokenizer, name)
    raise AttributeError(f"module 'hf_bpe.hf' has no attribute {name!r}")
