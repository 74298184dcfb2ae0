"""The layout guide of docs/architecture.md, kept true: every Rust source file stays at most 600
lines (generated files and test modules aside) and its module doc at most 40 lines."""
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
GENERATED = {"unicode_tables.rs"}  # written by scripts/gen_unicode_tables.py
MAX_LINES = 600
MAX_DOC_LINES = 40


def _test_only_files() -> set[Path]:
    """Files that are a `#[cfg(test)] mod name;` of their parent module."""
    out = set()
    for f in SRC.rglob("*.rs"):
        text = f.read_text()
        for m in re.finditer(r"#\[cfg\(test\)\]\s*mod (\w+);", text):
            base = f.parent if f.name in ("mod.rs", "lib.rs") else f.parent / f.stem
            out.add(base / f"{m.group(1)}.rs")
    return out


def code_lines(text: str) -> int:
    """Lines before an inline `#[cfg(test)] mod ... {` block (always last in a file here)."""
    m = re.search(r"^#\[cfg\(test\)\]\s*\nmod \w+ \{", text, flags=re.M)
    return text[: m.start()].count("\n") if m else text.count("\n")


def doc_lines(text: str) -> int:
    """`//!` lines at the top of a file (blank lines between them do not end the doc)."""
    n = 0
    for line in text.splitlines():
        if line.startswith("//!"):
            n += 1
        elif line.strip():
            break
    return n


FILES = sorted(p for p in SRC.rglob("*.rs") if p.name not in GENERATED and p not in _test_only_files())


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_rust_file_within_the_guide(path: Path):
    text = path.read_text()
    assert code_lines(text) <= MAX_LINES, f"{path.relative_to(SRC.parent)} has {code_lines(text)} lines (guide: {MAX_LINES})"
    assert doc_lines(text) <= MAX_DOC_LINES, (
        f"{path.relative_to(SRC.parent)}: module doc of {doc_lines(text)} lines (guide: {MAX_DOC_LINES}); "
        "history and figures belong in docs/performance.md")


def test_the_checks_would_fail():
    """The measures themselves: a long file and a long doc are caught."""
    long = "//! a\n" * 20 + "\n" + "//! b\n" * 21 + "fn f() {}\n" * 700 + "#[cfg(test)]\nmod tests {\n" + "x\n" * 50 + "}\n"
    assert doc_lines(long) == 41
    assert code_lines(long) == 742
    assert code_lines("fn f() {}\n#[cfg(test)]\nmod tests {\n}\n") == 1
