"""Bytes per distinct word: of ``WordCounts``, of the merge loop (``train_from_counts``) and of
a whole training run from files (``train_files``: counting, then the merge loop).

    PYTHONPATH=$PWD python scripts/bench_memory_per_word.py [N=2000000] [--vocab 8000]
    PYTHONPATH=$PWD python scripts/bench_memory_per_word.py --corpus ../shared/data/corpus/*.txt.gz

    PYTHONPATH=$PWD python scripts/bench_memory_per_word.py --corpus ../shared/data/corpus/*.txt.gz \
        --recombined 17300000 --keep /tmp/words18m --vocab 32000

Without ``--corpus`` the words are N distinct random words of 5-11 letters (so the distinct
words, not the corpus, set the memory); with it, the distinct pre-tokens of those files.
``--recombined N`` adds a file of N new distinct words, each a prefix of one of the corpora's
letter words joined to a suffix of another (real letter pairs, a long tail like a big corpus's
distinct words), seen 1-3 times; ``--keep DIR`` keeps that file for the next run. Each figure is
(peak RSS - RSS before) / distinct words, measured in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import sys
import tempfile

from benchlib import child_json, status_kib


def peak_rss() -> int:
    """This process's peak RSS in bytes. (Not ``getrusage``: after ``exec`` its maximum still
    holds the parent's RSS at the fork, which is bigger than the child's when it has counted.)"""
    return status_kib("VmHWM") * 1024


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
    return child_json([sys.executable, __file__, "--child", kind, json.dumps(paths), "--vocab", str(vocab)],
                      f"the {kind} child", env=env)


def recombined(paths: list[str], n: int, folder: str) -> str:
    """A text of ``n`` distinct words new to the files at ``paths`` (see the module doc)."""
    import numpy as np

    import hf_bpe

    out = os.path.join(folder, f"recombined-{n}.txt")
    if os.path.exists(out):
        return out
    counts = hf_bpe.count_files(paths, progress=False)
    seen = set()
    letters = []
    for w, _ in counts.items():
        t = w.decode("utf-8", "replace")
        seen.add(t)
        if t.lstrip(" ").isalpha() and len(t.lstrip(" ")) >= 2:
            letters.append(t)
    del counts
    rng = np.random.default_rng(0)
    new: set[str] = set()
    while len(new) < n:
        m = min(1 << 20, 2 * (n - len(new)))
        ai, bi = rng.integers(len(letters), size=m), rng.integers(len(letters), size=m)
        fa, fb = rng.random(m), rng.random(m)
        for i in range(m):
            x, y = letters[ai[i]], letters[bi[i]]
            lead = 1 if x[0] == " " else 0
            cx = lead + 1 + int(fa[i] * (len(x) - lead - 1))
            cy = 1 + int(fb[i] * (len(y) - (2 if y[0] == " " else 1)))
            w = x[:cx] + y[len(y) - cy:]
            if w not in seen and w not in new:
                new.add(w)
                if len(new) == n:
                    break
    reps = rng.integers(1, 4, size=n)
    tmp_out = out + ".part"
    with open(tmp_out, "w", encoding="utf-8") as f:
        line = []
        for w, r in zip(new, reps):
            line.extend([w if w[0] == " " else "\n" + w] * int(r))
            if len(line) > 10000:
                f.write("".join(line) + "\n")
                line = []
        f.write("".join(line) + "\n")
    os.replace(tmp_out, out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=2_000_000)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--corpus", nargs="*")
    ap.add_argument("--recombined", type=int, default=0)
    ap.add_argument("--keep")
    ap.add_argument("--child", nargs=2)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child[0], a.child[1], a.vocab)))
        return

    import hf_bpe

    with tempfile.TemporaryDirectory() as tmp:
        if a.corpus:
            paths = list(a.corpus)
            what = f"pre-tokens of {len(paths)} file(s)"
            if a.recombined:
                paths.append(recombined(paths, a.recombined, a.keep or tmp))
                what += f" and {a.recombined:,} recombined words"
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
