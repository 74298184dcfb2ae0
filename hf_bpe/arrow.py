"""The Arrow path of ``datasets.map``: ids written straight into Arrow list columns
(``input_ids`` as ``list<int32>``, ``attention_mask`` as ``list<int8>``) from the core's flat
batch output, and :class:`ArrowMapFn`, the picklable callable :func:`hf_bpe.map_fn` returns."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hf_bpe.bpe import BPE
from hf_bpe.hf_encoding import AddedSpec, encode_texts

__all__ = ["ArrowMapFn", "arrow_columns", "is_arrow_table", "with_columns"]


def is_arrow_table(x: object) -> bool:
    """Whether ``x`` is a ``pyarrow.Table`` (without importing pyarrow)."""
    t = type(x)
    return t.__name__ == "Table" and t.__module__.startswith("pyarrow")


def arrow_columns(bpe: BPE, spec: AddedSpec, texts: list, split_special: bool, attention_mask: bool) -> dict:
    """``input_ids`` (and ``attention_mask``) of ``texts`` as Arrow list arrays; ``None`` is ``""``."""
    import pyarrow as pa

    texts = ["" if t is None else t for t in texts]
    if split_special or not spec.items or spec.native_ok(bpe):
        flat, off = bpe.encode_batch_flat(texts, allowed_special=() if split_special else "all", disallowed_special=())
        flat = flat.astype(np.int32, copy=False)
    else:
        lists = encode_texts(bpe, spec, texts, split_special, False)[0]
        lens = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        off = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        flat = np.fromiter((i for x in lists for i in x), dtype=np.int32, count=int(off[-1]))
    offsets = pa.array(off.astype(np.int32))
    cols = {"input_ids": pa.ListArray.from_arrays(offsets, pa.array(flat, type=pa.int32()))}
    if attention_mask:
        cols["attention_mask"] = pa.ListArray.from_arrays(offsets, pa.array(np.ones(len(flat), dtype=np.int8)))
    return cols


def with_columns(table, cols: dict):
    """``table`` with ``cols`` appended, replacing columns of the same names."""
    for k, v in cols.items():
        if k in table.column_names:
            table = table.drop_columns([k])
        table = table.append_column(k, v)
    return table


class ArrowMapFn:
    """``ds.with_format("arrow").map(fn, batched=True)``: appends ``input_ids`` (``list<int32>``)
    and ``attention_mask`` (``list<int8>``) to each Arrow batch. Picklable and hashed by datasets
    from its compact, deterministic state (the BPE's core state and the options)."""

    def __init__(self, bpe: BPE, column: str = "text", attention_mask: bool = True,
                 added_tokens: tuple = (), split_special_tokens: bool = False) -> None:
        self.bpe = bpe
        self.column = column
        self.attention_mask = attention_mask
        self.added_tokens = tuple(added_tokens)
        self.split_special_tokens = split_special_tokens

    def __reduce__(self):
        return (type(self), (self.bpe, self.column, self.attention_mask, self.added_tokens, self.split_special_tokens))

    def __call__(self, batch):
        import pyarrow as pa

        if isinstance(batch, pa.Table):
            if self.column not in batch.column_names:
                raise KeyError(f"column {self.column!r} not in the table (columns: {batch.column_names})")
            texts = batch.column(self.column).to_pylist()
        elif isinstance(batch, Mapping):
            texts = list(batch[self.column])
            batch = pa.table({self.column: pa.array(texts, type=pa.string())})
        else:
            raise TypeError(f"expected a pyarrow.Table batch (use ds.with_format('arrow').map(fn, batched=True)), "
                            f"got {type(batch).__name__}")
        cols = arrow_columns(self.bpe, AddedSpec(self.added_tokens), texts, self.split_special_tokens,
                             self.attention_mask)
        return with_columns(batch, cols)
