#!/usr/bin/env python3
"""Superword training benchmark: time, memory and compression of ``superword_transition`` against
plain BPE on the same corpus, in one run.

    scripts/dev_build.sh
    PYTHONPATH=$PWD python scripts/bench_superword.py --vocabs 16000,32000,64000 --runs 3 \\
        --out-md bench_out/superword.md

What is measured
  The English books corpus minus its last ``--held-out-mb`` MB of whole documents is written once to
  ``bench_out/superword/train.txt`` (documents joined by ``<|endoftext|>``); every training reads it
  with ``train_files`` in a fresh subprocess of this script (all cores), which reports the seconds
  of the call (hf_bpe and numpy imported before it) and the process's peak RSS (VmHWM). For each
  vocabulary size: plain BPE, and superwords at each transition (a fraction of the vocabulary
  size), runs interleaved, medians, and each superword run's ratio to the plain run of its round
  (paired: the machine drifts).
  Compression is bytes per token on the held-out documents (never trained on), plain against
  superword. The superword tokenizer of the middle vocabulary size and the first transition is
  saved to ``bench_out/superword/tokenizer`` for ``bench_encode.py --vocabs superword``.
  With ``--stages``, each superword run also times every call into the core (the counting, the
  spans split into words in the counter, stage 1, the spans cut into stage 1's tokens, stage 2) in
  wall and CPU seconds; what is left is Python (building the tokenizers, arrays).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import EOT, ROOT, corpus_docs, git_state, machine_info, publish, status_kib

OUT = ROOT / "bench_out" / "superword"


def timed_core(log: list) -> None:
    """Wraps every function of the core and every method of its word counter so that each call
    appends ``(name, wall s, cpu s)`` to ``log``."""
    import functools

    from hf_bpe import _core

    def timer(name, f):
        @functools.wraps(f)
        def g(*a, **k):
            t, c = time.perf_counter(), time.process_time()
            try:
                return f(*a, **k)
            finally:
                log.append((name, time.perf_counter() - t, time.process_time() - c))
        return g

    for name in dir(_core):
        obj = getattr(_core, name)
        if callable(obj) and not isinstance(obj, type) and not name.startswith("_"):
            setattr(_core, name, timer(name, obj))
    real = _core.WordCounter

    class WordCounter:
        def __init__(self, *a):
            self._real = real(*a)

        def __getattr__(self, name):
            attr = getattr(self._real, name)
            return timer(f"WordCounter.{name}", attr) if callable(attr) else attr

    _core.WordCounter = WordCounter


def child(spec: dict) -> None:
    # Imports are not training: numpy (which superword training loads for its arrays, plain BPE
    # never) is imported before the clock, as hf_bpe is.
    import numpy  # noqa: F401

    import hf_bpe

    log: list = []
    if spec.get("stages") and spec["transition"]:
        timed_core(log)
    t0 = time.perf_counter()
    bpe = hf_bpe.train_files(spec["train"], spec["vocab"], superword_transition=spec["transition"], progress=False)
    seconds = time.perf_counter() - t0
    if spec.get("save"):
        bpe.save(spec["save"])
    print(json.dumps({"seconds": seconds, "rss_mib": status_kib("VmHWM") / 1024, "stages": log}))


def run_child(spec: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"child {spec} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bytes_per_token(folder: Path, docs: list[str]) -> float:
    import hf_bpe

    bpe = hf_bpe.BPE.load(folder)
    return sum(len(d.encode()) for d in docs) / sum(len(x) for x in bpe.encode_batch(docs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocabs", default="16000,32000,64000")
    ap.add_argument("--transitions", default="0.8,0.9", help="transition sizes as fractions of the vocabulary")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mb", type=float, default=0, help="MB of training text (default: the whole corpus)")
    ap.add_argument("--held-out-mb", type=float, default=5)
    ap.add_argument("--repeat", type=int, default=1,
                    help="write the training text this many times over (a size beyond the corpus: the counting's "
                         "time and memory at that size; the distinct words and spans stay those of one copy)")
    ap.add_argument("--stages", action="store_true", help="also time each call into the core (superword runs)")
    ap.add_argument("--out-md", type=Path)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(json.loads(args.child))

    OUT.mkdir(parents=True, exist_ok=True)
    docs = corpus_docs("english", 1e9)
    held, size = [], 0
    while docs and size < args.held_out_mb * 1e6:
        held.append(docs.pop())
        size += len(held[-1].encode())
    if args.mb:
        keep, size = [], 0
        for d in docs:
            if size >= args.mb * 1e6:
                break
            keep.append(d)
            size += len(d.encode())
        docs = keep
    train = OUT / "train.txt"
    with open(train, "w", encoding="utf-8") as f:
        for k in range(args.repeat):
            f.write(EOT * (k > 0) + EOT.join(docs))
    train_mb = train.stat().st_size / 1e6
    vocabs = [int(v) for v in args.vocabs.split(",")]
    fracs = [float(f) for f in args.transitions.split(",")]
    rows, stages = [], []
    for vocab in vocabs:
        configs = [None] + [int(f * vocab) for f in fracs]
        results: dict = {c: [] for c in configs}
        for r in range(args.runs):
            for c in configs:
                save = OUT / f"v{vocab}-t{c}" if r == 0 else None
                spec = {"train": str(train), "vocab": vocab, "transition": c, "save": str(save) if save else None,
                        "stages": args.stages}
                results[c].append(run_child(spec))
                print(f"vocab {vocab} transition {c} run {r}: {results[c][-1]}", file=sys.stderr)
        plain_s = statistics.median(x["seconds"] for x in results[None])
        plain_bpt = bytes_per_token(OUT / f"v{vocab}-tNone", held)
        for c in configs:
            s = statistics.median(x["seconds"] for x in results[c])
            rss = statistics.median(x["rss_mib"] for x in results[c])
            bpt = bytes_per_token(OUT / f"v{vocab}-t{c}", held)
            # Paired: each round's run over the same round's plain run (the machine drifts between rounds).
            paired = sorted(x["seconds"] / p["seconds"] for x, p in zip(results[c], results[None]))
            rows.append((vocab, c, s, s / plain_s, paired, rss, bpt, plain_bpt / bpt))
            if c and args.stages:
                stages.append((vocab, c, s, stage_medians(results[c])))
    mid = vocabs[len(vocabs) // 2]
    keep = OUT / "tokenizer"
    if keep.exists():
        import shutil

        shutil.rmtree(keep)
    (OUT / f"v{mid}-t{int(fracs[0] * mid)}").rename(keep)

    m = machine_info()
    lines = [
        "# Superword training: hf_bpe superword_transition against plain BPE", "",
        f"Machine: {m['affinity']} CPUs, {m['cpu']}, {m['mem']}; Python {m['python']}; hf_bpe {git_state(ROOT)}.",
        f"Training text: {train_mb:.0f} MB of English books"
        f"{f', the books written {args.repeat} times over' if args.repeat > 1 else ''} (`train_files`, all cores, "
        f"a fresh process per run, median of {args.runs}); held out: the last {args.held_out_mb:g} MB of documents.",
        "",
        "x plain: the medians' ratio; paired: each round's ratio to the same round's plain run, median (min-max).",
        "",
        "| vocab | transition | seconds | x plain | paired | peak RSS MiB | held-out bytes/token | tokens vs plain |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for vocab, c, s, ratio, paired, rss, bpt, gain in rows:
        saved = f"{(1 - gain) * 100:.1f}% fewer" if c else "-"  # tokens ∝ 1 / (bytes per token)
        pair = f"{statistics.median(paired):.2f}x ({paired[0]:.2f}-{paired[-1]:.2f})" if c else "-"
        lines.append(f"| {vocab:,} | {'plain' if c is None else f'{c:,}'} | {s:.1f} | {ratio:.1f}x | {pair} | "
                     f"{rss:,.0f} | {bpt:.3f} | {saved} |")
    for vocab, c, total, med in stages:
        lines += ["", f"Stages of vocab {vocab:,}, transition {c:,} (calls into the core, median of {args.runs} runs; "
                  "cpu/wall above 1: both cores busy):", "", "| stage | seconds | cpu/wall |", "|---|---:|---:|"]
        for name, (wall, cpu) in med.items():
            lines.append(f"| {name} | {wall:.2f} | {cpu / wall if wall else 0:.2f} |")
        rest = total - sum(w for w, _ in med.values())
        lines.append(f"| the rest (Python: tokenizers built, arrays) | {rest:.2f} | |")
    publish("\n".join(lines) + "\n", args.out_md)


def stage_medians(runs: list[dict]) -> dict[str, tuple[float, float]]:
    """Per core call name (summed over its calls in a run, those under 10 ms left out), the
    median wall and CPU seconds over the runs, in the order of the first run."""
    per: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        sums: dict[str, list[float]] = {}
        for name, wall, cpu in run["stages"]:
            s = sums.setdefault(name, [0.0, 0.0])
            s[0] += wall
            s[1] += cpu
        for name, (wall, cpu) in sums.items():
            per.setdefault(name, []).append((wall, cpu))
    return {name: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
            for name, v in per.items() if statistics.median(w for w, _ in v) >= 0.01}


if __name__ == "__main__":
    main()
