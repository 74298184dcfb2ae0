"""Memory of encoding: what a fresh ``BPE`` holds, and what a long run grows to.

    scripts/dev_build.sh
    PYTHONPATH=$PWD python scripts/bench_memory_encode.py [--mb 200] [--cache-mib 256]

Each vocabulary (GPT-2, o200k_base) in its own process: the resident set (RSS, from
/proc/self/status) after ``import hf_bpe``, after loading (the encoder's tables), after one short
``encode`` (a cache slot's first table: a copy of the seed tokens), then while encoding
``--mb`` MB of the corpora (English, code, multilingual in turn, 1 MB batches, all cores),
with ``cache_info()["bytes"]`` (what the word cache charges against ``cache_bytes``) and the
kept output buffers. The cache must stay within ``cache_bytes``; the script fails if not.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys

from benchlib import CORPORA, DATA, ROOT, SEP, child_json, corpus_path, status_kib


def rss_mib() -> float:
    return status_kib("VmRSS") / 1024


def batches(mb: float, size: int = 1 << 20):
    """Lists of documents of about ``size`` bytes, from the three corpora in turn, read 8 MB at
    a time (so the script's own text stays small next to what it measures)."""
    left = mb * 1e6
    while True:
        for name in CORPORA:
            with gzip.open(corpus_path(name), "rt", encoding="utf-8") as f:
                while left > 0 and (chunk := f.read(8_000_000)):
                    docs = chunk.split(SEP)
                    for k in range(0, len(docs), 64):
                        part = docs[k:k + 64]
                        yield part
                        left -= sum(map(len, part))
            if left <= 0:
                return


def worker(vocab: str, mb: float, cache_mib: int) -> dict:
    base = rss_mib()
    import hf_bpe

    imported = rss_mib()
    budget = cache_mib << 20
    if vocab == "gpt2":
        bpe = hf_bpe.BPE.load(DATA / "gpt2", cache_bytes=budget)
    else:
        bpe = hf_bpe.BPE.from_tiktoken(DATA / "tiktoken" / "o200k_base.tiktoken", pattern="o200k", cache_bytes=budget)
    bpe.encode("warm up the tables")  # (the encoder is built on first use)
    bpe.clear_cache()
    loaded = rss_mib()
    bpe.encode("Hello, world! A first sentence.")
    first = rss_mib()
    peak_cache, done, trace = 0, 0, []
    for docs in batches(mb):
        bpe.encode_batch_flat(docs)
        done += sum(len(d) for d in docs)
        info = bpe.cache_info()
        peak_cache = max(peak_cache, info["bytes"])
        if info["bytes"] > budget:
            raise SystemExit(f"cache {info['bytes']} bytes > cache_bytes {budget}")
        if len(trace) < int(done / 25e6):
            trace.append((round(done / 1e6), round(rss_mib()), round(info["bytes"] / 2**20)))
    info = bpe.cache_info()
    return {"vocab": vocab, "python": round(base), "import": round(imported - base), "loaded": round(loaded - imported),
            "first_encode": round(first - loaded), "after_run": round(rss_mib()), "cache_peak_mib": round(peak_cache / 2**20),
            "kept_output_mib": round(info["kept_output_bytes"] / 2**20), "mb": mb, "trace": trace}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--cache-mib", type=int, default=256)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.mb, args.cache_mib)))
        return
    print(f"| vocab | import hf_bpe | + load | + first encode | after {args.mb:g} MB (RSS) | cache peak (cache_bytes {args.cache_mib} MiB) | kept output buffers |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for vocab in ("gpt2", "o200k"):
        cmd = [sys.executable, __file__, "--worker", vocab, "--mb", str(args.mb), "--cache-mib", str(args.cache_mib)]
        r = child_json(cmd, f"the {vocab} worker", cwd=ROOT)
        print(f"| {vocab} | {r['import']} MiB | {r['loaded']} MiB | {r['first_encode']} MiB | {r['after_run']} MiB | "
              f"{r['cache_peak_mib']} MiB | {r['kept_output_mib']} MiB |")
        print(f"<!-- {vocab} (MB encoded, RSS MiB, cache MiB): {r['trace']} -->")


if __name__ == "__main__":
    main()
