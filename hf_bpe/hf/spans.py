"""Word and character alignment for :class:`hf_bpe.BPETokenizer`'s ``BatchEncoding``:
:class:`TokenSpans` answers what a ``tokenizers.Encoding`` answers (``word_ids``,
``sequence_ids``, ``char_to_token``, ``token_to_chars``, ...), with the same rules, from the
rows the tokenizer builds (its ``offset_mapping`` and the core's word indices,
``BPE.encode_spans``). :class:`LazyEncodings` builds them only when one is asked for, so a
call that never looks at them costs nothing more."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["TokenSpans", "LazyEncodings"]


class TokenSpans:
    """One row of a batch as ``tokenizers.Encoding`` presents it (read-only)."""

    __slots__ = ("ids", "tokens", "offsets", "word_ids", "type_ids", "attention_mask", "special_tokens_mask",
                 "_ranges", "overflowing")

    def __init__(self, ids: list[int], tokens: list[str], offsets: list[tuple[int, int]], word_ids: list[int | None],
                 ranges: list[tuple[int, int]], type_ids: list[int], attention_mask: list[int],
                 special_tokens_mask: list[int]) -> None:
        self.ids, self.tokens, self.offsets, self.word_ids = ids, tokens, offsets, word_ids
        self._ranges = ranges  # token range of each sequence (0, then 1 for a pair)
        self.type_ids, self.attention_mask, self.special_tokens_mask = type_ids, attention_mask, special_tokens_mask
        self.overflowing: list[TokenSpans] = []

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"TokenSpans(num_tokens={len(self.ids)}, n_sequences={self.n_sequences})"

    @property
    def words(self) -> list[int | None]:
        return self.word_ids

    @property
    def n_sequences(self) -> int:
        return len(self._ranges)

    @property
    def sequence_ids(self) -> list[int | None]:
        out: list[int | None] = [None] * len(self.ids)
        for k, (s, e) in enumerate(self._ranges):
            out[s:e] = [k] * (e - s)
        return out

    def _range(self, sequence_index: int) -> range:
        if 0 <= sequence_index < len(self._ranges):
            return range(*self._ranges[sequence_index])
        return range(len(self.ids))  # no such sequence: the whole row, as tokenizers

    def token_to_sequence(self, token_index: int) -> int | None:
        return next((k for k, (s, e) in enumerate(self._ranges) if s <= token_index < e), None)

    def token_to_word(self, token_index: int) -> int | None:
        if self.token_to_sequence(token_index) is None:
            return None
        return self.word_ids[token_index]

    def token_to_chars(self, token_index: int) -> tuple[int, int] | None:
        if self.token_to_sequence(token_index) is None:
            return None
        return self.offsets[token_index]

    def word_to_tokens(self, word_index: int, sequence_index: int = 0) -> tuple[int, int] | None:
        r = self._range(sequence_index)
        first = last = None
        for t in r:
            w = self.word_ids[t]
            if w is not None and w > word_index:
                break  # words are increasing within a sequence
            if w == word_index:
                first = t if first is None else first
                last = t
        return None if first is None else (first, last + 1)

    def word_to_chars(self, word_index: int, sequence_index: int = 0) -> tuple[int, int] | None:
        span = self.word_to_tokens(word_index, sequence_index)
        if span is None:
            return None
        return self.offsets[span[0]][0], self.offsets[span[1] - 1][1]

    def char_to_token(self, char_pos: int, sequence_index: int = 0) -> int | None:
        return next((t for t in self._range(sequence_index)
                     if self.offsets[t][0] <= char_pos < self.offsets[t][1]), None)

    def char_to_word(self, char_pos: int, sequence_index: int = 0) -> int | None:
        t = self.char_to_token(char_pos, sequence_index)
        return None if t is None else self.token_to_word(t)


class LazyEncodings(Sequence):
    """The ``encodings`` of a ``BatchEncoding``, built by ``build()`` on first use (then kept,
    and pickled as built)."""

    def __init__(self, build: Callable[[], list[TokenSpans]]) -> None:
        self._build: Callable[[], list[TokenSpans]] | None = build
        self._items: list[TokenSpans] | None = None

    def _all(self) -> list[TokenSpans]:
        if self._items is None:
            self._items, self._build = self._build(), None
        return self._items

    def __getitem__(self, k: Any) -> Any:
        return self._all()[k]

    def __len__(self) -> int:
        return len(self._all())

    def __bool__(self) -> bool:
        return True  # a batch always has rows; don't build them to say so

    def __reduce__(self):
        return list, (self._all(),)


def spans_rows(rows: dict[str, list], id_to_str: dict[int, str], added: dict[int, str], n_seq: int) -> list[TokenSpans]:
    """:class:`TokenSpans` of padded rows holding ``input_ids``, ``offset_mapping``, ``_words``
    and ``_seq`` (the sequence of each token, None for those the template or padding added)."""
    out = []
    n = len(rows["input_ids"])
    for r in range(n):
        ids = rows["input_ids"][r]
        seq = rows["_seq"][r]
        ranges = []
        for k in range(n_seq):
            where = [t for t, x in enumerate(seq) if x == k]
            ranges.append((where[0], where[-1] + 1) if where else (0, 0))
        tokens = [added.get(i) or id_to_str.get(i, "") for i in ids]
        out.append(TokenSpans(ids, tokens, [tuple(o) for o in rows["offset_mapping"][r]], rows["_words"][r], ranges,
                              rows["token_type_ids"][r] if "token_type_ids" in rows else [0] * len(ids),
                              rows["attention_mask"][r], rows["special_tokens_mask"][r]))
    return out
