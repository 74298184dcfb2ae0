"""Encode speed of the released models' pre-tokenizer scanners against the cl100k scanner, all
with the same cl100k_base ranks (so only the split differs), and tiktoken with the same regex.

    scripts/dev_build.sh
    PYTHONPATH=$PWD python scripts/bench_model_patterns.py [--mb 4] [--runs 5]

Each (pattern, corpus, threads, tool) runs in its own subprocess pinned to ``threads`` CPUs
(``os.sched_setaffinity``) with ``RAYON_NUM_THREADS`` set: one warm-up run (fills the word
caches), then ``--runs`` timed runs of ``encode_batch_flat`` (hf_bpe) or
``encode_ordinary_batch`` (tiktoken) on whole documents. MB/s = UTF-8 bytes / median wall
time; "cpu" is the median process CPU time per run (the steadier figure on a shared machine).
DeepSeek-V3's three splits are not one regex, so tiktoken has no row for it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

from benchlib import CORPORA, DATA, child_json, corpus_docs, pin, thread_env, tiktoken_from_ranks, wall_and_cpu

PATTERNS = ["cl100k", "llama3", "qwen2", "qwen3.5", "nemotron", "deepseek-v3"]


def worker(args) -> None:
    pin(args.threads)
    texts = corpus_docs(args.corpus, args.mb)
    nbytes = sum(len(t.encode()) for t in texts)
    ranks_path = DATA / "tiktoken" / "cl100k_base.tiktoken"
    if args.tool == "hf_bpe":
        import hf_bpe

        bpe = hf_bpe.BPE.from_tiktoken(str(ranks_path), pattern=args.pattern)
        run = lambda: bpe.encode_batch_flat(texts, num_threads=args.threads)  # noqa: E731
    else:
        from hf_bpe import _core

        enc = tiktoken_from_ranks(ranks_path, _core.pattern_source(args.pattern))
        run = lambda: enc.encode_ordinary_batch(texts, num_threads=args.threads)  # noqa: E731
    run()
    walls, cpus = wall_and_cpu(run, args.runs)
    print(json.dumps({"mbps": nbytes / 1e6 / statistics.median(walls), "cpu_mbps": nbytes / 1e6 / statistics.median(cpus)}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--patterns", default=",".join(PATTERNS))
    ap.add_argument("--no-tiktoken", action="store_true")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--tool"), ap.add_argument("--pattern"), ap.add_argument("--corpus")
    ap.add_argument("--thread-count", dest="threads_one", type=int)
    args = ap.parse_args()
    if args.worker:
        args.threads = args.threads_one
        return worker(args)
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        for pattern in args.patterns.split(","):
            for corpus in CORPORA:
                res = {}
                tools = ["hf_bpe"] + ([] if args.no_tiktoken or pattern == "deepseek-v3" else ["tiktoken"])
                for tool in tools:
                    cmd = [sys.executable, __file__, "--worker", "--tool", tool, "--pattern", pattern, "--corpus", corpus,
                           "--thread-count", str(threads), "--mb", str(args.mb), "--runs", str(args.runs)]
                    res[tool] = child_json(cmd, f"{tool} {pattern} {corpus}", env=thread_env(threads))
                rows.append((threads, pattern, corpus, res))
                r = res["hf_bpe"]
                t = res.get("tiktoken")
                print(f"{threads}t {pattern:12} {corpus:13} hf_bpe {r['mbps']:7.1f} MB/s (cpu {r['cpu_mbps']:7.1f})"
                      + (f"  tiktoken {t['mbps']:6.1f} (cpu {t['cpu_mbps']:6.1f})" if t else ""), flush=True)
    base = {(th, c): res["hf_bpe"]["cpu_mbps"] for th, p, c, res in rows if p == "cl100k"}
    print("\n| threads | pattern | corpus | hf_bpe MB/s (wall) | hf_bpe MB/s (CPU) | vs cl100k (CPU) | tiktoken MB/s (wall) |")
    print("|---|---|---|---|---|---|---|")
    for th, p, c, res in rows:
        r, t = res["hf_bpe"], res.get("tiktoken")
        rel = r["cpu_mbps"] / base[(th, c)] if (th, c) in base else float("nan")
        print(f"| {th} | {p} | {c} | {r['mbps']:.0f} | {r['cpu_mbps']:.0f} | {rel:.2f}x | {t['mbps']:.1f} |" if t else
              f"| {th} | {p} | {c} | {r['mbps']:.0f} | {r['cpu_mbps']:.0f} | {rel:.2f}x | - |")


if __name__ == "__main__":
    main()
