"""Artifacts: GPT-2-format vocab.json/merges.txt, tokenizer.json, tokenizer_config.json, atomic
saves, and clear errors for malformed files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hf_bpe
from hf_bpe import BPE, FormatError, formats


def small_bpe(tmp_path: Path, tie_break: str = "lexicographic") -> BPE:
    docs = ["the cat sat on the mat. The hat is on the cat!", "héllo wörld 🙂 日本語 tests 123"] * 20
    return hf_bpe.train(docs, vocab_size=300, tie_break=tie_break, progress=False)


def test_bytes_to_unicode_is_gpt2s_alphabet():
    m = formats.bytes_to_unicode()
    assert len(set(m.values())) == 256
    assert m[ord(" ")] == "Ġ" and m[ord("\n")] == "Ċ" and m[ord("a")] == "a"
    for b in range(256):
        assert formats.str_to_token(formats.token_to_str(bytes([b]))) == bytes([b])


def test_gpt2_files_round_trip_byte_for_byte(gpt2_dir, tmp_path):
    bpe = BPE.load(gpt2_dir)
    assert bpe.vocab_size == 50257 and len(bpe.merges) == 50000
    assert bpe.special_tokens == {"<|endoftext|>": 50256}
    assert bpe.vocab[262] == b" the"
    out = bpe.save(tmp_path / "gpt2")
    for name in ("vocab.json", "merges.txt"):
        assert (out / name).read_bytes() == (gpt2_dir / name).read_bytes(), name
    # tokenizer.json alone gives the same tables
    assert BPE.load(out / "tokenizer.json") == bpe
    assert BPE.load(gpt2_dir / "tokenizer.json") == bpe


def test_saved_tokenizer_json_loads_in_tokenizers(tmp_path, gpt2_dir):
    tokenizers = pytest.importorskip("tokenizers")
    bpe = BPE.load(gpt2_dir)
    out = bpe.save(tmp_path / "t")
    ours = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    real = tokenizers.Tokenizer.from_file(str(gpt2_dir / "tokenizer.json"))
    text = "Hello world!! <|endoftext|> It's  \n\n  tests 123 héllo 🙂"
    assert ours.encode(text).ids == real.encode(text).ids
    assert ours.get_vocab() == real.get_vocab()


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k"])
def test_trained_folder_loads_back_and_in_tokenizers(tmp_path, pattern):
    tokenizers = pytest.importorskip("tokenizers")
    docs = ["the cat sat on the mat. The hat is on the cat!", "héllo wörld 🙂 日本語 tests 12345"] * 20
    bpe = hf_bpe.train(docs, vocab_size=300, pattern=pattern, progress=False)
    out = bpe.save(tmp_path / "out")
    assert sorted(os.listdir(out)) == sorted(formats.ARTIFACTS)
    assert BPE.load(out) == bpe
    merges = (out / "merges.txt").read_text(encoding="utf-8").split("\n")
    assert merges[0] == "#version: 0.2" and merges[-1] == "" and len(merges) == len(bpe.merges) + 2
    tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    vocab = json.loads((out / "vocab.json").read_text())
    assert tok.get_vocab() == vocab
    cfg = json.loads((out / "tokenizer_config.json").read_text())
    assert cfg["eos_token"] == "<|endoftext|>"


def test_auto_tokenizer_loads_without_hf_bpe(tmp_path):
    """The saved folder loads with transformers alone (hf_bpe made unimportable) and gives the
    same ids as tokenizers reading the same tokenizer.json."""
    pytest.importorskip("transformers")
    docs = ["the cat sat on the mat. The hat is on the cat!", "héllo wörld 🙂 tests 12345"] * 20
    out = hf_bpe.train(docs, vocab_size=320, progress=False).save(tmp_path / "out")
    code = textwrap.dedent(f"""
        import sys, json
        sys.modules["hf_bpe"] = None          # not importable
        from transformers import AutoTokenizer
        import tokenizers
        tok = AutoTokenizer.from_pretrained({str(out)!r})
        ref = tokenizers.Tokenizer.from_file({str(out / "tokenizer.json")!r})
        text = "The cat sat on the hat<|endoftext|> héllo 🙂 999"
        print(json.dumps([type(tok).__name__, tok(text)["input_ids"], ref.encode(text).ids, tok.eos_token]))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    name, ids, ref_ids, eos = json.loads(res.stdout.strip().splitlines()[-1])
    assert ids == ref_ids and len(ids) > 5
    assert eos == "<|endoftext|>"


def test_hf_tie_break_vocab_layout(tmp_path):
    """tie_break='hf': specials first, then the byte alphabet by code point, then merges."""
    bpe = small_bpe(tmp_path, "hf")
    assert bpe.special_tokens == {"<|endoftext|>": 0}
    assert bpe.vocab[1] == b"!" and bpe.vocab[256] == b"\xad"
    chars = [formats.token_to_str(bpe.vocab[i]) for i in range(1, 257)]
    assert chars == sorted(chars, key=ord) and len(set(chars)) == 256


# ---- atomic writes ------------------------------------------------------------------------


def test_save_is_atomic_in_a_new_folder(tmp_path, monkeypatch):
    bpe = small_bpe(tmp_path)
    target = tmp_path / "new"
    real_replace = os.replace

    def crash(*a, **k):
        raise OSError("simulated crash")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        bpe.save(target)
    monkeypatch.setattr(os, "replace", real_replace)
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".new")] == []


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_saved_folders_get_the_mode_of_any_new_folder(tmp_path, umask):
    bpe = small_bpe(tmp_path)
    old = os.umask(umask)
    try:
        bpe.save(tmp_path / "new")       # renamed into place
        bpe.save(tmp_path / "new")       # exchanged with the old one
        os.mkdir(tmp_path / "plain")
    finally:
        os.umask(old)
    want = (tmp_path / "plain").stat().st_mode & 0o777
    assert want == 0o777 & ~umask
    assert (tmp_path / "new").stat().st_mode & 0o777 == want
    assert all(f.stat().st_mode & 0o777 == 0o666 & ~umask for f in (tmp_path / "new").iterdir())


def test_save_is_atomic_over_an_existing_folder(tmp_path, monkeypatch):
    old = small_bpe(tmp_path)
    target = old.save(tmp_path / "tok")
    (target / "README.md").write_text("kept")
    new = hf_bpe.train(["completely different text here"] * 30, vocab_size=280, progress=False)
    from hf_bpe.formats import files as artifacts

    def crash(what):
        if what == "exchange":
            raise OSError("simulated crash")

    monkeypatch.setattr(artifacts, "_step", crash)
    with pytest.raises(OSError, match="simulated"):
        new.save(target)
    monkeypatch.setattr(artifacts, "_step", lambda what: None)
    # A save that failed half-way left the old folder whole, and nothing else.
    assert BPE.load(target) == old
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    # A completed save over it works and keeps the folder's other files.
    new.save(target)
    assert BPE.load(target) == new
    assert (target / "README.md").read_text() == "kept"


@pytest.mark.parametrize("exchange", [True, False])
def test_retraining_into_a_folder_leaves_no_stale_tokenizer_file(tmp_path, monkeypatch, exchange):
    from transformers import AutoTokenizer

    from hf_bpe.formats import files as artifacts

    if not exchange:  # the one-by-one path of systems without an atomic exchange
        monkeypatch.setattr(artifacts, "_exchange", lambda a, b: False)
    target = tmp_path / "tok"
    tok = hf_bpe.BPETokenizer.from_bpe(small_bpe(tmp_path))
    tok.add_tokens(["<|im_start|>"], special_tokens=True)
    tok.chat_template = "{% for m in messages %}<|im_start|>{{ m['content'] }}{% endfor %}"
    tok.save_pretrained(target)
    (target / "added_tokens.json").write_text('{"<|im_start|>": 300}')  # as transformers 4 wrote it
    (target / "README.md").write_text("kept")
    assert (target / "chat_template.jinja").exists()
    new = hf_bpe.train(["completely different text here"] * 30, vocab_size=280, progress=False)
    new.save(target)
    assert not (target / "chat_template.jinja").exists() and not (target / "added_tokens.json").exists()
    assert (target / "README.md").read_text() == "kept"
    again = AutoTokenizer.from_pretrained(target)
    text = "<|im_start|>completely different"
    assert again(text)["input_ids"] == new.encode(text) and again.chat_template is None


@pytest.mark.parametrize("exchange", [True, False])
def test_named_chat_templates_are_saved_in_their_subfolder(tmp_path, monkeypatch, exchange):
    from hf_bpe.formats import files as artifacts

    if not exchange:
        monkeypatch.setattr(artifacts, "_exchange", lambda a, b: False)
    target = tmp_path / "tok"
    tok = hf_bpe.BPETokenizer.from_bpe(small_bpe(tmp_path))
    tok.chat_template = {"default": "{{'a'}}", "tools": "{{'b'}}"}
    for _ in range(2):  # the second save replaces a folder that has the subfolder
        tok.save_pretrained(target)
        assert (target / "additional_chat_templates" / "tools.jinja").read_text() == "{{'b'}}"
        assert (target / "chat_template.jinja").read_text() == "{{'a'}}"
        assert hf_bpe.BPETokenizer.from_pretrained(target).chat_template == tok.chat_template
    tok.chat_template = "{{'c'}}"
    tok.save_pretrained(target)  # no named templates now: the subfolder is stale and goes
    assert not (target / "additional_chat_templates").exists()
    assert hf_bpe.BPETokenizer.from_pretrained(target).chat_template == "{{'c'}}"


def write_pair(d: Path, vocab_text: str | bytes, merges_text: str | bytes) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "vocab.json").write_bytes(vocab_text.encode() if isinstance(vocab_text, str) else vocab_text)
    (d / "merges.txt").write_bytes(merges_text.encode() if isinstance(merges_text, str) else merges_text)
    return d


@pytest.fixture
def good_pair(tmp_path):
    bpe = small_bpe(tmp_path)
    out = bpe.save(tmp_path / "good")
    return (out / "vocab.json").read_text(), (out / "merges.txt").read_text()


def test_truncated_vocab_json_names_file_and_line(tmp_path, good_pair):
    vocab, merges = good_pair
    d = write_pair(tmp_path / "bad", vocab[: len(vocab) // 2], merges)
    with pytest.raises(FormatError, match=r"vocab\.json: line 1 column \d+: invalid JSON"):
        BPE.load(d)


def test_merge_with_unknown_token_names_line(tmp_path, good_pair):
    vocab, merges = good_pair
    lines = merges.split("\n")
    lines[3] = "Ġzz qq"
    d = write_pair(tmp_path / "bad", vocab, "\n".join(lines))
    with pytest.raises(FormatError, match=r"merges\.txt: line 4: token 'Ġzz' is not in the vocabulary"):
        BPE.load(d)


def test_duplicate_ids_are_rejected(tmp_path, good_pair):
    vocab, merges = good_pair
    v = json.loads(vocab)
    v["Ġcompletely_new"] = 5
    d = write_pair(tmp_path / "bad", json.dumps(v), merges)
    with pytest.raises(FormatError, match=r"vocab\.json: id 5 is used by both"):
        BPE.load(d)


def test_bad_header(tmp_path, good_pair):
    vocab, merges = good_pair
    d = write_pair(tmp_path / "bad", vocab, "#version: 9.9\n" + merges.split("\n", 1)[1])
    with pytest.raises(FormatError, match=r"merges\.txt: line 1: unknown header"):
        BPE.load(d)


def test_non_utf8_merges_line(tmp_path, good_pair):
    vocab, merges = good_pair
    raw = merges.encode().split(b"\n")
    raw[5] = b"\xff\xfe bad"
    d = write_pair(tmp_path / "bad", vocab, b"\n".join(raw))
    with pytest.raises(FormatError, match=r"merges\.txt: line 6: not valid UTF-8"):
        BPE.load(d)


def test_malformed_merge_line(tmp_path, good_pair):
    vocab, merges = good_pair
    lines = merges.split("\n")
    lines[2] = "onlyonetoken"
    d = write_pair(tmp_path / "bad", vocab, "\n".join(lines))
    with pytest.raises(FormatError, match=r"merges\.txt: line 3: expected two tokens"):
        BPE.load(d)


def test_missing_folder_and_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        BPE.load(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="neither vocab.json"):
        BPE.load(tmp_path / "empty")


def test_bad_tiktoken_file(tmp_path):
    p = tmp_path / "x.tiktoken"
    good = "".join(f"{__import__('base64').b64encode(bytes([b])).decode()} {b}\n" for b in range(256))
    p.write_text(good + "!!notbase64 256\n")
    with pytest.raises(FormatError, match=r"x\.tiktoken: line 257"):
        BPE.from_tiktoken(p, pattern="gpt2")
