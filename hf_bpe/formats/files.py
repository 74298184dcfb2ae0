"""Atomic writes: a folder all-or-nothing (:func:`write_folder`, never a folder that loads with a
mix of old and new files), one file (:func:`write_file`), a staged save (:func:`save_staged`).
Every file hf_bpe writes goes through here."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

__all__ = ["write_folder", "write_file", "save_staged", "TOKENIZER_FILES"]


def _step(what: str) -> None:
    """Called before each filesystem step of :func:`write_folder` (tests kill the process here)."""


# The files (and folder) a tokenizer save may write. One that a new save does not write is left
# out of the new folder: a stale chat template or added-token list would change the tokenizer.
TOKENIZER_FILES = frozenset({"vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
                             "special_tokens_map.json", "added_tokens.json", "chat_template.jinja",
                             "chat_template.json", "additional_chat_templates"})


def write_folder(path: str | os.PathLike, files: dict[str, bytes]) -> Path:
    """Writes files (names are paths inside the folder) into a folder all-or-nothing, as seen by
    every reader: at any moment (a crash included) the folder holds the old files or the new ones,
    never a mix or a half-written file.

    The new folder is written under a hidden temporary name beside it (with hard links to
    whatever else the old folder holds), then exchanged with the old one in one atomic rename
    (Linux ``renameat2(RENAME_EXCHANGE)``; a new folder is simply renamed into place); the old
    contents are removed after. Other files are kept, but not the tokenizer files
    (``TOKENIZER_FILES``) that this save does not write. A kill leaves at most that hidden folder, which a later save
    removes once its process is gone. Where the exchange is not available, the files are moved
    in one by one, the config last (a reader may then see the folder without a config).
    """
    try:
        return _write_folder(Path(path), files)
    except OSError as e:
        raise _named(e, Path(path)) from None


def _named(e: OSError, out: Path) -> OSError:
    """``e`` naming ``out`` where it named one of our hidden temporary paths beside it."""
    if e.errno is not None and ".tmp-" in os.fspath(e.filename or ""):
        return type(e)(e.errno, e.strerror, os.fspath(out))
    return e


def _write_folder(out: Path, files: dict[str, bytes]) -> Path:
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
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the usual mode, after the umask
    except OSError as e:
        raise _named(e, out) from None
    try:
        with os.fdopen(fd, "wb") as f:
            for part in [data] if isinstance(data, (bytes, bytearray, memoryview)) else data:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        _step("rename")
        os.replace(tmp, out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _named(e, out) from None
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
