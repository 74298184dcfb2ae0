"""Quick encode throughput check (not a test): hf_bpe Encoder vs tiktoken vs tokenizers.

    PYTHONPATH=$PWD python scripts/bench_encoder_quick.py [--mb 20] [--corpus english]

GPT-2 vocabulary from the shared files, documents split on `<|endoftext|>`, MB = 1e6 bytes of
UTF-8 text. hf_bpe is timed cold (fresh encoder, empty word cache; the first multi-thread
call also starts the pool) and warm (best of --repeat). tiktoken's thread counts are best of
--repeat too. Wall-clock times: on a shared machine, check the printed load average.
Ids are checked equal to tiktoken before any figure is printed.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_encoder_core import DATA, EOT, R50K_PAT, load_gpt2, load_ranks  # noqa: E402

from hf_bpe._core import Encoder  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=20)
    ap.add_argument("--corpus", default="english")
    ap.add_argument("--pattern", default="gpt2", help="pattern spec for hf_bpe (gpt2 or a regex)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N for the warm runs")
    args = ap.parse_args()

    import tiktoken
    import tokenizers

    n = int(args.mb * 1e6)
    with gzip.open(DATA / "corpus" / f"{args.corpus}.txt.gz", "rt", encoding="utf-8") as f:
        text = f.read(n)
    docs = [d for d in text.split(f"\n{EOT}\n") if d]
    nbytes = sum(len(d.encode()) for d in docs)
    print(f"{args.corpus}: {nbytes / 1e6:.1f} MB in {len(docs)} documents, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")

    vocab, merges = load_gpt2()
    tt = tiktoken.Encoding("r50k_local", pat_str=R50K_PAT, mergeable_ranks=load_ranks("r50k_base"), special_tokens={EOT: 50256})
    hf = tokenizers.Tokenizer.from_file(str(DATA / "gpt2" / "tokenizer.json"))

    def timed(f, repeat=1):
        best, r = float("inf"), None
        for _ in range(repeat):
            t = time.perf_counter()
            r = f()
            best = min(best, time.perf_counter() - t)
        return r, best

    ref, t_tt8 = timed(lambda: tt.encode_ordinary_batch(docs))
    ref_flat = np.fromiter((i for d in ref for i in d), dtype=np.uint32)
    rows = [("tiktoken encode_ordinary_batch (8 py threads)", t_tt8)]
    for nt in (1, 2):
        _, t = timed(lambda: tt.encode_ordinary_batch(docs, num_threads=nt), repeat=args.repeat)
        rows.append((f"tiktoken encode_ordinary_batch num_threads={nt}", t))
    hf_ids, t_hf = timed(lambda: hf.encode_batch_fast(docs, add_special_tokens=False))
    assert [e.ids for e in hf_ids] == ref, "tokenizers ids differ from tiktoken"
    rows.append(("tokenizers encode_batch_fast (all cores)", t_hf))

    for nt in (1, 2):
        enc = Encoder(vocab, merges, {EOT: 50256}, args.pattern)
        (ids, offs), t_cold = timed(lambda: enc.encode_batch_flat(docs, num_threads=nt))
        assert np.array_equal(ids, ref_flat), "hf_bpe ids differ from tiktoken"
        assert offs[-1] == len(ref_flat)
        (ids, offs), t_warm = timed(lambda: enc.encode_batch_flat(docs, num_threads=nt), repeat=args.repeat)
        assert np.array_equal(ids, ref_flat)
        rows.append((f"hf_bpe encode_batch_flat num_threads={nt} cold cache", t_cold))
        rows.append((f"hf_bpe encode_batch_flat num_threads={nt} warm cache", t_warm))
        info = enc.cache_info()
    print(f"ids equal ({len(ref_flat):,} tokens); cache {info}")
    for name, t in rows:
        print(f"{name:55s} {nbytes / 1e6 / t:8.1f} MB/s  ({t:.2f} s)")


if __name__ == "__main__":
    main()
