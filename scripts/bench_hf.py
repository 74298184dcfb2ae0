"""The Hugging Face face against the engine and the peers: the calls users write, on rows of 100,
500 and 2,000 characters of each corpus, with the real GPT-2 vocabulary.

    PYTHONPATH=$PWD python scripts/bench_hf.py [--mb 1] [--runs 5] [--threads 1,2] [--lens 100,500,2000]

Each thread count runs in its own subprocess pinned to that many CPUs (``sched_setaffinity``,
``RAYON_NUM_THREADS``). Per (corpus, row length), timed in the same process on the same rows
(medians of ``--runs`` after one warm-up over the same rows: the **primed** cache state, every
word cached; see ``bench_encode.py`` for cold and warm), MB/s of UTF-8 text:
* ``flat``: ``bpe.encode_batch_flat(rows)`` (the engine); ``lists``: ``bpe.encode_batch(rows)``;
* ``tok``: ``tok(rows)``; ``tok np``: ``tok(rows, padding=True, return_tensors="np")``;
* ``map``: ``ds.map(tok, batched=True)`` (in-memory dataset, caching off, batch_size 1000);
* ``floor``: ``ds.map`` of a function returning precomputed columns of the same shape (numpy row
  views, what the Arrow path hands back; ``new_fingerprint`` given, so that datasets does not
  hash the precomputed ids the function holds): what ``datasets`` itself costs;
* ``fast map``: the same ``ds.map`` with transformers' ``GPT2TokenizerFast``; ``tiktoken map``:
  ``ds.map(lambda b: {"input_ids": enc.encode_ordinary_batch(b["text"])}, batched=True)``.
Ratios against the issue's targets are printed beside them.
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

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SEP = "\n<|endoftext|>\n"


def rows_of(name: str, max_bytes: int, length: int) -> list[str]:
    """The corpus cut into rows of about ``length`` characters, at line breaks or spaces."""
    with gzip.open(SHARED / "corpus" / f"{name}.txt.gz", "rb") as f:
        text = f.read(max_bytes).decode("utf-8", errors="ignore").replace(SEP, "\n\n")
    out, start = [], 0
    while start < len(text):
        end = start + length
        cut = max(text.rfind("\n", start + length // 2, end), text.rfind(" ", start + length // 2, end))
        end = len(text) if end >= len(text) else (cut + 1 if cut > start else end)
        out.append(text[start:end])
        start = end
    return out


def median_time(fn, runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def worker(a) -> None:
    import datasets
    import numpy as np
    import tiktoken
    from transformers import GPT2TokenizerFast

    import hf_bpe

    datasets.disable_progress_bars()
    datasets.disable_caching()
    tok = hf_bpe.BPETokenizer.from_pretrained(SHARED / "gpt2")
    bpe = tok.bpe
    fast = GPT2TokenizerFast.from_pretrained(SHARED / "gpt2")
    fast.pad_token = fast.eos_token
    tok.pad_token = tok.eos_token
    try:
        import tiktoken.load

        ranks = tiktoken.load.load_tiktoken_bpe(str(SHARED / "tiktoken" / "r50k_base.tiktoken"))
        enc = tiktoken.Encoding("r50k", pat_str=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""",
                                mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256})
    except Exception:  # noqa: BLE001 - the peer is optional
        enc = None
    out = []
    for name in a.corpora.split(","):
        for length in map(int, a.lens.split(",")):
            rows = rows_of(name, int(a.mb * 1e6), length)
            mb = sum(len(r.encode()) for r in rows) / 1e6
            ds = datasets.Dataset.from_dict({"text": rows})
            flat, off = bpe.encode_batch_flat(rows, allowed_special="all", disallowed_special=())
            ids = np.empty(len(rows), dtype=object)
            ids[:] = np.split(flat.view(np.int32), off[1:-1])
            mask = np.empty(len(rows), dtype=object)
            mask[:] = np.split(np.ones(len(flat), np.int8), off[1:-1])
            pre = {"input_ids": ids, "attention_mask": mask}
            check = ds.map(tok, batched=True)["input_ids"]
            assert check == fast(rows)["input_ids"], f"{name} {length}: ids differ from GPT2TokenizerFast"

            def floor(b, idx):
                return {k: v[idx[0]:idx[-1] + 1] for k, v in pre.items()}

            t = {
                "flat": median_time(lambda: bpe.encode_batch_flat(rows, allowed_special="all", disallowed_special=()), a.runs),
                "lists": median_time(lambda: bpe.encode_batch(rows, allowed_special="all", disallowed_special=()), a.runs),
                "tok": median_time(lambda: tok(rows), a.runs),
                "tok np": median_time(lambda: tok(rows, padding=True, return_tensors="np"), a.runs),
                "map": median_time(lambda: ds.map(tok, batched=True), a.runs),
                "floor": median_time(lambda: ds.map(floor, batched=True, with_indices=True, new_fingerprint="floor"), a.runs),
                "fast map": median_time(lambda: ds.map(fast, input_columns=["text"], batched=True), max(1, a.runs // 2)),
            }
            if enc is not None:
                t["tiktoken map"] = median_time(
                    lambda: ds.map(lambda b: {"input_ids": enc.encode_ordinary_batch(b["text"])}, batched=True),
                    max(1, a.runs // 2))
            out.append({"corpus": name, "len": length, "rows": len(rows), "mb": mb,
                        "rate": {k: mb / v for k, v in t.items()}})
            print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=1.0, help="MB of text per corpus")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--lens", default="100,500,2000")
    ap.add_argument("--corpora", default="english,code,multilingual")
    ap.add_argument("--worker", action="store_true")
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    results = {}
    for n in map(int, a.threads.split(",")):
        env = dict(os.environ, RAYON_NUM_THREADS=str(n), TOKENIZERS_PARALLELISM="true", OPENBLAS_NUM_THREADS="1")
        cpus = sorted(os.sched_getaffinity(0))[:n]
        cmd = [sys.executable, __file__, "--worker", "--mb", str(a.mb), "--runs", str(a.runs), "--lens", a.lens,
               "--corpora", a.corpora]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True,
                             preexec_fn=lambda c=cpus: os.sched_setaffinity(0, c))
        if res.returncode:
            sys.exit(res.stderr[-3000:])
        results[n] = json.loads(res.stdout.strip().splitlines()[-1])
    cols = ["flat", "lists", "tok", "tok np", "map", "floor", "fast map", "tiktoken map"]
    print(f"MB/s of text, median of {a.runs}; GPT-2 vocabulary; ds.map with batch_size 1000, in memory, no cache\n")
    print("| threads | corpus | row chars | " + " | ".join(cols)
          + " | map/flat (≥0.3 at 2,000) | map/fast map (≥20 at 2,000) | map/floor (≥0.7 at 100) | tok/lists (≥0.8) | tok np/flat (≥0.5) |")
    print("|" + "---|" * (3 + len(cols) + 5))
    for n, rs in results.items():
        for r in rs:
            x = r["rate"]
            cells = [f"{x[c]:.1f}" if c in x else "–" for c in cols]
            ratios = [x["map"] / x["flat"], x["map"] / x["fast map"], x["map"] / x["floor"], x["tok"] / x["lists"],
                      x["tok np"] / x["flat"]]
            print(f"| {n} | {r['corpus']} | {r['len']} | " + " | ".join(cells) + " | "
                  + " | ".join(f"{v:.2f}" for v in ratios) + " |")


if __name__ == "__main__":
    main()
