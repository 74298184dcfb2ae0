#!/usr/bin/env python3
"""Pre-tokenization throughput: our scanners vs `regex.findall` vs fancy-regex.

Single thread, MB/s of UTF-8 input, median of several runs, on a slice of each corpus.
* ours        `_core.count_pieces(name, text)` (the hand-written scanner; no Python strings)
* fancy-regex `_core.count_pieces("(?:" + source + ")", text)`: the same regex through our
              Custom path (wrapping it in a group keeps it from being recognised as built-in)
* regex       `regex.findall(source, text)` (the reference, builds the list of str)
Also `ours+list`: `_core.pretokenize(name, text)`, i.e. including building Python strings.

Timing uses the calling thread's CPU time by default (`time.thread_time`; our scanner runs
on the calling thread with the GIL released), which keeps the figures meaningful on a busy
machine; `--clock wall` uses `time.perf_counter` instead.

Usage: python scripts/bench_pretokenize.py [--mb 8] [--runs 5] [--clock thread|wall]
"""
import argparse
import sys
import time

import regex

from benchlib import CORPORA, ROOT, corpus_text, median_time

sys.path.insert(0, str(ROOT))
from hf_bpe import _core  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=8.0, help="MB of each corpus (prefix)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--slow-runs", type=int, default=3, help="runs for regex/fancy-regex")
    ap.add_argument("--clock", choices=["thread", "wall"], default="thread")
    args = ap.parse_args()
    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    rows = []
    for corpus in CORPORA:
        text = corpus_text(corpus, int(args.mb * 1e6))
        nbytes = len(text.encode("utf-8")) / 1e6
        for name in ["gpt2", "cl100k", "o200k"]:
            src = _core.pattern_source(name)
            rx = regex.compile(src)
            n_ours = _core.count_pieces(name, text)
            n_fancy = _core.count_pieces("(?:" + src + ")", text)
            t_ours = median_time(lambda: _core.count_pieces(name, text), args.runs, clock=clock)
            t_list = median_time(lambda: _core.pretokenize(name, text), args.slow_runs, clock=clock)
            t_fancy = median_time(lambda: _core.count_pieces("(?:" + src + ")", text), args.slow_runs, clock=clock)
            t_re = median_time(lambda: rx.findall(text), args.slow_runs, clock=clock)
            note = "" if n_ours == n_fancy else f" (fancy-regex pieces differ: {n_fancy} vs {n_ours})"
            rows.append((corpus, name, nbytes / t_ours, nbytes / t_list, nbytes / t_fancy, nbytes / t_re, note))
            print(f"  {corpus:12} {name:7} done", file=sys.stderr)
    print(f"\n{args.mb:g} MB prefix of each corpus, single thread, {args.clock} clock, median of {args.runs} (ours) / {args.slow_runs} runs, MB/s\n")
    print("| corpus | pattern | ours | ours+list | fancy-regex | regex.findall | ours / fancy |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for c, p, o, ol, fr, rx, note in rows:
        print(f"| {c} | {p} | {o:.0f} | {ol:.0f} | {fr:.1f} | {rx:.1f} | {o / fr:.1f}x{note} |")


if __name__ == "__main__":
    main()
