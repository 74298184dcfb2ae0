"""Extending a vocabulary: new merges learned on a new corpus, appended to an existing tokenizer
whose every id, merge and special token stays as it was.

The new corpus is counted with the base's pattern and special tokens, each distinct word is cut
into the base's tokens by its merges (``_core.segment_words``: the same merges ``encode`` applies),
and the merge loop continues from there (``train_extending`` in ``src/train/mod.rs``): the base's
tokens are known strings, only new strings count towards the vocabulary size, and new tokens take
ids from the base's largest id + 1 on (holes in the base's ids stay holes). Where no new merge
applies, a text encodes exactly as with the base.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hf_bpe import _core, formats
from hf_bpe.bpe import BPE
from hf_bpe.progress import count_progress
from hf_bpe.training.counting import count
from hf_bpe.training.options import EMPTY, check_options

if TYPE_CHECKING:  # numpy is imported where it is used: `import hf_bpe` stays light
    import numpy as np

    from hf_bpe.training.counts import WordCounts

__all__ = ["extend", "extend_bpe", "extend_from_counts", "compression", "base_settings"]


def check_base(base: BPE) -> BPE:
    """``base`` if hf_bpe can extend it (a BPE whose pre-tokenization is its pattern), else a clear error."""
    if not isinstance(base, BPE):
        raise TypeError(f"base must be an hf_bpe.BPE (BPE.load reads GPT-2 files, tokenizer.json, .tiktoken), "
                        f"not {type(base).__name__}")
    if base.pipeline is not None or base.pattern_source.startswith("{"):
        raise ValueError("this base cannot be extended: its tokenizer.json pipeline (a normalizer, several "
                         "pre-tokenizer steps or missing byte tokens, see base.pipeline) is not one pattern over "
                         "bytes, so its words cannot be counted as the encoder cuts them")
    _check_added_split(base)
    return base


def _check_added_split(base: BPE) -> None:
    """Words are counted split on every added token's content in one pass. That is how the
    encoder splits too unless a token has flags (``lstrip``, ``rstrip``, ``single_word``) or a
    token matched in the raw text (``normalized=False``) can overlap one matched after
    normalization (``normalized=True``, a second pass: without a normalizer the same text, but
    matched only between the first pass's tokens)."""
    for t in base.added_tokens:
        flags = [f for f in ("lstrip", "rstrip", "single_word") if getattr(t, f)]
        if flags:
            raise ValueError(f"this base cannot be extended exactly: its added token {t.content!r} sets {flags[0]}, "
                             "which changes where it splits text; words are counted split on added tokens as they are")
    if not base._core.is_generic:
        return
    raw = [t.content for t in base.added_tokens if not t.normalized]
    later = [t.content for t in base.added_tokens if t.normalized]
    for a in raw:
        for b in later:
            if _overlap(a, b) or _overlap(b, a):
                raise ValueError(f"this base cannot be extended exactly: its added tokens {a!r} (matched first, in "
                                 f"the raw text) and {b!r} (matched after normalization) can overlap in text, and "
                                 "words are counted split on added tokens in one pass")


def _overlap(a: str, b: str) -> bool:
    """Whether an occurrence of ``a`` and one of ``b`` can share characters without being equal
    spans: one inside the other, or an end of ``a`` that begins ``b``."""
    return a in b or b in a or any(a.endswith(b[:k]) for k in range(1, min(len(a), len(b))))


def base_settings(base: BPE, pattern: str, special_tokens: Sequence[str]) -> tuple[str, list[str]]:
    """The pattern and the tokens to split on when ``train``/``train_files`` extend ``base``: its
    own (every added token is matched before the model, so none is part of a word). The
    defaults of ``pattern`` and ``special_tokens`` mean "the base's"; other values must be them."""
    check_base(base)
    own = [t.content for t in base.added_tokens]
    if pattern != "gpt2" and formats.pattern_key(pattern) != formats.pattern_key(base.pattern):
        raise ValueError(f"pattern={pattern!r} differs from the base's {base.pattern!r}: an extension keeps the base's")
    if tuple(special_tokens) not in (("<|endoftext|>",), tuple(own)):
        raise ValueError(f"special_tokens={list(special_tokens)} differ from the base's {own}: an extension keeps "
                         "the base's (add tokens to the result with BPE.derive or add_tokens)")
    return base.pattern, own


def _segment(bpe: BPE, counts: WordCounts) -> tuple[np.ndarray, np.ndarray]:
    """The counted words cut into ``bpe``'s token ids by its merges."""
    return _core.segment_words(bpe._encoder(), counts.bytes, counts.offsets)


def compression(bpe: BPE, counts: WordCounts) -> float:
    """Bytes per token of the counted text (special tokens aside) when ``bpe`` encodes it."""
    import numpy as np

    _, off = _segment(bpe, counts)
    tokens = float(np.dot(counts.counts.astype(np.float64), np.diff(off)))
    return float(np.dot(counts.counts.astype(np.float64), np.diff(counts.offsets))) / max(tokens, 1.0)


def extend_from_counts(base: BPE, counts: WordCounts, vocab_size: int, tie_break: str = "lexicographic",
                       min_frequency: int = 0, max_token_length: int | None = None, progress: bool = True,
                       extra_added: Sequence[formats.AddedToken] = (), report: bool = True,
                       label: str = "merging", merge_filter: Any = None,
                       segmented: tuple[np.ndarray, np.ndarray] | None = None) -> BPE:
    """``base`` with merges learned on ``counts`` until its vocabulary size (largest id + 1) is
    ``vocab_size``; see the module doc. ``extra_added`` are added tokens beside the base's (a
    ``BPETokenizer``'s ``add_tokens``) that keep their ids in the result; new ids come after them.
    ``report``: print what the extension changed (with ``progress``); ``label``: the bar's;
    ``merge_filter``: see :data:`hf_bpe.training.merging.MergeFilter` (never asked about the base's merges);
    ``segmented``: the counted words already cut into the base's ids (``_core.segment_words``' form)."""
    check_base(base)
    if formats.pattern_key(counts.pattern) != formats.pattern_key(base.pattern):
        raise ValueError(f"the counts were made with pattern {counts.pattern!r}, the base uses {base.pattern!r}: "
                         "count the new corpus with the base's pattern (hf_bpe.extend does)")
    own = tuple(dict.fromkeys(t.content for t in list(base.added_tokens) + list(extra_added)))
    if tuple(counts.special_tokens) != own:
        raise ValueError(f"the counts were split on {list(counts.special_tokens)}, the base's added tokens are "
                         f"{list(own)}: count with special_tokens={list(own)} (hf_bpe.extend does)")
    check_options(max(vocab_size, 256) if isinstance(vocab_size, int) else vocab_size, (), tie_break, min_frequency,
                   max_token_length)
    if len(counts) == 0:
        raise ValueError(EMPTY)
    done = extend_segmented(base, counts.counts, _segment(base, counts) if segmented is None else segmented,
                            vocab_size, tie_break, min_frequency, max_token_length, progress, extra_added, label,
                            merge_filter)
    assert done is not None  # (no floor)
    out, new = done
    first, next_id = max([base.vocab_size] + [t.id + 1 for t in extra_added]), out.vocab_size
    if progress and report:
        before, after = compression(base, counts), compression(out, counts)
        print(f"extended: {next_id - first} new tokens (ids {first}..{next_id - 1}), "
              f"{len(new)} merges; bytes per token on the new corpus {before:.3f} -> {after:.3f}", file=sys.stderr)
    return out


def extend_segmented(base: BPE, counts: np.ndarray, segmented: tuple[np.ndarray, np.ndarray], vocab_size: int,
                     tie_break: str, min_frequency: int, max_token_length: int | None, progress: bool,
                     extra_added: Sequence[formats.AddedToken] = (), label: str = "merging",
                     merge_filter: Any = None, pattern: str | None = None,
                     floor: int = 0) -> tuple[BPE, list[tuple[bytes, bytes]]] | None:
    """The merge loop of :func:`extend_from_counts` on words already cut into ``base``'s ids
    (``segmented``: ``(ids, offsets)``, ``_core.segment_words``' form) with their ``counts``
    (the caller has checked that they were counted with ``base``'s pattern and added tokens):
    the extended vocabulary and its new merges; ``pattern``: the result's, if not ``base``'s.
    ``floor``: the words are pieces of ``_core.segment_pieces``; None if the best pair fell below it."""
    import numpy as np

    first = max([base.vocab_size] + [t.id + 1 for t in extra_added])
    if not isinstance(vocab_size, int) or vocab_size < first:
        raise ValueError(f"vocab_size={vocab_size!r} is below the base's vocabulary size {first} "
                         "(largest id + 1): extending only adds tokens")
    special_ids = {t.id for t in base.added_tokens}
    mergeable = {b: i for i, b in base.vocab.items() if i not in special_ids}
    multi = sorted((i, b) for b, i in mergeable.items() if len(b) >= 2)
    lut = np.zeros(base.vocab_size, dtype=np.uint32)
    for b, i in mergeable.items():
        if len(b) == 1:
            lut[i] = b[0]
    lut[[i for i, _ in multi]] = np.arange(256, 256 + len(multi), dtype=np.uint32)
    ids, off = segmented
    max_new = vocab_size - first
    with count_progress(max_new, label, "tok", enabled=progress and max_new > 0) as cb:
        new = _core.train_merges_extending([b for _, b in multi], base.merges, ids, off, counts, max_new,
                                           tie_break, min_frequency, max_token_length, cb, merge_filter, lut, floor)
    if new is None:
        return None
    vocab, next_id = base.vocab, first
    added = {t.content.encode(): t.content for t in list(base.added_tokens) + list(extra_added)}
    for a, b in new:
        if a + b in added:
            raise ValueError(f"a new merge forms {added[a + b]!r}, which is an added token: count the new corpus "
                             "split on the base's added tokens (hf_bpe.extend and train(base=) do)")
        if a + b not in mergeable:
            mergeable[a + b], vocab[next_id] = next_id, a + b
            next_id += 1
    specials = dict(base.special_tokens) | {t.content: t.id for t in extra_added if t.special}
    out = BPE(vocab, base.merges + new, specials, pattern or base.pattern, cache_bytes=base.cache_bytes,
              added_tokens=list(base.added_tokens) + list(extra_added), pipeline=base.pipeline)
    return out, new


def extend(tokenizer, texts: Any, vocab_size: int, *, tie_break: str = "lexicographic", min_frequency: int = 0,
           max_token_length: int | None = None, num_threads: int | None = None, progress: bool = True,
           text_column: str = "text"):
    """``tokenizer`` (an :class:`~hf_bpe.BPE` or a ``BPETokenizer``) extended by merges learned on
    ``texts`` until its vocabulary size is ``vocab_size``: every existing id, merge and special
    token is kept (:func:`train` with ``base=``). A ``BPETokenizer`` comes back as one, with its
    added tokens and settings (it rebuilds itself around the result)."""
    options = dict(tie_break=tie_break, min_frequency=min_frequency, max_token_length=max_token_length,
                   num_threads=num_threads, progress=progress, text_column=text_column)
    own = getattr(tokenizer, "_extended", None)
    if not isinstance(tokenizer, BPE) and own is not None:
        return own(texts, vocab_size, **options)
    return extend_bpe(tokenizer, texts, vocab_size, **options)


def extend_bpe(bpe: BPE, texts: Any, vocab_size: int, *, tie_break: str = "lexicographic", min_frequency: int = 0,
               max_token_length: int | None = None, num_threads: int | None = None, progress: bool = True,
               text_column: str = "text", extra: Sequence[formats.AddedToken] = ()) -> BPE:
    """:func:`extend` of a :class:`~hf_bpe.BPE`; ``extra``: added tokens beyond its own (a
    ``BPETokenizer``'s), split on and kept with their ids."""
    check_base(bpe)
    split = list(dict.fromkeys(t.content for t in list(bpe.added_tokens) + list(extra)))
    counts = count(texts, split, bpe.pattern, num_threads, progress, text_column)
    return extend_from_counts(bpe, counts, vocab_size, tie_break, min_frequency, max_token_length, progress,
                              list(extra))
