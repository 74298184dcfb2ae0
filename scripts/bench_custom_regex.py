#!/usr/bin/env python3
"""Custom `pattern=` regexes: encoding and training throughput, before/after/peer in one run.

Encodes the English, code and multilingual corpora (the first `--mb` MB of each, cut into 10 kB
texts) with cl100k's ranks and a custom regex, with 1 and 2 threads, through:
* `before`  an hf_bpe build given by `--before DIR` (a directory holding `hf_bpe/` built from
            an older commit, e.g. the fancy-regex engine: `git archive f9cc526 | tar -x -C DIR`
            then `scripts/dev_build.sh` there);
* `after`   this checkout's build (`_core.pattern_engine` says which engine it picked);
* `tiktoken` with the same ranks and regex (fancy-regex inside);
* `builtin` this checkout with the built-in `cl100k` scanner, for reference (regex-independent).
Each (tool, regex) runs in its own process: one warm-up call per corpus and thread count, then
`--runs` timed calls; the median is kept, in MB/s of wall time and MB per CPU second (process
CPU, all threads). Tools alternate for `--rounds` rounds; the table shows the median round.
Then training (count + merges, `hf_bpe.train`, 2,000 tokens on the first 4 MB of English) with
a custom regex, before and after, medians of `--runs`.

Usage: python scripts/bench_custom_regex.py --before /tmp/before [--rounds 3] [--runs 3] [--mb 8]
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
CL100K = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
O200K = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n/]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+"])
REGEXES = {
    "gpt2 N{1,2}": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}{1,2}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    "cl100k N{1,2}": CL100K.replace(r"\p{N}{1,3}+", r"\p{N}{1,2}+"),
    "o200k (?:..)": f"(?:{O200K})",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "deepseek-v3": r"\p{N}{1,3}|[一-龥぀-ゟ゠-ヿ]+|[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+|.",
}
CORPORA = ("english", "code", "multilingual")

CHILD = r"""
import base64, gzip, json, statistics, sys, time
tool, root, data, regex, mb, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), int(sys.argv[6])
sys.path.insert(0, root)
path = f"{data}/tiktoken/cl100k_base.tiktoken"
if tool == "tiktoken":
    import tiktoken
    ranks = {base64.b64decode(t): int(r) for t, r in (l.split() for l in open(path, "rb").read().splitlines() if l)}
    enc = tiktoken.Encoding("bench", pat_str=regex, mergeable_ranks=ranks, special_tokens={})
    call = lambda docs, n: enc.encode_ordinary_batch(docs, num_threads=n)
    engine = "fancy-regex"
else:
    import hf_bpe
    from hf_bpe import _core
    pat = "cl100k" if tool == "builtin" else regex
    bpe = hf_bpe.BPE.from_tiktoken(path, pattern=pat)
    call = lambda docs, n: bpe.encode_batch_flat(docs, num_threads=n, disallowed_special=())
    engine = _core.pattern_engine(pat) if hasattr(_core, "pattern_engine") else "fancy-regex"
res = {"engine": engine}
for corpus in ("english", "code", "multilingual"):
    raw = gzip.open(f"{data}/corpus/{corpus}.txt.gz", "rb").read(int(mb * 1e6))
    text = raw.decode("utf-8", "ignore")
    docs = [text[i:i + 10_000] for i in range(0, len(text), 10_000)]
    for n in (1, 2):
        call(docs, n)
        wall, cpu = [], []
        for _ in range(runs):
            t, c = time.perf_counter(), time.process_time()
            call(docs, n)
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        res[f"{corpus} {n}"] = (len(raw) / statistics.median(wall) / 1e6, len(raw) / statistics.median(cpu) / 1e6)
print(json.dumps(res))
"""

TRAIN = r"""
import gzip, json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import hf_bpe
raw = gzip.open(f"{sys.argv[2]}/corpus/english.txt.gz", "rb").read(4_000_000).decode("utf-8", "ignore")
docs = raw.split("\n<|endoftext|>\n")
times = []
for _ in range(int(sys.argv[4])):
    t = time.perf_counter()
    hf_bpe.train(docs, vocab_size=2_000, pattern=sys.argv[3], progress=False, num_threads=1)
    times.append(time.perf_counter() - t)
print(json.dumps(statistics.median(times)))
"""


def run(code: str, *args) -> object:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="directory holding the older build's hf_bpe/")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mb", type=float, default=8)
    ap.add_argument("--only", default="", help="semicolon-separated regex names")
    args = ap.parse_args()
    roots = {"before": args.before, "after": str(REPO), "tiktoken": str(REPO), "builtin": str(REPO)}
    names = [n for n in REGEXES if not args.only or n in args.only.split(";")]
    results: dict = {}
    for _ in range(args.rounds):
        for name in names:
            for tool in ("before", "after", "tiktoken"):
                r = run(CHILD, tool, roots[tool], DATA, REGEXES[name], args.mb, args.runs)
                results.setdefault((name, tool), []).append(r)
        results.setdefault(("(cl100k scanner)", "builtin"), []).append(
            run(CHILD, "builtin", REPO, DATA, "", args.mb, args.runs))
    keys = [f"{c} {n}" for c in CORPORA for n in (1, 2)]
    print(f"cl100k ranks, {args.mb:g} MB per corpus, 10 kB texts; median of {args.rounds} rounds of median-of-{args.runs}.")
    print("MB/s wall (MB per CPU second)\n")
    print("| regex | tool | engine | " + " | ".join(k.replace(" 1", " 1T").replace(" 2", " 2T") for k in keys) + " |")
    print("|---" * (3 + len(keys)) + "|")
    for (name, tool), rs in results.items():
        cells = []
        for k in keys:
            w = statistics.median(r[k][0] for r in rs)
            c = statistics.median(r[k][1] for r in rs)
            cells.append(f"{w:.1f} ({c:.1f})")
        print(f"| {name} | {tool} | {rs[0]['engine']} | " + " | ".join(cells) + " |")
    print("\nTraining (hf_bpe.train, 2,000 tokens, 4 MB English, 1 thread), seconds, median:\n")
    print("| regex | before | after |\n|---|---|---|")
    for name in names:
        b = run(TRAIN, args.before, DATA, REGEXES[name], args.runs)
        a = run(TRAIN, REPO, DATA, REGEXES[name], args.runs)
        print(f"| {name} | {b:.2f} | {a:.2f} |")


if __name__ == "__main__":
    main()
