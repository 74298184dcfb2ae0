"""Word counts as data: the distinct pre-tokens of a corpus and how often each occurs, made by
:func:`hf_bpe.count` / :func:`hf_bpe.count_files` and trained on by :func:`hf_bpe.train_from_counts`.

A :class:`WordCounts` is three flat arrays sorted by the words' bytes (the core's form,
``src/counts.rs``): the words' bytes, their offsets and their counts, so memory is the words'
bytes plus 16 bytes per distinct word, pickling and saving copy no Python objects, and ``a + b``
is a linear merge of sorted runs in the core. Counts remember the pattern and special tokens
they were made with and refuse to merge with counts made otherwise.

File format (``save``/``load``), version 2: a magic line, a little-endian u32 header length, a
JSON header (version, pattern, special tokens, sizes, CRC-32 of the arrays), the header's own
CRC-32 (u32), then the three arrays raw. Every field is checked before anything is allocated:
a damaged or foreign file is a :class:`~hf_bpe.FormatError` naming the file and the field.
Version 1 files (no header checksum) still load, their fields checked alike.
"""

from __future__ import annotations

import bisect
import json
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from hf_bpe import _core
from hf_bpe.formats.files import write_file
from hf_bpe.formats.types import FormatError
from hf_bpe.formats.regex_forms import pattern_key

__all__ = ["WordCounts"]

MAGIC = b"hf_bpe word counts\n"
VERSION = 2
_HEADER = {"version": int, "pattern": str, "special_tokens": list, "words": int, "word_bytes": int,
           "documents": int, "text_bytes": int, "crc32": int}
_DTYPES = (("bytes", "<u1"), ("offsets", "<i8"), ("counts", "<u8"))


def _exact(a, name: str, dtype: str) -> np.ndarray:
    """``a`` as ``dtype`` when that loses nothing (integers, none negative), else a ValueError."""
    a = np.asarray(a)
    if a.dtype.kind not in "ui" and a.size:
        raise ValueError(f"the {name} array must hold integers, not {a.dtype}")
    if a.dtype.kind == "i" and a.size and a.min() < 0:
        raise ValueError(f"the {name} array holds a negative value ({a.min()})")
    return np.ascontiguousarray(a, dtype=dtype)


class WordCounts:
    """Distinct words (``bytes``) with their counts, for one pattern and set of special tokens.

    >>> import hf_bpe
    >>> c = hf_bpe.count(["the cat, the hat, the end"], progress=False)
    >>> len(c), c.total, c.most_common(1)
    (6, 8, [(b' the', 2)])
    """

    __slots__ = ("pattern", "special_tokens", "bytes", "offsets", "counts", "documents", "text_bytes")

    def __init__(self, arrays: tuple[np.ndarray, np.ndarray, np.ndarray], pattern: str = "gpt2",
                 special_tokens: Iterable[str] = ("<|endoftext|>",), documents: int = 0, text_bytes: int = 0,
                 *, checked: bool = False) -> None:
        b, o, c = (_exact(a, name, d) for a, (name, d) in zip(arrays, _DTYPES))
        if not checked:
            _core.check_counts((b, o, c))
        self.bytes, self.offsets, self.counts = b, o, c
        self.pattern, self.special_tokens = pattern, tuple(special_tokens)
        self.documents, self.text_bytes = int(documents), int(text_bytes)

    # ---- reading -----------------------------------------------------------------------------
    def __len__(self) -> int:
        """Distinct words."""
        return len(self.counts)

    @property
    def total(self) -> int:
        """Occurrences of all words."""
        return (int((self.counts >> np.uint64(32)).sum()) << 32) + int((self.counts & np.uint64(0xFFFFFFFF)).sum())

    def word(self, i: int) -> bytes:
        """The ``i``-th word in byte order."""
        return self.bytes[self.offsets[i]:self.offsets[i + 1]].tobytes()

    def items(self) -> Iterator[tuple[bytes, int]]:
        """``(word, count)`` in byte order."""
        for i in range(len(self)):
            yield self.word(i), int(self.counts[i])

    def most_common(self, n: int | None = None) -> list[tuple[bytes, int]]:
        """The ``n`` most frequent words (all without ``n``); equal counts in byte order."""
        order = np.lexsort((np.arange(len(self)), ~self.counts))[:n]  # exact on uint64: ~c ascending
        return [(self.word(i), int(self.counts[i])) for i in order.tolist()]

    def __getitem__(self, word: bytes) -> int:
        """The count of ``word`` (0 when it never occurs)."""
        i = bisect.bisect_left(range(len(self)), word, key=self.word)
        return int(self.counts[i]) if i < len(self) and self.word(i) == word else 0

    def __repr__(self) -> str:
        return (f"WordCounts({len(self):,} words, {self.total:,} occurrences, pattern={self.pattern!r}, "
                f"special_tokens={list(self.special_tokens)})")

    # ---- combining ---------------------------------------------------------------------------
    def _check_compatible(self, other: WordCounts) -> None:
        if not isinstance(other, WordCounts):
            raise TypeError(f"can only merge WordCounts with WordCounts, not {type(other).__name__}")
        if pattern_key(self.pattern) != pattern_key(other.pattern):
            raise ValueError(f"counts made with pattern {self.pattern!r} cannot merge with counts made with "
                             f"pattern {other.pattern!r}: the words would not be the same pre-tokens")
        # The same special tokens in another order split the text alike: they merge (the
        # first part's order is kept, as the ids a trainer gives them follow it).
        if sorted(self.special_tokens) != sorted(other.special_tokens):
            raise ValueError(f"counts made with special tokens {list(self.special_tokens)} cannot merge with "
                             f"counts made with {list(other.special_tokens)}")

    @classmethod
    def merge(cls, parts: Iterable[WordCounts]) -> WordCounts:
        """All ``parts`` in one (a single k-way merge; ``sum`` of many would merge pairwise)."""
        parts = list(parts)
        if not parts:
            raise ValueError("no counts to merge")
        for p in parts[1:]:
            parts[0]._check_compatible(p)
        arrays = _core.merge_counts([(p.bytes, p.offsets, p.counts) for p in parts])
        return cls(arrays, parts[0].pattern, parts[0].special_tokens, sum(p.documents for p in parts),
                   sum(p.text_bytes for p in parts), checked=True)

    def __add__(self, other: WordCounts) -> WordCounts:
        self._check_compatible(other)
        return WordCounts.merge([self, other])

    def __radd__(self, other):  # sum(counts) starts from 0
        return self if isinstance(other, int) and other == 0 else NotImplemented

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WordCounts):
            return NotImplemented
        return (pattern_key(self.pattern) == pattern_key(other.pattern)
                and self.special_tokens == other.special_tokens
                and all(np.array_equal(getattr(self, k), getattr(other, k)) for k, _ in _DTYPES))

    __hash__ = None  # mutable arrays

    def pruned(self, min_word_count: int) -> WordCounts:
        """Without the words seen fewer than ``min_word_count`` times (itself when that is 0 or 1)."""
        if min_word_count <= 1:
            return self
        keep = self.counts >= min_word_count
        lens = np.diff(self.offsets)[keep]
        starts = self.offsets[:-1][keep]
        ends = np.cumsum(lens)
        idx = np.repeat(starts - (ends - lens), lens) + np.arange(ends[-1] if len(ends) else 0)
        offsets = np.concatenate(([0], ends)).astype(np.int64)
        return WordCounts((self.bytes[idx], offsets, self.counts[keep]), self.pattern, self.special_tokens,
                          self.documents, self.text_bytes, checked=True)

    # ---- files and pickling ------------------------------------------------------------------
    def __getstate__(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state: dict) -> None:
        for k in self.__slots__:
            setattr(self, k, state[k])

    def save(self, path: str | os.PathLike) -> Path:
        """Writes the counts to one file, atomically (see the module doc for the format)."""
        arrays = [getattr(self, k) for k, _ in _DTYPES]
        crc = 0
        for a in arrays:
            crc = zlib.crc32(memoryview(a).cast("B"), crc)
        header = json.dumps({"version": VERSION, "pattern": self.pattern, "special_tokens": list(self.special_tokens),
                             "words": len(self), "word_bytes": len(self.bytes), "documents": self.documents,
                             "text_bytes": self.text_bytes, "crc32": crc}).encode()
        return write_file(path, [MAGIC, struct.pack("<I", len(header)), header, struct.pack("<I", zlib.crc32(header))]
                          + [memoryview(a).cast("B") for a in arrays])

    @classmethod
    def load(cls, path: str | os.PathLike) -> WordCounts:
        """Reads a file written by :meth:`save`; a file that is not one, truncated or corrupt
        is a :class:`hf_bpe.FormatError` naming it."""
        path = Path(path)
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                raise FormatError(f"{path}: not an hf_bpe word counts file (made by WordCounts.save)")
            size = os.fstat(f.fileno()).st_size
            raw = f.read(4)
            n = struct.unpack("<I", raw)[0] if len(raw) == 4 else size
            if len(MAGIC) + 4 + n > size:
                raise FormatError(f"{path}: truncated: the header of the word counts is cut short")
            text = f.read(n)
            head = _header(path, text)
            if head["version"] == 2 and struct.unpack("<I", f.read(4).ljust(4, b"\0"))[0] != zlib.crc32(text):
                raise FormatError(f"{path}: corrupt: the checksum of the word counts' header does not match")
            words, nbytes = head["words"], head["word_bytes"]
            left = size - f.tell()
            arrays, crc = [], 0
            for (name, dtype), count in zip(_DTYPES, (nbytes, words + 1, words)):
                width = np.dtype(dtype).itemsize
                if count * width > left:
                    raise FormatError(f"{path}: truncated: the {name} array has {left // width} of its {count} entries")
                a = np.fromfile(f, dtype=dtype, count=count)
                left -= count * width
                crc = zlib.crc32(memoryview(a).cast("B"), crc)
                arrays.append(a)
            if f.read(1):
                raise FormatError(f"{path}: there are bytes after the word counts")
        if crc != head["crc32"]:
            raise FormatError(f"{path}: corrupt: the checksum of the word counts does not match")
        try:
            return cls(tuple(arrays), head["pattern"], head["special_tokens"], head["documents"], head["text_bytes"])
        except ValueError as e:
            raise FormatError(f"{path}: {e}") from None


def _header(path: Path, text: bytes) -> dict:
    """The header's fields, each checked (type, range); a FormatError naming the field if not."""
    try:
        head = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise FormatError(f"{path}: the header of the word counts is damaged ({e})") from None
    if not isinstance(head, dict):
        raise FormatError(f"{path}: the header of the word counts is not a JSON object")
    version = head.get("version")
    if version not in (1, 2) or isinstance(version, bool):
        raise FormatError(f"{path}: word counts format version {version!r}; this hf_bpe reads versions 1 and 2")
    fields = (dict(_HEADER) if version == 2
              else {k: t for k, t in _HEADER.items() if k not in ("documents", "text_bytes")})
    missing, unknown = sorted(set(fields) - set(head)), sorted(set(head) - set(_HEADER))
    if missing or unknown:
        raise FormatError(f"{path}: the header of the word counts has " + "; ".join(
            ([f"no field {', '.join(missing)}"] if missing else [])
            + ([f"unknown field {', '.join(unknown)}"] if unknown else [])))
    for key, kind in _HEADER.items():
        v = head.setdefault(key, 0)
        if (not isinstance(v, kind) or isinstance(v, bool)
                or (kind is int and not 0 <= v < (1 << 32 if key == "crc32" else 1 << 63))):
            raise FormatError(f"{path}: the word counts' header field {key!r} is {str(v)[:60]!r}, not "
                              + ("a non-negative integer" if kind is int else f"a {kind.__name__}"))
    specials = head["special_tokens"]
    if not all(isinstance(t, str) and t for t in specials) or len(set(specials)) != len(specials):
        raise FormatError(f"{path}: the word counts' header field 'special_tokens' must list distinct "
                          "non-empty strings")
    if not head["pattern"]:
        raise FormatError(f"{path}: the word counts' header field 'pattern' is empty")
    return head
