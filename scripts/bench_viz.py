"""Latency of the viz page's slider: one /api/encode per slider position, 10 kB of text.

    PYTHONPATH=$PWD python scripts/bench_viz.py [--tokenizer ../shared/data/gpt2] [--updates 200]

Reports p50/p95 of the whole HTTP round trip (what the page waits for) with the first k merges,
k drawn at random, and with all merges; the target is p95 <= 50 ms.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import time
import urllib.request

import hf_bpe
from benchlib import DATA, corpus_path
from hf_bpe.tools import viz


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=str(DATA / "gpt2"))
    ap.add_argument("--corpus", default=str(corpus_path("english")))
    ap.add_argument("--bytes", type=int, default=10_000)
    ap.add_argument("--updates", type=int, default=200)
    a = ap.parse_args()
    with gzip.open(a.corpus, "rt", encoding="utf-8") as f:
        f.read(1_000_000)
        text = f.read(a.bytes)
    bpe = hf_bpe.BPE.load(a.tokenizer)
    srv = viz.serve(bpe, open_browser=False, block=False)
    url = f"http://127.0.0.1:{srv.server_address[1]}/api/encode"
    rng = random.Random(0)
    n = len(bpe.merges)

    def once(k: int | None) -> float:
        body = json.dumps({"name": "tokenizer", "text": text, "merges": k}).encode()
        t = time.perf_counter()
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as r:
            r.read()
        return (time.perf_counter() - t) * 1000

    once(None)
    for label, pick in (("first k merges (k random)", lambda: rng.randint(0, n - 1)), ("all merges", lambda: None)):
        ms = sorted(once(pick()) for _ in range(a.updates))
        p95 = ms[int(0.95 * (len(ms) - 1))]
        print(f"{label:28} {len(text.encode()):,} bytes: p50 {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms"
              f" over {a.updates} updates")
    srv.shutdown()


if __name__ == "__main__":
    main()
