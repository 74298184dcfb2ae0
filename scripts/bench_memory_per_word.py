"""Bytes per distinct word: of ``WordCounts`` and of the merge loop (``train_from_counts``), on
N distinct random words of 5-11 letters (so the distinct words, not the corpus, set the memory).

    PYTHONPATH=$PWD python scripts/bench_memory_per_word.py [N=2000000] [--vocab 8000]

The merge loop's figure is (peak RSS during training - RSS before it) / distinct words.
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import string


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=2_000_000)
    ap.add_argument("--vocab", type=int, default=8000)
    a = ap.parse_args()

    import psutil

    import hf_bpe

    rng = random.Random(0)
    words = sorted({"".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(5, 11))) for _ in range(a.n)})
    docs = [" ".join(words[i:i + 10000]) for i in range(0, len(words), 10000)]
    counts = hf_bpe.count(docs, progress=False)
    del docs, words
    gc.collect()
    before = psutil.Process().memory_info().rss
    counting_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    hf_bpe.train_from_counts(counts, vocab_size=a.vocab, progress=False)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    arrays = counts.bytes.nbytes + counts.offsets.nbytes + counts.counts.nbytes
    if peak <= counting_peak:
        print("the peak RSS came while counting, not training: the merge loop's figure is an upper bound")
    print(f"{len(counts):,} distinct words: WordCounts {arrays / len(counts):.1f} bytes/word; merge loop "
          f"~{(peak - before) / len(counts):.0f} bytes/word (RSS {before / 2**20:.0f} -> peak {peak / 2**20:.0f} MiB)")


if __name__ == "__main__":
    main()
