#!/usr/bin/env python3
"""Id parity fuzzer: random text of every class through hf_bpe and the real peers.

    python scripts/fuzz_parity.py --texts 100000          # the adversarial run (minutes)
    python scripts/fuzz_parity.py --quick                 # a few hundred texts (the tests run this)

Texts are glued from pools of every class the patterns tell apart: ASCII words in both cases,
contractions in every case, digit runs, every kind of whitespace and `\\r\\n` runs, marks, ZWJ,
emoji, CJK, Cyrillic, Arabic, random code points of all planes, long runs of one char, and
slices of the real corpora in ../shared/data (when present). They go through
* r50k, cl100k and o200k from the rank files shipped in the package, against tiktoken (same files);
* the same vocabularies saved as tokenizer.json, against `tokenizers`;
* vocabularies trained here (one per pattern: the built-ins, and custom regexes with POSIX
  classes, \\w, \\b and anchors, which Oniguruma reads otherwise) and saved, against `tokenizers`
  and `transformers` (`PreTrainedTokenizerFast` on the saved file).
Every mismatch is classified: `unicode` when the text holds a code point whose class (\\p{L} and
its parts, \\p{N}, \\p{M}, \\s) differs between the `regex` module (which our scanners follow) and Rust's
regex tables (which tiktoken uses) — the documented caveat, detected per text, not assumed —
else `other`. Prints counts per (vocabulary, peer); exits 1 if any mismatch is `other`.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

from benchlib import CORPORA, ROOT, corpus_path, corpus_text

sys.path.insert(0, str(ROOT))
import hf_bpe  # noqa: E402
from hf_bpe import _core  # noqa: E402

POOLS = {
    "ascii": ["the", "The", "THE", "cat", "Zebra", "a", "I", "x"],
    "contraction": ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'m", "'M", "'ll", "'LL", "'d", "'D", "’s"],
    "digits": ["1", "12", "123", "1234", "12345678", "٣٤", "１２"],
    "space": [" ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c", "\u0085"],
    "punct": [".", ",", "!", "?", "...", "--", "/", "//", ";", "(", ")", "\"", "«", "»", "<", ">", "@", "#"],
    "mark": ["\u0301", "e\u0301", "\u0308", "\u20dd"],
    "zwj": ["\u200d", "👨\u200d👩", "\u200c"],
    "emoji": ["🙂", "🇫🇷", "👍🏽"],
    "script": ["日本語", "中文", "Привет", "мир", "مرحبا", "שלום", "नमस्ते", "ไทย", "한국어", "Ελλάδα"],
}


def random_codepoint(rng: random.Random) -> str:
    while True:
        plane = rng.choice([0, 0, 0, 1, 2, 14, 15])
        cp = plane << 16 | rng.randrange(0x10000)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def corpus_slices() -> list[str]:
    """2 MB of each shared corpus; without them (a user's clone), of the sample shipped in the package."""
    real = [corpus_text(name, 2_000_000) for name in CORPORA if corpus_path(name).exists()]
    if not real:
        import gzip

        with gzip.open(hf_bpe.sample_corpus(), "rt", encoding="utf-8") as f:
            real = [f.read(2_000_000)]
    return real


def make_text(rng: random.Random, real: list[str]) -> str:
    parts = []
    for _ in range(rng.randrange(1, 30)):
        r = rng.random()
        if r < 0.05:
            parts.append(random_codepoint(rng))
        elif r < 0.08:
            parts.append(rng.choice(rng.choice(list(POOLS.values()))) * rng.randrange(20, 300))
        elif r < 0.13 and real:
            src = rng.choice(real)
            i = rng.randrange(max(1, len(src) - 200))
            parts.append(src[i:i + rng.randrange(1, 200)])
        else:
            parts.append(rng.choice(POOLS[rng.choice(list(POOLS))]))
    return "".join(parts)


_caveat: dict[str, bool] = {}


def has_unicode_caveat(text: str) -> bool:
    """Whether `text` holds a code point whose class differs between `regex` and Rust's tables."""
    import regex

    for ch in set(text):
        if ch not in _caveat:
            diff = False
            for cls in (r"\p{L}", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{N}", r"\p{M}", r"\s"):
                ours = regex.fullmatch(cls, ch) is not None
                # (Through fancy-regex, which uses Rust's tables: an empty match before `ch`
                # cuts "\0" + ch in two exactly when ch is in the class.)
                rust = len(_core.pretokenize(f"(?={cls})", "\0" + ch)) == 2
                if ours != rust:
                    diff = True
            _caveat[ch] = diff
        if _caveat[ch]:
            return True
    return False


def peers(tmp: Path):
    """(name, our_encode, peer_encode) for every comparison that the installed packages allow."""
    import tiktoken
    from tokenizers import Tokenizer

    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import CL100K_PAT, O200K_PAT, R50K_PAT  # the patterns exactly as tiktoken writes them

    for name, pattern, pat in (("r50k", "gpt2", R50K_PAT), ("cl100k", "cl100k", CL100K_PAT), ("o200k", "o200k", O200K_PAT)):
        tables = hf_bpe.formats.read_published(f"{name}_base")  # the package's files (tiktoken's hashes)
        ours = hf_bpe.BPE.from_tables(tables._replace(special_tokens={}, vocab={
            i: t for i, t in tables.vocab.items() if i not in tables.special_tokens.values()}))
        assert ours.pattern == pattern
        ranks = {t: r for r, t in ours.vocab.items()}
        tik = tiktoken.Encoding(name, pat_str=pat, mergeable_ranks=ranks, special_tokens={})
        yield f"{name} vs tiktoken", ours.encode_ordinary, tik.encode_ordinary
        ours.save(tmp / name)
        tok = Tokenizer.from_file(str(tmp / name / "tokenizer.json"))
        yield f"{name} saved vs tokenizers", ours.encode_ordinary, lambda t, tok=tok: tok.encode(t, add_special_tokens=False).ids
    real = corpus_slices()
    if real:
        from transformers import PreTrainedTokenizerFast

        # the built-ins, and custom regexes whose constructs Oniguruma reads otherwise (written for it)
        for k, pattern in enumerate(("gpt2", "cl100k", "o200k", r"[[:alpha:]]+|[^[:alpha:]]+", r"\b\w+|\W+|\w+",
                                     r"^\s+|\s+$|\S+|\s")):
            bpe = hf_bpe.train([s[:300_000] for s in real], vocab_size=2000, pattern=pattern, progress=False)
            bpe.save(tmp / f"trained-{k}")
            file = str(tmp / f"trained-{k}" / "tokenizer.json")
            tok = Tokenizer.from_file(file)
            fast = PreTrainedTokenizerFast(tokenizer_file=file)
            # tokenizers always matches its added tokens (the corpora hold <|endoftext|>):
            # compare with every special allowed.
            ours = lambda t, bpe=bpe: bpe.encode(t, allowed_special="all")  # noqa: E731
            yield f"trained {pattern} vs tokenizers", ours, lambda t, tok=tok: tok.encode(t, add_special_tokens=False).ids
            yield f"trained {pattern} vs transformers", ours, lambda t, fast=fast: fast.encode(t, add_special_tokens=False)


def run(n: int, seed: int, show: int = 3) -> dict[str, Counter]:
    rng = random.Random(seed)
    real = corpus_slices()
    texts = [make_text(rng, real) for _ in range(n)]
    report: dict[str, Counter] = {}
    with tempfile.TemporaryDirectory() as d:
        for name, ours, theirs in peers(Path(d)):
            c = report.setdefault(name, Counter())
            for t in texts:
                c["texts"] += 1
                if ours(t) == theirs(t):
                    c["equal"] += 1
                elif has_unicode_caveat(t):
                    c["unicode"] += 1
                else:
                    c["other"] += 1
                    if c["other"] <= show:
                        print(f"  {name}: mismatch on {t[:120]!r}", file=sys.stderr)
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--texts", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="300 texts (what the tests run)")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = ap.parse_args()
    report = run(300 if args.quick else args.texts, args.seed)
    if args.json:
        print(json.dumps({k: dict(v) for k, v in report.items()}))
    else:
        print(f"{'comparison':34} {'texts':>8} {'equal':>8} {'unicode':>8} {'other':>8}")
        for k, v in report.items():
            print(f"{k:34} {v['texts']:8} {v['equal']:8} {v['unicode']:8} {v['other']:8}")
    return 1 if any(v["other"] for v in report.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
