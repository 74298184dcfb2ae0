#!/usr/bin/env python3
"""Parity-aware training benchmark: fairness and cost on held-out sentence pairs, and speed against
HF ``tokenizers``' ``ParityBpeTrainer`` on the same task, in one run.

    scripts/dev_build.sh
    PYTHONPATH=$PWD python scripts/bench_parity.py --vocabs 8000,16000,32000 --runs 3 \\
        --out-md bench_out/parity.md

What is measured
  Tatoeba pairs of 112 languages with English (``../shared/data/parallel``), split per language:
  the first ``--train`` share of each language's pairs is its corpus (the English sides of all of
  them are the English corpus), the next ``--dev`` share its dev pairs, the rest is held out.
  *Fairness*: each language's premium on the held-out pairs (its tokens over its English
  translations' tokens), the Gini coefficient of the premiums, and the total tokens of the
  held-out pairs (both sides), for classical BPE (``hf_bpe.train`` on all corpora together) and
  for ``train_parity`` in several settings.
  *Speed*: ``train_parity(tie_break="hf")`` against ``ParityBpeTrainer`` given the same corpora and
  the same dev texts per language (the first ``--hf-dev-lines`` of each, at most the fewest any
  language has; ``tokenizers`` takes
  only raw dev totals, so the dev texts are passed as parallel texts to both); merges checked
  equal; seconds per call in this process (all cores), runs interleaved, medians.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import statistics
import time
from pathlib import Path

from benchlib import DATA, ROOT, git_state, machine_info, package_version, publish

PAIRS = DATA / "parallel" / "tatoeba-eng.jsonl.gz"


def split(train: float, dev: float):
    by = collections.defaultdict(list)
    with gzip.open(PAIRS, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            by[r["lang"]].append((r["text"], r["eng"]))
    cut = {lang: (int(len(v) * train), int(len(v) * (train + dev))) for lang, v in by.items()}
    corpora = {lang: [t for t, _ in v[:cut[lang][0]]] for lang, v in by.items()}
    corpora["eng"] = [e for lang, v in by.items() for _, e in v[:cut[lang][0]]]
    dev_pairs = {lang: v[cut[lang][0]:cut[lang][1]] for lang, v in by.items()}
    held = {lang: v[cut[lang][1]:] for lang, v in by.items()}
    return corpora, dev_pairs, held


def fairness(bpe, held) -> tuple[float, int, float]:
    from hf_bpe.tools.report import gini

    premiums, total = [], 0
    for rows in held.values():
        t = sum(map(len, bpe.encode_batch([r[0] for r in rows])))
        e = sum(map(len, bpe.encode_batch([r[1] for r in rows])))
        premiums.append(t / e)
        total += t + e
    worst = max(premiums)
    return gini(premiums), total, worst


def hf_parity(corpora, parallel, merges: int):
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import ParityBpeTrainer

    tok = Tokenizer(BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = ParityBpeTrainer(num_merges=merges, special_tokens=["<|endoftext|>"], show_progress=False,
                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    langs = list(corpora)
    trainer.train_from_iterator(tok, train_iterators=[corpora[lang] for lang in langs],
                                dev_iterators=[parallel[lang] for lang in langs])
    return tok


def main() -> None:
    import hf_bpe
    from hf_bpe.formats.alphabet import str_to_token

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocabs", default="8000,16000,32000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--train", type=float, default=0.8, help="share of each language's pairs to train on")
    ap.add_argument("--dev", type=float, default=0.1, help="share of each language's pairs for the dev set")
    ap.add_argument("--hf-dev-lines", type=int, default=20)
    ap.add_argument("--out-md", type=Path)
    args = ap.parse_args()

    corpora, dev_pairs, held = split(args.train, args.dev)
    train_mb = sum(len(t.encode()) for v in corpora.values() for t in v) / 1e6
    settings = [("base", 0, 2.0), ("window", 0, 2.0), ("base", 0.4, 2.0), ("window", 0.4, 2.0), ("window", 0.4, 3.0),
                ("window", 0.5, 4.0)]
    fair_rows, speed_rows = [], []
    for vocab in [int(v) for v in args.vocabs.split(",")]:
        plain = hf_bpe.train([t for v in corpora.values() for t in v], vocab, progress=False)
        g0, t0, w0 = fairness(plain, held)
        fair_rows.append((vocab, "classical BPE", g0, g0, t0, t0, w0))
        for variant, share, alpha in settings:
            gm = int(share * (vocab - 257))
            bpe = hf_bpe.train_parity(corpora, vocab, dev_pairs, variant=variant, global_merges=gm, alpha=alpha,
                                      progress=False)
            g, t, w = fairness(bpe, held)
            name = f"{variant}, global {share:.0%}" + (f", alpha {alpha:g}" if variant == "window" else "")
            fair_rows.append((vocab, name, g, g0, t, t0, w))
            print(f"vocab {vocab} {name}: gini {g:.3f} ({g0:.3f}), tokens {t / t0:.3f}x", flush=True)

        lines_ = min([args.hf_dev_lines] + [len(v) for v in dev_pairs.values()])
        parallel = {lang: [t for t, _ in v[:lines_]] for lang, v in dev_pairs.items()}
        parallel["eng"] = [e for _, e in next(iter(dev_pairs.values()))[:lines_]]
        ours_s, hf_s = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            ours = hf_bpe.train_parity(corpora, vocab, parallel, tie_break="hf", progress=False)
            ours_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            tok = hf_parity(corpora, parallel, vocab - 257)
            hf_s.append(time.perf_counter() - t)
        theirs = [tuple(str_to_token(x) for x in m) for m in json.loads(tok.to_str())["model"]["merges"]]
        if theirs != ours.merges:
            raise SystemExit(f"vocab {vocab}: merges differ from ParityBpeTrainer's")
        o, h = statistics.median(ours_s), statistics.median(hf_s)
        speed_rows.append((vocab, len(ours.merges), o, h))
        print(f"vocab {vocab}: hf_bpe {o:.2f} s, ParityBpeTrainer {h:.2f} s", flush=True)

    m = machine_info()
    langs = len(held)
    lines = [
        "# Parity-aware training: hf_bpe.train_parity against classical BPE and tokenizers' ParityBpeTrainer", "",
        f"Machine: {m['affinity']} CPUs, {m['cpu']}, {m['mem']}; Python {m['python']}; hf_bpe {git_state(ROOT)}; "
        f"tokenizers {package_version('tokenizers')}.",
        f"Data: Tatoeba pairs of {langs} languages with English; per language {args.train:.0%} to train "
        f"({train_mb:.1f} MB in all, English sides included), {args.dev:.0%} dev pairs, the rest held out.", "",
        "## Fairness on held-out pairs", "",
        "Premium: a language's tokens over its English translations' tokens. Tokens: both sides of every "
        "held-out pair.", "",
        "| vocab | training | Gini of premiums | vs classical | worst premium | held-out tokens | vs classical |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for vocab, name, g, g0, t, t0, w in fair_rows:
        lines.append(f"| {vocab:,} | {name} | {g:.3f} | {(g / g0 - 1) * 100:+.0f}% | {w:.2f} | {t:,} | "
                     f"{t / t0:.3f}x |")
    lines += ["", "## Speed against ParityBpeTrainer (same merges, checked)", "",
              f"Same corpora; dev: the first {lines_} dev sentences per language as parallel texts; "
              f"seconds per call, median of {args.runs}, all cores.", "",
              "| vocab | merges | hf_bpe s | ParityBpeTrainer s | speed-up |", "|---:|---:|---:|---:|---:|"]
    for vocab, n, o, h in speed_rows:
        lines.append(f"| {vocab:,} | {n:,} | {o:.2f} | {h:.2f} | {h / o:.1f}x |")
    publish("\n".join(lines) + "\n", args.out_md)


if __name__ == "__main__":
    main()
