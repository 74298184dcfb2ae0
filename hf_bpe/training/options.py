"""Training options, checked once for every trainer (``train``, ``train_files``,
``train_from_counts``, extending, ``hf_bpe.distributed``): the special tokens, the vocabulary
size, the tie rule and the merge loop's limits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

__all__ = ["TieBreak", "EMPTY", "MAX_VOCAB_SIZE", "check_options", "check_specials"]

TieBreak = Literal["lexicographic", "hf"]

EMPTY = "the corpus is empty: there is no text to train on (only empty documents or special tokens)"

# Token ids are 32-bit; far below that, a vocabulary this large is already unheard of.
MAX_VOCAB_SIZE = 1 << 24


def check_options(vocab_size: int, special_tokens: Sequence[str], tie_break: str, min_frequency: int,
                   max_token_length: int | None) -> list[str]:
    if isinstance(special_tokens, str):
        raise TypeError(f"special_tokens must be a list of strings, not the string {special_tokens!r}")
    specials = list(special_tokens)
    for s in specials:
        if not isinstance(s, str) or not s:
            raise ValueError(f"special token {s!r} must be a non-empty string")
        if len(s.encode("utf-8")) == 1:
            raise ValueError(f"special token {s!r} is one byte, which is already the byte token {s!r}: "
                             "a special token needs two bytes or more")
    dup = {s for s in specials if specials.count(s) > 1}
    if dup:
        raise ValueError(f"special token {sorted(dup)[0]!r} is listed twice")
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__} ({vocab_size!r})")
    if vocab_size > MAX_VOCAB_SIZE:
        raise ValueError(f"vocab_size={vocab_size} is above the largest vocabulary hf_bpe trains, {MAX_VOCAB_SIZE:,}")
    if vocab_size < 256 + len(specials):
        raise ValueError(f"vocab_size={vocab_size!r} is below 256 byte tokens + {len(specials)} special "
                         f"token{'s' * (len(specials) != 1)} "
                         f"= {256 + len(specials)}")
    if tie_break not in ("lexicographic", "hf"):
        raise ValueError(f"tie_break must be 'lexicographic' or 'hf', not {tie_break!r}")
    if min_frequency < 0:
        raise ValueError(f"min_frequency must be >= 0, not {min_frequency}")
    if max_token_length is not None and max_token_length < 1:
        raise ValueError(f"max_token_length must be >= 1 or None, not {max_token_length}")
    return specials


def check_specials(special_tokens: Sequence[str]) -> list[str]:
    return check_options(256 + len(special_tokens) if not isinstance(special_tokens, str) else 256, special_tokens,
                          "lexicographic", 0, None)
