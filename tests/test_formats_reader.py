"""One reader decides what a path holds (`formats.read`): every kind of path gives the same tables,
the core's rejections name the file, and entries no merge builds stay ordinary tokens."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

import hf_bpe
from hf_bpe import BPE, FormatError, formats
from conftest import openai_files

DOCS = ["the cat sat on the mat. The hat is on the cat!", "héllo wörld 🙂 日本語 tests 123 <|x|> y"] * 20


@pytest.fixture(scope="module")
def small() -> BPE:
    return hf_bpe.train(DOCS, vocab_size=300, special_tokens=["<|endoftext|>", "<|x|>"], progress=False)


@pytest.fixture
def saved(small, tmp_path) -> Path:
    return small.save(tmp_path / "tok")


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
    path = openai_files() / "cl100k_base.tiktoken"
    specials = formats.TIKTOKEN_ENCODINGS["cl100k_base"][1]
    bpe = BPE.load(path)
    assert bpe.pattern == "cl100k" and bpe.is_tiktoken and bpe.special_tokens == specials
    assert bpe == BPE.from_tiktoken(path, pattern="cl100k", special_tokens=specials)
    text = "hello <|endoftext|> world 🙂 12345"
    assert bpe.encode(text, allowed_special="all") == BPE.from_tiktoken(
        path, pattern="cl100k", special_tokens=specials).encode(text, allowed_special="all")
    other = tmp_path / "mine.tiktoken"
    other.write_bytes((openai_files() / "r50k_base.tiktoken").read_bytes())
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


def test_vocabulary_entries_no_merge_builds_are_ordinary_tokens(gpt2_dir, tmp_path):
    # A merges.txt cut in half: the entries it no longer builds stay ordinary tokens, which
    # encoding never produces (as in tokenizers), and loading warns with their count.
    pytest.importorskip("tokenizers")
    d = tmp_path / "half"
    d.mkdir()
    shutil.copy(gpt2_dir / "vocab.json", d / "vocab.json")
    lines = (gpt2_dir / "merges.txt").read_text(encoding="utf-8").split("\n")
    (d / "merges.txt").write_text("\n".join(lines[: len(lines) // 2]) + "\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"merges\.txt: \d+ vocabulary entries are made by no merge"):
        bpe = hf_bpe.BPE.load(d)
    assert bpe.special_tokens == {}
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.BPE.from_file(str(d / "vocab.json"), str(d / "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    for t in ["School design", "the quick brown fox", "Zebra stripes 2024"]:
        assert bpe.encode(t) == tok.encode(t).ids
    # The full folder (with its tokenizer.json) has no such entries and warns about nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hf_bpe.BPE.load(gpt2_dir).special_tokens == {"<|endoftext|>": 50256}
