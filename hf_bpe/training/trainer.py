"""The trainers: documents (or their counts, :mod:`~hf_bpe.training.counting`) merged by the
native trainer, and the ids given to the result.

The recipe is GPT-2's: split on special tokens (they go straight into the vocabulary and never
take part in a merge), pre-tokenize with the pattern, count each distinct pre-token once, then
repeatedly merge the most frequent adjacent pair (weighted by word count) until the vocabulary
is full.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hf_bpe import _core
from hf_bpe.bpe import BPE
from hf_bpe.formats.alphabet import BYTE_TO_CHAR
from hf_bpe.progress import count_progress
from hf_bpe.training.counting import count_paths, count_words, counts_of
from hf_bpe.training.extending import base_settings, extend_from_counts
from hf_bpe.training.options import EMPTY, TieBreak, check_options

if TYPE_CHECKING:  # numpy (which WordCounts holds) is imported on first use: `import hf_bpe` stays light
    from hf_bpe.training.counts import WordCounts

__all__ = ["train", "train_files", "train_from_counts", "assemble"]


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

    ``base`` extends that vocabulary instead (:mod:`hf_bpe.training.extending`): its ids, merges, pattern
    and special tokens are kept, new tokens take ids from its largest id + 1 until
    ``vocab_size`` (largest id + 1) is reached.
    """
    if base is not None:
        pattern, special_tokens = base_settings(base, pattern, special_tokens)
    specials = check_options(vocab_size, special_tokens, tie_break, min_frequency, max_token_length)
    _core.pattern_source(pattern)  # fail early on a bad pattern
    counter = count_words(texts, specials, pattern, num_threads, progress, text_column)
    if base is not None:
        return extend_from_counts(base, counts_of(counter, specials, pattern), vocab_size, tie_break, min_frequency,
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
        pattern, special_tokens = base_settings(base, pattern, special_tokens)
    specials = check_options(vocab_size, special_tokens, tie_break, min_frequency, max_token_length)
    counter = count_paths(paths, specials, pattern, num_threads, progress, errors, text_field)
    if base is not None:
        return extend_from_counts(base, counts_of(counter, specials, pattern), vocab_size, tie_break, min_frequency,
                                  max_token_length, progress)
    return _finish(counter, vocab_size, specials, pattern, tie_break, min_frequency, max_token_length, progress)


def train_from_counts(counts: WordCounts, vocab_size: int = 32000, tie_break: TieBreak = "lexicographic",
                      min_frequency: int = 0, max_token_length: int | None = None, min_word_count: int = 0,
                      progress: bool = True, base: BPE | None = None) -> BPE:
    """Trains on word counts (:func:`count`, :func:`count_files`, merged or loaded): the same
    vocabulary :func:`train` / :func:`train_files` give on the text counted, with the counts'
    pattern and special tokens. ``min_word_count`` first drops the words seen fewer times (a
    pruning for counts too large to train on; exact when 0), unlike ``min_frequency``, the merge
    loop's threshold on pairs. ``base`` extends that vocabulary (the counts made with its
    pattern and added tokens), as in :func:`train`."""
    from hf_bpe.training.counts import WordCounts

    if not isinstance(counts, WordCounts):
        raise TypeError("counts must be hf_bpe.WordCounts (from hf_bpe.count / count_files), "
                        f"not {type(counts).__name__}")
    if min_word_count < 0:
        raise ValueError(f"min_word_count must be >= 0, not {min_word_count}")
    pruned = counts.pruned(min_word_count)
    if len(counts) and not len(pruned):
        raise ValueError(f"min_word_count={min_word_count} removed all {len(counts):,} distinct words")
    if base is not None:
        return extend_from_counts(base, pruned, vocab_size, tie_break, min_frequency, max_token_length, progress)
    specials = check_options(vocab_size, counts.special_tokens, tie_break, min_frequency, max_token_length)
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
        base = ([s.encode() for s in specials]
                + [bytes([b]) for b in sorted(range(256), key=lambda b: ord(BYTE_TO_CHAR[b]))])
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
