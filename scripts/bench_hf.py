"""Throughput of hf_bpe's BPETokenizer vs transformers' GPT2Tokenizer (the `tokenizers` Rust
backend) on the same real GPT-2 vocabulary and the same documents.

    PYTHONPATH=$PWD python scripts/bench_hf.py [--mb 2] [--runs 5]

Measures `tok(batch)` (no padding) and `ds.map(tok, batched=True)` (in-memory dataset, no cache
file) on english / code / multilingual documents from ../shared/data/corpus, plus
`ds.with_format("arrow").map(hf_bpe.map_fn(tok), batched=True)`. Prints medians and a markdown table.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import time
from pathlib import Path

import datasets
from transformers import GPT2Tokenizer

import hf_bpe

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SEP = "\n<|endoftext|>\n"


def docs(name: str, max_bytes: int, chunk: int = 0) -> list[str]:
    """Whole documents, or (chunk > 0) the documents cut into pieces of about `chunk` characters
    at line breaks (the corpora hold whole books, so this gives paragraph-sized rows)."""
    with gzip.open(SHARED / "corpus" / f"{name}.txt.gz", "rb") as f:
        text = f.read(max_bytes).decode("utf-8", errors="ignore")
    out = [d for d in text.split(SEP)[:-1] if d]
    if chunk:
        pieces = []
        for d in out:
            start = 0
            while start < len(d):
                end = d.find("\n", start + chunk)
                end = len(d) if end < 0 else end + 1
                pieces.append(d[start:end])
                start = end
        out = pieces
    return out


def median_time(fn, runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=2.0, help="MB of text per corpus")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--chunk", type=int, default=0, help="cut documents into ~N-character rows (0: whole documents)")
    a = ap.parse_args()
    datasets.disable_progress_bars()
    datasets.disable_caching()
    ours = hf_bpe.BPETokenizer.from_pretrained(SHARED / "gpt2")
    ref = GPT2Tokenizer.from_pretrained(SHARED / "gpt2")
    rows = []
    for name in ("english", "code", "multilingual"):
        d = docs(name, int(a.mb * 1e6), a.chunk)
        mb = sum(len(x.encode()) for x in d) / 1e6
        assert ours(d)["input_ids"] == ref(d)["input_ids"], f"{name}: ids differ"
        ntok = sum(map(len, ref(d)["input_ids"]))
        ds = datasets.Dataset.from_dict({"text": d})
        fn = hf_bpe.map_fn(ours)
        res = {
            "call_ours": median_time(lambda: ours(d), a.runs),
            "call_ref": median_time(lambda: ref(d), a.runs),
            "map_ours": median_time(lambda: ds.map(ours, batched=True, batch_size=a.batch_size), a.runs),
            "map_ref": median_time(lambda: ds.map(lambda b: ref(b["text"]), batched=True, batch_size=a.batch_size), a.runs),
            "map_arrow": median_time(lambda: ds.with_format("arrow").map(fn, batched=True, batch_size=a.batch_size), a.runs),
        }
        rows.append((name, len(d), mb, ntok, res))
        print(name, {k: f"{v * 1e3:.0f} ms" for k, v in res.items()}, flush=True)
    print()
    print(f"{a.runs} runs each, medians; rows={'whole documents' if not a.chunk else f'~{a.chunk}-char chunks'}; batch_size={a.batch_size} for map; M tok/s (ratio vs GPT2Tokenizer)\n")
    print("| corpus | docs | MB | tokens | tok(batch) ours | tok(batch) GPT2Tokenizer | ratio "
          "| ds.map ours | ds.map GPT2Tokenizer | ratio | ds.map map_fn (arrow) | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, n, mb, ntok, r in rows:
        def rate(k):
            return f"{ntok / r[k] / 1e6:.2f}"
        print(f"| {name} | {n} | {mb:.1f} | {ntok} | {rate('call_ours')} | {rate('call_ref')} | "
              f"{r['call_ref'] / r['call_ours']:.2f}x | {rate('map_ours')} | {rate('map_ref')} | "
              f"{r['map_ref'] / r['map_ours']:.2f}x | {rate('map_arrow')} | {r['map_ref'] / r['map_arrow']:.2f}x |")


if __name__ == "__main__":
    main()
