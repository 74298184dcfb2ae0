"""tiktoken's entry points on hf_bpe: :class:`Encoding` (tiktoken's constructor for a :class:`BPE`),
:func:`get_encoding`, :func:`list_encoding_names`, :func:`encoding_for_model` and
:func:`encoding_name_for_model`, over OpenAI's published encodings shipped in the package (no
network). ``import hf_bpe as tiktoken`` is enough for code written for tiktoken.
"""

from __future__ import annotations

import functools
import os

from hf_bpe import formats
from hf_bpe.bpe import DEFAULT_CACHE_BYTES, BPE, _from_state
from hf_bpe.formats import encoding_name_for_model

__all__ = ["Encoding", "get_encoding", "list_encoding_names", "encoding_for_model", "encoding_name_for_model"]


class Encoding(BPE):
    """A :class:`BPE` made as tiktoken makes an ``Encoding``: ids are the ranks of
    ``mergeable_ranks`` (the lowest-ranked adjacent pair whose join is a token merges first) and
    ``pat_str`` is a regex as tiktoken's engine reads it."""

    def __init__(self, name: str, *, pat_str: str, mergeable_ranks: dict[bytes, int], special_tokens: dict[str, int],
                 explicit_n_vocab: int | None = None, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        vocab = {r: bytes(t) for t, r in mergeable_ranks.items()}
        if len(vocab) != len(mergeable_ranks):
            dup = next(r for r in vocab if list(mergeable_ranks.values()).count(r) > 1)
            raise ValueError(f"Encoding {name!r}: two tokens of mergeable_ranks have the rank {dup}")
        if explicit_n_vocab:
            top = max([*vocab, *special_tokens.values()], default=-1)
            if len(vocab) + len(special_tokens) != explicit_n_vocab or top != explicit_n_vocab - 1:
                raise ValueError(f"Encoding {name!r}: explicit_n_vocab is {explicit_n_vocab}, but there are "
                                 f"{len(vocab)} ranks and {len(special_tokens)} special tokens, largest id {top}")
        super().__init__(vocab, None, special_tokens, formats.from_tiktoken_pattern(pat_str), cache_bytes=cache_bytes)
        self.name = name

    def __repr__(self) -> str:
        return f"<Encoding {self.name!r}>"

    def __reduce__(self):
        state = self._core.to_state()
        return (_encoding_from_state, (state, self.name, self.dropout, os.urandom(8) if self.dropout else b""))


def _encoding_from_state(state: bytes, name: str | None, dropout: float | None = None, _nonce: bytes = b"") -> Encoding:
    bpe = _from_state(state, dropout, _nonce, name)
    bpe.__class__ = Encoding
    return bpe


@functools.lru_cache(maxsize=None)
def get_encoding(encoding_name: str) -> Encoding:
    """One of OpenAI's published encodings by name, from the files shipped in the package (made
    once per process, as tiktoken's)."""
    if not isinstance(encoding_name, str):
        raise ValueError(f"expected the name of an encoding (a str), got {type(encoding_name).__name__}")
    if encoding_name not in formats.PUBLISHED:
        raise ValueError(f"Unknown encoding {encoding_name!r}: the known ones are {', '.join(list_encoding_names())}")
    t = formats.read_published(encoding_name)
    enc = Encoding.__new__(Encoding)
    BPE.__init__(enc, t.vocab, None, t.special_tokens, t.pattern)
    enc.name = encoding_name
    return enc


def list_encoding_names() -> list[str]:
    """The names :func:`get_encoding` knows."""
    return list(formats.PUBLISHED)


def encoding_for_model(model_name: str) -> Encoding:
    """The encoding of an OpenAI model (``"gpt-4o"``); an unknown model raises ``KeyError``."""
    return get_encoding(encoding_name_for_model(model_name))
