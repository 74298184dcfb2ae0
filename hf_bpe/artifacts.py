"""Writing a tokenizer folder: GPT-2 ``vocab.json`` + ``merges.txt``, HF ``tokenizer.json`` and
``tokenizer_config.json`` (:func:`folder_files`), and the atomic folder write (:func:`write_folder`)
that never leaves a folder that loads with a mix of old and new files; one file (a ``.tiktoken``
rank file) is written atomically by :func:`write_file`."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from hf_bpe import _core
from hf_bpe.alphabet import token_to_str
from hf_bpe.regex_forms import for_oniguruma

__all__ = ["ARTIFACTS", "folder_files", "gpt2_files", "pipeline_parts", "tokenizer_json", "tokenizer_config", "write_folder",
           "write_file"]

# The files `save` writes, in the order they are moved into place (the config last).
ARTIFACTS = ("vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")


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


def _pre_tokenizer_json(pattern: str) -> dict:
    """GPT-2's regex is ByteLevel's own; any other pattern is a Split on each of its regexes (DeepSeek-V3
    has three, the third with CR, LF as its file has them: tokenizers 1.0 knows that spelling), then ByteLevel."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if _core.pattern_source(pattern) == _core.pattern_source("gpt2"):
        return byte_level
    splits = [s.replace("\\r", "\r").replace("\\n", "\n") if k == 2 else s for k, s in enumerate(_core.pattern_splits(pattern))]
    return {
        "type": "Sequence",
        "pretokenizers": [
            # Written so that Oniguruma (tokenizers' engine) splits exactly as we do.
            *({"type": "Split", "pattern": {"Regex": for_oniguruma(s, builtin=_core.pattern_from_splits(splits) is not None)},
               "behavior": "Isolated", "invert": False} for s in splits),
            dict(byte_level, use_regex=False),
        ],
    }


def _added_json(special_tokens: dict[str, int], added_tokens: Sequence) -> list[dict]:
    """``added_tokens`` entries: every added token with its flags (specials given only by name
    have none)."""
    entries = {t.content: {"id": t.id, "content": t.content, "single_word": t.single_word, "lstrip": t.lstrip,
                           "rstrip": t.rstrip, "normalized": t.normalized, "special": t.special}
               for t in added_tokens}
    for s, i in special_tokens.items():
        entries.setdefault(s, {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                               "normalized": False, "special": True})
    return sorted(entries.values(), key=lambda e: e["id"])


def pipeline_parts(pattern: str, pipeline: str | None) -> dict:
    """The ``tokenizer.json`` components around the model: an imported file's (``pipeline``), or
    hf_bpe's own for ``pattern`` (split -> ByteLevel, ByteLevel post-processor and decoder)."""
    return json.loads(pipeline) if pipeline else {
        "normalizer": None,
        "pre_tokenizer": _pre_tokenizer_json(pattern),
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {},
    }


def tokenizer_json(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: dict[str, int],
    pattern: str,
    added_tokens: Sequence = (),
    pipeline: str | None = None,
) -> dict:
    """The HF ``tokenizers`` pipeline: split (regex) -> ByteLevel -> BPE -> ByteLevel decoder, or
    the components of an imported ``tokenizer.json`` (``pipeline``) as they were.
    ``pattern`` is ``"gpt2"``, ``"cl100k"``, ``"o200k"`` or a regex."""
    added = _added_json(special_tokens, added_tokens)
    names = {e["content"]: e["id"] for e in added}
    parts = pipeline_parts(pattern, pipeline)
    options = {"dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
               "fuse_unk": False, "byte_fallback": False, "ignore_merges": False}
    options.update({k: v for k, v in parts["model"].items() if k in options})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": parts["normalizer"],
        "pre_tokenizer": parts["pre_tokenizer"],
        "post_processor": parts["post_processor"],
        "decoder": parts["decoder"],
        "model": {
            "type": "BPE",
            **options,
            "vocab": _vocab_strings(vocab, names),
            "merges": [[token_to_str(a), token_to_str(b)] for a, b in merges],
        },
    }


def tokenizer_config(special_tokens: dict[str, int], tokenizer_class: str | None = None,
                     added_tokens: Sequence = ()) -> dict:
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
            str(e["id"]): {k: e[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
            for e in _added_json(special_tokens, added_tokens)
        },
    }
    return cfg


def _dump(obj: dict, *, compact_ascii: bool = False) -> bytes:
    if compact_ascii:  # byte-for-byte GPT-2 style: one line, ASCII escapes
        return json.dumps(obj, ensure_ascii=True).encode("ascii")
    return (json.dumps(obj, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def gpt2_files(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: dict[str, int]
               ) -> dict[str, bytes]:
    """GPT-2's two files, ``vocab.json`` (one line, ASCII escapes) and ``merges.txt``, by file name
    (``special_tokens``: the added tokens, spelled as their content)."""
    vocab_json = _dump(_vocab_strings(vocab, special_tokens), compact_ascii=True)
    merges_txt = ("#version: 0.2\n" + "".join(f"{token_to_str(a)} {token_to_str(b)}\n" for a, b in merges)).encode("utf-8")
    return {"vocab.json": vocab_json, "merges.txt": merges_txt}


def folder_files(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: dict[str, int],
    pattern: str,
    tokenizer_class: str | None = None,
    added_tokens: Sequence = (),
    pipeline: str | None = None,
) -> dict[str, bytes]:
    """The contents of every artifact (:data:`ARTIFACTS`), by file name."""
    names = {e["content"]: e["id"] for e in _added_json(special_tokens, added_tokens)}
    return {
        **gpt2_files(vocab, merges, names),
        "tokenizer.json": _dump(tokenizer_json(vocab, merges, special_tokens, pattern, added_tokens, pipeline)),
        "tokenizer_config.json": _dump(tokenizer_config(special_tokens, tokenizer_class, added_tokens)),
    }


def write_vocabulary(folder: str, files: dict[str, bytes], prefix: str | None = None) -> tuple[str, ...]:
    """``save_vocabulary``'s files (vocab.json, merges.txt, tokenizer.json) into ``folder``, each
    atomically; returns their paths."""
    if not os.path.isdir(folder):
        raise NotADirectoryError(f"{folder} is not a folder")
    return tuple(str(write_file(os.path.join(folder, f"{prefix}-{n}" if prefix else n), files[n]))
                 for n in ("vocab.json", "merges.txt", "tokenizer.json"))


def _step(what: str) -> None:
    """Called before each filesystem step of :func:`write_folder` (tests kill the process here)."""


# The files (and folder) a tokenizer save may write. One that a new save does not write is left
# out of the new folder: a stale chat template or added-token list would change the tokenizer.
TOKENIZER_FILES = frozenset({"vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
                             "special_tokens_map.json", "added_tokens.json", "chat_template.jinja",
                             "chat_template.json", "additional_chat_templates"})


def write_folder(path: str | os.PathLike, files: dict[str, bytes]) -> Path:
    """Writes files (names are paths inside the folder) into a folder all-or-nothing, as seen by every reader: at any moment (a crash
    included) the folder holds the old files or the new ones, never a mix or a half-written file.

    The new folder is written under a hidden temporary name beside it (with hard links to
    whatever else the old folder holds), then exchanged with the old one in one atomic rename
    (Linux ``renameat2(RENAME_EXCHANGE)``; a new folder is simply renamed into place); the old
    contents are removed after. Other files are kept, but not the tokenizer files
    (``TOKENIZER_FILES``) that this save does not write. A kill leaves at most that hidden folder, which a later save
    removes once its process is gone. Where the exchange is not available, the files are moved
    in one by one, the config last (a reader may then see the folder without a config).
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out} exists and is not a folder")
    _remove_stale(out)
    tmp = _new_hidden_dir(out)
    try:
        for name, data in files.items():
            _step(f"write {name}")
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            _write_synced(tmp / name, data)
        if not out.exists():
            _step("rename")
            os.replace(tmp, out)
            _fsync_dir(out.parent)
            return out
        tops = {n.split("/")[0] for n in files}  # names may be paths ("additional_chat_templates/x.jinja")
        for entry in os.scandir(out):
            if entry.name not in tops and entry.name not in TOKENIZER_FILES:
                _step(f"keep {entry.name}")
                _keep(Path(entry.path), tmp / entry.name)
        _fsync_dir(tmp)
        _step("exchange")
        if not _exchange(tmp, out):
            return _replace_one_by_one(out, tmp, tops)
        _fsync_dir(out.parent)
        _step("remove old")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the old contents after an exchange
    return out


def write_file(path: str | os.PathLike, data: bytes | Sequence[bytes | memoryview]) -> Path:
    """Writes one file atomically: a hidden temporary file beside it, synced, then renamed over
    ``path``; readers see the old file or the whole new one, and a failure leaves the old one.
    ``data`` is the content, or its parts in order (large arrays are written without a copy)."""
    out = Path(path)
    if out.is_dir():
        raise IsADirectoryError(f"{out} is a folder, not a file path")
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(out)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the usual mode, after the umask
    try:
        with os.fdopen(fd, "wb") as f:
            for part in [data] if isinstance(data, (bytes, bytearray, memoryview)) else data:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        _step("rename")
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(out.parent)
    return out


def _new_hidden_dir(out: Path) -> Path:
    """A new hidden folder beside ``out``, with the mode any new folder gets (0777 minus the
    umask; ``tempfile.mkdtemp`` would make it 0700)."""
    while True:
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            os.mkdir(tmp, 0o777)
            return tmp
        except FileExistsError:
            continue


def portable_config(written: tuple[str, ...], tokenizer_class: str | None) -> tuple[str, ...]:
    """The files a ``save_pretrained`` wrote, with a ``tokenizer_config.json`` that transformers 4
    reads too: the extra special tokens under their 4.x name ``additional_special_tokens`` (5.x
    reads both; 4.x takes ``extra_special_tokens`` for a dict and fails on a list), and
    ``tokenizer_class`` when given."""
    cfg = next(Path(w) for w in written if os.path.basename(w) == "tokenizer_config.json")
    spec = json.loads(cfg.read_text(encoding="utf-8"))
    if isinstance(spec.get("extra_special_tokens"), list):
        spec["additional_special_tokens"] = spec.pop("extra_special_tokens")
    if tokenizer_class is not None:
        spec["tokenizer_class"] = tokenizer_class
    cfg.write_text(json.dumps(spec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return written


def save_staged(path: str | os.PathLike, write) -> tuple[str, ...]:
    """Runs ``write(staging)``, which writes files into a fresh folder and returns their paths,
    then puts them all into ``path`` at once (:func:`write_folder`); returns their final paths."""
    with tempfile.TemporaryDirectory(prefix=".hf_bpe-staging-") as staging:
        written = write(staging)
        root = Path(staging)
        files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
        write_folder(path, files)
    return tuple(os.path.join(os.fspath(path), os.path.basename(w)) for w in written)


def _keep(src: Path, dst: Path) -> None:
    """Another file of the old folder, carried over (a hard link where possible)."""
    if src.is_dir() and not src.is_symlink():
        shutil.copytree(src, dst, symlinks=True)
        return
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def _exchange(a: Path, b: Path) -> bool:
    """Swaps two paths in one atomic rename; False where the system cannot."""
    import ctypes
    import errno

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _replace_one_by_one(out: Path, tmp: Path, tops: set[str]) -> Path:
    (out / "tokenizer_config.json").unlink(missing_ok=True)  # from here on the folder does not load
    _fsync_dir(out)
    for name in sorted(tops, key=lambda n: n == "tokenizer_config.json"):
        _remove(out / name)
        os.replace(tmp / name, out / name)
    for name in TOKENIZER_FILES - tops:
        _remove(out / name)
    _fsync_dir(out)
    return out


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)


def _remove_stale(out: Path) -> None:
    """Removes the hidden temporary files and folders that writes of ``out`` left when their
    process was killed (named ``.{name}.tmp-{pid}-{random}``; a live process's are kept)."""
    prefix = f".{out.name}.tmp-"
    try:
        entries = list(os.scandir(out.parent))
    except OSError:
        return
    for e in entries:
        pid = e.name[len(prefix):].split("-", 1)[0] if e.name.startswith(prefix) and not e.is_symlink() else ""
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            if e.is_dir(follow_symlinks=False):
                shutil.rmtree(e.path, ignore_errors=True)
            else:
                Path(e.path).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


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
