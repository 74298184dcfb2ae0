"""What `save` writes (`formats.writer`): GPT-2-format vocab.json/merges.txt byte for byte,
tokenizer.json and tokenizer_config.json that `tokenizers` and `transformers` load alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import hf_bpe
from hf_bpe import BPE, formats


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
