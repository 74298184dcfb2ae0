"""Training front: documents from lists, generators, files or ``datasets``, counted by the native
core (all cores, GIL released), then merged by the native trainer.

The recipe is GPT-2's: split on special tokens (they go straight into the vocabulary and never
take part in a merge), pre-tokenize with the pattern, count each distinct pre-token once, then
repeatedly merge the most frequent adjacent pair (weighted by word count) until the vocabulary
is full.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hf_bpe import _core
from hf_bpe.bpe import BPE
from hf_bpe.alphabet import BYTE_TO_CHAR

if TYPE_CHECKING:  # numpy (which WordCounts holds) is imported on first use: `import hf_bpe` stays light
    from hf_bpe.counts import WordCounts
from hf_bpe.progress import count_progress, file_progress

__all__ = ["train", "train_files", "train_from_counts", "count", "count_files", "count_words"]

TieBreak = Literal["lexicographic", "hf"]

EMPTY = "the corpus is empty: there is no text to train on (only empty documents or special tokens)"

# Token ids are 32-bit; far below that, a vocabulary this large is already unheard of.
MAX_VOCAB_SIZE = 1 << 24

# Documents are handed to the core in batches of about this many characters: big enough to keep
# every core busy, small enough to keep memory flat when streaming a generator.
_BATCH_CHARS = 8 << 20


def _check_options(vocab_size: int, special_tokens: Sequence[str], tie_break: str, min_frequency: int,
                   max_token_length: int | None) -> list[str]:
    if isinstance(special_tokens, str):
        raise TypeError(f"special_tokens must be a list of strings, not the string {special_tokens!r}")
    specials = list(special_tokens)
    for s in specials:
        if not isinstance(s, str) or not s:
            raise ValueError(f"special token {s!r} must be a non-empty string")
        if len(s.encode("utf-8")) == 1:
            raise ValueError(f"special token {s!r} is one byte, which is already the byte token {s!r}: "
                             "a special token needs two bytes or more")
    dup = {s for s in specials if specials.count(s) > 1}
    if dup:
        raise ValueError(f"special token {sorted(dup)[0]!r} is listed twice")
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__} ({vocab_size!r})")
    if vocab_size > MAX_VOCAB_SIZE:
        raise ValueError(f"vocab_size={vocab_size} is above the largest vocabulary hf_bpe trains, {MAX_VOCAB_SIZE:,}")
    if vocab_size < 256 + len(specials):
        raise ValueError(f"vocab_size={vocab_size!r} is below 256 byte tokens + {len(specials)} special tokens "
                         f"= {256 + len(specials)}")
    if tie_break not in ("lexicographic", "hf"):
        raise ValueError(f"tie_break must be 'lexicographic' or 'hf', not {tie_break!r}")
    if min_frequency < 0:
        raise ValueError(f"min_frequency must be >= 0, not {min_frequency}")
    if max_token_length is not None and max_token_length < 1:
        raise ValueError(f"max_token_length must be >= 1 or None, not {max_token_length}")
    return specials


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
                num_threads: int | None = None, progress: bool = False, text_column: str = "text") -> _core.WordCounter:
    """Counts the distinct pre-tokens of documents (the first half of training)."""
    counter = _core.WordCounter(pattern, list(special_tokens), num_threads)
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


def train(
    texts: Any,
    vocab_size: int = 32000,
    special_tokens: Sequence[str] = ("<|endoftext|>",),
    pattern: str = "gpt2",
    tie_break: TieBreak = "lexicographic",
    min_frequency: int = 0,
    max_token_length: int | None = None,
    num_threads: int | None = None,
    progress: bool = True,
    text_column: str = "text",
    base: BPE | None = None,
) -> BPE:
    """Trains a byte-level BPE vocabulary on documents.

    ``texts``: any iterable of ``str`` documents (list, generator) or a ``datasets.Dataset`` /
    ``IterableDataset`` (its ``text_column``). ``vocab_size`` counts every token: 256 bytes +
    special tokens + merged tokens. ``tie_break="lexicographic"`` picks, among pairs of equal
    count, the greatest (left bytes, right bytes); ``"hf"`` reproduces HF ``tokenizers``'
    ``BpeTrainer`` exactly, ids included. Training stops early when no pair occurs at least
    ``min_frequency`` times. ``max_token_length`` caps the bytes of a merged token.

    ``base`` extends that vocabulary instead (:mod:`hf_bpe.extending`): its ids, merges, pattern
    and special tokens are kept, new tokens take ids from its largest id + 1 until
    ``vocab_size`` (largest id + 1) is reached.
    """
    if base is not None:
        from hf_bpe.extending import base_settings, extend_from_counts

        pattern, special_tokens = base_settings(base, pattern, special_tokens)
    specials = _check_options(vocab_size, special_tokens, tie_break, min_frequency, max_token_length)
    _core.pattern_source(pattern)  # fail early on a bad pattern
    counter = count_words(texts, specials, pattern, num_threads, progress, text_column)
    if base is not None:
        return extend_from_counts(base, _counts_of(counter, specials, pattern), vocab_size, tie_break, min_frequency,
                                  max_token_length, progress)
    return _finish(counter, vocab_size, specials, pattern, tie_break, min_frequency, max_token_length, progress)


def train_files(
    paths: str | os.PathLike | Sequence[str | os.PathLike],
    vocab_size: int = 32000,
    special_tokens: Sequence[str] = ("<|endoftext|>",),
    pattern: str = "gpt2",
    tie_break: TieBreak = "lexicographic",
    min_frequency: int = 0,
    max_token_length: int | None = None,
    num_threads: int | None = None,
    progress: bool = True,
    errors: str = "strict",
    text_field: str = "text",
    base: BPE | None = None,
) -> BPE:
    """Trains on files, streamed (never loaded whole): plain UTF-8 text, ``.gz``, or ``.jsonl``
    (``.jsonl.gz``) with a ``text_field``. ``errors`` is ``"strict"`` (a non-UTF-8 file fails,
    naming the byte offset), ``"replace"`` or ``"ignore"``. Other options as :func:`train`.

    Files are cut into blocks only where the cut cannot change the pre-tokens: for the built-in
    patterns at safe places every few MiB; for a custom regex ``pattern`` only right after a
    special token, so memory then holds the text up to the next special token (a file with no
    special tokens is held whole). ``base`` extends that vocabulary, as in :func:`train`."""
    if base is not None:
        from hf_bpe.extending import base_settings, extend_from_counts

        pattern, special_tokens = base_settings(base, pattern, special_tokens)
    specials = _check_options(vocab_size, special_tokens, tie_break, min_frequency, max_token_length)
    counter = _count_files(paths, specials, pattern, num_threads, progress, errors, text_field)
    if base is not None:
        return extend_from_counts(base, _counts_of(counter, specials, pattern), vocab_size, tie_break, min_frequency,
                                  max_token_length, progress)
    return _finish(counter, vocab_size, specials, pattern, tie_break, min_frequency, max_token_length, progress)


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


def _count_files(paths, specials: list[str], pattern: str, num_threads: int | None, progress: bool, errors: str,
                 text_field: str) -> _core.WordCounter:
    paths = file_paths(paths)
    counter = _core.WordCounter(pattern, specials, num_threads)
    with file_progress(paths, "counting", enabled=progress) as cb:
        for p in paths:
            counter.add_file(p, errors, text_field, cb)
            if cb is not None:
                cb.next_file()  # type: ignore[attr-defined]
    return counter


def count(texts: Any, special_tokens: Sequence[str] = ("<|endoftext|>",), pattern: str = "gpt2",
          num_threads: int | None = None, progress: bool = True, text_column: str = "text") -> WordCounts:
    """The word counts of documents, as :func:`train` makes them (same inputs): a
    :class:`~hf_bpe.counts.WordCounts` to merge, save, ship and train on
    (:func:`train_from_counts`)."""
    specials = _check_specials(special_tokens)
    counter = count_words(texts, specials, pattern, num_threads, progress, text_column)
    return _counts_of(counter, specials, pattern)


def count_files(paths: str | os.PathLike | Sequence[str | os.PathLike], special_tokens: Sequence[str] = ("<|endoftext|>",),
                pattern: str = "gpt2", num_threads: int | None = None, progress: bool = True, errors: str = "strict",
                text_field: str = "text") -> WordCounts:
    """The word counts of files, as :func:`train_files` makes them (same inputs)."""
    specials = _check_specials(special_tokens)
    counter = _count_files(paths, specials, pattern, num_threads, progress, errors, text_field)
    return _counts_of(counter, specials, pattern)


def _counts_of(counter: _core.WordCounter, specials: list[str], pattern: str) -> WordCounts:
    from hf_bpe.counts import WordCounts

    arrays = counter.arrays(release=True)  # the tables are freed while gathering
    return WordCounts(arrays, pattern, specials, counter.documents, counter.bytes, checked=True)


def _check_specials(special_tokens: Sequence[str]) -> list[str]:
    return _check_options(256 + len(special_tokens) if not isinstance(special_tokens, str) else 256, special_tokens,
                          "lexicographic", 0, None)


def train_from_counts(counts: WordCounts, vocab_size: int = 32000, tie_break: TieBreak = "lexicographic",
                      min_frequency: int = 0, max_token_length: int | None = None, min_word_count: int = 0,
                      progress: bool = True, base: BPE | None = None) -> BPE:
    """Trains on word counts (:func:`count`, :func:`count_files`, merged or loaded): the same
    vocabulary :func:`train` / :func:`train_files` give on the text counted, with the counts'
    pattern and special tokens. ``min_word_count`` first drops the words seen fewer times (a
    pruning for counts too large to train on; exact when 0), unlike ``min_frequency``, the merge
    loop's threshold on pairs. ``base`` extends that vocabulary (the counts made with its
    pattern and added tokens), as in :func:`train`."""
    from hf_bpe.counts import WordCounts

    if not isinstance(counts, WordCounts):
        raise TypeError(f"counts must be hf_bpe.WordCounts (from hf_bpe.count / count_files), not {type(counts).__name__}")
    if min_word_count < 0:
        raise ValueError(f"min_word_count must be >= 0, not {min_word_count}")
    pruned = counts.pruned(min_word_count)
    if len(counts) and not len(pruned):
        raise ValueError(f"min_word_count={min_word_count} removed all {len(counts):,} distinct words")
    if base is not None:
        from hf_bpe.extending import extend_from_counts

        return extend_from_counts(base, pruned, vocab_size, tie_break, min_frequency, max_token_length, progress)
    specials = _check_options(vocab_size, counts.special_tokens, tie_break, min_frequency, max_token_length)
    counts = pruned
    return _finish(counts, vocab_size, specials, counts.pattern, tie_break, min_frequency, max_token_length, progress)


def _finish(counted: "_core.WordCounter | WordCounts", vocab_size: int, specials: list[str], pattern: str,
            tie_break: str, min_frequency: int, max_token_length: int | None, progress: bool) -> BPE:
    if len(counted) == 0 or (isinstance(counted, _core.WordCounter) and counted.bytes == 0):
        raise ValueError(EMPTY)
    words = counted if isinstance(counted, _core.WordCounter) else (counted.bytes, counted.offsets, counted.counts)
    max_new = vocab_size - 256 - len(specials)
    with count_progress(max_new, "merging", "tok", enabled=progress and max_new > 0) as cb:
        merges = _core.train_merges(words, max_new, tie_break, min_frequency, max_token_length, cb,
                                     release_counts=True)
        bpe = assemble(merges, specials, pattern, tie_break)
        if cb is not None:
            cb(bpe.vocab_size - 256 - len(specials))
    return bpe


def assemble(merges: list[tuple[bytes, bytes]], specials: Sequence[str], pattern: str, tie_break: str) -> BPE:
    """Gives ids to the tokens of a training run.

    ``lexicographic``: bytes 0-255 by value, then the special tokens, then the merged tokens in
    training order. ``hf``: the special tokens, then the 256 bytes in the order of their GPT-2
    characters' code points, then the merged tokens — HF ``tokenizers``' layout. In both, a merge
    whose result already exists keeps that token's id.
    """
    if tie_break == "hf":
        base = [s.encode() for s in specials] + [bytes([b]) for b in sorted(range(256), key=lambda b: ord(BYTE_TO_CHAR[b]))]
    else:
        base = [bytes([b]) for b in range(256)] + [s.encode() for s in specials]
    vocab = dict(enumerate(base))
    special_ids = {s: (i if tie_break == "hf" else 256 + i) for i, s in enumerate(specials)}
    known = {b for i, b in vocab.items() if i not in special_ids.values()}
    for a, b in merges:
        t = a + b
        if t not in known:
            known.add(t)
            vocab[len(vocab)] = t
    return BPE(vocab, merges, special_ids, pattern)

