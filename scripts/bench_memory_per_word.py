"""Bytes per distinct word: of ``WordCounts``, of the merge loop (``train_from_counts``) and of
a whole training run from files (``train_files``: counting, then the merge loop).

    PYTHONPATH=$PWD python scripts/bench_memory_per_word.py [N=2000000] [--vocab 8000]
    PYTHONPATH=$PWD python scripts/bench_memory_per_word.py --corpus ../shared/data/corpus/*.txt.gz

Without ``--corpus`` the words are N distinct random words of 5-11 letters (so the distinct
words, not the corpus, set the memory); with it, the distinct pre-tokens of those files. Each
figure is (peak RSS - RSS before) / distinct words, measured in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import subprocess
import sys
import tempfile


def peak_rss() -> int:
    """This process's peak RSS in bytes. (Not ``getrusage``: after ``exec`` its maximum still
    holds the parent's RSS at the fork, which is bigger than the child's when it has counted.)"""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def child(kind: str, src: str, vocab: int) -> dict:
    import gc

    import psutil

    import hf_bpe

    paths = json.loads(src)
    if kind == "counts":
        counts = hf_bpe.WordCounts.load(paths[0])
        gc.collect()
        before = psutil.Process().memory_info().rss
        hf_bpe.train_from_counts(counts, vocab_size=vocab, progress=False)
        words = len(counts)
    else:
        before = psutil.Process().memory_info().rss
        hf_bpe.train_files(paths, vocab_size=vocab, progress=False)
        words = int(os.environ["BENCH_WORDS"])
    peak = peak_rss()
    return {"words": words, "before": before, "peak": peak}


def run_child(kind: str, paths: list[str], vocab: int, words: int) -> dict:
    env = dict(os.environ, BENCH_WORDS=str(words))
    out = subprocess.run([sys.executable, __file__, "--child", kind, json.dumps(paths), "--vocab", str(vocab)],
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=2_000_000)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--corpus", nargs="*")
    ap.add_argument("--child", nargs=2)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child[0], a.child[1], a.vocab)))
        return

    import hf_bpe

    with tempfile.TemporaryDirectory() as tmp:
        if a.corpus:
            paths = a.corpus
            what = f"pre-tokens of {len(paths)} file(s)"
        else:
            rng = random.Random(0)
            words = sorted({"".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(5, 11)))
                            for _ in range(a.n)})
            paths = [os.path.join(tmp, "words.txt")]
            with open(paths[0], "w") as f:
                for i in range(0, len(words), 10000):
                    f.write(" ".join(words[i:i + 10000]) + "\n")
            del words
            what = "random words of 5-11 letters"
        counts = hf_bpe.count_files(paths, progress=False)
        counts.save(os.path.join(tmp, "c.counts"))
        n = len(counts)
        arrays = counts.bytes.nbytes + counts.offsets.nbytes + counts.counts.nbytes
        mean = counts.bytes.nbytes / n
        del counts
        loop = run_child("counts", [os.path.join(tmp, "c.counts")], a.vocab, n)
        whole = run_child("files", paths, a.vocab, n)
    per = lambda r: (r["peak"] - r["before"]) / n  # noqa: E731
    print(f"{n:,} distinct {what} (mean {mean:.1f} bytes), vocab {a.vocab}:")
    print(f"  WordCounts                         {arrays / n:6.1f} bytes/word")
    print(f"  train_from_counts (merge loop)     {per(loop):6.1f} bytes/word  (peak {loop['peak'] / 2**20:.0f} MiB)")
    print(f"  train_files (count + merge loop)   {per(whole):6.1f} bytes/word  (peak {whole['peak'] / 2**20:.0f} MiB)")


if __name__ == "__main__":
    main()
