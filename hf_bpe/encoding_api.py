"""tiktoken's ``Encoding`` API, which :class:`~hf_bpe.BPE` has besides its own: code written for
tiktoken runs on a ``BPE`` unchanged (``import hf_bpe as tiktoken``; see :mod:`hf_bpe.registry`).
Unknown ids and tokens raise :class:`UnknownTokenError`, both the ``KeyError`` tiktoken raises and
the ``ValueError`` hf_bpe raises elsewhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from hf_bpe import _core
from hf_bpe.formats import tiktoken_export

if TYPE_CHECKING:
    import numpy as np

__all__ = ["EncodingAPI", "UnknownTokenError", "specials_arg"]

UnknownTokenError: type[KeyError] = _core.UnknownTokenError
"""An id or token the vocabulary does not have: a ``KeyError`` (tiktoken's) and a ``ValueError``."""

_EOT = "<|endoftext|>"


class EncodingAPI:
    """The methods and properties of ``tiktoken.Encoding``, on the tables of a ``BPE``."""

    name: str | None
    """A published encoding's name (``"cl100k_base"``), the ``name`` given to ``Encoding``, or ``None``."""

    @property
    def n_vocab(self) -> int:
        """The largest id + 1, special tokens included (tiktoken's ``n_vocab``)."""
        return self.vocab_size

    @property
    def max_token_value(self) -> int:
        """The largest id, special tokens included."""
        return self.vocab_size - 1

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>``."""
        if _EOT not in self.special_tokens:
            raise UnknownTokenError(f"this vocabulary has no special token {_EOT}")
        return self.special_tokens[_EOT]

    @property
    def special_tokens_set(self) -> set[str]:
        """The texts of the special tokens."""
        return set(self.special_tokens)

    def is_special_token(self, token: int) -> bool:
        """Whether ``token`` is the id of a special token."""
        return token in self.special_tokens.values()

    @property
    def _special_tokens(self) -> dict[str, int]:
        return dict(self.special_tokens)

    @property
    def _mergeable_ranks(self) -> dict[bytes, int]:
        """The ranks tiktoken would need for these ids (see ``BPE.to_tiktoken``)."""
        return self._ranks()

    @property
    def _pat_str(self) -> str:
        return tiktoken_export.pat_str(self.pattern, self.pattern_source)

    def encode_to_numpy(self, text: str, *, allowed_special=(), disallowed_special="all") -> np.ndarray:
        """:meth:`encode` as a ``uint32`` array."""
        if self.dropout:
            import numpy as np

            return np.array(self.encode(text, allowed_special, disallowed_special), dtype=np.uint32)
        return self._encoder().encode_to_numpy(text, specials_arg(allowed_special), specials_arg(disallowed_special))

    def encode_ordinary_batch(self, text: Sequence[str], *, num_threads: int | None = None) -> list[list[int]]:
        """:meth:`encode_ordinary` of many texts on all cores (``num_threads``: how many)."""
        return self.encode_batch(text, num_threads, (), ())

    def encode_bytes(self, data: bytes) -> list[int]:
        """Ids of any bytes, UTF-8 or not, as tiktoken's ``_encode_bytes``: valid UTF-8 is
        :meth:`encode_ordinary`; otherwise the tokens of the valid prefix's last piece (and the
        whitespace tokens before it) are merged again with the bytes that follow, as one piece."""
        return _core.encode_bytes(self._encoder(), bytes(data))

    _encode_bytes = encode_bytes

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of one token given by its text or bytes (special tokens by their text)."""
        b = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else bytes(text_or_bytes)
        i = self.token_to_id(b)
        if i is None:
            try:
                i = self.special_tokens.get(b.decode("utf-8"))
            except UnicodeDecodeError:
                pass
        if i is None:
            raise UnknownTokenError(f"not a token of this vocabulary: {text_or_bytes!r}")
        return i

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one id."""
        return self._encoder().token_bytes(token)

    def decode_tokens_bytes(self, tokens: Iterable[int]) -> list[bytes]:
        """The bytes of each id."""
        core = self._encoder()
        return [core.token_bytes(t) for t in tokens]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """The text of ``tokens`` (which must decode to valid UTF-8) and the character at which each
        token starts: a token that starts inside a character starts at that character."""
        parts = self.decode_tokens_bytes(tokens)
        offsets, chars = [], 0
        for b in parts:
            inside = bool(b) and 0x80 <= b[0] < 0xC0  # a continuation byte: the character began before
            offsets.append(max(0, chars - inside))
            chars += sum(1 for c in b if not 0x80 <= c < 0xC0)
        return b"".join(parts).decode("utf-8", errors="strict"), offsets

    def decode_batch(self, batch: Sequence[Sequence[int]], *, errors: str = "replace",
                     num_threads: int | None = None) -> list[str]:
        """:meth:`decode` of each id sequence (``num_threads``: accepted for tiktoken's signature)."""
        return self._encoder().decode_batch(batch, errors)

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int | None = None) -> list[bytes]:
        """:meth:`decode_bytes` of each id sequence."""
        return [self.decode_bytes(ids) for ids in batch]

    def token_byte_values(self) -> list[bytes]:
        """The bytes of every ordinary (mergeable) token, sorted."""
        return sorted(self._ids)


def specials_arg(s) -> str | list[str]:
    """An ``allowed_special``/``disallowed_special`` argument for the core: ``"all"`` or a sorted list."""
    if s == "all":
        return "all"
    if isinstance(s, str):
        raise TypeError(f"expected 'all' or a collection of special tokens, got the string {s!r}")
    return sorted(s)
