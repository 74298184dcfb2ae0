"""Reading tokenizer files. :func:`read` decides what a path holds (our saved folder, GPT-2's
``vocab.json`` + ``merges.txt``, a ``tokenizer.json``, a ``.tiktoken`` rank file) and returns its
:class:`Tables`; ``BPE.load``, ``BPETokenizer`` and the CLI all read through it.

Parsing errors raise :class:`FormatError` naming the file and line. Whether the tables make a
consistent vocabulary (all 256 byte tokens, no two ids with the same bytes, ...) is checked once,
by the native core, when a ``BPE`` is built from them (``BPE.from_tables`` names the path).

A ``.tiktoken`` rank file, and OpenAI's published encodings by name (``"gpt2"``, ``"cl100k_base"``,
...), are read by :mod:`~hf_bpe.formats.tiktoken_files`.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Iterable

from hf_bpe.formats.alphabet import str_to_token
from hf_bpe.formats.regex_forms import pattern_name
from hf_bpe.formats.tiktoken_files import PUBLISHED, TIKTOKEN_ENCODINGS, read_published, read_tiktoken
from hf_bpe.formats.types import MAX_ID, AddedToken, FormatError, Tables

__all__ = ["read", "from_strings"]


def read(
    path: str | os.PathLike,
    special_tokens: Iterable[str] = (),
    *,
    merges_file: str | os.PathLike | None = None,
    tokenizer_file: str | os.PathLike | None = None,
) -> Tables:
    """Reads the tokenizer at ``path``: a folder (ours or GPT-2's ``vocab.json`` + ``merges.txt``,
    else its ``tokenizer.json``), the path of ``vocab.json`` or ``merges.txt`` (the pair beside it,
    as in a folder), a ``tokenizer.json`` (any ``*.json`` but ``vocab.json``), or a ``.tiktoken``
    rank file named after a tiktoken encoding (``cl100k_base.tiktoken``, ...). A name that is no
    path on disk but one of OpenAI's published encodings (``"gpt2"``, ``"r50k_base"``,
    ``"p50k_base"``, ``"p50k_edit"``, ``"cl100k_base"``, ``"o200k_base"``, ``"o200k_harmony"``)
    reads the files shipped in the package: no network.

    Special tokens: those ``tokenizer.json`` marks ``"special": true``, the extra vocabulary
    entries named in ``special_tokens``, and entries that cannot be ordinary tokens (not spelled
    in the byte alphabet, or several bytes that no merge makes).

    ``merges_file`` (and optionally ``tokenizer_file``) name the companion files of a
    ``vocab.json`` given as ``path`` explicitly, whatever their names, as transformers'
    constructors get them; nothing beside them is looked at then.
    """
    if isinstance(special_tokens, str):
        raise TypeError(f"special_tokens must be a collection of strings, not the string {special_tokens!r}")
    declared = list(special_tokens)
    p = Path(path)
    if merges_file is not None:
        tj = Path(tokenizer_file) if tokenizer_file is not None else None
        return _read_gpt2(p, Path(merges_file), tj, declared)
    if p.is_file():
        if p.name in ("vocab.json", "merges.txt"):
            return _read_gpt2(p.parent / "vocab.json", p.parent / "merges.txt", _beside(p.parent), declared)
        if p.suffix == ".tiktoken":
            return _read_tiktoken_encoding(p, declared)
        if p.suffix == ".json":
            return _read_tokenizer_json(p, declared)
        raise FormatError(f"{p}: not a tokenizer file (expected a folder, vocab.json, merges.txt, "
                          f"a tokenizer .json or a .tiktoken file)")
    if not p.exists() and isinstance(path, str) and path in PUBLISHED:
        if declared:
            raise ValueError(f"{path}: a published encoding has its own special tokens; add others with "
                             "BPE.derive or BPETokenizer.add_special_tokens")
        return read_published(path)
    if not p.exists():
        kind = "file" if p.suffix in (".json", ".txt", ".tiktoken") else "folder"
        raise FileNotFoundError(f"{p}: no such {kind}")
    if (p / "vocab.json").exists() and (p / "merges.txt").exists():
        return _read_gpt2(p / "vocab.json", p / "merges.txt", _beside(p), declared)
    if (p / "tokenizer.json").exists():
        return _read_tokenizer_json(p / "tokenizer.json", declared)
    raise FileNotFoundError(f"{p}: neither vocab.json + merges.txt nor tokenizer.json found")


def from_strings(vocab: dict[str, int], merges: Iterable, added: Iterable[tuple[str, bool]] = (),
                 what: str = "vocab=/merges=") -> Tables:
    """The tables of a byte-level vocabulary and merges held in memory, as transformers' v5
    constructors take them: ``vocab`` maps spellings to ids, ``merges`` are ``(a, b)`` pairs or
    ``"a b"`` strings, ``added`` the ``(content, special)`` of the added tokens. Checked as a
    ``vocab.json`` + ``merges.txt`` pair is; errors name ``what``."""
    label = Path(what)
    lines = []
    for n, m in enumerate(merges, start=1):
        if isinstance(m, (tuple, list)) and len(m) == 2 and all(isinstance(x, str) for x in m):
            m = f"{m[0]} {m[1]}"
        if not isinstance(m, str):
            raise FormatError(f"{what}: merge #{n} is {m!r}, not a pair of tokens")
        lines.append((n, m))
    added = list(added)
    declared = [c for c, special in added if special]
    vocab = _parse_vocab(vocab, label)
    return _to_tables(vocab, _parse_merges(lines, vocab, label), declared, [c for c, _ in added], "gpt2", label)


def _beside(folder: Path) -> Path | None:
    tj = folder / "tokenizer.json"
    return tj if tj.exists() else None


# --------------------------------------------------------------------------------------------
# The formats


def _read_gpt2(vp: Path, mp: Path, tj: Path | None, declared: list[str]) -> Tables:
    """``vocab.json`` + ``merges.txt``; a ``tokenizer.json`` beside them (or named) describes the
    whole tokenizer, so it is read instead, as ``transformers`` does."""
    if tj is not None:
        return _read_tokenizer_json(tj, declared)
    vocab = _parse_vocab(_load_json(vp), vp)
    lines = _read_text(mp).split("\n")
    numbered = list(enumerate(lines, start=1))
    if lines and lines[0].startswith("#"):
        if lines[0].rstrip("\r") != "#version: 0.2":
            raise FormatError(f"{mp}: line 1: unknown header {lines[0]!r} (expected '#version: 0.2')")
        numbered = numbered[1:]
    numbered = [(n, line[:-1] if line.endswith("\r") else line) for n, line in numbered]
    return _to_tables(vocab, _parse_merges(numbered, vocab, mp), declared, [], "gpt2", mp)


def _read_tokenizer_json(p: Path, declared: list[str]) -> Tables:
    """A byte-level BPE ``tokenizer.json``, all of it: the vocabulary and merges, the added
    tokens with their flags, and the components around the model (the core checks those and
    refuses what it cannot reproduce, naming the component)."""
    raw = _load_json(p)
    if not isinstance(raw, dict) or not isinstance(raw.get("model"), dict):
        raise FormatError(f"{p}: no 'model' object")
    if raw.get("version", "1.0") != "1.0":  # as tokenizers: "Unknown tokenizer version"
        raise FormatError(f"{p}: version {raw['version']!r}: tokenizers reads version '1.0' only")
    model = raw["model"]
    if model.get("type", "BPE") != "BPE":
        raise FormatError(f"{p}: model type {model.get('type')!r} is not BPE")
    vocab = _parse_vocab(model.get("vocab"), p)
    lines = []
    for n, m in enumerate(model.get("merges", []), start=1):
        if isinstance(m, str):
            lines.append((n, m))
        elif isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m):
            lines.append((n, f"{m[0]} {m[1]}"))
        else:
            raise FormatError(f"{p}: merge #{n} is {m!r}, not a pair of tokens")
    merges = _parse_merges(lines, vocab, p)
    added = _added_tokens(raw, p, set(declared))
    by_content = {t.content: t for t in added}
    for d in declared:  # a vocabulary entry declared special becomes a special added token
        if d not in by_content and d in vocab:
            by_content[d] = AddedToken(d, vocab[d])
            added.append(by_content[d])
    added_ids = {t.id: t for t in added}
    out: dict[int, bytes] = {}
    for s_, i in vocab.items():
        b = str_to_token(s_)
        # A spelling outside the byte alphabet: a token no text maps to; decoded as its UTF-8.
        out[i] = b if b is not None else s_.encode("utf-8")
    byte_merges = [(str_to_token(a), str_to_token(b)) for a, b in merges]
    parts = {k: raw.get(k) for k in ("normalizer", "pre_tokenizer", "post_processor", "decoder")}
    parts["model"] = {k: v for k, v in model.items() if k not in ("vocab", "merges")}
    specials = {t.content: t.id for t in added if t.special}
    sections = {k: raw[k] for k in ("truncation", "padding") if raw.get(k) is not None}
    return Tables(out, byte_merges, specials, "gpt2", tuple(added), json.dumps(parts),  # type: ignore[arg-type]
                  sections or None)


def _added_tokens(raw: dict, p: Path, declared: set[str]) -> list[AddedToken]:
    """The ``added_tokens`` of a ``tokenizer.json`` (``declared`` ones made special), with the ids
    ``tokenizers`` gives them on load: a content that is a model vocabulary entry takes that
    entry's id, any other the next id from the size of the model's vocabulary on (the file's
    ``id`` fields are not what it goes by; a file that disagrees gets a warning, as there)."""
    vocab = raw["model"].get("vocab") or {}
    out: list[AddedToken] = []
    taken: dict[str, int] = {}
    next_id = len(vocab)
    for n, t in enumerate(raw.get("added_tokens") or [], start=1):
        if not isinstance(t, dict) or not isinstance(t.get("content"), str) or not t["content"]:
            raise FormatError(f"{p}: added token #{n} is {json.dumps(t)[:100]}, "
                              "not an object with a non-empty 'content'")
        i = t.get("id")
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < MAX_ID:
            raise FormatError(f"{p}: added token {t['content']!r} has id {i!r}, not an integer id below {MAX_ID}")
        flags = {}
        for k, default in (("special", False), ("lstrip", False), ("rstrip", False), ("single_word", False)):
            v = t.get(k, default)
            if not isinstance(v, bool):
                raise FormatError(f"{p}: added token {t['content']!r}: {k!r} is {v!r}, not true or false")
            flags[k] = v
        normalized = t.get("normalized", not flags["special"])
        if not isinstance(normalized, bool):
            raise FormatError(f"{p}: added token {t['content']!r}: 'normalized' is {normalized!r}, not true or false")
        flags["special"] = flags["special"] or t["content"] in declared
        c = t["content"]
        if c in taken:
            out = [x for x in out if x.content != c]
            given = taken[c]
        elif c in vocab:
            given = vocab[c]
        else:
            given, next_id = next_id, next_id + 1
        if given != i:
            warnings.warn(f"{p}: added token {c!r} is listed with id {i} but gets id {given}, as tokenizers gives it",
                          stacklevel=5)
        taken[c] = given
        out.append(AddedToken(c, given, normalized=normalized, **flags))
    return out


def _read_tiktoken_encoding(p: Path, declared: list[str]) -> Tables:
    """A ``.tiktoken`` file of a well-known encoding: its pattern and special tokens by name."""
    known = TIKTOKEN_ENCODINGS.get(p.stem)
    if known is None:
        raise FormatError(f"{p}: a tiktoken rank file does not say its pattern and special tokens, and "
                          f"{p.stem!r} is not one of {', '.join(TIKTOKEN_ENCODINGS)}: "
                          f"use BPE.from_tiktoken(path, pattern=..., special_tokens={{...}})")
    if declared:
        raise ValueError(f"{p}: special tokens of a tiktoken file need ids: "
                         f"use BPE.from_tiktoken(path, pattern=..., special_tokens={{...}})")
    pattern, specials = known
    ranks = read_tiktoken(p)
    vocab = {r: t for t, r in ranks.items()}
    for s, i in specials.items():
        vocab.setdefault(i, s.encode())
    return Tables(vocab, None, dict(specials), pattern, name=p.stem)


def _to_tables(vocab: dict[str, int], merges: list[tuple[str, str]], declared: Iterable[str], added: Iterable[str],
               pattern: str, path: Path) -> Tables:
    """Turns string tables into byte tables. A vocabulary entry is a special token if it is
    declared as one, if it is not spelled in the byte alphabet, or if it is an added token that no
    merge makes (matched before the model, as ``tokenizers`` does). Any other entry no merge makes
    is an ordinary token that encoding never produces (as in ``tokenizers``); loading warns with
    their count, since a truncated ``merges.txt`` is the usual cause."""
    made = {a + b for a, b in merges}
    declared, added = set(declared), set(added)
    specials: dict[str, int] = {}
    out: dict[int, bytes] = {}
    unreachable: list[str] = []
    for s, i in vocab.items():
        b = None if s in declared else str_to_token(s)
        if b is not None and len(b) > 1 and s not in made:
            if s in added:
                b = None
            else:
                unreachable.append(s)
        if b is None:
            specials[s] = i
            out[i] = s.encode("utf-8")
        else:
            out[i] = b
    if unreachable:
        warnings.warn(f"{path}: {len(unreachable)} vocabulary entries are made by no merge (e.g. {unreachable[0]!r}); "
                      "they are ordinary tokens that encoding never produces (is the merges list cut short?)",
                      stacklevel=4)
    for a, b in merges:
        if a in specials or b in specials:
            raise FormatError(f"{path}: merge {a} {b} uses the special token {(a if a in specials else b)!r}")
    byte_merges = [(str_to_token(a), str_to_token(b)) for a, b in merges]
    return Tables(out, byte_merges, specials, pattern_name(pattern))  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Parsing


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise FormatError(f"{path}: line {line}: not valid UTF-8 (byte offset {e.start})") from None


def _load_json(path: Path) -> object:
    text = _read_text(path)

    def no_duplicates(pairs: list[tuple[str, object]]) -> dict:
        out: dict = {}
        for k, v in pairs:
            if k in out:
                raise FormatError(f"{path}: key {k!r} appears twice")
            out[k] = v
        return out

    try:
        return json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as e:
        raise FormatError(f"{path}: line {e.lineno} column {e.colno}: invalid JSON ({e.msg})") from None


def _parse_vocab(raw: object, path: Path) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise FormatError(f"{path}: expected a JSON object mapping token -> id")
    by_id: dict[int, str] = {}
    for tok, i in raw.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise FormatError(f"{path}: token {tok!r} has id {i!r}, not a non-negative integer")
        if i >= MAX_ID:
            raise FormatError(f"{path}: token {tok!r} has id {i}, beyond the largest id, {MAX_ID - 1}")
        if i in by_id:
            raise FormatError(f"{path}: id {i} is used by both {by_id[i]!r} and {tok!r}")
        by_id[i] = tok
    return raw  # type: ignore[return-value]


def _parse_merges(lines: Iterable[tuple[int, str]], vocab: dict[str, int], path: Path) -> list[tuple[str, str]]:
    merges = []
    for lineno, line in lines:
        if not line:
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise FormatError(f"{path}: line {lineno}: expected two tokens separated by one space, got {line!r}")
        a, b = parts
        for t in (a, b):
            if t not in vocab:
                raise FormatError(f"{path}: line {lineno}: token {t!r} is not in the vocabulary")
        if a + b not in vocab:
            raise FormatError(f"{path}: line {lineno}: the merge result {a + b!r} is not in the vocabulary")
        merges.append((a, b))
    return merges
