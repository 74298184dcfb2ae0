#!/usr/bin/env python3
"""A/B of two (or more) builds of hf_bpe on counting: ``count_files`` wall time and peak RSS.

Each argument is a directory holding an ``hf_bpe/`` package with its built ``_core`` (e.g. a
``git worktree`` after ``scripts/dev_build.sh``). Each build counts the files in a fresh
process (1 and 2 threads; one warm-up call, then one timed call per round, so the OS file cache
is warm for every build alike); builds alternate for ``--rounds`` rounds and the median is
shown with the ratio to the first build. Peers are not involved: counting alone has no peer
API (for whole trainings with the peers see ``scripts/bench_train.py``).

Usage: python scripts/ab_count.py DIR_A DIR_B [--rounds 5] [--files ../shared/data/corpus/english.txt.gz]
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

from benchlib import child_json

CHILD = r"""
import json, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[4]]
import hf_bpe
from benchlib import status_kib
paths, threads = json.loads(sys.argv[2]), int(sys.argv[3])
hf_bpe.count_files(paths, num_threads=threads, progress=False)
t = time.perf_counter()
c = hf_bpe.count_files(paths, num_threads=threads, progress=False)
dt = time.perf_counter() - t
peak = status_kib("VmHWM") // 1024
print(json.dumps({"s": dt, "words": len(c), "peak": peak}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--files", nargs="+", default=["../shared/data/corpus/english.txt.gz"])
    a = ap.parse_args()
    res: dict[tuple[str, int], list[dict]] = {}
    for _ in range(a.rounds):
        for threads in (1, 2):
            for d in a.dirs:
                cmd = [sys.executable, "-c", CHILD, d, json.dumps(a.files), str(threads), str(Path(__file__).parent)]
                res.setdefault((d, threads), []).append(child_json(cmd, d))
    print(f"count_files {' '.join(a.files)}, median of {a.rounds} rounds:")
    print(f"{'build':<30} {'threads':>7} {'s':>8} {'ratio':>6} {'peak MiB':>9} {'words':>10}")
    for threads in (1, 2):
        base = statistics.median(r["s"] for r in res[(a.dirs[0], threads)])
        for d in a.dirs:
            rs = res[(d, threads)]
            s = statistics.median(r["s"] for r in rs)
            peak = statistics.median(r["peak"] for r in rs)
            print(f"{d:<30} {threads:>7} {s:>8.3f} {s / base:>6.2f} {peak:>9.0f} {rs[0]['words']:>10,}")


if __name__ == "__main__":
    main()
