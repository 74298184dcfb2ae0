"""The :class:`BPE` object: a trained (or loaded) byte-level BPE vocabulary that encodes and
decodes text through the native core, saves to GPT-2/HF files and loads them back."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, AbstractSet, Collection, Iterable, Literal, Sequence

from hf_bpe import _core, formats
from hf_bpe.encoding_api import EncodingAPI
from hf_bpe.encoding_api import specials_arg as _specials_arg
from hf_bpe.formats import ranks, tiktoken_export
from hf_bpe.progress import gc_paused


if TYPE_CHECKING:  # numpy is imported where it is used: `import hf_bpe` stays light (~16 MiB less RSS)
    import numpy as np
    import tiktoken

__all__ = ["BPE", "DEFAULT_CACHE_BYTES"]

#: The word cache budget of a new tokenizer: 256 MiB for all threads together.
DEFAULT_CACHE_BYTES = 256 << 20

AllowedSpecial = Literal["all"] | AbstractSet[str] | Collection[str]
Sections = Literal["refuse", "ignore"]  # what load does with a tokenizer.json's truncation/padding


class BPE(EncodingAPI):
    """A byte-level BPE tokenizer: vocabulary, merges, special tokens and a pre-tokenization pattern.
    It also answers tiktoken's ``Encoding`` API (:class:`~hf_bpe.encoding_api.EncodingAPI`).

    >>> bpe = BPE.load("out/")                     # doctest: +SKIP
    >>> bpe.decode(bpe.encode("hello world"))      # doctest: +SKIP
    'hello world'
    """

    def __init__(self, vocab: dict[int, bytes], merges: Sequence[tuple[bytes, bytes]] | None,
                 special_tokens: dict[str, int] | None = None, pattern: str = "gpt2", *,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, added_tokens: Sequence[formats.AddedToken] = (),
                 pipeline: str | None = None) -> None:
        """Builds a tokenizer from its tables.

        ``vocab`` maps every id to its bytes (special tokens may be left out, or given as their
        UTF-8 bytes); ``merges`` lists the merges in training order as byte pairs, or is ``None``
        for a tiktoken-style vocabulary where the id is the merge rank. ``pattern`` is
        a built-in name (``"gpt2"``, ``"cl100k"``, ``"o200k"``, ``"llama3"``, ``"qwen2"``, ``"qwen3.5"``,
        ``"nemotron"``, ``"deepseek-v3"``, ``"kimi"``) or a regex. ``added_tokens`` gives added tokens with
        their flags (:class:`hf_bpe.formats.AddedToken`); ``pipeline`` the components of an
        imported ``tokenizer.json`` (see :func:`hf_bpe.formats.read`). The native core checks
        everything and raises ``ValueError`` naming what is wrong.
        """
        specials = dict(special_tokens or {})
        full = dict(vocab)
        for s, i in specials.items():
            if isinstance(s, str):
                full.setdefault(i, s.encode())
        added = [formats.AddedToken(*t) for t in added_tokens]
        byte_merges = None if merges is None else [(bytes(a), bytes(b)) for a, b in merges]
        core = _core.Encoder(full, byte_merges, specials, pattern, _budget(cache_bytes), [tuple(t) for t in added],
                             pipeline)
        for t in added:  # the core keeps added tokens apart from the vocabulary it merges with
            full.setdefault(t.id, t.content.encode())
        self._adopt(core, full, byte_merges)

    def _adopt(self, core: _core.Encoder, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]] | None) -> None:
        # The core holds the tables; the dicts kept here only make the properties fast.
        self._core = core
        self._core_pid = os.getpid()
        self.special_tokens: dict[str, int] = dict(core.special_tokens)
        self.added_tokens: list[formats.AddedToken] = [formats.AddedToken(*t) for t in core.added_tokens]
        """Every added token with its flags, by id (special tokens among them)."""
        self.pipeline: str | None = core.pipeline
        """An imported ``tokenizer.json``'s components (JSON), or ``None``."""
        self.dropout: float | None = json.loads(core.pipeline)["model"].get("dropout") if core.pipeline else None
        """The default BPE-dropout of ``encode*`` (a ``tokenizer.json``'s model ``dropout``), or ``None``."""
        self.truncation_padding: dict | None = None  # a file's truncation/padding sections, loaded ignored
        self.name = None
        self.pattern: str = core.pattern
        self.pattern_source: str = self.pattern if self.pattern.startswith("{") else _core.pattern_source(self.pattern)
        self._vocab = vocab
        special_ids = {t.id for t in self.added_tokens}
        self._ids: dict[bytes, int] = {b: i for i, b in vocab.items() if i not in special_ids}
        self._merges = merges
        self._derived_merges: list[tuple[bytes, bytes]] | None = None

    # ---- tables ---------------------------------------------------------------------------

    @property
    def vocab(self) -> dict[int, bytes]:
        """Every id and its bytes (special tokens as their UTF-8 bytes)."""
        return dict(self._vocab)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges in training (rank) order. For a tiktoken vocabulary they are derived."""
        if self._merges is not None:
            return list(self._merges)
        if self._derived_merges is None:
            self._derived_merges = ranks.merges_from_ranks(self._ids, set(self.special_tokens.values()))
        return list(self._derived_merges)

    @property
    def is_tiktoken(self) -> bool:
        """True when ids are tiktoken ranks (``merges=None``): merging follows the rank of the result."""
        return self._merges is None

    @property
    def vocab_size(self) -> int:
        """The largest id + 1 (tiktoken's ``n_vocab``); ``len(bpe)`` counts tokens (less with holes)."""
        return self._core.n_vocab

    def __len__(self) -> int:
        """The number of tokens (byte tokens + merged tokens + added tokens)."""
        return len(self._vocab)

    def token_to_id(self, token: bytes | str) -> int | None:
        """The id of a token given by its bytes, or of an added token given by its text."""
        if isinstance(token, str):
            added = next((t.id for t in self.added_tokens if t.content == token), None)
            return added if added is not None else self._ids.get(token.encode())
        return self._ids.get(token)

    def __repr__(self) -> str:
        return (f"BPE(vocab_size={self.vocab_size}, merges={'ranks' if self._merges is None else len(self._merges)}, "
                f"special_tokens={list(self.special_tokens)}, pattern={self.pattern!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BPE):
            return NotImplemented
        # (`normalized` means nothing without a normalizer: GPT-2's own file sets it.)
        def added(b: BPE) -> list:
            return [t if b.pipeline else t._replace(normalized=False) for t in b.added_tokens]

        same = self._vocab == other._vocab and added(self) == added(other) and self.pipeline == other.pipeline
        return (same and formats.pattern_key(self.pattern) == formats.pattern_key(other.pattern)
                and self.merges == other.merges)

    __hash__ = None  # type: ignore[assignment]

    # ---- files ----------------------------------------------------------------------------

    def derive(self, added_tokens: Iterable[formats.AddedToken] = (), *, post_processor: dict | None = None) -> "BPE":
        """This tokenizer with more added tokens (:class:`hf_bpe.formats.AddedToken`s or their tuples;
        a clash raises ``ValueError``) and, if given, another ``tokenizer.json`` ``post_processor``."""
        new = [formats.AddedToken(*t) for t in added_tokens]
        pipeline = None if post_processor is None else json.dumps(
            dict(formats.pipeline_parts(self.pattern, self.pipeline), post_processor=post_processor))
        out = BPE.__new__(BPE)
        vocab = {**{t.id: t.content.encode() for t in new}, **self._vocab}
        out._adopt(self._encoder().derive([tuple(t) for t in new], pipeline), vocab, self._merges)
        out.dropout = self.dropout
        return out

    def save(self, path: str | os.PathLike, *, tokenizer_class: str | None = None) -> Path:
        """Writes ``vocab.json``, ``merges.txt``, ``tokenizer.json`` and ``tokenizer_config.json``
        into the folder ``path`` (created if needed), atomically. Returns the folder."""
        files = formats.folder_files(self._vocab, self.merges, self.special_tokens, self.pattern, tokenizer_class,
                                     self.added_tokens, formats.with_dropout(self.pattern, self.pipeline, self.dropout))
        return formats.write_folder(path, files)

    @classmethod
    def load(cls, path: str | os.PathLike, *, special_tokens: Iterable[str] = (),
             cache_bytes: int = DEFAULT_CACHE_BYTES, truncation_and_padding: Sections = "refuse") -> "BPE":
        """Loads a folder saved by :meth:`save`, GPT-2's ``vocab.json`` + ``merges.txt`` (a folder,
        or the path of either file), a byte-level BPE ``tokenizer.json``, or a tiktoken encoding's
        ``.tiktoken`` file (``cl100k_base.tiktoken``, ...; see :func:`hf_bpe.formats.read`), or one of
        OpenAI's published encodings by name (``"gpt2"``, ``"cl100k_base"``, ``"o200k_base"``, ...: shipped,
        no network; a path that exists wins).

        Malformed files raise :class:`hf_bpe.formats.FormatError` naming the file and line.
        ``special_tokens`` declares extra entries special; ``cache_bytes`` bounds the word cache. A
        ``tokenizer.json`` setting ``truncation`` or ``padding`` needs ``truncation_and_padding="ignore"``."""
        return cls.from_tables(formats.read(path, special_tokens), path, cache_bytes=cache_bytes,
                               truncation_and_padding=truncation_and_padding)

    @classmethod
    def from_tables(cls, tables: formats.Tables, source: str | os.PathLike | None = None, *,
                    cache_bytes: int = DEFAULT_CACHE_BYTES, truncation_and_padding: Sections = "refuse") -> "BPE":
        """A BPE from a reader's tables (see :meth:`load`); what the core rejects is a FormatError naming ``source``."""
        name = "<tables>" if source is None else os.fspath(source)
        if tables.truncation_padding and truncation_and_padding != "ignore":
            what = "; ".join(f"{k} {json.dumps(v)}" for k, v in tables.truncation_padding.items())
            raise formats.FormatError(f"{name}: the tokenizer.json sets {what}: tokenizers truncates and pads every "
                                      "encode with it, BPE.encode never does. Load it with "
                                      "BPETokenizer.from_pretrained (as transformers does), "
                                      "or BPE.load(..., truncation_and_padding='ignore')")
        try:
            out = cls(tables.vocab, tables.merges, tables.special_tokens, tables.pattern, cache_bytes=cache_bytes,
                      added_tokens=tables.added_tokens, pipeline=tables.pipeline)
        except ValueError as e:
            if source is None:
                raise
            raise formats.FormatError(f"{name}: {e}") from None
        out.truncation_padding, out.name = tables.truncation_padding, tables.name
        return out

    @classmethod
    def from_tiktoken(cls, path: str | os.PathLike, pattern: str = "cl100k",
                      special_tokens: dict[str, int] | None = None, *,
                      cache_bytes: int = DEFAULT_CACHE_BYTES) -> "BPE":
        """Loads a tiktoken rank file (``*.tiktoken``): ids equal ranks, merges follow ranks."""
        vocab = {r: t for t, r in formats.read_tiktoken(path).items()}
        return cls.from_tables(formats.Tables(vocab, None, dict(special_tokens or {}), pattern), path,
                               cache_bytes=cache_bytes)

    def to_tiktoken(self, name: str | None = None) -> "tiktoken.Encoding":
        """A ``tiktoken.Encoding`` (same pattern, ranks = ids, same specials) that gives the ids of
        :meth:`encode` for every input; a merges vocabulary only when tiktoken's rule (join the
        pair whose token has the lowest id) reproduces its merges (else ``ValueError`` names the
        token at fault), a sequence of splits never. Needs ``tiktoken`` (the ``tiktoken`` extra)."""
        pat = tiktoken_export.pat_str(self.pattern, self.pattern_source)
        return tiktoken_export.to_encoding(name, pat, self._ranks(), self.special_tokens)

    def save_tiktoken(self, path: str | os.PathLike) -> Path:
        """Writes the ``.tiktoken`` rank file to ``path`` atomically (as :meth:`to_tiktoken`); it holds
        neither the pattern nor the specials: give them to :meth:`from_tiktoken`."""
        return formats.write_file(path, tiktoken_export.rank_file(self._ranks()))

    def _ranks(self) -> dict[bytes, int]:
        plain = not self._core.is_generic and not self.pattern_source.startswith("{")
        merges = None if self.is_tiktoken else self.merges
        return tiktoken_export.mergeable_ranks(self.vocab, merges, self.special_tokens, self.added_tokens, plain)

    @property
    def cache_bytes(self) -> int:
        """The word cache's budget in bytes, all threads together (0: off); setting it empties it."""
        return self._encoder().cache_bytes

    @cache_bytes.setter
    def cache_bytes(self, value: int) -> None:
        self._core = _core.Encoder.from_state(self._encoder().to_state(), cache_bytes=_budget(value))

    def __reduce__(self):  # (pickled: the core's deterministic state; never the cache)
        # With dropout, each pickle differs (a nonce): `datasets` never serves a map from its cache.
        return (_from_state, (self._core.to_state(), self.dropout, os.urandom(8) if self.dropout else b"", self.name))

    # ---- encoding -------------------------------------------------------------------------

    def _encoder(self) -> _core.Encoder:
        # A fresh core per process keeps its thread pool and cache valid after fork().
        pid = os.getpid()
        if self._core_pid != pid:
            self._core = _core.Encoder.from_state(self._core.to_state())
            self._core_pid = pid
        return self._core

    def encode(self, text: str, allowed_special: AllowedSpecial = (), disallowed_special: AllowedSpecial = "all",
               *, dropout: float | None = None, seed: int | None = None) -> list[int]:
        """Text to ids. Special tokens in ``allowed_special`` (a set, or ``"all"``) become their id;
        a disallowed special token found in the text raises ``ValueError``, as in tiktoken.
        ``dropout=p``: BPE-dropout, each merge skipped with probability ``p`` as ``tokenizers``'
        ``BPE(dropout=p)``; ``seed`` makes it reproducible per text, whatever the batch."""
        if dropout or (dropout is None and self.dropout):
            return self.encode_batch([text], 1, allowed_special, disallowed_special, dropout=dropout, seed=seed)[0]
        return self._encoder().encode(text, _specials_arg(allowed_special), _specials_arg(disallowed_special))

    def encode_ordinary(self, text: str, *, dropout: float | None = None, seed: int | None = None) -> list[int]:
        """Text to ids, with special tokens treated as plain text (``dropout``: :meth:`encode`)."""
        return self.encode_batch([text], 1, (), (), dropout=dropout, seed=seed)[0] if dropout or (
            dropout is None and self.dropout) else self._encoder().encode_ordinary(text)

    def encode_batch(self, texts: Sequence[str], num_threads: int | None = None, allowed_special: AllowedSpecial = (),
                     disallowed_special: AllowedSpecial = "all", *, dropout: float | None = None,
                     seed: int | None = None) -> list[list[int]]:
        """Encodes many texts on all cores (GIL released); ``dropout``, ``seed``: :meth:`encode`."""
        dropout = self.dropout if dropout is None else dropout
        with gc_paused():
            if dropout:  # (seed None: each text draws its own)
                return _core.encode_batch_dropout(self._encoder(), _texts_arg(texts), float(dropout), seed,
                                                  _specials_arg(allowed_special), _specials_arg(disallowed_special),
                                                  num_threads)
            return self._encoder().encode_batch(_texts_arg(texts), _specials_arg(allowed_special),
                                                _specials_arg(disallowed_special), num_threads)

    def encode_batch_flat(self, texts: Sequence[str], num_threads: int | None = None,
                          allowed_special: AllowedSpecial = (), disallowed_special: AllowedSpecial = "all"
                          ) -> tuple[np.ndarray, np.ndarray]:
        """Encodes many texts into one flat ``uint32`` array plus ``int64`` offsets (``len(texts)+1``):
        the ids of text ``i`` are ``ids[offsets[i]:offsets[i+1]]`` (with :attr:`dropout` if set)."""
        if self.dropout:
            return _flat(self.encode_batch(texts, num_threads, allowed_special, disallowed_special))
        return self._encoder().encode_batch_flat(_texts_arg(texts), _specials_arg(allowed_special),
                                                 _specials_arg(disallowed_special), num_threads)

    def encode_utf8_rows(self, data: np.ndarray, offsets: np.ndarray, num_threads: int | None = None,
                         allowed_special: AllowedSpecial = (), disallowed_special: AllowedSpecial = "all"
                         ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`encode_batch_flat` of the rows ``data[offsets[i]:offsets[i+1]]`` of a UTF-8 buffer
        (``uint8``; ``offsets`` ``int64``, n + 1 of them): an Arrow string column's two buffers."""
        if self.dropout:
            rows = [bytes(data[a:b]).decode() for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
            return self.encode_batch_flat(rows, num_threads, allowed_special, disallowed_special)
        return _core.encode_utf8_column(self._encoder(), data, offsets, _specials_arg(allowed_special),
                                        _specials_arg(disallowed_special), num_threads)

    def encode_with_offsets(self, text: str, allowed_special: AllowedSpecial = (),
                            disallowed_special: AllowedSpecial = "all") -> tuple[list[int], list[tuple[int, int]]]:
        """Ids plus each token's ``(start, end)`` char offsets into ``text`` (a char belongs to the token
        holding its first byte)."""
        return self._encoder().encode_with_offsets(text, _specials_arg(allowed_special),
                                                   _specials_arg(disallowed_special))

    def encode_spans(self, texts: Sequence[str], allowed_special: AllowedSpecial = (),
                     disallowed_special: AllowedSpecial = "all"
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Flat ``(ids, offsets, words, row_offsets)`` of ``texts``: text ``i`` is rows
        ``row_offsets[i]:row_offsets[i+1]``; ``offsets`` (``(n, 2)``) are the chars each token's bytes
        touch, ``words`` each token's pre-tokenizer piece (or special token) index in its text, as
        ``tokenizers``' ``Encoding.offsets`` / ``word_ids``."""
        return self._encoder().encode_spans(_texts_arg(texts), _specials_arg(allowed_special),
                                            _specials_arg(disallowed_special))

    def encode_file(self, path_in: str | os.PathLike, path_out: str | os.PathLike, *, progress: bool = True,
                    allowed_special: AllowedSpecial = "all", errors: str = "strict", separator: str | None = None,
                    text_field: str = "text", num_threads: int | None = None) -> tuple[int, int]:
        """Streams a text/.gz/.jsonl file into a flat ``.npy`` of ids (uint16 when the vocabulary
        fits, else uint32), written atomically (an interrupted run leaves no output file).
        ``separator`` (a special token) is appended after each JSON-lines document.
        Returns (tokens, bytes of text). OS errors raise ``OSError`` subclasses naming the path.

        ``errors``: ``"strict"`` (bytes that are not UTF-8 fail, naming the byte offset or the
        JSON line), ``"replace"`` (U+FFFD) or ``"ignore"`` (dropped). With a custom regex
        ``pattern`` the file is only cut right after special tokens, so memory holds the text up
        to the next special token (a file without any is read whole)."""
        from hf_bpe.progress import file_progress

        if not os.path.isfile(path_in):  # (a path may be bytes: a file name that is not UTF-8)
            raise FileNotFoundError(f"{os.fsdecode(path_in)}: no such file")
        with file_progress([path_in], "encoding", enabled=progress) as cb:
            return self._encoder().encode_file(path_in, path_out,
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
        """Word cache ``hits``, ``misses``, ``bytes`` and ``budget`` (a disabled cache has no hits:
        the whole tokens it reads from the vocabulary are not counted); ``kept_output_bytes`` of
        the big output buffers kept (process-wide) for reuse by later batches."""
        return self._encoder().cache_info()

    def clear_cache(self) -> None:
        """Empties the word cache and frees the output buffers kept for reuse."""
        self._encoder().clear_cache()


def _budget(value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:  # (a bool is an int)
        raise ValueError(f"cache_bytes must be a number of bytes (an int >= 0), not {value!r}")
    return value


def _ids_arg(ids: Iterable[int]) -> list[int]:
    if isinstance(ids, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"expected a sequence of token ids, got {type(ids).__name__}")
    np = sys.modules.get("numpy")  # an ndarray can only exist if numpy is loaded
    if np is not None and isinstance(ids, np.ndarray):
        if ids.dtype.kind not in "iu":
            raise TypeError(f"expected integer token ids, got an array of {ids.dtype}")
        if ids.dtype.kind == "u" and ids.size and int(ids.max()) > np.iinfo(np.int64).max:
            raise ValueError(f"unknown token id {int(ids.max())}")
        return ids.astype(np.int64, copy=False).tolist()
    return list(ids)


def _texts_arg(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"expected a list of str, got a single {type(texts).__name__}: wrap it in a list")
    return texts if isinstance(texts, list) else list(texts)


def _flat(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    return (np.fromiter((i for x in lists for i in x), dtype=np.uint32),
            np.concatenate(([0], np.cumsum([len(x) for x in lists], dtype=np.int64))))


def _from_state(state: bytes, dropout: float | None = None, _nonce: bytes = b"", name: str | None = None) -> BPE:
    """Unpickles a :class:`BPE` from its core's state (and its :attr:`BPE.dropout` and name)."""
    core = _core.Encoder.from_state(state)
    bpe = BPE.__new__(BPE)
    bpe._adopt(core, core.vocab, core.merges)
    bpe.dropout, bpe.name = dropout, name
    return bpe
