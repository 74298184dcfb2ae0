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
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SEP = "\n<|endoftext|>\n"
PATTERNS = ["cl100k", "llama3", "qwen2", "qwen3.5", "nemotron", "deepseek-v3"]
CORPORA = ["english", "code", "multilingual"]


def docs(name: str, mb: float) -> list[str]:
    out, size = [], 0
    with gzip.open(DATA / "corpus" / f"{name}.txt.gz", "rt", encoding="utf-8") as f:
        buf = f.read(int(mb * 1e6 * 1.3) + 200_000)
    for d in buf.split(SEP)[:-1]:
        if size >= mb * 1e6:
            break
        if "<|endoftext|>" not in d:
            out.append(d)
            size += len(d.encode())
    return out


def worker(args) -> None:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.threads])
    texts = docs(args.corpus, args.mb)
    nbytes = sum(len(t.encode()) for t in texts)
    ranks_path = DATA / "tiktoken" / "cl100k_base.tiktoken"
    if args.tool == "hf_bpe":
        import hf_bpe

        bpe = hf_bpe.BPE.from_tiktoken(str(ranks_path), pattern=args.pattern)
        run = lambda: bpe.encode_batch_flat(texts, num_threads=args.threads)  # noqa: E731
    else:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        from hf_bpe import _core

        src = _core.pattern_source(args.pattern)
        enc = tiktoken.Encoding("bench", pat_str=src, mergeable_ranks=load_tiktoken_bpe(str(ranks_path)), special_tokens={})
        run = lambda: enc.encode_ordinary_batch(texts, num_threads=args.threads)  # noqa: E731
    run()
    walls, cpus = [], []
    for _ in range(args.runs):
        c0, t0 = time.process_time(), time.perf_counter()
        run()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
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
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        for pattern in args.patterns.split(","):
            for corpus in CORPORA:
                res = {}
                tools = ["hf_bpe"] + ([] if args.no_tiktoken or pattern == "deepseek-v3" else ["tiktoken"])
                for tool in tools:
                    cmd = [sys.executable, __file__, "--worker", "--tool", tool, "--pattern", pattern, "--corpus", corpus,
                           "--thread-count", str(threads), "--mb", str(args.mb), "--runs", str(args.runs)]
                    out = subprocess.run(cmd, env={**env, "RAYON_NUM_THREADS": str(threads)}, capture_output=True, text=True)
                    if out.returncode:
                        sys.exit(out.stderr)
                    res[tool] = json.loads(out.stdout.strip().splitlines()[-1])
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
