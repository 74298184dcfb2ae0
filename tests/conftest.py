"""Shared fixtures. The big real-world data lives in ``../shared/data`` beside the repository:
tests that need it skip with a clear reason in a fresh clone that lacks it (CI has it)."""

from __future__ import annotations

import functools
import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# The pre-tokenization regexes as written in tiktoken 0.14.0 (listed in ../shared/data/README.md),
# kept here as text on purpose rather than read back from the extension.
GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
R50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
CL100K_PAT = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
SHARED = REPO.parent / "shared" / "data"
SEP = "\n<|endoftext|>\n"


def shared_data() -> Path:
    """``../shared/data`` or a skip (a user's fresh clone has no shared data)."""
    if not SHARED.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"{SHARED} is missing in CI: the shared data must be beside the checkout")
        pytest.skip(f"{SHARED} not found: real corpora and vocabularies live beside the repo (fresh clone)",
                    allow_module_level=True)
    return SHARED


def corpus_docs(name: str, max_bytes: int) -> list[str]:
    """Whole documents from the start of ``corpus/<name>.txt.gz``, about ``max_bytes`` in all."""
    path = shared_data() / "corpus" / f"{name}.txt.gz"
    with gzip.open(path, "rb") as f:
        raw = f.read(max_bytes + 200_000)
    text = raw.decode("utf-8", errors="ignore")
    docs = text.split(SEP)
    out, size = [], 0
    for d in docs[:-1] if len(docs) > 1 else docs:
        out.append(d)
        size += len(d)
        if size >= max_bytes:
            break
    if not out:
        out = [text[:max_bytes]]
    return out


def corpus_slice(name: str, max_bytes: int, offset: int = 0) -> str:
    """``max_bytes`` of text (cut at a character boundary) from ``corpus/<name>.txt.gz``."""
    path = shared_data() / "corpus" / f"{name}.txt.gz"
    with gzip.open(path, "rb") as f:
        if offset:
            f.read(offset)
        raw = f.read(max_bytes)
    return raw.decode("utf-8", errors="ignore")


# Big files of one script: one line repeated, written a reader's block at a time (the tests of
# reading files in blocks, of peak memory and of a killed encode_file).
READ_BLOCK = 2 << 20  # the reader's block (src/corpus/read.rs BLOCK_BYTES)
SCRIPT_LINES = {
    "cjk": "日本語の文章はスペースを使わずに書かれ、句読点で区切られる。東京都は人口が多い都市です\n",
    "cyrillic": "Съешь же ещё этих мягких французских булок, да выпей чаю. Пример текста номер 42\n",
    "indented": "                if value is not None and count > limit:\n                    return compute(value, 1)\n",
}


def script_file(tmp_path: Path, kind: str, mb: int) -> Path:
    """``SCRIPT_LINES[kind]`` repeated to about ``mb`` MB (``mb // 2`` blocks), in ``tmp_path``."""
    path = tmp_path / f"{kind}-{mb}.txt"
    line = SCRIPT_LINES[kind]
    block = (line * (READ_BLOCK // len(line.encode()) + 1))
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(mb // 2):
            f.write(block)
    return path


@pytest.fixture
def gpt2_dir() -> Path:
    return shared_data() / "gpt2"


@functools.cache
def tokenizers_unstable_chars() -> frozenset[str]:
    """The characters that `tokenizers`' older Unicode tables treat differently from Python's
    (and ours) in the components the tests import: 73 whose NFC/NFD/NFKC/NFKD decompositions
    came in Unicode 12-14 (U+32FF, U+A7F2.., U+10781.., U+1FBF0..), and about a hundred
    punctuation marks its `Punctuation` pre-tokenizer does not know (U+11660.., U+10F55..). Both
    are the README's Unicode caveat, not differences to find again."""
    import unicodedata

    from tokenizers import normalizers
    from tokenizers import pre_tokenizers

    forms = {f: getattr(normalizers, f)() for f in ("NFC", "NFD", "NFKC", "NFKD")}
    assigned = [chr(cp) for cp in range(0x110000) if unicodedata.category(chr(cp)) not in ("Cn", "Cs")]
    out = set()
    for c in assigned:
        if unicodedata.normalize("NFKD", c) != c and any(unicodedata.normalize(f, c) != n.normalize_str(c) for f, n in forms.items()):
            out.add(c)
    # Punctuation as tokenizers isolates it, vs general category P* or ASCII punctuation.
    others = [c for c in assigned if c != "a"]
    pieces = pre_tokenizers.Punctuation().pre_tokenize_str("a" + "a".join(others) + "a")
    theirs = {p for p, _ in pieces if len(p) == 1 and p != "a"}
    ours = {c for c in others if unicodedata.category(c).startswith("P") or (c.isascii() and c.isprintable() and not c.isalnum() and c != " ")}
    return frozenset(out | (theirs ^ ours))


def peer_stable_chars():
    """A hypothesis strategy of characters whose Unicode classes all engines agree on.

    Our scanners classify code points as the ``regex`` module does (Unicode 17); tiktoken's
    regex engine and tokenizers' Oniguruma ship older Unicode data, so on letters assigned
    since then, and on U+0295 (Lo in Unicode 17, Ll before), their splits differ from the
    ``regex`` module's and from ours. Id-parity tests against those peers therefore draw from
    code points that Python's own (older) Unicode database already assigns, minus U+0295.
    Scanner tests compare with the ``regex`` module over all code points.
    """
    import unicodedata

    from hypothesis import strategies as st

    return st.characters(blacklist_categories=("Cs", "Cn")).filter(
        lambda c: unicodedata.category(c) != "Cn" and c != "\u0295")


def peer_python(name: str, requirement: str) -> Path:
    """The interpreter of a virtual environment of its own with ``requirement`` installed and without
    hf_bpe (a peer version that cannot live beside ours), made once in the test cache
    (``HF_BPE_TEST_CACHE``, default ``~/.cache/hf_bpe-tests``). Without network the test skips; in CI
    it fails."""
    cache = Path(os.environ.get("HF_BPE_TEST_CACHE", Path.home() / ".cache" / "hf_bpe-tests"))
    venv = cache / f"venv-{name}"
    python = venv / "bin" / "python"
    if (venv / "ready").exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
    run = subprocess.run([str(python), "-m", "pip", "install", "-q", requirement], capture_output=True, text=True,
                         timeout=900)
    if run.returncode != 0:
        why = (run.stderr.strip().splitlines() or [f"pip exited with {run.returncode}"])[-1]
        if os.environ.get("CI"):
            pytest.fail(f"could not install {requirement}: {why}")
        pytest.skip(f"{requirement} could not be installed ({why}): no network?")
    (venv / "ready").write_text(requirement)
    return python


# The files that take minutes (parity grids against the peers, transformers' own suite, a Ray
# cluster, Chromium, fresh virtual environments, the Rust unit tests): `pytest -m "not slow"` is
# the quick loop; CI runs everything.
SLOW_FILES = frozenset({
    "test_transformers_suite.py", "test_transformers4.py", "test_tokenizers1.py", "test_hf.py", "test_hf_methods.py",
    "test_extend.py", "test_rust_units.py", "test_distributed.py", "test_model_files.py", "test_tiktoken_export.py",
    "test_encoder_core.py", "test_model_patterns.py", "test_custom_regex.py", "test_fuzz_parity.py",
    "test_viz_browser.py", "test_readme.py",
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
