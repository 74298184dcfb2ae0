"""The types every format shares: :class:`FormatError`, :class:`AddedToken`, :class:`Tables`.
A leaf: it imports nothing of hf_bpe."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["FormatError", "AddedToken", "Tables", "MAX_ID"]


class FormatError(ValueError):
    """A tokenizer file is malformed; the message names the file and, where it can, the line."""


class AddedToken(NamedTuple):
    """A token matched in the text before the model, with the flags of ``tokenizers``'
    ``AddedToken``: ``special`` ones follow ``allowed_special``/``disallowed_special`` (and are
    skipped by ``decode(skip_special_tokens=True)``), the others always match; ``lstrip`` /
    ``rstrip`` take the whitespace on that side into the token; ``single_word`` matches only
    where no word character touches it; ``normalized`` ones are matched in the normalized text."""

    content: str
    id: int
    special: bool = True
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False
    normalized: bool = False


class Tables(NamedTuple):
    """What a tokenizer file holds, as ``BPE``'s constructor takes it."""

    vocab: dict[int, bytes]
    """Every id and its bytes (added tokens as their UTF-8 bytes)."""
    merges: list[tuple[bytes, bytes]] | None
    """Merges in rank order, or ``None`` for tiktoken ranks."""
    special_tokens: dict[str, int]
    pattern: str
    """``"gpt2"``, ``"cl100k"``, ``"o200k"`` or a regex."""
    added_tokens: tuple[AddedToken, ...] = ()
    """Added tokens with their flags (special ones also in ``special_tokens``)."""
    pipeline: str | None = None
    """An imported ``tokenizer.json``'s normalizer, pre-tokenizer, model options, post-processor
    and decoder (JSON), checked and run by the core."""
    truncation_padding: dict | None = None
    """A ``tokenizer.json``'s ``truncation`` and ``padding`` sections that are set (``tokenizers``
    applies them in every encode; ``BPE.load`` refuses them unless told to ignore them)."""
    name: str | None = None
    """The name of a published encoding read by name (``"cl100k_base"``), else ``None``."""


# Ids are 32-bit in the core (u32::MAX itself is reserved).
MAX_ID = (1 << 32) - 1
