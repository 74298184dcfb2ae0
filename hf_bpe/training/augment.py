"""StochasTok (Sims et al., 2025, arXiv 2506.01687): a training-time augmentation that splits
tokens of already-encoded ids into two tokens that spell the same bytes, so a model sees how its
tokens are made of others. It works on the flat id arrays, at numpy speed; decoding is
unchanged.

Each id that has a split (a merged token that is two tokens of the vocabulary side by side) is
replaced, with probability ``p``, by one of its splits chosen uniformly. Byte tokens and special
or added tokens are never split. ``rounds`` repeats the pass (a split's parts may split again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hf_bpe.bpe import BPE

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["stochastok"]


def stochastok(bpe: BPE, ids: "npt.ArrayLike", p: float, seed: int | None = None, rounds: int = 1) -> "np.ndarray":
    """``ids`` (a flat sequence) with each splittable id replaced by one of its two-token splits
    with probability ``p``; ``seed`` makes it reproducible. Returns a new int64 array whose
    decoding equals that of ``ids``."""
    import numpy as np

    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be between 0 and 1, not {p}")
    if rounds < 0:
        raise ValueError(f"rounds must be >= 0, not {rounds}")
    arr = np.asarray(ids)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"ids must be a flat sequence of ints, not an array of shape {arr.shape} "
                         f"and dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    offsets, left, right = _splits(bpe)
    n_ids = len(offsets) - 1
    if len(arr) and (arr.min() < 0 or arr.max() >= n_ids):
        bad = int(arr[(arr < 0) | (arr >= n_ids)][0])
        raise ValueError(f"id {bad} is not in the vocabulary (vocab_size {bpe.vocab_size})")
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        count = offsets[arr + 1] - offsets[arr]
        split = (count > 0) & (rng.random(len(arr)) < p)
        if not split.any():
            continue
        pick = offsets[arr[split]] + (rng.random(int(split.sum())) * count[split]).astype(np.int64)
        out = np.repeat(arr, 1 + split)
        at = np.flatnonzero(split) + np.arange(int(split.sum()))  # where each split's left part lands
        out[at] = left[pick]
        out[at + 1] = right[pick]
        arr = out
    return arr


def _splits(bpe: BPE) -> tuple["np.ndarray", "np.ndarray", "np.ndarray"]:
    """Every id's two-token splits as flat arrays: id ``i``'s are ``left[o[i]:o[i+1]]``,
    ``right[o[i]:o[i+1]]`` (computed once per tokenizer)."""
    import numpy as np

    cached = getattr(bpe, "_stochastok_splits", None)
    if cached is not None:
        return cached
    added = {t.id for t in bpe.added_tokens}
    vocab = bpe.vocab
    ids = {b: i for i, b in vocab.items() if i not in added}
    size = bpe.vocab_size
    counts = np.zeros(size + 1, dtype=np.int64)
    lefts: list[int] = []
    rights: list[int] = []
    for i in range(size):
        b = vocab.get(i)
        if b is None or i in added or len(b) < 2:
            continue
        for k in range(1, len(b)):
            x, y = ids.get(b[:k]), ids.get(b[k:])
            if x is not None and y is not None:
                lefts.append(x)
                rights.append(y)
                counts[i + 1] += 1
    splits = (np.cumsum(counts), np.asarray(lefts, dtype=np.int64), np.asarray(rights, dtype=np.int64))
    bpe._stochastok_splits = splits  # type: ignore[attr-defined]
    return splits
