"""Type stubs for the native core (Rust, PyO3). Every long call releases the GIL."""

from typing import Callable, Literal, Sequence

import numpy as np
import numpy.typing as npt

def pretokenize(pattern: str, text: str) -> list[str]:
    """Splits ``text`` into pre-tokens with ``"gpt2"``, ``"cl100k"``, ``"o200k"`` or a regex."""

def pattern_source(pattern: str) -> str:
    """The regex a pattern name stands for (a regex is returned as is, after compiling it)."""

class WordCounter:
    """Counts distinct pre-tokens of a corpus on all cores."""

    def __init__(self, pattern: str = "gpt2", special_tokens: Sequence[str] = (), num_threads: int | None = None) -> None: ...
    def add_texts(self, texts: Sequence[str]) -> None:
        """Counts documents: each is split on the special tokens, then pre-tokenized."""
    def add_file(self, path: str, errors: Literal["strict", "replace", "ignore"] = "strict", text_field: str = "text",
                 progress: Callable[[int], object] | None = None) -> None:
        """Streams a text, ``.gz`` or ``.jsonl`` file; ``progress(bytes_read)`` now and then."""
    def words(self) -> list[tuple[bytes, int]]:
        """Distinct pre-tokens with their counts, sorted by bytes."""
    def __len__(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def documents(self) -> int: ...

def train_merges(words: WordCounter | Sequence[tuple[bytes, int]], max_new_tokens: int,
                 tie_break: Literal["lexicographic", "hf"] = "lexicographic", min_frequency: int = 0,
                 max_token_length: int | None = None,
                 progress: Callable[[int], object] | None = None) -> list[tuple[bytes, bytes]]:
    """Learns merges (in training order) until ``max_new_tokens`` new token strings exist."""
