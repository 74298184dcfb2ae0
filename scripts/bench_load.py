"""Time to load a published encoding and encode once, in a fresh process: hf_bpe's
``get_encoding`` (the rank files shipped in the package) against tiktoken's (the same files, put
in its cache under the names it downloads them to, so no network), median of ``--runs``.

    python scripts/bench_load.py [--runs 5]
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import os
import statistics
import subprocess
import sys
import tempfile
from importlib import resources

URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
NAMES = ["r50k_base", "cl100k_base", "o200k_base"]
CODE = ("import time; t = time.perf_counter(); import {mod}; e = {mod}.get_encoding({name!r}); "
        "e.encode('hello world'); print(time.perf_counter() - t)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        for name in NAMES:
            data = lzma.decompress((resources.files("hf_bpe") / "data" / f"{name}.tiktoken.xz").read_bytes())
            with open(os.path.join(cache, hashlib.sha1(URL.format(name).encode()).hexdigest()), "wb") as f:
                f.write(data)
        env = dict(os.environ, TIKTOKEN_CACHE_DIR=cache)
        print("| encoding | hf_bpe s | tiktoken s | ratio |\n|---|---:|---:|---:|")
        for name in NAMES:
            med = {}
            for mod in ("hf_bpe", "tiktoken"):
                times = [float(subprocess.run([sys.executable, "-c", CODE.format(mod=mod, name=name)], env=env,
                                              capture_output=True, text=True, check=True).stdout)
                         for _ in range(args.runs)]
                med[mod] = statistics.median(times)
            print(f"| {name} | {med['hf_bpe']:.3f} | {med['tiktoken']:.3f} | {med['hf_bpe'] / med['tiktoken']:.2f}x |")


if __name__ == "__main__":
    main()
