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
from hf_bpe.training import superword
from hf_bpe.training.counting import count_paths, count_words, counts_of
from hf_bpe.training.extending import base_settings, extend_from_counts
from hf_bpe.training.merging import MergeFilter, assemble, finish
from hf_bpe.training.options import TieBreak, check_options

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
    superword_transition: int | None = None,
    superword_max_words: int = superword.MAX_WORDS,
    merge_filter: MergeFilter | None = None,
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

    ``superword_transition`` trains superword tokens (SuperBPE, :mod:`hf_bpe.training.superword`):
    plain BPE until the vocabulary holds that many tokens (the same merges as without it), then
    tokens that span up to ``superword_max_words`` words (never a line or a sentence stop).

    ``merge_filter`` vetoes merges: a callable ``(left: bytes, right: bytes) -> bool`` (False: never
    merge this pair; the best allowed pair merges instead), or a regex ``str``, run in the core,
    that vetoes every merge whose token would hold a match (e.g. ``r"[.!?]\\s"``).
    """
    specials, pattern = _settings(vocab_size, special_tokens, pattern, tie_break, min_frequency, max_token_length,
                                  base, superword_transition, superword_max_words)
    counter = count_words(texts, specials, pattern, num_threads, progress, text_column,
                          split_only=superword_transition is not None)
    return _trained(counter, vocab_size, specials, pattern, tie_break, min_frequency, max_token_length, progress,
                    base, superword_transition, merge_filter)


def _settings(vocab_size: int, special_tokens: Sequence[str], pattern: str, tie_break: str, min_frequency: int,
              max_token_length: int | None, base: BPE | None, transition: int | None,
              max_words: int) -> tuple[list[str], str]:
    """The checked special tokens and the pattern to count with (a base's; a span pattern)."""
    if base is not None:
        if transition is not None:
            raise ValueError("superword_transition and base= cannot be combined: extend a superword tokenizer "
                             "by training it again with both stages")
        pattern, special_tokens = base_settings(base, pattern, special_tokens)
    specials = check_options(vocab_size, special_tokens, tie_break, min_frequency, max_token_length)
    if transition is not None:
        superword.check_superword(transition, vocab_size, specials)
        pattern = superword.span_pattern(pattern, max_words)
    _core.pattern_source(pattern)  # fail early on a bad pattern
    return specials, pattern


def _trained(counter: _core.WordCounter, vocab_size: int, specials: list[str], pattern: str, tie_break: str,
             min_frequency: int, max_token_length: int | None, progress: bool, base: BPE | None,
             transition: int | None, merge_filter: MergeFilter | None) -> BPE:
    """The vocabulary of counted text: trained, extended from ``base``, or with superwords."""
    if base is not None:
        return extend_from_counts(base, counts_of(counter, specials, pattern), vocab_size, tie_break, min_frequency,
                                  max_token_length, progress, merge_filter=merge_filter)
    if transition is not None:
        return superword.train_counted(counter, pattern, specials, vocab_size, transition, tie_break, min_frequency,
                                       max_token_length, progress, merge_filter)
    return finish(counter, vocab_size, specials, pattern, tie_break, min_frequency, max_token_length, progress,
                  merge_filter)


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
    superword_transition: int | None = None,
    superword_max_words: int = superword.MAX_WORDS,
    merge_filter: MergeFilter | None = None,
) -> BPE:
    """Trains on files, streamed (never loaded whole): plain UTF-8 text, ``.gz``, or ``.jsonl``
    (``.jsonl.gz``) with a ``text_field``. ``errors`` is ``"strict"`` (a non-UTF-8 file fails,
    naming the byte offset), ``"replace"`` or ``"ignore"``. Other options as :func:`train`.

    Files are cut into blocks only where the cut cannot change the pre-tokens: for the built-in
    patterns at safe places every few MiB; for a custom regex ``pattern`` only right after a
    special token, so memory then holds the text up to the next special token (a file with no
    special tokens is held whole; superword spans likewise). ``base`` extends that vocabulary and
    ``superword_transition`` trains superwords, as in :func:`train` (``merge_filter`` too)."""
    specials, pattern = _settings(vocab_size, special_tokens, pattern, tie_break, min_frequency, max_token_length,
                                  base, superword_transition, superword_max_words)
    counter = count_paths(paths, specials, pattern, num_threads, progress, errors, text_field,
                          split_only=superword_transition is not None)
    return _trained(counter, vocab_size, specials, pattern, tie_break, min_frequency, max_token_length, progress,
                    base, superword_transition, merge_filter)


def train_from_counts(counts: WordCounts, vocab_size: int = 32000, tie_break: TieBreak = "lexicographic",
                      min_frequency: int = 0, max_token_length: int | None = None, min_word_count: int = 0,
                      progress: bool = True, base: BPE | None = None,
                      superword_transition: int | None = None, merge_filter: MergeFilter | None = None) -> BPE:
    """Trains on word counts (:func:`count`, :func:`count_files`, merged or loaded): the same
    vocabulary :func:`train` / :func:`train_files` give on the text counted, with the counts'
    pattern and special tokens. ``min_word_count`` first drops the words seen fewer times (a
    pruning for counts too large to train on; exact when 0), unlike ``min_frequency``, the merge
    loop's threshold on pairs. ``base`` extends that vocabulary (the counts made with its
    pattern and added tokens), as in :func:`train`. ``superword_transition`` trains superwords
    from span counts (counted with :func:`hf_bpe.training.superword.span_pattern`); ``merge_filter``
    as in :func:`train`."""
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
        return extend_from_counts(base, pruned, vocab_size, tie_break, min_frequency, max_token_length, progress,
                                  merge_filter=merge_filter)
    if superword_transition is not None:
        check_options(vocab_size, counts.special_tokens, tie_break, min_frequency, max_token_length)
        return superword.train_spans(pruned, vocab_size, superword_transition, tie_break, min_frequency,
                                     max_token_length, progress, merge_filter)
    specials = check_options(vocab_size, counts.special_tokens, tie_break, min_frequency, max_token_length)
    counts = pruned
    return finish(counts, vocab_size, specials, counts.pattern, tie_break, min_frequency, max_token_length, progress,
                  merge_filter)
