"""Progress bars (tqdm) for long jobs (reading files, merging), and the pause of Python's GC
while a batch's results are built."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from typing import Callable, Iterator, Sequence

__all__ = ["file_progress", "count_progress", "gc_paused"]


def _tqdm(**kw):
    from tqdm.auto import tqdm

    return tqdm(file=sys.stderr, dynamic_ncols=True, **kw)


@contextlib.contextmanager
def file_progress(paths: Sequence[str | os.PathLike], desc: str,
                  enabled: bool = True) -> Iterator[Callable[[int], None] | None]:
    """A bar over the bytes of ``paths``; yields a callback taking the bytes read of the current file.
    Call ``.next_file()`` on the callback (if any) when moving to the next file."""
    if not enabled:
        yield None
        return
    total = sum(os.path.getsize(p) for p in paths if os.path.exists(p))
    bar = _tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024)
    base = [0, 0]  # bytes of finished files, bytes of the current file so far

    def cb(done: int) -> None:
        bar.update(base[0] + done - bar.n)
        base[1] = done

    def next_file() -> None:
        base[0] += base[1]
        base[1] = 0

    cb.next_file = next_file  # type: ignore[attr-defined]
    try:
        yield cb
    finally:
        bar.close()


@contextlib.contextmanager
def count_progress(total: int, desc: str, unit: str, enabled: bool = True) -> Iterator[Callable[[int], None] | None]:
    """A bar up to ``total``; yields a callback taking the amount done so far."""
    if not enabled:
        yield None
        return
    bar = _tqdm(total=total, desc=desc, unit=unit)

    def cb(done: int) -> None:
        bar.update(min(done, total) - bar.n)

    try:
        yield cb
    finally:
        bar.close()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a batch's lists are built: the lists hold
    ints only, yet every few hundred of them the collector walked all the young ones (a third of
    the time of ``encode_batch`` on short texts)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
