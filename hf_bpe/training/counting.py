"""Counting: documents from lists, generators, files or ``datasets``, split on special tokens,
pre-tokenized and counted by the native core (all cores, GIL released): the first half of
training, and :class:`~hf_bpe.training.counts.WordCounts` as data."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hf_bpe import _core
from hf_bpe.progress import file_progress
from hf_bpe.training.options import check_specials

if TYPE_CHECKING:  # numpy (which WordCounts holds) is imported on first use: `import hf_bpe` stays light
    from hf_bpe.training.counts import WordCounts

__all__ = ["count", "count_files", "count_words", "count_paths", "counts_of", "file_paths"]

# Documents are handed to the core in batches of about this many characters: big enough to keep
# every core busy, small enough to keep memory flat when streaming a generator.
_BATCH_CHARS = 8 << 20


def _batches(texts: Any, text_column: str) -> Iterable[list[str]]:
    """Yields lists of documents from a list/generator of str or a datasets (Iterable)Dataset."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be an iterable of documents, not a single string: wrap it in a list")
    if hasattr(texts, "column_names") and hasattr(texts, "iter"):  # datasets.Dataset / IterableDataset
        cols = texts.column_names
        if cols is not None and text_column not in cols:
            raise ValueError(f"the dataset has no column {text_column!r} (columns: {cols}); pass text_column=")
        for batch in texts.select_columns([text_column]).iter(batch_size=1000):
            docs = batch[text_column]
            yield [d for d in docs if d is not None]
        return
    batch: list[str] = []
    size = 0
    for n, doc in enumerate(texts):
        if not isinstance(doc, str):
            raise TypeError(f"document #{n} is a {type(doc).__name__}, not a str")
        batch.append(doc)
        size += len(doc)
        if size >= _BATCH_CHARS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def count_words(texts: Any, special_tokens: Sequence[str] = ("<|endoftext|>",), pattern: str = "gpt2",
                num_threads: int | None = None, progress: bool = False, text_column: str = "text",
                split_only: bool = False) -> _core.WordCounter:
    """Counts the distinct pre-tokens of documents (the first half of training); ``split_only``:
    spans that only ``WordCounter.split_spans`` will read (superword training)."""
    counter = _core.WordCounter(pattern, list(special_tokens), num_threads, split_only)
    bar = None
    if progress:
        from hf_bpe.progress import _tqdm

        total = len(texts) if hasattr(texts, "__len__") and not isinstance(texts, (str, bytes)) else None
        bar = _tqdm(total=total, desc="counting", unit="doc")
    try:
        for batch in _batches(texts, text_column):
            counter.add_texts(batch)
            if bar is not None:
                bar.update(len(batch))
    finally:
        if bar is not None:
            bar.close()
    return counter


def file_paths(paths) -> list[str]:
    """``paths`` (one or many) as strings, each an existing file, or a clear error."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = [os.fspath(p) for p in paths]
    if not out:
        raise ValueError("no files given")
    for p in out:
        if not Path(p).is_file():
            raise FileNotFoundError(f"{p}: no such file" if not Path(p).exists() else f"{p}: not a file")
    return out


def count_paths(paths, specials: list[str], pattern: str, num_threads: int | None, progress: bool, errors: str,
                 text_field: str, split_only: bool = False) -> _core.WordCounter:
    paths = file_paths(paths)
    counter = _core.WordCounter(pattern, specials, num_threads, split_only)
    with file_progress(paths, "counting", enabled=progress) as cb:
        for p in paths:
            counter.add_file(p, errors, text_field, cb)
            if cb is not None:
                cb.next_file()  # type: ignore[attr-defined]
    return counter


def count(texts: Any, special_tokens: Sequence[str] = ("<|endoftext|>",), pattern: str = "gpt2",
          num_threads: int | None = None, progress: bool = True, text_column: str = "text") -> WordCounts:
    """The word counts of documents, as :func:`train` makes them (same inputs): a
    :class:`~hf_bpe.WordCounts` to merge, save, ship and train on
    (:func:`train_from_counts`)."""
    specials = check_specials(special_tokens)
    counter = count_words(texts, specials, pattern, num_threads, progress, text_column)
    return counts_of(counter, specials, pattern)


def count_files(paths: str | os.PathLike | Sequence[str | os.PathLike],
                special_tokens: Sequence[str] = ("<|endoftext|>",), pattern: str = "gpt2",
                num_threads: int | None = None, progress: bool = True, errors: str = "strict",
                text_field: str = "text") -> WordCounts:
    """The word counts of files, as :func:`train_files` makes them (same inputs)."""
    specials = check_specials(special_tokens)
    counter = count_paths(paths, specials, pattern, num_threads, progress, errors, text_field)
    return counts_of(counter, specials, pattern)


def counts_of(counter: _core.WordCounter, specials: list[str], pattern: str) -> WordCounts:
    """The counter's words (its tables freed while gathering)."""
    from hf_bpe.training.counts import WordCounts

    arrays = counter.arrays(release=True)
    return WordCounts(arrays, pattern, specials, counter.documents, counter.bytes, checked=True)
