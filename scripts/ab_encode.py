#!/usr/bin/env python3
"""A/B of two (or more) builds of hf_bpe on the encoder's hot path, one thread.

Each argument is a directory holding an `hf_bpe/` package with its built `_core` (e.g. a
`git worktree` after `scripts/dev_build.sh`, or a copy of `hf_bpe/` with another `_core.abi3.so`).
For GPT-2 and o200k on the first 20 MB of each corpus (cut into 10 kB texts; a fresh encoder
per corpus), each build runs in its own process: one warm-up `encode_batch_flat`, then 7 timed calls; the best MB per *thread CPU
second* is kept (robust on a shared machine: other processes do not count, and the minimum
drops the disturbed runs). Builds alternate for `--rounds` rounds and the best round is shown.
Peers are not involved: for comparisons with them use `scripts/bench_encode.py`.

With `--check` the calls keep the default `disallowed_special` (every special disallowed, as
`bench_encode.py` calls it), so the search for special tokens is timed too (the corpora's
`<|endoftext|>` separators are replaced by blank lines); without it they pass
`disallowed_special=()`.

Usage: python scripts/ab_encode.py DIR_A DIR_B [--rounds 3] [--only "o200k english,gpt2 code"] [--check]
"""
import argparse
import sys
from pathlib import Path

from benchlib import DATA, child_json

CHILD = r"""
import json, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[5]]
import hf_bpe
from benchlib import chunks, corpus_text, times
data = sys.argv[2]
only = [c for c in sys.argv[3].split(",") if c]
kw = {} if sys.argv[4] == "check" else {"disallowed_special": ()}
res = {}
for voc in ("gpt2", "o200k"):
    for corpus in ("english", "code", "multilingual"):
        if only and f"{voc} {corpus}" not in only:
            continue
        # A fresh encoder per corpus: its cache then holds this corpus's words only.
        if voc == "gpt2":
            bpe = hf_bpe.BPE.load(f"{data}/gpt2")
        else:
            bpe = hf_bpe.BPE.from_tiktoken(f"{data}/tiktoken/o200k_base.tiktoken", pattern="o200k",
                                          special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018})
        text = corpus_text(corpus, 20_000_000, data)
        size = len(text.encode())
        if not kw:
            # (The corpora separate documents with <|endoftext|>: with the check on, drop it.)
            text = text.replace("<|endoftext|>", "\n\n")
        docs = chunks(text)
        bpe.encode_batch_flat(docs, num_threads=1, **kw)
        best = min(times(lambda: bpe.encode_batch_flat(docs, num_threads=1, **kw), 7, clock=time.thread_time))
        res[f"{voc} {corpus}"] = size / best / 1e6
print(json.dumps(res))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help='comma-separated configs, e.g. "o200k english,gpt2 code" (default: all six)')
    ap.add_argument("--check", action="store_true", help="keep the default disallowed_special (time the special-token check)")
    ap.add_argument("--data", default=str(DATA))
    args = ap.parse_args()
    env = {"OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    results = {d: [] for d in args.dirs}
    for _ in range(args.rounds):
        for d in args.dirs:
            check = "check" if args.check else ""
            cmd = [sys.executable, "-c", CHILD, d, args.data, args.only, check, str(Path(__file__).parent)]
            results[d].append(child_json(cmd, d, env=env))
    keys = list(results[args.dirs[0]][0])
    print("MB per thread CPU second, best of 7 calls x", args.rounds, "rounds")
    print("config".ljust(20), *[Path(d).name[-14:].rjust(14) for d in args.dirs])
    for k in keys:
        print(k.ljust(20), *[f"{max(r[k] for r in results[d]):14.0f}" for d in args.dirs])


if __name__ == "__main__":
    main()
