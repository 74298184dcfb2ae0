"""Superword training (SuperBPE: Liu et al., COLM 2025, arXiv 2503.13423): plain BPE until the
vocabulary holds ``transition`` tokens, then merges across word boundaries, inside *spans*.

* **Stage 1** is :func:`~hf_bpe.train` to ``transition`` tokens, exactly (same counts, same merges).
* **Stage 2** cuts the text into spans with a *span pattern* built from the word pattern
  (:func:`span_pattern`), cuts each distinct span into stage 1's tokens by its merges (over the
  whole span, as the encoder will) and continues the merge loop from there: the extending loop
  of :mod:`~hf_bpe.training.extending` (stage 1's tokens are known strings, new ones count
  towards ``vocab_size``). The result's pattern is the span pattern, so a saved
  ``tokenizer.json`` encodes in stock ``tokenizers`` as it was trained.
* **Counted once, as data.** Spans are counted like words (one pass over the corpus, memory
  = the distinct spans, bounded; files are cut at lines, which no span crosses); stage 1's word counts
  are the spans split by the word pattern (``_core.split_spans``), exact because every span
  boundary is a word boundary; the same split gives each span's words, so stage 2 cuts a span
  into stage 1's tokens from its words' (``_core.segment_spans``). Training from text counts
  for the split alone (``WordCounter(split_only=True)``): with spans of up to 4 words (the
  default), each span is counted by its words' ids, found where the scanner cuts them, and
  nothing is split again.
* **Trained on pieces.** Most spans are seen once, but few of their word boundaries ever merge:
  stage 2 cuts the spans where no merge it can make crosses (a boundary whose first pair counts
  below a floor, from a sketch) and counts each distinct piece once (``_core.segment_pieces``:
  ~2 M pieces for ~8 M spans on 185 MB of English). Exact: the trainer is told the floor and
  gives up on a merge below it (or one that reuses a token), and the whole spans are trained then.

Where SuperBPE's own trainer lifts pre-tokenization altogether (whole documents in memory), a
span here is (our choices, named so they can be argued with):

* 1 to ``max_words`` consecutive non-whitespace pieces of the word pattern, each with its one
  leading space; any other whitespace (a newline, indentation, two spaces) ends the span and is
  a piece of its own, so no token ever spans a line;
* a piece holding sentence punctuation (``.``, ``!``, ``?``) ends a span: ``" of the"`` and
  ``", and the"`` can form, ``"end. The"`` cannot (a span may end with the stop: ``" it."``).

Only the ``gpt2`` word pattern has a span pattern so far; others are a clear error.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hf_bpe import _core
from hf_bpe.bpe import BPE
from hf_bpe.training.extending import extend_segmented
from hf_bpe.training.merging import MergeFilter, finish

if TYPE_CHECKING:
    import numpy as np

    from hf_bpe.training.counts import WordCounts

__all__ = ["span_pattern", "word_pattern_of", "check_superword", "train_spans", "train_counted", "MAX_WORDS"]

#: The default of ``superword_max_words``: the pieces a span (and so a superword token) holds at most.
MAX_WORDS = 4


def span_pattern(pattern: str = "gpt2", max_words: int = MAX_WORDS) -> str:
    """The stage-2 pattern of superword training over ``pattern`` (see the module doc; built in
    the core, ``src/pretok/spans.rs``): a regex whose pieces are spans of 1 to ``max_words``
    words. Count with it (:func:`hf_bpe.count`) to train superwords from counts
    (:func:`hf_bpe.train_from_counts`)."""
    if isinstance(max_words, bool) or not isinstance(max_words, int):
        raise TypeError(f"superword_max_words must be an int, not {type(max_words).__name__}")
    return _core.span_pattern(pattern, max(max_words, 0))


def word_pattern_of(pattern: str) -> tuple[str, int] | None:
    """``(word pattern, max_words)`` if ``pattern`` is a span pattern of :func:`span_pattern`, else None."""
    return _core.span_words(pattern)


def check_superword(transition: object, vocab_size: int, specials: Sequence[str]) -> int:
    """``transition`` if it can be a transition vocabulary size, else a clear error."""
    low = 256 + len(specials)
    if isinstance(transition, bool) or not isinstance(transition, int):
        raise TypeError(f"superword_transition must be an int (the vocabulary size where superwords start), "
                        f"not {type(transition).__name__}")
    if not low <= transition <= vocab_size:
        raise ValueError(f"superword_transition={transition} must be between {low} (256 bytes + "
                         f"{len(specials)} special token{'s' * (len(specials) != 1)}) and vocab_size={vocab_size}")
    return transition


def train_spans(spans: WordCounts, vocab_size: int, transition: int, tie_break: str, min_frequency: int,
                max_token_length: int | None, progress: bool, merge_filter: MergeFilter | None = None) -> BPE:
    """Superword training on span counts (counted with a :func:`span_pattern`): stage 1 on the
    words they hold up to ``transition`` tokens, then stage 2 on the spans up to ``vocab_size``."""
    word_pattern = _word_pattern(spans.pattern)
    specials = list(spans.special_tokens)
    check_superword(transition, vocab_size, specials)
    arrays, span_words, span_ends = _core.split_spans((spans.bytes, spans.offsets, spans.counts), word_pattern)
    split = [arrays, (span_words, span_ends, spans.counts)]
    del arrays, span_words, span_ends
    return _stages(split, (spans.bytes, spans.offsets), spans.pattern, word_pattern, specials, spans.documents,
                   spans.text_bytes, vocab_size, transition, tie_break, min_frequency, max_token_length, progress,
                   merge_filter)


def train_counted(counter: _core.WordCounter, pattern: str, specials: list[str], vocab_size: int, transition: int,
                  tie_break: str, min_frequency: int, max_token_length: int | None, progress: bool,
                  merge_filter: MergeFilter | None = None) -> BPE:
    """:func:`train_spans` on a counter of spans (counted with ``pattern``, a span pattern), split
    in place (``WordCounter.split_words``: the counter is then empty, and the spans are never
    gathered into bytes of their own; their order, which training does not depend on, is the
    counter's; they are gathered on threads of their own while stage 1 trains)."""
    word_pattern = _word_pattern(pattern)
    check_superword(transition, vocab_size, specials)
    documents, text_bytes = counter.documents, counter.bytes
    split = list(counter.split_words(word_pattern))
    return _stages(split, None, pattern, word_pattern, specials, documents, text_bytes, vocab_size, transition,
                   tie_break, min_frequency, max_token_length, progress, merge_filter)


def _word_pattern(pattern: str) -> str:
    """The word pattern of the span pattern ``pattern``, or a clear error."""
    found = word_pattern_of(pattern)
    if found is None:
        raise ValueError("superword training needs span counts: count with pattern=hf_bpe.training.superword."
                         f"span_pattern(...), not {pattern!r}")
    return found[0]


def _stages(split: list, span_bytes: tuple[np.ndarray, np.ndarray] | None, pattern: str, word_pattern: str,
            specials: list[str], documents: int, text_bytes: int, vocab_size: int, transition: int, tie_break: str,
            min_frequency: int, max_token_length: int | None, progress: bool,
            merge_filter: MergeFilter | None) -> BPE:
    """Both stages from the spans split into words: ``split`` is ``[arrays, spans]`` (``arrays``:
    the word counts; ``spans``: ``(span_words, span_ends, span_counts)``, span ``i``'s words
    ``span_words[span_ends[i]:span_ends[i + 1]]``, its count ``span_counts[i]``, or a
    ``_core.SpanGather`` giving them once stage 1 is trained), emptied here so that the arrays
    are freed once stage 2 has its own copy of the whole spans (kept while stage 2 trains on
    pieces, in case it gives up); ``span_bytes``: the spans' own bytes and offsets, or None
    where a span is its words."""
    from hf_bpe.training.counts import WordCounts

    arrays, spans = split
    split.clear()
    words = WordCounts(arrays, word_pattern, specials, documents, text_bytes, checked=True)
    stage1 = finish(words, transition, specials, word_pattern, tie_break, min_frequency, max_token_length, progress,
                    merge_filter)
    del words
    if vocab_size <= stage1.vocab_size:
        return BPE(stage1.vocab, stage1.merges, stage1.special_tokens, pattern)
    span_words, span_ends, span_counts = spans.take() if isinstance(spans, _core.SpanGather) else spans
    del spans
    encoder = stage1._encoder()
    # (Stage 1's tokenizer stands for the base: only its tables are read, and the result takes
    # the span pattern.)
    stage2 = functools.partial(extend_segmented, stage1, vocab_size=vocab_size, tie_break=tie_break,
                               min_frequency=min_frequency, max_token_length=max_token_length, progress=progress,
                               label="superwords", merge_filter=merge_filter, pattern=pattern)
    done = None
    # Cut where no stage-2 merge can cross, each distinct piece once (``_core.segment_pieces``);
    # trained on the whole spans if a merge falls below its floor or reuses a token. (HF's counts of long pairs
    # depend on how they formed, which the floor's bound does not see.)
    if tie_break != "hf" or max_token_length is None:
        pieces = _core.segment_pieces(encoder, arrays[0], arrays[1], arrays[2], span_words, span_ends, span_counts,
                                      vocab_size - stage1.vocab_size)
        if pieces is not None:
            ids, offsets, counts, floor = pieces
            del pieces
            done = stage2(counts=counts, segmented=(ids, offsets), floor=floor)
            del ids, offsets, counts
    if done is None:
        # Each span cut into stage 1's tokens, from its words' where no merge can cross between
        # them (``_core.segment_spans``), as the span pattern's encoder would.
        b, o = span_bytes if span_bytes is not None else (None, None)
        segmented = _core.segment_spans(encoder, b, o, arrays[0], arrays[1], span_words, span_ends, checked=True)
        del arrays, span_words, span_ends, span_bytes, b, o
        done = stage2(counts=span_counts, segmented=segmented)
    assert done is not None
    out = done[0]
    if progress:
        print(f"superwords: {out.vocab_size - stage1.vocab_size} tokens after the first {stage1.vocab_size} "
              f"(ids {stage1.vocab_size}..{out.vocab_size - 1})", file=sys.stderr)
    return out
