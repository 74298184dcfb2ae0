#!/usr/bin/env python3
"""Released models' tokenizer.json files against `tokenizers`, on whole corpora (not in CI:
`tokenizers` encodes these at a few MB/s here).

    python scripts/parity_model_files.py                  # every file, every corpus, whole
    python scripts/parity_model_files.py --mb 20 --only phi-2

For each file in ../shared/data/hf-tokenizers/ and each corpus, documents are encoded by
`BPE.load(file).encode_batch(docs, allowed_special="all")` and by
`tokenizers.Tokenizer.from_file(file).encode_batch(docs, add_special_tokens=False)`; prints the
documents compared, those that differ (with the first difference), and both speeds. Exits 1 on
any difference.
"""
from __future__ import annotations

import argparse
import sys
import time

from benchlib import CORPORA, DATA, ROOT, SEP, corpus_text

sys.path.insert(0, str(ROOT))
from hf_bpe import BPE  # noqa: E402


def docs_of(name: str, mb: float | None) -> list[str]:
    return [d for d in corpus_text(name, int(mb * 2**20) if mb else -1).split(SEP) if d]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=None, help="MiB of each corpus (default: all)")
    ap.add_argument("--only", default=None, help="one model folder name")
    args = ap.parse_args()
    import tokenizers

    bad = 0
    for folder in sorted((DATA / "hf-tokenizers").iterdir()):
        if not folder.is_dir() or (args.only and folder.name != args.only):
            continue
        path = folder / "tokenizer.json"
        bpe, ref = BPE.load(path), tokenizers.Tokenizer.from_file(str(path))
        for corpus in CORPORA:
            docs = docs_of(corpus, args.mb)
            size = sum(len(d.encode()) for d in docs) / 1e6
            t = time.perf_counter()
            ours = bpe.encode_batch(docs, allowed_special="all")
            t_ours = time.perf_counter() - t
            t = time.perf_counter()
            theirs = [e.ids for e in ref.encode_batch(docs, add_special_tokens=False)]
            t_ref = time.perf_counter() - t
            diff = [k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b]
            bad += len(diff)
            print(f"{folder.name:18} {corpus:12} {len(docs):6} docs {size:7.1f} MB  differ: {len(diff):4}  "
                  f"hf_bpe {size / t_ours:7.1f} MB/s  tokenizers {size / t_ref:6.1f} MB/s", flush=True)
            for k in diff[:2]:
                a, b = ours[k], theirs[k]
                i = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                print(f"    doc {k}: at id {i}: ours {a[i:i + 8]} tokenizers {b[i:i + 8]}  "
                      f"text {bpe.decode(b[max(0, i - 3):i + 5])!r}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
