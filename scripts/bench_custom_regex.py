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
import statistics
import sys
from pathlib import Path

from benchlib import CORPORA, DATA, ROOT, child_json

SCRIPTS = Path(__file__).resolve().parent
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

CHILD = r"""
import json, statistics, sys
tool, root, data, regex, mb, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), int(sys.argv[6])
sys.path[:0] = [root, sys.argv[7]]
from benchlib import CORPORA, chunks, corpus_text, tiktoken_from_ranks, wall_and_cpu
path = f"{data}/tiktoken/cl100k_base.tiktoken"
if tool == "tiktoken":
    enc = tiktoken_from_ranks(path, regex)
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
for corpus in CORPORA:
    text = corpus_text(corpus, int(mb * 1e6), data)
    size, docs = len(text.encode()), chunks(text)
    for n in (1, 2):
        call(docs, n)
        wall, cpu = wall_and_cpu(lambda: call(docs, n), runs)
        res[f"{corpus} {n}"] = (size / statistics.median(wall) / 1e6, size / statistics.median(cpu) / 1e6)
print(json.dumps(res))
"""

TRAIN = r"""
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[5]]
import hf_bpe
from benchlib import SEP, corpus_text, median_time
docs = corpus_text("english", 4_000_000, sys.argv[2]).split(SEP)
train = lambda: hf_bpe.train(docs, vocab_size=2_000, pattern=sys.argv[3], progress=False, num_threads=1)
print(json.dumps(median_time(train, int(sys.argv[4]))))
"""


def run(code: str, *args) -> object:
    """Runs a child (CHILD or TRAIN) with ``args`` and benchlib's folder last; returns its JSON."""
    return child_json([sys.executable, "-c", code, *map(str, args), SCRIPTS], f"child {args[0]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="directory holding the older build's hf_bpe/")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mb", type=float, default=8)
    ap.add_argument("--only", default="", help="semicolon-separated regex names")
    args = ap.parse_args()
    roots = {"before": args.before, "after": str(ROOT), "tiktoken": str(ROOT), "builtin": str(ROOT)}
    names = [n for n in REGEXES if not args.only or n in args.only.split(";")]
    results: dict = {}
    for _ in range(args.rounds):
        for name in names:
            for tool in ("before", "after", "tiktoken"):
                r = run(CHILD, tool, roots[tool], DATA, REGEXES[name], args.mb, args.runs)
                results.setdefault((name, tool), []).append(r)
        results.setdefault(("(cl100k scanner)", "builtin"), []).append(
            run(CHILD, "builtin", ROOT, DATA, "", args.mb, args.runs))
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
        a = run(TRAIN, ROOT, DATA, REGEXES[name], args.runs)
        print(f"| {name} | {b:.2f} | {a:.2f} |")


if __name__ == "__main__":
    main()
