#!/usr/bin/env python3
"""Fuzzes the hand-written scanners against the `regex` module, for a given time.

Texts are runs drawn per character class (ASCII and non-ASCII whitespace, CR/LF, letters of
both cases and other scripts, marks, digits and other numbers, punctuation, `/`, apostrophes with
contraction suffixes in any case, `'ſ`), 60-300 bytes, each tried behind prefixes of 0-63 bytes
so that every part lands at every offset of a 64-byte window (the scanners' block path). Each
text is split by `_core.pretokenize` and by `regex.findall` with the same pattern, for gpt2,
cl100k and o200k; the first differing piece of each failure is printed.

Usage: python scripts/fuzz_pretokenize.py [--seconds 60] [--seed 1] [--ascii]
(`scripts/dev_build.sh` first, or an installed package.) The pytest suite covers the same ground
with hypothesis (`tests/test_pretokenize.py`); this runs millions of cases when the scanners change.
"""
import argparse
import random
import sys
import time
from pathlib import Path

import regex

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hf_bpe import _core  # noqa: E402

NAMES = ["gpt2", "cl100k", "o200k"]
CLASSES = {
    "space": " \t\x0b\x0c", "crlf": "\r\n", "ws_non_ascii": "\xa0\u3000\u2028\x85\u2029\u1680\u2009",
    "lower": "abcdefghijklmnopqrstuvwxyz", "upper": "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "digit": "0123456789",
    "punct": "!\"#$%&()*+,-.:;<=>?@[\\]^_`{|}~", "apos": "'", "slash": "/",
    "other_non_ascii": "\u2018\u2019\u201c\u201d\u2014\u00a9\u20ac\U0001f600",
    "letter_non_ascii": "\u00e9\u00c9\u00fc\u00df\u03a9\u03c9\u01c5\u02b0\u00aa\u4e2d\u6587\u3042\u30a2\u017f",
    "mark": "\u0301\u0308\u0903", "number_non_ascii": "\u0663\u00b2\u00bd\u216b\u2460\U0001d7d8",
}
ASCII_ONLY = ["space", "crlf", "lower", "upper", "digit", "punct", "apos", "slash"]
SUFFIXES = ["s", "t", "re", "ve", "m", "ll", "d", "S", "T", "RE", "Re", "rE", "VE", "M", "LL", "lL", "D", "\u017f"]


def make_text(rng: random.Random, classes: list[str], size: int) -> str:
    parts, n = [], 0
    while n < size:
        c = rng.choice(classes)
        if c == "apos" and rng.random() < 0.6:
            part = "'" + rng.choice(SUFFIXES)
        else:
            k = rng.choice([1, 1, 1, 2, 2, 3, 4, 5, 6, 8, rng.randint(1, 70)])
            part = "".join(rng.choice(CLASSES[c]) for _ in range(k))
        parts.append(part)
        n += len(part.encode())
    return "".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ascii", action="store_true", help="ASCII classes only")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    classes = ASCII_ONLY if args.ascii else list(CLASSES)
    pats = {n: regex.compile(_core.pattern_source(n)) for n in NAMES}
    t0, checks, fails = time.time(), 0, 0
    while time.time() - t0 < args.seconds:
        text = make_text(rng, classes, rng.randint(60, 300))
        for off in range(0, 64, rng.choice([1, 2, 5])):
            t = "x" * off + text
            for n in NAMES:
                got, want = _core.pretokenize(n, t), pats[n].findall(t)
                checks += 1
                if got != want:
                    fails += 1
                    k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                    print(f"FAIL {n} {t!r}\n  ours : {got[max(0, k - 2):k + 3]!r}\n  regex: {want[max(0, k - 2):k + 3]!r}")
                    if fails >= 20:
                        return 1
    print(f"{checks} checks in {time.time() - t0:.0f} s, {fails} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
