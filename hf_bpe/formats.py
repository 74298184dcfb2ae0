"""File formats: GPT-2 ``vocab.json`` + ``merges.txt``, HF ``tokenizer.json`` and
``tokenizer_config.json``, tiktoken rank files, and atomic folder writes.

Every reader validates what it reads and raises :class:`FormatError` naming the file and line.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable

__all__ = [
    "FormatError",
    "bytes_to_unicode",
    "token_to_str",
    "str_to_token",
    "ARTIFACTS",
    "write_folder",
    "read_folder",
    "read_gpt2_files",
    "read_tokenizer_json",
    "read_tiktoken",
    "tokenizer_json",
    "tokenizer_config",
]

# The files `save` writes, in the order they are moved into place (the config last).
ARTIFACTS = ("vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")


class FormatError(ValueError):
    """A tokenizer file is malformed; the message names the file and, where it can, the line."""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from each byte to a printable character.

    Printable Latin-1 bytes map to themselves; the other 68 bytes (controls, space, NBSP, soft
    hyphen) map, in byte order, to U+0100 onwards, so that every token is a visible string.
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table = {b: chr(b) for b in keep}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shifted)
            shifted += 1
    return dict(sorted(table.items()))


BYTE_TO_CHAR: dict[int, str] = bytes_to_unicode()
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in BYTE_TO_CHAR.items()}
_ENCODE_TABLE = [BYTE_TO_CHAR[b] for b in range(256)]


def token_to_str(token: bytes) -> str:
    """The GPT-2 vocab.json spelling of a token's bytes (``b" the"`` -> ``"Ġthe"``)."""
    return "".join([_ENCODE_TABLE[b] for b in token])


def str_to_token(s: str) -> bytes | None:
    """Inverse of :func:`token_to_str`; ``None`` if a character is outside the byte alphabet."""
    try:
        return bytes([CHAR_TO_BYTE[c] for c in s])
    except KeyError:
        return None


# --------------------------------------------------------------------------------------------
# Writing


def _vocab_strings(vocab: dict[int, bytes], special_tokens: dict[str, int]) -> dict[str, int]:
    special_ids = {i: s for s, i in special_tokens.items()}
    out: dict[str, int] = {}
    for i in sorted(vocab):
        s = special_ids.get(i)
        if s is None:
            s = token_to_str(vocab[i])
        if s in out:
            raise ValueError(f"two tokens ({out[s]} and {i}) are both spelled {s!r}")
        out[s] = i
    return out


def _pre_tokenizer_json(pattern_name: str, pattern_source: str) -> dict:
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if pattern_name == "gpt2":
        return byte_level
    return {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern_source}, "behavior": "Isolated", "invert": False},
            dict(byte_level, use_regex=False),
        ],
    }


def tokenizer_json(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: dict[str, int],
    pattern_name: str,
    pattern_source: str,
) -> dict:
    """The HF ``tokenizers`` pipeline: split (regex) -> ByteLevel -> BPE -> ByteLevel decoder."""
    added = [
        {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for s, i in sorted(special_tokens.items(), key=lambda kv: kv[1])
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": _pre_tokenizer_json(pattern_name, pattern_source),
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": _vocab_strings(vocab, special_tokens),
            "merges": [[token_to_str(a), token_to_str(b)] for a, b in merges],
        },
    }


def tokenizer_config(special_tokens: dict[str, int], pattern_name: str, tokenizer_class: str | None = None) -> dict:
    """``tokenizer_config.json``: what ``AutoTokenizer`` reads to pick and set up the class.

    The default class is ``BPETokenizer``: with ``hf_bpe`` imported, ``AutoTokenizer`` gives
    hf_bpe's own tokenizer; without it, transformers 5 does not know the name and falls back to
    its ``tokenizers`` backend reading ``tokenizer.json`` (same ids, same eos/bos/unk). For
    consumers on transformers 4.x without hf_bpe, pass ``tokenizer_class="GPT2Tokenizer"`` (GPT-2
    pattern) or ``"PreTrainedTokenizerFast"``.
    """
    if tokenizer_class is None:
        tokenizer_class = "BPETokenizer"
    eos = "<|endoftext|>" if "<|endoftext|>" in special_tokens else next(iter(special_tokens), None)
    cfg: dict = {
        "tokenizer_class": tokenizer_class,
        "add_prefix_space": False,
        "errors": "replace",
        "clean_up_tokenization_spaces": False,
        "bos_token": eos,
        "eos_token": eos,
        "unk_token": eos,
        "added_tokens_decoder": {
            str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True}
            for s, i in sorted(special_tokens.items(), key=lambda kv: kv[1])
        },
    }
    return cfg


def _dump(obj: dict, *, compact_ascii: bool = False) -> bytes:
    if compact_ascii:  # byte-for-byte GPT-2 style: one line, ASCII escapes
        return json.dumps(obj, ensure_ascii=True).encode("ascii")
    return (json.dumps(obj, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def folder_files(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: dict[str, int],
    pattern_name: str,
    pattern_source: str,
    tokenizer_class: str | None = None,
) -> dict[str, bytes]:
    """The contents of every artifact, by file name."""
    vocab_json = _dump(_vocab_strings(vocab, special_tokens), compact_ascii=True)
    merges_txt = ("#version: 0.2\n" + "".join(f"{token_to_str(a)} {token_to_str(b)}\n" for a, b in merges)).encode("utf-8")
    return {
        "vocab.json": vocab_json,
        "merges.txt": merges_txt,
        "tokenizer.json": _dump(tokenizer_json(vocab, merges, special_tokens, pattern_name, pattern_source)),
        "tokenizer_config.json": _dump(tokenizer_config(special_tokens, pattern_name, tokenizer_class)),
    }


def write_folder(path: str | os.PathLike, files: dict[str, bytes]) -> Path:
    """Writes files into a folder so that a crash at any point never leaves a folder that loads
    with a mix of old and new files or a half-written file.

    A new folder is written under a temporary name and renamed into place. In an existing folder,
    every file is first written and fsynced under a temporary name, the old artifacts are removed
    (config first, so a partial folder does not load), then the new ones are renamed in, config
    last.
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists():
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
        try:
            for name, data in files.items():
                _write_synced(tmp / name, data)
            os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(out.parent)
        return out
    if not out.is_dir():
        raise NotADirectoryError(f"{out} exists and is not a folder")
    staged: list[tuple[Path, Path]] = []
    try:
        for name, data in files.items():
            fd, tmpname = tempfile.mkstemp(prefix=f".{name}.tmp-", dir=out)
            os.close(fd)
            _write_synced(Path(tmpname), data)
            staged.append((Path(tmpname), out / name))
        order = sorted(staged, key=lambda st: st[1].name != "tokenizer_config.json")
        for _, final in order:  # config first: from here on the folder no longer loads
            final.unlink(missing_ok=True)
        _fsync_dir(out)
        for tmpfile, final in sorted(staged, key=lambda st: st[1].name == "tokenizer_config.json"):
            os.replace(tmpfile, final)
        _fsync_dir(out)
    finally:
        for tmpfile, _ in staged:
            tmpfile.unlink(missing_ok=True)
    return out


def _write_synced(p: Path, data: bytes) -> None:
    with open(p, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(p: Path) -> None:
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------------------------
# Reading


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


def _to_tables(
    vocab: dict[str, int], merges: list[tuple[str, str]], declared_specials: Iterable[str], path: Path
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], dict[str, int]]:
    """Turns string tables into byte tables. A vocabulary entry is a special (added) token if it is
    declared as one, if it is not spelled in the byte alphabet, or if it is longer than one byte
    yet no merge makes it (a consistent BPE vocabulary reaches every ordinary token by merges)."""
    made = {a + b for a, b in merges}
    declared = set(declared_specials)
    specials: dict[str, int] = {}
    out: dict[int, bytes] = {}
    for s, i in vocab.items():
        b = None if s in declared else str_to_token(s)
        if b is None or (len(b) > 1 and s not in made):
            specials[s] = i
            out[i] = s.encode("utf-8")
        else:
            out[i] = b
    for a, b in merges:
        if a in specials or b in specials:
            raise FormatError(f"{path}: merge {a} {b} uses the special token {(a if a in specials else b)!r}")
    singles = {b for b in out.values() if len(b) == 1}
    if len(singles) < 256:
        missing = sorted(set(range(256)) - {b[0] for b in singles})
        raise FormatError(f"{path}: the vocabulary lacks {len(missing)} of the 256 byte tokens (e.g. byte {missing[0]})")
    byte_merges = [(str_to_token(a), str_to_token(b)) for a, b in merges]
    return out, byte_merges, specials  # type: ignore[return-value]


def read_gpt2_files(vocab_path: str | os.PathLike, merges_path: str | os.PathLike, declared_specials: Iterable[str] = ()):
    """Reads GPT-2 style ``vocab.json`` + ``merges.txt``. Returns (vocab, merges, special_tokens)."""
    vp, mp = Path(vocab_path), Path(merges_path)
    vocab = _parse_vocab(_load_json(vp), vp)
    text = _read_text(mp)
    lines = text.split("\n")
    numbered = list(enumerate(lines, start=1))
    if lines and lines[0].startswith("#"):
        if lines[0].rstrip("\r") != "#version: 0.2":
            raise FormatError(f"{mp}: line 1: unknown header {lines[0]!r} (expected '#version: 0.2')")
        numbered = numbered[1:]
    numbered = [(n, l[:-1] if l.endswith("\r") else l) for n, l in numbered]
    merges = _parse_merges(numbered, vocab, mp)
    return _to_tables(vocab, merges, declared_specials, vp)


def read_tokenizer_json(path: str | os.PathLike):
    """Reads a byte-level BPE ``tokenizer.json``. Returns (vocab, merges, special_tokens, pattern)."""
    p = Path(path)
    raw = _load_json(p)
    if not isinstance(raw, dict) or not isinstance(raw.get("model"), dict):
        raise FormatError(f"{p}: no 'model' object")
    model = raw["model"]
    if model.get("type", "BPE") != "BPE":
        raise FormatError(f"{p}: model type {model.get('type')!r} is not BPE")
    vocab = _parse_vocab(model.get("vocab"), p)
    merges_raw = model.get("merges", [])
    lines = []
    for n, m in enumerate(merges_raw, start=1):
        if isinstance(m, str):
            lines.append((n, m))
        elif isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m):
            lines.append((n, f"{m[0]} {m[1]}"))
        else:
            raise FormatError(f"{p}: merge #{n} is {m!r}, not a pair of tokens")
    merges = _parse_merges(lines, vocab, p)
    declared = [t["content"] for t in raw.get("added_tokens") or [] if isinstance(t, dict) and "content" in t]
    for t in raw.get("added_tokens") or []:
        if isinstance(t, dict) and t.get("content") not in vocab:
            vocab[t["content"]] = t["id"]
    tables = _to_tables(vocab, merges, declared, p)
    return (*tables, _pattern_from_pre_tokenizer(raw.get("pre_tokenizer"), p))


def _pattern_from_pre_tokenizer(pre: object, path: Path) -> str:
    if not isinstance(pre, dict):
        raise FormatError(f"{path}: no pre_tokenizer; only byte-level BPE tokenizers are supported")
    kind = pre.get("type")
    if kind == "ByteLevel":
        if pre.get("use_regex", True) is False:
            raise FormatError(f"{path}: ByteLevel pre_tokenizer without a regex is not supported")
        if pre.get("add_prefix_space"):
            raise FormatError(f"{path}: add_prefix_space=true is not supported")
        return "gpt2"
    if kind == "Sequence":
        steps = pre.get("pretokenizers") or []
        split = [s for s in steps if isinstance(s, dict) and s.get("type") == "Split"]
        level = [s for s in steps if isinstance(s, dict) and s.get("type") == "ByteLevel"]
        if len(split) == 1 and len(level) == 1 and len(steps) == 2 and not level[0].get("use_regex", True) is True:
            pat = split[0].get("pattern", {})
            if isinstance(pat, dict) and "Regex" in pat and split[0].get("behavior") == "Isolated" and not split[0].get("invert"):
                return pat["Regex"]
    raise FormatError(f"{path}: unsupported pre_tokenizer {json.dumps(pre)[:200]}")


def read_folder(path: str | os.PathLike):
    """Reads a tokenizer folder: ours, GPT-2's (vocab.json + merges.txt) or tokenizer.json alone.
    Returns (vocab, merges, special_tokens, pattern)."""
    d = Path(path)
    if d.is_file():
        if d.name.endswith(".json") and d.name != "vocab.json":
            return read_tokenizer_json(d)
        d = d.parent
    if not d.exists():
        raise FileNotFoundError(f"{d}: no such folder")
    tj = d / "tokenizer.json"
    if (d / "vocab.json").exists() and (d / "merges.txt").exists():
        declared: list[str] = []
        pattern = "gpt2"
        if tj.exists():
            raw = _load_json(tj)
            if isinstance(raw, dict):
                declared = [t["content"] for t in raw.get("added_tokens") or [] if isinstance(t, dict) and t.get("special")]
                pattern = _pattern_from_pre_tokenizer(raw.get("pre_tokenizer"), tj)
        return (*read_gpt2_files(d / "vocab.json", d / "merges.txt", declared), pattern)
    if tj.exists():
        return read_tokenizer_json(tj)
    raise FileNotFoundError(f"{d}: neither vocab.json + merges.txt nor tokenizer.json found")


def read_tiktoken(path: str | os.PathLike) -> dict[bytes, int]:
    """Reads a tiktoken rank file (``base64(token) rank`` per line)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such file") from None
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
