"""The Arrow path of ``datasets.map``: ids written straight into Arrow list columns
(``input_ids`` as ``list<int32>``, ``attention_mask`` as ``list<int8>``) from the core's flat
batch output, and :class:`ArrowMapFn`, the picklable callable :func:`hf_bpe.map_fn` returns."""

from __future__ import annotations

import sys
from collections.abc import Mapping

import numpy as np

from hf_bpe.bpe import BPE

__all__ = ["ArrowMapFn", "arrow_columns", "column_flat", "is_arrow_table", "map_batch", "map_fn", "table_call",
           "with_columns"]


def is_arrow_table(x: object) -> bool:
    """Whether ``x`` is a ``pyarrow.Table`` (without importing pyarrow)."""
    t = type(x)
    return t.__name__ == "Table" and t.__module__.startswith("pyarrow")


def column_flat(bpe: BPE, column, name: str = "text", split_special: bool = False,
                num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Ids of every row of an Arrow string column (``pa.Array`` or ``pa.ChunkedArray``) as one flat
    ``int32`` array plus ``int64`` offsets, read from the column's buffers: no Python ``str`` per
    row. Special tokens of the vocabulary in the text become their ids unless ``split_special``.
    A null row is an error naming it."""
    import pyarrow as pa

    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    special = () if split_special else "all"
    flats, offs, base, row = [], [np.zeros(1, np.int64)], 0, 0
    for chunk in chunks:
        if chunk.null_count:
            bad = row + chunk.is_null().to_numpy(zero_copy_only=False).argmax()
            raise ValueError(f"row {bad} of column {name!r} is None: every row must be a string (use '' for none)")
        if pa.types.is_string_view(chunk.type):
            chunk = chunk.cast(pa.large_string())
        if not (pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type)):
            raise TypeError(f"column {name!r} holds {chunk.type}, not strings")
        _, ob, db = chunk.buffers()
        width = np.int32 if pa.types.is_string(chunk.type) else np.int64
        o = np.frombuffer(ob, dtype=width)[chunk.offset:chunk.offset + len(chunk) + 1].astype(np.int64)
        data = np.frombuffer(db, dtype=np.uint8) if db is not None and db.size else np.zeros(0, np.uint8)
        flat, off = bpe.encode_utf8_rows(data, o, num_threads, allowed_special=special, disallowed_special=())
        flats.append(flat.view(np.int32))
        offs.append(off[1:] + base)
        base += len(flat)
        row += len(chunk)
    flat = flats[0] if len(flats) == 1 else np.concatenate(flats) if flats else np.zeros(0, np.int32)
    return flat, np.concatenate(offs)


def arrow_columns(bpe: BPE, column, name: str, split_special: bool, attention_mask: bool,
                  rows: bool = False) -> tuple[dict, int]:
    """``input_ids`` (``int32``) and ``attention_mask`` (``int8``) of an Arrow string column, and
    the longest row's length: as Arrow list arrays, or with ``rows`` as numpy object arrays of
    per-row views (what ``datasets`` accepts from a batched ``map`` function's dict)."""
    import pyarrow as pa

    flat, off = column_flat(bpe, column, name, split_special)
    longest = int(np.diff(off).max(initial=0))
    mask = np.ones(len(flat), dtype=np.int8) if attention_mask else None
    if rows:
        cols = {}
        for key, values in (("input_ids", flat), ("attention_mask", mask)):
            if values is not None:
                cols[key] = np.empty(len(off) - 1, dtype=object)
                cols[key][:] = np.split(values, off[1:-1])
        return cols, longest
    offsets = pa.array(off.astype(np.int32))
    cols = {"input_ids": pa.ListArray.from_arrays(offsets, pa.array(flat, type=pa.int32()))}
    if mask is not None:
        cols["attention_mask"] = pa.ListArray.from_arrays(offsets, pa.array(mask))
    return cols, longest


def map_batch(batch, column, bpe: BPE, name: str, split_special: bool, attention_mask: bool) -> tuple[dict, int]:
    """The return for ``datasets``' batched ``map`` (see :func:`map_batch_column`) and the longest
    row. With datasets 5, whose ``map`` writes the Arrow values of the batch's columns as they are,
    the Arrow columns go into the batch and the function returns ``{}`` (an Arrow array is not
    allowed in a returned dict); a new column named like an old one (which ``remove_columns``
    would drop) goes back as numpy rows."""
    import datasets

    if (datasets.__version__.split(".")[0] == "5"
            and not {"input_ids", "attention_mask"} & set(batch.pa_table.column_names)):
        cols, longest = arrow_columns(bpe, column, name, split_special, attention_mask)
        for key, values in cols.items():
            batch[key] = values
        return {}, longest
    return arrow_columns(bpe, column, name, split_special, attention_mask, rows=True)


def map_batch_column(batch, column: str):
    """The Arrow column behind ``batch`` when ``datasets``' batched ``map`` hands the batch
    straight to the tokenizer (``ds.map(tok, batched=True)``; its caller is the one two frames up)
    and the column is still as read; else ``None``. Only then may the tokenizer return numpy
    rows instead of lists: nobody but ``datasets`` sees them."""
    if type(batch).__name__ != "LazyBatch" or column not in getattr(batch, "keys_to_format", ()):
        return None
    caller = sys._getframe(2)
    if caller.f_code.co_name != "apply_function" or caller.f_globals.get("__name__") != "datasets.arrow_dataset":
        return None
    return batch.pa_table.column(column)


def table_call(bpe: BPE | None, table, name: str, split_special: bool, attention_mask: bool, call):
    """A tokenizer called on a ``pyarrow.Table``: the table with the encoding of its ``name``
    column appended; from the buffers by ``bpe`` when given (a plain call), else the columns of
    ``call(texts)`` (the tokenizer with its options) as Arrow arrays."""
    import pyarrow as pa

    if name not in table.column_names:
        raise KeyError(f"column {name!r} not in the table (columns: {table.column_names})")
    if bpe is not None:
        cols, _ = arrow_columns(bpe, table.column(name), name, split_special, attention_mask)
    else:
        enc = call(table.column(name).to_pylist())
        cols = {k: pa.array(v, type=pa.list_(pa.int32()) if k != "offset_mapping" else None)
                if isinstance(v, list) and v and isinstance(v[0], list) else pa.array(v)
                for k, v in enc.items()}
    return with_columns(table, cols)


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
                 split_special_tokens: bool = False) -> None:
        self.bpe = bpe
        self.column = column
        self.attention_mask = attention_mask
        self.split_special_tokens = split_special_tokens

    def __reduce__(self):
        return (type(self), (self.bpe, self.column, self.attention_mask, self.split_special_tokens))

    def __call__(self, batch):
        import pyarrow as pa

        if isinstance(batch, pa.Table):
            if self.column not in batch.column_names:
                raise KeyError(f"column {self.column!r} not in the table (columns: {batch.column_names})")
            column = batch.column(self.column)
        elif isinstance(batch, Mapping):
            column = pa.array(list(batch[self.column]), type=pa.string())
            batch = pa.table({self.column: column})
        else:
            raise TypeError(f"expected a pyarrow.Table batch (use ds.with_format('arrow').map(fn, batched=True)), "
                            f"got {type(batch).__name__}")
        cols, _ = arrow_columns(self.bpe, column, self.column, self.split_special_tokens, self.attention_mask)
        return with_columns(batch, cols)


def map_fn(tok_or_bpe: "BPETokenizer | BPE", column: str = "text", attention_mask: bool = True,
           split_special_tokens: bool = False) -> ArrowMapFn:
    """A small picklable callable for ``ds.with_format("arrow").map(fn, batched=True)`` that
    returns the batch as a ``pyarrow.Table`` with ``input_ids`` (``list<int32>``) and
    ``attention_mask`` columns: the fastest way to tokenize a dataset. Special tokens of the
    vocabulary (and a tokenizer's added tokens) in the text become their ids."""
    if isinstance(getattr(tok_or_bpe, "bpe", None), BPE) and hasattr(tok_or_bpe, "engine"):  # a BPETokenizer
        return ArrowMapFn(tok_or_bpe.engine(), column, attention_mask, split_special_tokens)
    if isinstance(tok_or_bpe, BPE):
        return ArrowMapFn(tok_or_bpe, column, attention_mask, split_special_tokens)
    raise TypeError(f"expected an hf_bpe.BPETokenizer or hf_bpe.BPE, got {type(tok_or_bpe).__name__}")
