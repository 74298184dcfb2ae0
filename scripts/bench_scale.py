"""Training beyond one process: ``hf_bpe.distributed.train_files`` on a local Ray cluster of 1
and 2 workers against ``hf_bpe.train_files``, on the 191 MB English corpus and on it repeated to
about 1 GB (plain text, so files are cut into byte-range shards).

    PYTHONPATH=$PWD python scripts/bench_scale.py [--sizes 191,1000] [--runs 3] [--vocab 32000]

Reported, medians of ``--runs`` (after a warm-up run that also warms Ray's workers):
* ``one machine``: ``train_files`` (its own count and merge-loop times);
* per worker count: the cluster's start-up, then on the started cluster the count stage (tasks
  for all shards plus the tree of merges), the merge loop on the driver, the total and its ratio
  to ``train_files``; bytes shipped (the shards' counts, pickled); peak RSS of the driver and of
  the workers (``psutil``, sampled);
* words: distinct words, and the driver's bytes per distinct word for the merged counts.
"""

from __future__ import annotations

import argparse
import gzip
import os
import pickle
import statistics
import sys
import threading
import time
from pathlib import Path

from benchlib import corpus_path


def corpus(size_mb: int, where: Path) -> Path:
    """The English corpus as plain text, repeated to about ``size_mb`` MB (made once)."""
    out = where / f"english-{size_mb}mb.txt"
    if not out.exists():
        with gzip.open(corpus_path("english"), "rb") as f:
            text = f.read()
        tmp = out.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            written = 0
            while written < size_mb * 1_000_000:
                part = text[: size_mb * 1_000_000 - written]
                f.write(part)
                written += len(part)
        os.replace(tmp, out)
    return out


class PeakRSS:
    """Peak RSS of this process and of Ray's worker processes, sampled every 50 ms."""

    def __init__(self) -> None:
        import psutil

        self.psutil, self.me = psutil, psutil.Process()
        self.driver = self.workers = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.driver = max(self.driver, self.me.memory_info().rss)
            total = 0
            for p in self.psutil.process_iter(["cmdline"]):
                cmd = " ".join(p.info["cmdline"] or [])
                if "ray::" in cmd or "default_worker.py" in cmd:
                    try:
                        total = max(total, p.memory_info().rss)
                    except self.psutil.Error:
                        pass
            self.workers = max(self.workers, total)
            time.sleep(0.05)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def shipped(shards) -> int:
    """Bytes the shards' counts take pickled: what the counting tasks send to the merges."""
    from hf_bpe import _core
    from hf_bpe.training.counts import WordCounts

    total = 0
    for p, rng in shards:
        c = _core.WordCounter("gpt2", ["<|endoftext|>"], None)
        c.add_file(p, "strict", "text", None, rng)
        total += len(pickle.dumps(WordCounts(c.arrays(), checked=True)))
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="191,1000", help="corpus sizes in MB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--shard-mb", type=int, default=64)
    ap.add_argument("--tmp", default="/tmp/hf_bpe_bench_scale")
    a = ap.parse_args()

    import hf_bpe
    from hf_bpe import distributed

    where = Path(a.tmp)
    where.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in map(int, a.sizes.split(",")):
        path = corpus(size, where)
        mb = path.stat().st_size / 1e6

        def local():
            t0 = time.perf_counter()
            counts = hf_bpe.count_files(path, progress=False)
            t1 = time.perf_counter()
            hf_bpe.train_from_counts(counts, vocab_size=a.vocab, progress=False)
            return t1 - t0, time.perf_counter() - t1, counts

        local()
        runs = [local() for _ in range(a.runs)]
        counts = runs[-1][2]
        one = statistics.median(c + m for c, m, _ in runs)
        rows.append((size, mb, "one machine", "–", statistics.median(c for c, _, _ in runs),
                     statistics.median(m for _, m, _ in runs), one, 1.0, "–", "–", "–"))
        words = len(counts)
        per_word = (counts.bytes.nbytes + counts.offsets.nbytes + counts.counts.nbytes) / words
        for n in map(int, a.workers.split(",")):
            import ray

            t0 = time.perf_counter()
            ray.init(num_cpus=n, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
            start = time.perf_counter() - t0
            threads = max(1, (os.cpu_count() or 1) // n)

            def dist():
                t0 = time.perf_counter()
                c = distributed.count_files([path], shard_bytes=a.shard_mb << 20, threads_per_task=threads,
                                            progress=False)
                t1 = time.perf_counter()
                hf_bpe.train_from_counts(c, vocab_size=a.vocab, progress=False)
                return t1 - t0, time.perf_counter() - t1

            t0 = time.perf_counter()
            dist()
            warm = time.perf_counter() - t0
            with PeakRSS() as rss:
                d = [dist() for _ in range(a.runs)]
            total = statistics.median(c + m for c, m in d)
            shards = distributed.shards([path], shard_bytes=a.shard_mb << 20)
            rows.append((size, mb, f"Ray, {n} worker{'s' if n > 1 else ''} ({threads} threads each)",
                         f"{start:.1f} s + warm-up run {warm:.1f} s", statistics.median(c for c, _ in d),
                         statistics.median(m for _, m in d), total, total / one,
                         f"{len(shards)} shards, {shipped(shards) / 1e6:.0f} MB shipped",
                         f"{rss.driver / 2**20:.0f} MiB", f"{rss.workers / 2**20:.0f} MiB"))
            ray.shutdown()
        print(f"{size} MB: {words:,} distinct words; the merged counts hold {per_word:.1f} bytes per word",
              file=sys.stderr)
    print(f"vocab_size {a.vocab}; medians of {a.runs}; shards of {a.shard_mb} MiB\n")
    print("| corpus | how | start-up | count (+ merge of counts) | merge loop | total | ratio | shards | driver peak RSS | worker peak RSS |")
    print("|---|---|---|---:|---:|---:|---:|---|---:|---:|")
    for size, mb, how, start, c, m, t, r, sh, drv, wrk in rows:
        print(f"| {mb:.0f} MB | {how} | {start} | {c:.2f} s | {m:.2f} s | {t:.2f} s | {r:.2f} | {sh} | {drv} | {wrk} |")


if __name__ == "__main__":
    main()
