"""The layout guide of docs/architecture.md, kept true. Python: wings that import one way only
(formats < bpe < training < hf < tools), no import cycle (imports inside functions count), small
modules, the adapter on public names. Rust: every source file at most 600 lines (generated files
and test modules aside) and its module doc at most 40 lines."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hf_bpe
from hf_bpe import BPE

# ---- Python package -------------------------------------------------------------------------

PKG = Path(hf_bpe.__file__).resolve().parent

# What each wing may import of hf_bpe (besides itself, `_core`, and the leaves `progress` and `reference`).
ALLOWED = {
    "formats": set(),
    "encoding_api": {"formats"},  # tiktoken's Encoding methods, which BPE has
    "bpe": {"formats", "encoding_api"},
    "registry": {"formats", "bpe"},  # tiktoken's entry points over BPE
    "training": {"formats", "bpe"},
    "hf": {"formats", "bpe", "training"},
    "distributed": {"formats", "bpe", "training", "hf"},
    "tools": {"formats", "bpe", "training", "hf", "distributed", ""},
    "": {"formats", "encoding_api", "bpe", "registry", "training", "hf"},  # hf_bpe/__init__.py
}
LEAVES = {"_core", "progress", "reference"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _imports(name: str, path: Path) -> set[str]:
    """The hf_bpe modules ``name`` imports anywhere in its code (functions included), but not
    under ``if TYPE_CHECKING:``."""
    mods = _modules()
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", "") == "TYPE_CHECKING" for n in ast.walk(node)}
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("hf_bpe")}
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = ["hf_bpe"] + (pkg.split(".") if pkg else [])
                mod = ".".join(base[:len(base) - node.level + 1] + ([mod] if mod else []))
            if mod.startswith("hf_bpe"):  # `from X import y`: the module X.y, else X
                found |= {f"{mod}.{a.name}" if f"{mod}.{a.name}".removeprefix("hf_bpe").lstrip(".") in mods
                          or a.name == "_core" else mod for a in node.names}
    return {m.removeprefix("hf_bpe").lstrip(".") for m in found} & (set(mods) | {"_core"}) - {name}


def _graph() -> dict[str, set[str]]:
    return {name: _imports(name, path) for name, path in _modules().items()}


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}

    def visit(m: str, trail: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if d in ("", "_core"):  # the package (every module's parent, imported first) and the extension
                continue
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(trail + [m, d]))
            if d not in state:
                visit(d, trail + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_wings_import_one_way():
    for name, deps in _graph().items():
        wing = "tools" if name == "__main__" else name.split(".")[0]  # (`python -m hf_bpe` is the CLI)
        for d in deps:
            target = d.split(".")[0]
            if target in LEAVES or target == wing:
                continue
            assert target in ALLOWED[wing], f"hf_bpe.{name} imports hf_bpe.{d}: {wing or 'the package'} may not"


def test_formats_never_import_bpe():
    for name, deps in _graph().items():
        if name.startswith("formats"):
            assert not {d for d in deps if d.split(".")[0] not in ("formats", "_core", "reference")}, name


def test_bpe_does_not_import_its_adapter():
    code = ("import sys, hf_bpe.bpe, hf_bpe.formats, hf_bpe.training; "
            "print(sorted(m for m in sys.modules if m in ('hf_bpe.hf.tokenizer', 'transformers', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == "[]"
    assert not hasattr(BPE, "to_transformers")


def test_map_fn_does_not_import_transformers():
    code = "import sys, hf_bpe; hf_bpe.map_fn; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == "False"


def test_adapter_uses_public_names_of_bpe_and_formats():
    for path in sorted((PKG / "hf").glob("*.py")) + [PKG / "tools" / "cli.py"]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in ("hf_bpe.bpe", "hf_bpe.formats"):
                assert all(not a.name.startswith("_") for a in node.names), f"{path.name}:{node.lineno}"
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = node.value
                owner = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
                assert owner not in ("bpe", "formats", "BPE"), f"{path.name}:{node.lineno}: {owner}.{node.attr}"


def test_python_modules_stay_small():
    for path in sorted(PKG.rglob("*.py")):
        lines = path.read_text().splitlines()
        assert len(lines) <= 400, f"{path.relative_to(PKG)} has {len(lines)} lines (the guide: at most ~400)"
        long = [n for n, line in enumerate(lines, 1) if len(line) > 120]
        assert not long, f"{path.relative_to(PKG)}: lines {long[:5]} are over 120 characters"


def test_public_names_import_as_before():
    import hf_bpe.distributed
    import hf_bpe.reference

    for name in ("BPE", "train", "train_files", "train_from_counts", "count", "count_files", "WordCounts", "extend",
                 "FormatError", "sample_corpus"):
        assert getattr(hf_bpe, name) is not None
    assert callable(hf_bpe.distributed.count_files) and callable(hf_bpe.reference.encode_word_reference)


# ---- Rust sources ---------------------------------------------------------------------------

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
