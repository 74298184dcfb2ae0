"""GPT-2's byte alphabet: how ``vocab.json``, ``merges.txt`` and ``tokenizer.json`` spell a token's
bytes as printable characters (``b" the"`` is ``"Ġthe"``). The map itself comes from the native
core, which uses it too; ``hf_bpe.reference`` computes its own copy independently."""

from __future__ import annotations

from hf_bpe import _core

__all__ = ["bytes_to_unicode", "token_to_str", "str_to_token", "BYTE_TO_CHAR", "CHAR_TO_BYTE"]

_ENCODE_TABLE: list[str] = list(_core.byte_alphabet())
BYTE_TO_CHAR: dict[int, str] = dict(enumerate(_ENCODE_TABLE))
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in BYTE_TO_CHAR.items()}


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from each byte to a printable character.

    Printable Latin-1 bytes map to themselves; the other 68 bytes (controls, space, NBSP, soft
    hyphen) map, in byte order, to U+0100 onwards, so that every token is a visible string.
    """
    return dict(BYTE_TO_CHAR)


def token_to_str(token: bytes) -> str:
    """The GPT-2 vocab.json spelling of a token's bytes (``b" the"`` -> ``"Ġthe"``)."""
    return "".join([_ENCODE_TABLE[b] for b in token])


def str_to_token(s: str) -> bytes | None:
    """Inverse of :func:`token_to_str`; ``None`` if a character is outside the byte alphabet."""
    try:
        return bytes([CHAR_TO_BYTE[c] for c in s])
    except KeyError:
        return None
