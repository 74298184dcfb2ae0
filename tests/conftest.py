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


FIXTURES = REPO / "tests" / "fixtures"


def corpus_path(name: str) -> Path:
    """``corpus/<name>.txt.gz`` of ``../shared/data``; without it (a user's clone), English is the
    sample corpus shipped in the package (8.8 MB of the same books), code and multilingual text
    the small slices of ``tests/fixtures/corpus`` (0.8 and 1 MB)."""
    if not SHARED.is_dir() and not os.environ.get("CI"):
        if name == "english":
            import hf_bpe

            return Path(hf_bpe.sample_corpus())
        if (FIXTURES / "corpus" / f"{name}.txt.gz").exists():
            return FIXTURES / "corpus" / f"{name}.txt.gz"
    return shared_data() / "corpus" / f"{name}.txt.gz"


# The released models' files (tests/fixtures/hf-tokenizers, xz): the sha256 of each as released.
MODEL_SHA256 = {
    "olmo-2-dolma2/tokenizer.json": "3ca996cca8afea58b34e95c353e859333592642a5e51d695d7a6dbbaf692dfe9",
    "gpt-neox-20b/tokenizer.json": "56ac4821e129d2c520fdaba60abd920fa852ada51b45c0dd52bbb6bd8c985ade",
    "phi-2/tokenizer.json": "337da36be7a71a6e88aa9148967a7bc8736f4b47c7de8e19ba92b89e80734cfc",
    "phi-2/tokenizer_config.json": "1906c7514a738bd743a05d7d95c8e9aeddb4d8c9ffdda4fb6ee05653fb6b97c4",
    "whisper-large-v3/tokenizer.json": "6d8cbd7cd0d8d5815e478dac67b85a26bbe77c1f5e0c6d76d1ce2abc0e5f21ca",
    "whisper-large-v3/tokenizer_config.json": "844b642c73a91359722f47b35705f7174686df33d252695d8572cf9ac03a6389",
}


@functools.cache
def model_files() -> Path:
    """A folder of the released models' tokenizer files (``<model>/tokenizer.json``, ...),
    unpacked from ``tests/fixtures/hf-tokenizers`` into the test cache, each checked against
    the sha256 of the released file: the same bytes as ``../shared/data/hf-tokenizers``."""
    import hashlib
    import lzma

    out = Path(os.environ.get("HF_BPE_TEST_CACHE", Path.home() / ".cache" / "hf_bpe-tests")) / "hf-tokenizers"
    for name, want in MODEL_SHA256.items():
        target = out / name
        if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == want:
            continue
        data = lzma.decompress((FIXTURES / "hf-tokenizers" / f"{name}.xz").read_bytes())
        assert hashlib.sha256(data).hexdigest() == want, f"tests/fixtures/hf-tokenizers/{name}.xz is damaged"
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    return out


def corpus_docs(name: str, max_bytes: int) -> list[str]:
    """Whole documents from the start of ``corpus/<name>.txt.gz``, about ``max_bytes`` in all."""
    path = corpus_path(name)
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
    """``max_bytes`` of text (cut at a character boundary) from ``corpus/<name>.txt.gz`` (from the
    start of a small stand-in of a user's clone, whatever the ``offset``)."""
    path = corpus_path(name)
    offset = offset if path.parent == SHARED / "corpus" else 0
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


# OpenAI's published files and the sha256 tiktoken 0.14.0 pins for their downloads
# (`tiktoken_ext/openai_public.py`): facts to check the files the package ships against.
OPENAI_SHA256 = {
    "r50k_base.tiktoken": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    "p50k_base.tiktoken": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    "cl100k_base.tiktoken": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base.tiktoken": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "gpt2/merges.txt": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",  # vocab.bpe
    "gpt2/vocab.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",  # encoder.json
}


@functools.cache
def openai_files() -> Path:
    """OpenAI's files rebuilt from the three rank files in the package, in a folder of the test
    cache, each checked byte for byte against tiktoken's pinned sha256: ``r50k_base``,
    ``p50k_base`` (r50k + the space runs 2..25), ``cl100k_base``, ``o200k_base`` ``.tiktoken`` and
    GPT-2's ``gpt2/vocab.json`` + ``gpt2/merges.txt`` (GPT-2's ranks, written here in OpenAI's
    layout), with the ``tokenizer.json`` of the same. So the tests of GPT-2/r50k/cl100k/o200k need
    no ``../shared``."""
    import base64
    import hashlib
    import json
    import lzma
    from importlib.resources import files

    from hf_bpe.formats import bytes_to_unicode

    out = Path(os.environ.get("HF_BPE_TEST_CACHE", Path.home() / ".cache" / "hf_bpe-tests")) / "openai"
    (out / "gpt2").mkdir(parents=True, exist_ok=True)
    data = {n: lzma.decompress((files("hf_bpe") / "data" / f"{n}.xz").read_bytes())
            for n in ("r50k_base.tiktoken", "cl100k_base.tiktoken", "o200k_base.tiktoken")}
    data["p50k_base.tiktoken"] = data["r50k_base.tiktoken"] + b"".join(
        base64.b64encode(b" " * n) + b" %d\n" % (50255 + n) for n in range(2, 26))
    ranks = sorted(((base64.b64decode(t), int(r)) for t, r in
                    (line.split() for line in data["r50k_base.tiktoken"].splitlines())), key=lambda x: x[1])
    alphabet = bytes_to_unicode()
    spell = {t: "".join(alphabet[b] for b in t) for t, _ in ranks}
    vocab = {spell[t]: r for t, r in ranks} | {"<|endoftext|>": 50256}
    data["gpt2/vocab.json"] = json.dumps(vocab, separators=(", ", ": ")).encode()
    merges, rank_of = [], dict(ranks)
    for t, r in ranks[256:]:  # GPT-2's merge r makes token 256 + r, from the two tokens of lower rank
        parts = [t[i:i + 1] for i in range(len(t))]
        while len(parts) > 2:  # tiktoken's rule with the tokens below r: the lowest-ranked join first
            joins = [rank_of.get(parts[k] + parts[k + 1], r) for k in range(len(parts) - 1)]
            i = joins.index(min(joins))
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        merges.append(f"{spell[parts[0]]} {spell[parts[1]]}\n")
    data["gpt2/merges.txt"] = ("#version: 0.2\n" + "".join(merges)).encode()
    for name, content in data.items():
        got = hashlib.sha256(content).hexdigest()
        assert got == OPENAI_SHA256[name], f"{name} rebuilt from the package is not OpenAI's file ({got})"
    # GPT-2 in tokenizers' format, as released models ship it (its JSON equals ../shared's copy: tested)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}
    data["gpt2/tokenizer.json"] = json.dumps({
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 50256, "special": True, "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": True}],
        "normalizer": None, "pre_tokenizer": byte_level,
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True},
        "model": {"dropout": None, "unk_token": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "vocab": vocab, "merges": [m[:-1] for m in merges]}}, ensure_ascii=False).encode()
    for name, content in data.items():
        if not (out / name).exists() or (out / name).read_bytes() != content:
            tmp = out / f"{name}.tmp-{os.getpid()}"
            tmp.write_bytes(content)
            os.replace(tmp, out / name)
    return out


@pytest.fixture
def gpt2_dir() -> Path:
    return openai_files() / "gpt2"


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
    "test_viz_browser.py", "test_readme.py", "test_tiktoken_suite.py",
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
