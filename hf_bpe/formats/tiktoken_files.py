"""tiktoken's rank files, and OpenAI's published encodings by name, offline.

:func:`read_tiktoken` parses a ``.tiktoken`` rank file. :func:`read_published` gives the tables of
a published encoding (``gpt2``, ``r50k_base``, ``p50k_base``, ``p50k_edit``, ``cl100k_base``,
``o200k_base``, ``o200k_harmony``) from the three rank files shipped in ``hf_bpe/data`` (MIT,
OpenAI; xz-compressed): each is checked against the sha256 that tiktoken pins for its download,
and the others are defined from them as tiktoken defines them (``gpt2`` is ``r50k_base``; ``p50k``
adds the runs of 2 to 25 spaces, and the result hashes to tiktoken's pin for ``p50k_base``; the
``o200k_harmony`` specials name the id 200018 twice). Patterns are the built-in ones that equal
tiktoken's regexes.
"""

from __future__ import annotations

import base64
import hashlib
import lzma
import os
from importlib import resources
from pathlib import Path
from typing import NamedTuple

from hf_bpe.formats.types import FormatError, Tables

__all__ = ["read_tiktoken", "read_published", "PUBLISHED", "TIKTOKEN_ENCODINGS", "encoding_name_for_model"]

_EOT = "<|endoftext|>"
_FIM = {"<|fim_prefix|>": 1, "<|fim_middle|>": 2, "<|fim_suffix|>": 3}  # offsets past the base


class Published(NamedTuple):
    """A published encoding: its shipped rank file, pattern, special tokens and added ranks."""

    ranks: str
    pattern: str
    special_tokens: dict[str, int]
    space_runs: bool = False  # p50k: " " * n for n in 2..25 at ranks 50257..50280


# The sha256 of each shipped rank file, uncompressed: tiktoken 0.14.0's `expected_hash`.
_SHA256 = {
    "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

_HARMONY = {_EOT: 199999, "<|endofprompt|>": 200018, "<|startoftext|>": 199998, "<|return|>": 200002,
            "<|constrain|>": 200003, "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007,
            "<|message|>": 200008, "<|call|>": 200012}
_HARMONY.update({f"<|reserved_{i}|>": i for i in (200000, 200001, 200004, 200009, 200010, 200011)})
_HARMONY.update({f"<|reserved_{i}|>": i for i in range(200013, 201088)})

PUBLISHED: dict[str, Published] = {
    "gpt2": Published("r50k_base", "gpt2", {_EOT: 50256}),
    "r50k_base": Published("r50k_base", "gpt2", {_EOT: 50256}),
    "p50k_base": Published("r50k_base", "gpt2", {_EOT: 50256}, True),
    "p50k_edit": Published("r50k_base", "gpt2", {_EOT: 50256, **{k: 50280 + v for k, v in _FIM.items()}}, True),
    "cl100k_base": Published("cl100k_base", "cl100k",
                             {_EOT: 100257, **{k: 100257 + v for k, v in _FIM.items()}, "<|endofprompt|>": 100276}),
    "o200k_base": Published("o200k_base", "o200k", {_EOT: 199999, "<|endofprompt|>": 200018}),
    "o200k_harmony": Published("o200k_base", "o200k", _HARMONY),
}

# A `.tiktoken` file named after an encoding: (pattern, special tokens).
TIKTOKEN_ENCODINGS: dict[str, tuple[str, dict[str, int]]] = {
    n: (e.pattern, e.special_tokens) for n, e in PUBLISHED.items() if n in ("r50k_base", "p50k_base", "cl100k_base",
                                                                            "o200k_base")}

# Model names (and prefixes, the keys ending in '-' or ':') to encodings, as tiktoken 0.14.0 maps them.
_MODELS = {
    "o200k_base": "o1 o3 o4-mini gpt-5 gpt-4.1 gpt-4o o1- o3- o4-mini- gpt-4.5- gpt-4.1- chatgpt-4o- gpt-4o- ft:gpt-4o",
    "cl100k_base": "gpt-4 gpt-3.5-turbo gpt-3.5 gpt-35-turbo davinci-002 babbage-002 text-embedding-ada-002 "
                   "text-embedding-3-small text-embedding-3-large gpt-4- gpt-3.5-turbo- gpt-35-turbo- ft:gpt-4 "
                   "ft:gpt-3.5-turbo ft:davinci-002 ft:babbage-002",
    "o200k_harmony": "gpt-oss-",
    "p50k_base": "text-davinci-003 text-davinci-002 code-davinci-002 code-davinci-001 code-cushman-002 "
                 "code-cushman-001 davinci-codex cushman-codex",
    "p50k_edit": "text-davinci-edit-001 code-davinci-edit-001",
    "r50k_base": "text-davinci-001 text-curie-001 text-babbage-001 text-ada-001 davinci curie babbage ada "
                 "text-similarity-davinci-001 text-similarity-curie-001 text-similarity-babbage-001 "
                 "text-similarity-ada-001 text-search-davinci-doc-001 text-search-curie-doc-001 "
                 "text-search-babbage-doc-001 text-search-ada-doc-001 code-search-babbage-code-001 "
                 "code-search-ada-code-001",
    "gpt2": "gpt2 gpt-2",
}
_EXACT = {m: e for e, ms in _MODELS.items() for m in ms.split() if not m.endswith("-") and not m.startswith("ft:")}
_PREFIXES = [(m, e) for e, ms in _MODELS.items() for m in ms.split() if m.endswith("-") or m.startswith("ft:")]


def encoding_name_for_model(model_name: str) -> str:
    """The published encoding of an OpenAI model (``"gpt-4o"`` -> ``"o200k_base"``), by exact name
    or by prefix as tiktoken maps them; an unknown model raises ``KeyError``."""
    if model_name in _EXACT:
        return _EXACT[model_name]
    for prefix, name in _PREFIXES:
        if model_name.startswith(prefix):
            return name
    raise KeyError(f"no known encoding for the model {model_name!r}: name an encoding instead "
                   f"(one of {', '.join(PUBLISHED)})")


def read_published(name: str) -> Tables:
    """The tables of a published encoding, from the rank files shipped in the package."""
    e = PUBLISHED[name]
    ranks = _shipped_ranks(e.ranks)
    if e.space_runs:
        ranks = {**ranks, **{b" " * n: 50257 + i for i, n in enumerate(range(2, 26))}}
    vocab = {r: t for t, r in ranks.items()}
    for s, i in e.special_tokens.items():
        vocab.setdefault(i, s.encode())
    return Tables(vocab, None, dict(e.special_tokens), e.pattern, name=name)


def _shipped_ranks(stem: str) -> dict[bytes, int]:
    source = resources.files("hf_bpe") / "data" / f"{stem}.tiktoken.xz"
    data = lzma.decompress(source.read_bytes())
    if hashlib.sha256(data).hexdigest() != _SHA256[stem]:
        raise FormatError(f"{source}: the shipped rank file is damaged (its sha256 is not the one tiktoken pins): "
                          "reinstall hf_bpe")
    return parse_tiktoken(data, Path(str(source)))


def read_tiktoken(path: str | os.PathLike) -> dict[bytes, int]:
    """Reads a tiktoken rank file (``base64(token) rank`` per line)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such file") from None
    return parse_tiktoken(data, p)


def parse_tiktoken(data: bytes, p: Path) -> dict[bytes, int]:
    """The ranks of a rank file's contents; errors name ``p`` and the line."""
    ranks: dict[bytes, int] = {}
    seen: dict[int, int] = {}
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise FormatError(f"{p}: line {lineno}: expected 'base64-token rank', got {line[:80]!r}")
        try:
            tok = base64.b64decode(parts[0], validate=True)
            rank = int(parts[1])
        except ValueError:
            raise FormatError(f"{p}: line {lineno}: bad token or rank {line[:80]!r}") from None
        if rank < 0:
            raise FormatError(f"{p}: line {lineno}: negative rank {rank}")
        if tok in ranks:
            raise FormatError(f"{p}: line {lineno}: token {tok!r} already has rank {ranks[tok]}")
        if rank in seen:
            raise FormatError(f"{p}: line {lineno}: rank {rank} already used on line {seen[rank]}")
        ranks[tok] = rank
        seen[rank] = lineno
    if not ranks:
        raise FormatError(f"{p}: no tokens")
    return ranks
