#!/usr/bin/env python3
"""Vocabulary surgery and stochastic encoding: what pruning costs in bytes/token on held-out
text, and BPE-dropout's speed and token counts against HF ``tokenizers``, in one run.

    scripts/dev_build.sh
    PYTHONPATH=$PWD python scripts/bench_surgery.py --mb 12 --runs 3 --out-md bench_out/surgery.md

What is measured
  *Pruning*: GPT-2 (``../shared/data/gpt2``) and cl100k (rank file) pruned with ``hf_bpe.prune``
  by use on the first two thirds of ``--mb`` MB of English books, bytes/token on the last third
  (held out) before and after, and the seconds of the call.
  *Dropout*: the same text cut in 10 kB documents, GPT-2, ``dropout=--p``; hf_bpe
  ``encode_batch(dropout=p, seed=run)`` on 1 and 2 threads, ``tokenizers``' ``BPE(dropout=p)``
  (GPT-2's ``tokenizer.json`` with the model's dropout set) one document at a time and with
  ``encode_batch`` (its threads); MB/s, median of ``--runs``; and the mean tokens of each. No
  word cache takes part on either side (dropout bypasses it), so there is no cache state to name.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from benchlib import DATA, ROOT, corpus_text, git_state, machine_info, package_version, publish


def timed(fn, runs: int):
    out, secs = None, []
    for r in range(runs):
        t = time.perf_counter()
        out = fn(r)
        secs.append(time.perf_counter() - t)
    return statistics.median(secs), out


def main() -> None:
    import hf_bpe

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=12)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--p", type=float, default=0.1)
    ap.add_argument("--out-md", type=Path)
    args = ap.parse_args()

    text = corpus_text("english", int(args.mb * 1e6)).replace("<|endoftext|>", "")
    cut = len(text) * 2 // 3
    train, held = [text[:cut]], [text[cut:][i:i + 100_000] for i in range(0, len(text) - cut, 100_000)]

    def bpt(b) -> float:
        return sum(len(d.encode()) for d in held) / sum(map(len, b.encode_batch(held)))

    prune_rows = []
    for name, path, sizes in (("GPT-2", DATA / "gpt2", (45000, 40000, 30000)),
                              ("cl100k", DATA / "tiktoken" / "cl100k_base.tiktoken", (80000, 60000))):
        full = hf_bpe.BPE.load(path)
        base = bpt(full)
        for size in sizes:
            t = time.perf_counter()
            small, _ = hf_bpe.prune(full, size, texts=train)
            secs = time.perf_counter() - t
            prune_rows.append((name, full.vocab_size, size, base, bpt(small), secs))
            print(f"{name} -> {size}: {bpt(small) / base:.4f}x in {secs:.2f} s", flush=True)

    import tokenizers

    gpt2 = hf_bpe.BPE.load(DATA / "gpt2")
    spec = json.loads((DATA / "gpt2" / "tokenizer.json").read_text())
    spec["model"]["dropout"] = args.p
    tok = tokenizers.Tokenizer.from_str(json.dumps(spec))
    pieces = [text[i:i + 10_000] for i in range(0, len(text), 10_000)]
    mb = len(text.encode()) / 1e6
    rows = []
    for threads in (1, 2):
        s, ids = timed(lambda r: gpt2.encode_batch(pieces, dropout=args.p, seed=r, num_threads=threads), args.runs)
        rows.append((f"hf_bpe, {threads} thread{'s' * (threads > 1)}", mb / s, sum(map(len, ids))))
    s, enc = timed(lambda r: [tok.encode(p) for p in pieces], args.runs)
    rows.append(("tokenizers, one document at a time", mb / s, sum(len(e.ids) for e in enc)))
    s, enc = timed(lambda r: tok.encode_batch(pieces), args.runs)
    rows.append(("tokenizers, encode_batch (its threads)", mb / s, sum(len(e.ids) for e in enc)))
    plain = sum(map(len, gpt2.encode_batch(pieces)))

    m = machine_info()
    lines = ["# Pruning and BPE-dropout", "",
             f"Machine: {m['affinity']} CPUs, {m['cpu']}, {m['mem']}; Python {m['python']}; hf_bpe {git_state(ROOT)}; "
             f"tokenizers {package_version('tokenizers')}.",
             f"Text: the first {args.mb:g} MB of the English books corpus ({len(text) / 1e6:.1f} M characters).", "",
             "## Pruning (by use on the first two thirds, bytes/token on the last third)", "",
             "| vocabulary | tokens | pruned to | bytes/token before | after | kept | seconds |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, n, size, a, b, secs in prune_rows:
        lines.append(f"| {name} | {n:,} | {size:,} | {a:.3f} | {b:.3f} | {b / a:.3f}x | {secs:.2f} |")
    lines += ["", f"## BPE-dropout, p = {args.p:g} (GPT-2, 10 kB documents, median of {args.runs})", "",
              f"Tokens without dropout: {plain:,}.", "",
              "| encoder | MB/s | tokens |", "|---|---:|---:|"]
    for name, speed, n in rows:
        lines.append(f"| {name} | {speed:.1f} | {n:,} |")
    lines += ["", f"hf_bpe one thread against tokenizers one document at a time: {rows[0][1] / rows[2][1]:.1f}x; "
              f"two threads against encode_batch: {rows[1][1] / rows[3][1]:.1f}x; tokens "
              f"{rows[0][2] / rows[2][2]:.4f}x."]
    publish("\n".join(lines) + "\n", args.out_md)


if __name__ == "__main__":
    main()
