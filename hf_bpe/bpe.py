"""The :class:`BPE` object: a trained (or loaded) byte-level BPE vocabulary that encodes and
decodes text through the native core, saves to GPT-2/HF files and loads them back."""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING, AbstractSet, Collection, Iterable, Literal, Sequence

from hf_bpe import _core, formats

if TYPE_CHECKING:  # numpy is imported where it is used: `import hf_bpe` stays light (~16 MiB less RSS)
    import numpy as np

__all__ = ["BPE"]

AllowedSpecial = Literal["all"] | AbstractSet[str] | Collection[str]


class BPE:
    """A byte-level BPE tokenizer: vocabulary, merges, special tokens and a pre-tokenization pattern.

    >>> bpe = BPE.load("out/")                     # doctest: +SKIP
    >>> bpe.decode(bpe.encode("hello world"))      # doctest: +SKIP
    'hello world'
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: Sequence[tuple[bytes, bytes]] | None,
        special_tokens: dict[str, int] | None = None,
        pattern: str = "gpt2",
    ) -> None:
        """Builds a tokenizer from its tables.

        ``vocab`` maps every id (special tokens included, as their UTF-8 bytes) to its bytes;
        ``merges`` lists the merges in training order as byte pairs, or is ``None`` for a
        tiktoken-style vocabulary where the id is the merge rank. ``pattern`` is ``"gpt2"``,
        ``"cl100k"``, ``"o200k"`` or a regex.
        """
        self.special_tokens: dict[str, int] = dict(special_tokens or {})
        self.pattern: str = pattern
        self.pattern_source: str = _core.pattern_source(pattern)  # validates the pattern
        self._vocab: dict[int, bytes] = dict(vocab)
        special_ids = set(self.special_tokens.values())
        for s, i in self.special_tokens.items():
            if self._vocab.get(i, s.encode()) != s.encode():
                raise ValueError(f"special token {s!r} has id {i}, which the vocabulary gives to {self._vocab[i]!r}")
            self._vocab[i] = s.encode()
        self._ids: dict[bytes, int] = {}
        for i, b in self._vocab.items():
            if i in special_ids:
                continue
            if b in self._ids:
                raise ValueError(f"ids {self._ids[b]} and {i} are both the token {b!r}")
            self._ids[b] = i
        missing = [b for b in range(256) if bytes([b]) not in self._ids]
        if missing:
            raise ValueError(f"the vocabulary lacks {len(missing)} of the 256 byte tokens (e.g. byte {missing[0]})")
        self._merges: list[tuple[bytes, bytes]] | None = None
        if merges is not None:
            checked = []
            for n, (a, b) in enumerate(merges):
                a, b = bytes(a), bytes(b)
                for t in (a, b, a + b):
                    if t not in self._ids:
                        raise ValueError(f"merge #{n} ({a!r}, {b!r}) uses {t!r}, which is not in the vocabulary")
                checked.append((a, b))
            self._merges = checked
        self._core: _core.Encoder | None = None
        self._core_pid = -1

    # ---- tables ---------------------------------------------------------------------------

    @property
    def vocab(self) -> dict[int, bytes]:
        """Every id and its bytes (special tokens as their UTF-8 bytes)."""
        return dict(self._vocab)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges in training (rank) order. For a tiktoken vocabulary they are derived."""
        if self._merges is None:
            self._merges = _merges_from_ranks(self._ids, set(self.special_tokens.values()))
        return list(self._merges)

    @property
    def vocab_size(self) -> int:
        """How many tokens there are: byte tokens + merged tokens + special tokens."""
        return len(self._vocab)

    def token_to_id(self, token: bytes | str) -> int | None:
        """The id of a token given by its bytes, or of a special token given by its text."""
        if isinstance(token, str):
            if token in self.special_tokens:
                return self.special_tokens[token]
            token = token.encode()
        return self._ids.get(token)

    def __repr__(self) -> str:
        return (f"BPE(vocab_size={self.vocab_size}, merges={len(self._merges) if self._merges is not None else 'ranks'}, "
                f"special_tokens={list(self.special_tokens)}, pattern={self.pattern!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BPE):
            return NotImplemented
        return (self._vocab == other._vocab and self.special_tokens == other.special_tokens
                and self.pattern_source == other.pattern_source and self.merges == other.merges)

    __hash__ = None  # type: ignore[assignment]

    # ---- files ----------------------------------------------------------------------------

    def save(self, path: str | os.PathLike, *, tokenizer_class: str | None = None) -> Path:
        """Writes ``vocab.json``, ``merges.txt``, ``tokenizer.json`` and ``tokenizer_config.json``
        into the folder ``path`` (created if needed), atomically. Returns the folder."""
        name = self.pattern if self.pattern in ("gpt2", "cl100k", "o200k") else "custom"
        if self.pattern_source == _core.pattern_source("gpt2"):
            name = "gpt2"
        files = formats.folder_files(self._vocab, self.merges, self.special_tokens, name,
                                     self.pattern_source, tokenizer_class)
        return formats.write_folder(path, files)

    @classmethod
    def load(cls, path: str | os.PathLike, *, special_tokens: Iterable[str] = ()) -> "BPE":
        """Loads a folder saved by :meth:`save`, GPT-2's ``vocab.json`` + ``merges.txt`` (a folder,
        or the path of either file), or a byte-level BPE ``tokenizer.json``.

        Malformed files raise :class:`hf_bpe.formats.FormatError` naming the file and line.
        ``special_tokens`` declares extra vocabulary entries as special.
        """
        p = Path(path)
        if p.is_file() and p.name in ("vocab.json", "merges.txt"):
            vocab, merges, specials = formats.read_gpt2_files(p.parent / "vocab.json", p.parent / "merges.txt", special_tokens)
            pattern = "gpt2"
        elif p.is_file() and p.suffix == ".json":
            vocab, merges, specials, pattern = formats.read_tokenizer_json(p)
        else:
            vocab, merges, specials, pattern = formats.read_folder(p)
        return cls(vocab, merges, specials, _pattern_name(pattern))

    @classmethod
    def from_tiktoken(
        cls,
        path: str | os.PathLike,
        pattern: str = "cl100k",
        special_tokens: dict[str, int] | None = None,
    ) -> "BPE":
        """Loads a tiktoken rank file (``*.tiktoken``): ids equal ranks, merges follow ranks."""
        ranks = formats.read_tiktoken(path)
        vocab = {r: t for t, r in ranks.items()}
        specials = dict(special_tokens or {})
        for s, i in specials.items():
            if i in vocab:
                raise ValueError(f"special token {s!r} has id {i}, already the rank of {vocab[i]!r} in {path}")
        return cls(vocab, None, specials, pattern)

    def to_transformers(self, **kwargs) -> "BPETokenizer":  # noqa: F821
        """This vocabulary as a ``transformers`` tokenizer (:class:`hf_bpe.BPETokenizer`, sharing
        this object as its ``.bpe``). ``kwargs`` go to its constructor (``pad_token=...``,
        ``model_max_length=...``). Imports transformers."""
        from hf_bpe.hf import BPETokenizer

        return BPETokenizer(bpe=self, **kwargs)

    # ---- pickling: the tables, compactly and deterministically; never the cache -----------

    def __reduce__(self):
        return (_from_blob, (self._to_blob(),))

    def _to_blob(self) -> bytes:
        import numpy as np

        ids = sorted(self._vocab)
        lens = np.fromiter((len(self._vocab[i]) for i in ids), dtype=np.uint32, count=len(ids))
        header = json.dumps({"pattern": self.pattern, "special_tokens": sorted(self.special_tokens.items()),
                             "has_merges": self._merges is not None}, ensure_ascii=False).encode()
        parts = [struct.pack("<II", len(header), len(ids)), header,
                 np.asarray(ids, dtype=np.uint32).tobytes(), lens.tobytes(), b"".join(self._vocab[i] for i in ids)]
        if self._merges is not None:
            pairs = np.array([(self._ids[a], self._ids[b]) for a, b in self._merges], dtype=np.uint32).reshape(-1, 2)
            parts += [struct.pack("<I", len(pairs)), pairs.tobytes()]
        return b"".join(parts)

    # ---- encoding -------------------------------------------------------------------------

    def _encoder(self) -> "_core.Encoder":
        # A fresh core per process keeps its thread pool and cache valid after fork().
        pid = os.getpid()
        if self._core is None or self._core_pid != pid:
            merges = None if self._merges is None else [(self._ids[a], self._ids[b]) for a, b in self._merges]
            self._core = _core.Encoder(self._vocab, merges, self.special_tokens, self.pattern)
            self._core_pid = pid
        return self._core

    def encode(self, text: str, allowed_special: AllowedSpecial = (), disallowed_special: AllowedSpecial = "all") -> list[int]:
        """Text to ids. Special tokens in ``allowed_special`` (a set, or ``"all"``) become their id;
        a disallowed special token found in the text raises ``ValueError``, as in tiktoken."""
        return self._encoder().encode(text, _specials_arg(allowed_special), _specials_arg(disallowed_special))

    def encode_ordinary(self, text: str) -> list[int]:
        """Text to ids, with special tokens treated as plain text."""
        return self._encoder().encode_ordinary(text)

    def encode_batch(self, texts: Sequence[str], num_threads: int | None = None,
                     allowed_special: AllowedSpecial = (), disallowed_special: AllowedSpecial = "all") -> list[list[int]]:
        """Encodes many texts on all cores (GIL released)."""
        return self._encoder().encode_batch(list(texts), _specials_arg(allowed_special),
                                            _specials_arg(disallowed_special), num_threads)

    def encode_batch_flat(self, texts: Sequence[str], num_threads: int | None = None,
                          allowed_special: AllowedSpecial = (), disallowed_special: AllowedSpecial = "all"
                          ) -> tuple[np.ndarray, np.ndarray]:
        """Encodes many texts into one flat ``uint32`` array plus ``int64`` offsets (``len(texts)+1``):
        the ids of text ``i`` are ``ids[offsets[i]:offsets[i+1]]``."""
        return self._encoder().encode_batch_flat(list(texts), _specials_arg(allowed_special),
                                                 _specials_arg(disallowed_special), num_threads)

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids plus each token's ``(start, end)`` character offsets into ``text``."""
        return self._encoder().encode_with_offsets(text)

    def encode_file(self, path_in: str | os.PathLike, path_out: str | os.PathLike, *, progress: bool = True,
                    allowed_special: AllowedSpecial = "all", errors: str = "strict", separator: str | None = None,
                    text_field: str = "text", num_threads: int | None = None) -> tuple[int, int]:
        """Streams a text/.gz/.jsonl file into a flat ``.npy`` of ids (uint16 when the vocabulary
        fits, else uint32), written atomically (an interrupted run leaves no output file).
        ``separator`` (a special token) is appended after each JSON-lines document.
        Returns (tokens, bytes of text).

        ``errors``: ``"strict"`` (bytes that are not UTF-8 fail, naming the byte offset or the
        JSON line), ``"replace"`` (U+FFFD) or ``"ignore"`` (dropped). With a custom regex
        ``pattern`` the file is only cut right after special tokens, so memory holds the text up
        to the next special token (a file without any is read whole)."""
        from hf_bpe.progress import file_progress

        if not Path(path_in).is_file():
            raise FileNotFoundError(f"{os.fspath(path_in)}: no such file")
        with file_progress([path_in], "encoding", enabled=progress) as cb:
            return self._encoder().encode_file(os.fspath(path_in), os.fspath(path_out),
                                               allowed_special=_specials_arg(allowed_special), errors=errors,
                                               separator=separator, text_field=text_field,
                                               num_threads=num_threads, progress=cb)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Ids to bytes (any byte sequence, valid UTF-8 or not). Unknown ids raise ``ValueError``."""
        return self._encoder().decode_bytes(_ids_arg(ids))

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """Ids to text; bytes that are not valid UTF-8 are handled by ``errors`` (as ``bytes.decode``)."""
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    # ---- memory ---------------------------------------------------------------------------

    def cache_info(self) -> dict[str, int]:
        """Word cache ``hits``, ``misses``, ``bytes`` and ``budget``; ``kept_output_bytes`` of the
        big output buffers kept (process-wide) for reuse by later batches."""
        return self._encoder().cache_info()

    def clear_cache(self) -> None:
        """Empties the word cache and frees the output buffers kept for reuse."""
        self._encoder().clear_cache()


def _ids_arg(ids: Iterable[int]) -> list[int]:
    np = sys.modules.get("numpy")  # an ndarray can only exist if numpy is loaded
    if np is not None and isinstance(ids, np.ndarray):
        return ids.astype(np.int64, copy=False).tolist()
    return list(ids)


def _specials_arg(s: AllowedSpecial) -> str | list[str]:
    if s == "all":
        return "all"
    if isinstance(s, str):
        raise TypeError(f"expected 'all' or a collection of special tokens, got the string {s!r}")
    return sorted(s)


def _pattern_name(pattern: str) -> str:
    for name in ("gpt2", "cl100k", "o200k"):
        if pattern == name or pattern == _core.pattern_source(name):
            return name
    return pattern


def _from_blob(blob: bytes) -> BPE:
    import numpy as np

    hlen, n = struct.unpack_from("<II", blob, 0)
    pos = 8
    header = json.loads(blob[pos:pos + hlen])
    pos += hlen
    ids = np.frombuffer(blob, dtype=np.uint32, count=n, offset=pos).tolist()
    pos += 4 * n
    lens = np.frombuffer(blob, dtype=np.uint32, count=n, offset=pos).tolist()
    pos += 4 * n
    vocab = {}
    for i, ln in zip(ids, lens):
        vocab[i] = blob[pos:pos + ln]
        pos += ln
    merges = None
    if header["has_merges"]:
        (m,) = struct.unpack_from("<I", blob, pos)
        pos += 4
        pairs = np.frombuffer(blob, dtype=np.uint32, count=2 * m, offset=pos).reshape(-1, 2).tolist()
        merges = [(vocab[a], vocab[b]) for a, b in pairs]
    return BPE(vocab, merges, dict(header["special_tokens"]), header["pattern"])


def _merges_from_ranks(ids: dict[bytes, int], special_ids: set[int]) -> list[tuple[bytes, bytes]]:
    """Recovers merges from tiktoken ranks: a token's merge is the last step of encoding its own
    bytes with the tokens of lower rank (byte pair merging by lowest rank of the concatenation)."""
    merges = []
    for tok, rank in sorted(ids.items(), key=lambda kv: kv[1]):
        if len(tok) < 2 or rank in special_ids:
            continue
        parts = [tok[i:i + 1] for i in range(len(tok))]
        while len(parts) > 2:
            best, best_i = None, -1
            for i in range(len(parts) - 1):
                r = ids.get(parts[i] + parts[i + 1])
                if r is not None and r < rank and (best is None or r < best):
                    best, best_i = r, i
            if best is None:
                break
            parts[best_i:best_i + 2] = [parts[best_i] + parts[best_i + 1]]
        if len(parts) != 2:
            raise ValueError(f"token {tok!r} (rank {rank}) cannot be built from two tokens of lower rank")
        merges.append((parts[0], parts[1]))
    return merges
