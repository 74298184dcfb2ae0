"""The rows of a :class:`hf_bpe.BPETokenizer` call, built from each text's encoding as the
``tokenizers`` library builds them: truncation windows (with ``stride`` and overflowing rows),
the special tokens of the post-processor's template, token types, special-token masks, offsets,
each token's word and sequence (for :mod:`hf_bpe.hf.spans`), and padding."""

from __future__ import annotations

import operator
from itertools import repeat

from transformers.tokenization_utils_base import TruncationStrategy
from transformers.utils.generic import PaddingStrategy

from hf_bpe.progress import gc_paused

__all__ = ["windows", "pair_keep", "pad_rows", "rows_of", "all_rows", "ones_rows"]


def all_rows(ok, rows: list) -> bool:
    """``all(map(ok, rows))``, at C speed when every row is a plain ``str``."""
    return set(map(type, rows)) <= {str} or all(map(ok, rows))


def ones_rows(rows: list[list]) -> list[list[int]]:
    """An attention mask of ones per row (one new list each: callers may edit them)."""
    with gc_paused():
        return list(map(operator.mul, repeat([1]), map(len, rows)))

# An encoded sequence: (ids per text, offsets per text or None, words per text or None).
Encoded = tuple[list[list[int]], "list | None", "list | None"]



def windows(n: int, keep: int, stride: int, left: bool) -> list[tuple[int, int]]:
    """Ranges of a sequence of length n cut to ``keep`` tokens: the kept part first, then the
    overflowing windows, each overlapping the previous one by ``stride`` tokens."""
    if n <= keep:
        return [(0, n)]
    if keep == 0:
        return [(0, 0)]
    if stride >= keep:
        raise ValueError(f"stride ({stride}) must be smaller than the number of tokens kept per sequence ({keep})")
    step = keep - stride
    out = []
    if not left:
        for start in range(0, n, step):
            stop = min(start + keep, n)
            out.append((start, stop))
            if stop == n:
                break
    else:
        for stop in range(n, 0, -step):
            start = max(stop - keep, 0)
            out.append((start, stop))
            if start == 0:
                break
    return out


def pair_keep(n1: int, n2: int, max_len: int, strategy: TruncationStrategy) -> tuple[int, int]:
    """How many tokens of each sequence of a pair fit in ``max_len``, as ``tokenizers`` truncates."""
    if n1 + n2 <= max_len:
        return n1, n2
    if strategy == TruncationStrategy.ONLY_FIRST:
        if max_len < n2:
            raise ValueError("Truncation error: Sequence to truncate too short to respect the provided max_length")
        return max_len - n2, n2
    if strategy == TruncationStrategy.ONLY_SECOND:
        if max_len < n1:
            raise ValueError("Truncation error: Sequence to truncate too short to respect the provided max_length")
        return n1, max_len - n1
    swap = n1 > n2
    a, b = (n2, n1) if swap else (n1, n2)
    b = a if a > max_len else max(a, max_len - a)
    if a + b > max_len:
        a = max_len // 2
        b = a + max_len % 2
    return (b, a) if swap else (a, b)


def pad_rows(rows: dict[str, list], strategy: PaddingStrategy, max_length: int | None, multiple: int | None,
             side: str, pad_id: int | None, pad_type_id: int) -> None:
    """Pads every per-token row in place, on ``side``, to the longest row (``LONGEST``) or to
    ``max_length`` (``MAX_LENGTH``), rounded up to a multiple of ``multiple``."""
    if strategy == PaddingStrategy.DO_NOT_PAD:
        return
    target = max(map(len, rows["input_ids"]), default=0) if strategy == PaddingStrategy.LONGEST else max_length
    if target is None:
        return
    if multiple and target % multiple:
        target = (target // multiple + 1) * multiple
    if pad_id is None:
        raise ValueError("Asking to pad but the tokenizer does not have a padding token: set tokenizer.pad_token")
    fill = {"input_ids": pad_id, "attention_mask": 0, "token_type_ids": pad_type_id,
            "special_tokens_mask": 1, "offset_mapping": (0, 0), "_words": None, "_seq": None}
    for key, vals in rows.items():
        f = fill[key]
        for r, v in enumerate(vals):
            d = target - len(v)
            if d > 0:
                vals[r] = v + [f] * d if side == "right" else [f] * d + v


def rows_of(tok, a: Encoded, b: Encoded | None, add_special: bool, strategy: TruncationStrategy, max_length: int | None,
            stride: int, overflow: bool, want_tt: bool, want_mask: bool, want_offs: bool,
            want_spans: bool) -> tuple[dict[str, list], list[int]]:
    """Unpadded rows of texts ``a`` (paired with ``b``) and the text each row came from.
    ``want_spans`` adds ``offset_mapping``, ``special_tokens_mask``, ``token_type_ids`` and the
    ``_words``/``_seq`` rows (needs offsets and words in ``a`` and ``b``)."""
    n_special = tok.num_special_tokens_to_add(pair=b is not None) if add_special else 0
    truncate = strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None
    left = tok.truncation_side == "left"
    rows: dict[str, list] = {}
    mapping: list[int] = []

    def cut(enc, k, rng):
        s, e = rng
        return tuple(None if part is None else part[k][s:e] for part in enc)

    for k in range(len(a[0])):
        na = len(a[0][k])
        if b is None:
            if truncate:
                keep = max_length - n_special
                if keep < 0:
                    raise ValueError(f"max_length={max_length} is smaller than the {n_special} special tokens added")
                if strategy == TruncationStrategy.ONLY_SECOND and na > keep:
                    raise ValueError("Truncation error: truncation='only_second' needs a second sequence (text_pair)")
                wins = windows(na, keep, stride, left)
            else:
                wins = [(0, na)]
            combos = [(w, None) for w in wins]
        else:
            nb = len(b[0][k])
            if truncate:
                ka, kb = pair_keep(na, nb, max(max_length - n_special, 0), strategy)
                wa, wb = windows(na, ka, stride, left), windows(nb, kb, stride, left)
            else:
                wa, wb = [(0, na)], [(0, nb)]
            combos = [(wa[0], wb[0])] + [(x, y) for x in wa[1:] for y in wb] + [(wa[0], y) for y in wb[1:]]
        if not overflow:
            combos = combos[:1]
        for ra, rb in combos:
            _emit(tok, rows, cut(a, k, ra), None if rb is None else cut(b, k, rb), add_special, want_tt or want_spans,
                  want_mask or want_spans, want_offs or want_spans, want_spans)
            mapping.append(k)
    return rows, mapping


def _emit(tok, rows, a, b, add_special, want_tt, want_mask, want_offs, want_spans) -> None:
    ia, oa, wa = a
    ib, ob, wb = b if b is not None else (None, None, None)
    ids = tok.build_inputs_with_special_tokens(ia, ib) if add_special else ia + (ib if ib is not None else [])
    pair_len = len(ia) + (len(ib) if ib is not None else 0)
    rows.setdefault("input_ids", []).append(ids)
    rows.setdefault("attention_mask", []).append([1] * len(ids))
    if want_tt:
        if add_special:
            tt = tok.create_token_type_ids_from_sequences(ia, ib)
        else:
            tt = [0] * len(ia) + ([1] * len(ib) if ib is not None else [])
        rows.setdefault("token_type_ids", []).append(tt)
    if not (want_mask or want_offs):
        return
    # 1 for the special tokens the template adds around the sequences (as transformers'
    # GPT2Tokenizer: special tokens written in the text itself count as content).
    sm = tok.get_special_tokens_mask(ia, ib) if add_special and len(ids) != pair_len else [0] * len(ids)
    if want_mask:
        rows.setdefault("special_tokens_mask", []).append(sm)
    if want_offs:
        offs = iter((oa or []) + (ob or []))
        rows.setdefault("offset_mapping", []).append([(0, 0) if bit else next(offs) for bit in sm])
    if want_spans:  # the template puts the first sequence's tokens before the second's
        words = iter(wa + (wb or []))
        seqs = iter([0] * len(ia) + [1] * len(ib or []))
        rows.setdefault("_words", []).append([None if bit else next(words) for bit in sm])
        rows.setdefault("_seq", []).append([None if bit else next(seqs) for bit in sm])
