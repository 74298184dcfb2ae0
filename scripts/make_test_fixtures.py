"""Builds the small test fixtures of ``tests/fixtures`` from the shared data beside the checkout, so
that a user's clone (which has no ``../shared``) runs the parity suites and the model-file tests:

* ``corpus/code.txt.gz`` — whole source files from the start of the Python (PSF-2.0), Go
  (BSD-3-Clause), Rust (MIT OR Apache-2.0) and JavaScript (MIT) parts of ``corpus/code.txt.gz``,
  up to 200 kB of each (files under 40 kB); the C part (LGPL) is left out;
* ``corpus/multilingual.txt.gz`` — the first 4,000 characters (whole lines) of each of the 112
  Tatoeba documents (CC BY 2.0 FR) and the first 8,000 of each of the 22 CLDR annotation
  documents (Unicode-DFS-2016) of ``corpus/multilingual.txt.gz``; the manual pages (GPL) are left out;
* ``hf-tokenizers/<model>/<file>.xz`` — the released models' files, byte for byte (xz).

Deterministic: run twice, the same bytes (``gzip`` without a time stamp). Usage:
``python scripts/make_test_fixtures.py [--shared ../shared/data] [--check]`` (``--check`` fails
if the committed fixtures differ from what the shared data gives).
"""

from __future__ import annotations

import argparse
import gzip
import io
import lzma
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures"
SEP = "\n<|endoftext|>\n"
# The parts of code.txt.gz by document index (see its SOURCES.md: Python, C, Go, Rust, JavaScript).
CODE_PARTS = {"python": (0, 540), "go": (1026, 1407), "rust": (1407, 1739), "javascript": (1739, 2186)}
TATOEBA, CLDR = 112, 22  # the first and last documents of multilingual.txt.gz


def _docs(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().split(SEP)


def _head(doc: str, chars: int) -> str:
    cut = doc[:chars]
    return cut[: cut.rfind("\n")] if len(doc) > chars and "\n" in cut else cut


def _gz(text: str) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9, mtime=0, filename="") as f:
        f.write(text.encode("utf-8"))
    return buf.getvalue()


def fixtures(shared: Path) -> dict[str, bytes]:
    out = {}
    code = _docs(shared / "corpus" / "code.txt.gz")
    picked = []
    for start, end in CODE_PARTS.values():
        size = 0
        for d in code[start:end]:
            if len(d) < 40_000 and size < 200_000:
                picked.append(d)
                size += len(d)
    out["corpus/code.txt.gz"] = _gz(SEP.join(picked))
    multi = _docs(shared / "corpus" / "multilingual.txt.gz")
    docs = [_head(d, 4_000) for d in multi[:TATOEBA]] + [_head(d, 8_000) for d in multi[-CLDR:]]
    out["corpus/multilingual.txt.gz"] = _gz(SEP.join(docs))
    for f in sorted((shared / "hf-tokenizers").glob("*/*.json")):
        out[f"hf-tokenizers/{f.parent.name}/{f.name}.xz"] = lzma.compress(f.read_bytes(), preset=9 | lzma.PRESET_EXTREME)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--check", action="store_true", help="compare with the committed fixtures, write nothing")
    args = ap.parse_args()
    made = fixtures(args.shared)
    if args.check:
        bad = [n for n, b in made.items() if not (OUT / n).exists() or (OUT / n).read_bytes() != b]
        print("fixtures differ: " + ", ".join(bad) if bad else f"{len(made)} fixtures up to date")
        return 1 if bad else 0
    for name, data in made.items():
        (OUT / name).parent.mkdir(parents=True, exist_ok=True)
        (OUT / name).write_bytes(data)
        print(f"{name}: {len(data):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
