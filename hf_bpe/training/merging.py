"""From counts to a :class:`~hf_bpe.BPE`: the native merge loop over counted words
(:func:`finish`) and the ids of a training run's tokens (:func:`assemble`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Union

from hf_bpe import _core
from hf_bpe.bpe import BPE
from hf_bpe.formats.alphabet import BYTE_TO_CHAR
from hf_bpe.progress import count_progress
from hf_bpe.training.options import EMPTY

if TYPE_CHECKING:
    from hf_bpe.training.counts import WordCounts

__all__ = ["finish", "assemble", "MergeFilter"]

#: What may merge: ``(left bytes, right bytes) -> bool`` (False vetoes), or a regex ``str`` run in
#: the core over the merged token's bytes (a match vetoes). Asked once per pair, when it first
#: comes out on top; the best allowed pair merges instead of a vetoed one.
MergeFilter = Union[Callable[[bytes, bytes], bool], str]


def finish(counted: "_core.WordCounter | WordCounts", vocab_size: int, specials: list[str], pattern: str,
            tie_break: str, min_frequency: int, max_token_length: int | None, progress: bool,
            merge_filter: MergeFilter | None = None) -> BPE:
    if len(counted) == 0 or (isinstance(counted, _core.WordCounter) and counted.bytes == 0):
        raise ValueError(EMPTY)
    words = counted if isinstance(counted, _core.WordCounter) else (counted.bytes, counted.offsets, counted.counts)
    max_new = vocab_size - 256 - len(specials)
    with count_progress(max_new, "merging", "tok", enabled=progress and max_new > 0) as cb:
        merges = _core.train_merges(words, max_new, tie_break, min_frequency, max_token_length, cb,
                                     release_counts=True, merge_filter=merge_filter)
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
