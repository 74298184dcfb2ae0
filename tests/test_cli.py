"""The `hf-bpe` command: train, encode, stats, and clear errors."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

import hf_bpe
from hf_bpe.tools.cli import main
from conftest import corpus_docs


@pytest.fixture
def corpus(tmp_path):
    docs = corpus_docs("english", 300_000)
    p = tmp_path / "c.txt.gz"
    p.write_bytes(gzip.compress("\n<|endoftext|>\n".join(docs).encode()))
    return p, docs


def test_train_encode_stats(tmp_path, corpus, capsys):
    path, docs = corpus
    out = tmp_path / "tok"
    assert main(["train", str(path), "--vocab-size", "700", "--out", str(out), "--quiet",
                 "--special-token", "<|endoftext|>", "--special-token", "<|pad|>"]) == 0
    bpe = hf_bpe.BPE.load(out)
    assert bpe.vocab_size == 700 and set(bpe.special_tokens) == {"<|endoftext|>", "<|pad|>"}
    assert bpe == hf_bpe.train_files(path, vocab_size=700, special_tokens=["<|endoftext|>", "<|pad|>"], progress=False)

    ids_path = tmp_path / "ids.npy"
    assert main(["encode", "--tokenizer", str(out), str(path), str(path), "--out", str(ids_path), "--quiet"]) == 0
    ids = np.load(ids_path)
    text = "\n<|endoftext|>\n".join(docs)
    expected = bpe.encode(text, allowed_special="all")
    assert ids.dtype == np.uint16 and ids.tolist() == expected + expected

    capsys.readouterr()
    assert main(["stats", "--tokenizer", str(out), str(path), "--quiet"]) == 0
    line = [l for l in capsys.readouterr().out.splitlines() if l.startswith(str(path)[-40:])][0]
    n_bytes, n_tok, ratio = line.split()[-3:]
    assert int(n_bytes.replace(",", "")) == len(text.encode()) and int(n_tok.replace(",", "")) == len(expected)
    assert float(ratio) == pytest.approx(len(text.encode()) / len(expected), abs=1e-3)


def test_errors_exit_1_with_a_message(tmp_path, capsys):
    assert main(["train", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o"), "--quiet"]) == 1
    assert "missing.txt: no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok text\n\xff\xfe\n")
    assert main(["train", str(bad), "--out", str(tmp_path / "o"), "--quiet", "--vocab-size", "300"]) == 1
    assert "bad.txt: invalid UTF-8 at byte offset 8" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
