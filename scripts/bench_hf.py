"""The Hugging Face face against the engine and the peers: the calls users write, on rows of 100,
500 and 2,000 characters of each corpus, with the real GPT-2 vocabulary.

    PYTHONPATH=$PWD python scripts/bench_hf.py [--mb 1] [--runs 5] [--threads 1,2] [--lens 100,500,2000]
                                               [--states cold,warm,primed]

Each thread count runs in its own subprocess pinned to that many CPUs (``sched_setaffinity``,
``RAYON_NUM_THREADS``). Per (corpus, row length), the rows are cut in two halves of the corpus
text; every figure times the second half, in three cache states (medians of ``--runs``, each run
with a fresh word cache for every tool that has one): **cold** (nothing seen), **warm** (after the
first half: other documents of the corpus), **primed** (after the same rows: every word cached).
MB/s of UTF-8 text:
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
import json
import sys

from benchlib import DATA, SEP, child_json, corpus_text, median_time, pin, thread_env, tiktoken_from_ranks


def rows_of(name: str, max_bytes: int, length: int) -> list[str]:
    """The corpus cut into rows of about ``length`` characters, at line breaks or spaces."""
    text = corpus_text(name, max_bytes).replace(SEP, "\n\n")
    out, start = [], 0
    while start < len(text):
        end = start + length
        cut = max(text.rfind("\n", start + length // 2, end), text.rfind(" ", start + length // 2, end))
        end = len(text) if end >= len(text) else (cut + 1 if cut > start else end)
        out.append(text[start:end])
        start = end
    return out


def worker(a) -> None:
    import datasets
    import numpy as np
    from transformers import GPT2TokenizerFast

    import hf_bpe

    datasets.disable_progress_bars()
    datasets.disable_caching()
    tok = hf_bpe.BPETokenizer.from_pretrained(DATA / "gpt2")
    bpe = tok.bpe
    fast = GPT2TokenizerFast.from_pretrained(DATA / "gpt2")
    fast.pad_token = fast.eos_token
    tok.pad_token = tok.eos_token
    try:
        r50k = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
        enc = tiktoken_from_ranks(DATA / "tiktoken" / "r50k_base.tiktoken", r50k, {"<|endoftext|>": 50256}, name="r50k")
    except Exception:  # noqa: BLE001 - the peer is optional
        enc = None
    peer: dict = {}

    def fresh() -> None:  # new word caches: ours rebuilt from its state, the peer's reloaded
        bpe.cache_bytes = bpe.cache_bytes
        peer["fast"] = GPT2TokenizerFast.from_pretrained(DATA / "gpt2")

    out = []
    for name in a.corpora.split(","):
        for length in map(int, a.lens.split(",")):
            both = rows_of(name, int(2 * a.mb * 1e6), length)
            other, rows = both[:len(both) // 2], both[len(both) // 2:]
            mb = sum(len(r.encode()) for r in rows) / 1e6
            ds, ds_other = datasets.Dataset.from_dict({"text": rows}), datasets.Dataset.from_dict({"text": other})
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

            calls = {  # name: (the call on some rows or their dataset, runs)
                "flat": (lambda r, d: bpe.encode_batch_flat(r, allowed_special="all", disallowed_special=()), a.runs),
                "lists": (lambda r, d: bpe.encode_batch(r, allowed_special="all", disallowed_special=()), a.runs),
                "tok": (lambda r, d: tok(r), a.runs),
                "tok np": (lambda r, d: tok(r, padding=True, return_tensors="np"), a.runs),
                "map": (lambda r, d: d.map(tok, batched=True), a.runs),
                "fast map": (lambda r, d: d.map(peer["fast"], input_columns=["text"], batched=True), max(1, a.runs // 2)),
            }
            if enc is not None:
                calls["tiktoken map"] = (lambda r, d: d.map(lambda b: {"input_ids": enc.encode_ordinary_batch(b["text"])},
                                                            batched=True), max(1, a.runs // 2))
            for state in a.states.split(","):
                warm_rows = {"cold": None, "warm": (other, ds_other), "primed": (rows, ds)}[state]

                def before(f) -> None:  # fresh caches, then the cache state
                    fresh()
                    if warm_rows is not None:
                        f(*warm_rows)
                t = {k: median_time(lambda f=f: f(rows, ds), n, before=lambda f=f: before(f))
                     for k, (f, n) in calls.items()}
                t["floor"] = median_time(lambda: ds.map(floor, batched=True, with_indices=True, new_fingerprint="floor"),
                                         a.runs)
                out.append({"corpus": name, "len": length, "state": state, "rows": len(rows), "mb": mb,
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
    ap.add_argument("--states", default="cold,warm,primed")
    ap.add_argument("--worker", action="store_true")
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    results = {}
    for n in map(int, a.threads.split(",")):
        cmd = [sys.executable, __file__, "--worker", "--mb", str(a.mb), "--runs", str(a.runs), "--lens", a.lens,
               "--corpora", a.corpora, "--states", a.states]
        results[n] = child_json(cmd, f"the {n}-thread worker", env=thread_env(n, tokenizers_parallelism=True),
                                preexec_fn=lambda n=n: pin(n))
    cols = ["flat", "lists", "tok", "tok np", "map", "floor", "fast map", "tiktoken map"]
    print(f"MB/s of text, median of {a.runs}; GPT-2 vocabulary; ds.map with batch_size 1000, in memory, no cache\n")
    print("| threads | corpus | row chars | state | " + " | ".join(cols)
          + " | map/flat (≥0.3 at 2,000) | map/fast map (≥20 at 2,000) | map/floor (≥0.7 at 100) | tok/lists (≥0.8) | tok np/flat (≥0.5) |")
    print("|" + "---|" * (4 + len(cols) + 5))
    for n, rs in results.items():
        for r in rs:
            x = r["rate"]
            cells = [f"{x[c]:.1f}" if c in x else "–" for c in cols]
            ratios = [x["map"] / x["flat"], x["map"] / x["fast map"], x["map"] / x["floor"], x["tok"] / x["lists"],
                      x["tok np"] / x["flat"]]
            print(f"| {n} | {r['corpus']} | {r['len']} | {r['state']} | " + " | ".join(cells) + " | "
                  + " | ".join(f"{v:.2f}" for v in ratios) + " |")


if __name__ == "__main__":
    main()
