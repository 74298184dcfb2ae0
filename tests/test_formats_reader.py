"""One reader decides what a path holds (`formats.read`), the core validates the tables once (its
errors name the file), a `BPE` pickles as its core's state, and the package keeps its boundaries
(no import cycle, the transformers adapter uses public names only, small modules)."""

from __future__ import annotations

import ast
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hf_bpe
from hf_bpe import BPE, FormatError, formats

PKG = Path(hf_bpe.__file__).resolve().parent
DOCS = ["the cat sat on the mat. The hat is on the cat!", "héllo wörld 🙂 日本語 tests 123 <|x|> y"] * 20


@pytest.fixture(scope="module")
def small() -> BPE:
    return hf_bpe.train(DOCS, vocab_size=300, special_tokens=["<|endoftext|>", "<|x|>"], progress=False)


@pytest.fixture
def saved(small, tmp_path) -> Path:
    return small.save(tmp_path / "tok")


# ---- what a path holds --------------------------------------------------------------------


def test_every_kind_of_path_gives_the_same_tables(small, saved, tmp_path):
    only_json = tmp_path / "only_json"
    only_json.mkdir()
    shutil.copy(saved / "tokenizer.json", only_json / "tokenizer.json")
    renamed = tmp_path / "mine.json"
    shutil.copy(saved / "tokenizer.json", renamed)
    for path in (saved, saved / "vocab.json", saved / "merges.txt", saved / "tokenizer.json", only_json, renamed):
        tables = formats.read(path)
        assert isinstance(tables, formats.Tables)
        assert tables.pattern == "gpt2" and tables.special_tokens == small.special_tokens, path
        assert BPE.load(path) == small, path


def test_custom_pattern_keeps_its_name_through_files(tmp_path):
    bpe = hf_bpe.train(DOCS, vocab_size=300, pattern="cl100k", progress=False)
    out = bpe.save(tmp_path / "cl")
    for path in (out, out / "vocab.json", out / "tokenizer.json"):  # (the core reads a tokenizer.json's pattern)
        assert BPE.load(path).pattern == "cl100k"
    assert formats.pattern_name(hf_bpe._core.pattern_source("o200k")) == "o200k"
    assert formats.pattern_name(r"\w+|\s+") == r"\w+|\s+"


def test_explicit_companion_files_as_transformers_passes_them(small, saved, tmp_path):
    d = tmp_path / "elsewhere"
    d.mkdir()
    shutil.copy(saved / "vocab.json", d / "v.json")
    shutil.copy(saved / "merges.txt", d / "m.txt")
    tables = formats.read(d / "v.json", merges_file=d / "m.txt", tokenizer_file=saved / "tokenizer.json")
    assert BPE.from_tables(tables) == small
    pytest.importorskip("transformers")
    tok = hf_bpe.BPETokenizer(vocab_file=str(d / "v.json"), merges_file=str(d / "m.txt"),
                              tokenizer_file=str(saved / "tokenizer.json"))
    assert tok.bpe == small
    # Without the tokenizer.json nothing says which entries are special: like tokenizers, the
    # entries no merge builds are ordinary tokens, and loading says so.
    with pytest.warns(UserWarning, match="made by no merge"):
        bare = hf_bpe.BPETokenizer(vocab_file=str(d / "v.json"), merges_file=str(d / "m.txt"))
    assert bare.bpe.special_tokens == {} and bare.bpe.vocab == small.vocab


def test_only_added_tokens_marked_special_are_special(small, saved, tmp_path):
    """An ordinary token listed in added_tokens without "special": true stays ordinary, in every
    reader (a folder, the tokenizer.json alone, transformers' file arguments)."""
    ordinary = max(small.vocab)  # the last merged token: no merge uses it
    spelled = formats.token_to_str(small.vocab[ordinary])
    raw = json.loads((saved / "tokenizer.json").read_text(encoding="utf-8"))
    raw["added_tokens"].append({"id": ordinary, "content": spelled, "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": False, "special": False})
    (saved / "tokenizer.json").write_text(json.dumps(raw), encoding="utf-8")
    for path in (saved, saved / "tokenizer.json", saved / "vocab.json"):
        assert formats.read(path).special_tokens == small.special_tokens, path
    raw["added_tokens"][-1]["special"] = True
    (saved / "tokenizer.json").write_text(json.dumps(raw), encoding="utf-8")
    for path in (saved, saved / "tokenizer.json", saved / "vocab.json"):
        assert formats.read(path).special_tokens == {**small.special_tokens, spelled: ordinary}, path
    assert formats.read(saved / "vocab.json", ["<|x|>"]).special_tokens["<|x|>"] == small.special_tokens["<|x|>"]


def test_well_known_tiktoken_files_load_by_name(tmp_path):
    from conftest import shared_data

    path = shared_data() / "tiktoken" / "cl100k_base.tiktoken"
    specials = formats.TIKTOKEN_ENCODINGS["cl100k_base"][1]
    bpe = BPE.load(path)
    assert bpe.pattern == "cl100k" and bpe.is_tiktoken and bpe.special_tokens == specials
    assert bpe == BPE.from_tiktoken(path, pattern="cl100k", special_tokens=specials)
    text = "hello <|endoftext|> world 🙂 12345"
    assert bpe.encode(text, allowed_special="all") == BPE.from_tiktoken(
        path, pattern="cl100k", special_tokens=specials).encode(text, allowed_special="all")
    other = tmp_path / "mine.tiktoken"
    other.write_bytes((shared_data() / "tiktoken" / "r50k_base.tiktoken").read_bytes())
    with pytest.raises(FormatError, match=r"mine\.tiktoken: .*BPE\.from_tiktoken\(path, pattern=\.\.\."):
        BPE.load(other)


def test_core_rejections_name_the_file(saved, tmp_path):
    raw = json.loads((saved / "tokenizer.json").read_text())
    raw["normalizer"] = {"type": "Precompiled"}
    (saved / "tokenizer.json").write_text(json.dumps(raw))
    for path in (saved, saved / "vocab.json", saved / "tokenizer.json"):
        with pytest.raises(FormatError, match=r"tok(/vocab\.json|/tokenizer\.json)?: normalizer Precompiled is not supported"):
            BPE.load(path)
    p = tmp_path / "cl100k_base.tiktoken"
    p.write_text("".join(f"{__import__('base64').b64encode(bytes([b])).decode()} {b}\n" for b in range(1, 256)))
    with pytest.raises(FormatError, match=r"cl100k_base\.tiktoken: the vocabulary lacks 1 of the 256 byte tokens"):
        BPE.load(p)
    with pytest.raises(FormatError, match=r"r\.tiktoken: special token .* has id 0"):
        p = tmp_path / "r.tiktoken"
        p.write_text("".join(f"{__import__('base64').b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
        BPE.from_tiktoken(p, pattern="gpt2", special_tokens={"<|e|>": 0})


def test_constructor_errors_come_from_the_core():
    vocab = {i: bytes([i]) for i in range(256)}
    with pytest.raises(ValueError, match=r"lacks 1 of the 256 byte tokens \(e\.g\. byte 0x00\)"):
        BPE({i: b for i, b in vocab.items() if i}, None)
    with pytest.raises(ValueError, match=r"merge #0 \(b'a', b'b'\) uses b'ab', which is not in the vocabulary"):
        BPE(vocab, [(b"a", b"b")])
    with pytest.raises(ValueError, match="special token"):
        BPE(vocab, None, {"<|s|>": 97})  # (tiktoken ranks; in merges mode an added token may take a spelled id)
    with pytest.raises(ValueError, match="does not compile"):
        BPE(vocab, [], {}, "(unclosed")


# ---- one serialized form ------------------------------------------------------------------


def test_pickle_is_the_core_state_and_keeps_name_and_kind(small, tmp_path):
    clone = pickle.loads(pickle.dumps(small))
    assert clone == small and clone.pattern == "gpt2" and not clone.is_tiktoken
    assert pickle.dumps(clone) == pickle.dumps(small)
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
    for pattern in ("o200k", r"\w+|\s+"):
        for merges in ([(b"a", b"b")], None):
            bpe = BPE(vocab, merges, {"<|s|>": 300}, pattern)
            back = pickle.loads(pickle.dumps(bpe))
            assert back == bpe and back.pattern == pattern and back.is_tiktoken == (merges is None)
            assert back.vocab[300] == b"<|s|>" and back.encode("ab<|s|>", allowed_special="all") == [256, 300]


def test_pickle_bytes_are_identical_across_processes(saved):
    code = ("import sys, hashlib, pickle, hf_bpe; b = hf_bpe.BPE.load(sys.argv[1]); b.encode('warm the cache'); "
            "print(hashlib.sha256(pickle.dumps(b)).hexdigest())")
    runs = {subprocess.run([sys.executable, "-c", code, str(saved)], capture_output=True, text=True, check=True,
                           timeout=120).stdout.strip() for _ in range(2)}
    import hashlib

    assert runs == {hashlib.sha256(pickle.dumps(BPE.load(saved))).hexdigest()}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_gets_a_fresh_core(small):
    small.encode_batch(["the cat sat"] * 64, num_threads=2)
    assert small.cache_info()["misses"] > 0
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: a new core (an empty cache) that encodes the same
        try:
            fresh = small.cache_info()["misses"] == 0
            ok = small.encode_batch(["the cat sat"] * 64, num_threads=2) == [small.encode("the cat sat")] * 64
            os.write(w, b"1" if fresh and ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    assert os.read(r, 1) == b"1"


def test_byte_alphabet_comes_from_the_core():
    from hf_bpe import _core
    from hf_bpe.reference import hf_byte_rank

    alphabet = _core.byte_alphabet()
    assert formats.bytes_to_unicode() == dict(enumerate(alphabet))
    by_code_point = sorted(range(256), key=lambda b: ord(alphabet[b]))
    assert [by_code_point.index(b) for b in range(256)] == hf_byte_rank()  # the oracle's own computation
