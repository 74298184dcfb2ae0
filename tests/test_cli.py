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


def test_version_help_defaults_text_field_and_a_short_training(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"hf-bpe {hf_bpe.__version__}"
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert "(default: 32000)" in helptext and "--text-field NAME" in helptext and "0 or unset: all cores" in helptext
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join('{"body": "%s"}\n' % t for t in ["the cat sat", "the hat", "a cat and a hat"] * 5))
    assert main(["train", str(rows), "--text-field", "body", "--vocab-size", "32000", "--out", str(tmp_path / "t"),
                 "--quiet"]) == 0
    got = hf_bpe.BPE.load(tmp_path / "t")
    assert got == hf_bpe.train_files(rows, 32000, text_field="body", progress=False) and got.vocab_size < 300
    err = capsys.readouterr().err
    assert f"note: {got.vocab_size:,} of the 32,000 tokens asked for: no pair is left to merge" in err
    assert main(["train", str(rows), "--text-field", "body", "--min-frequency", "6", "--out", str(tmp_path / "u"),
                 "--quiet"]) == 0
    assert "no pair occurs 6 times or more (--min-frequency)" in capsys.readouterr().err


def test_messages_speak_the_cli_and_name_the_users_path(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok text\n\xff\xfe\n")
    good = tmp_path / "good.txt"
    good.write_text("the cat sat on the mat " * 20)
    assert main(["train", str(good), "--vocab-size", "260", "--out", str(tmp_path / "tok"), "--quiet"]) == 0
    assert main(["stats", "--tokenizer", str(tmp_path / "tok"), str(bad), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "(pass --errors replace to read it anyway)" in err and "errors='" not in err
    assert main(["train", str(bad), "--out", str(tmp_path / "o"), "--quiet"]) == 1
    assert "--errors replace or --errors ignore" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["viz", "--port", "99999"])
    assert e.value.code == 2 and "'99999' is not a port (0-65535)" in capsys.readouterr().err
    assert main(["train", str(good), "--vocab-size", "100", "--out", str(tmp_path / "x"), "--quiet"]) == 1
    assert "256 byte tokens + 1 special token = 257" in capsys.readouterr().err

    import os

    from hf_bpe.formats import files

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", os.fspath(src))

    monkeypatch.setattr(files.os, "replace", refuse)
    with pytest.raises(PermissionError) as e:
        files.write_file(tmp_path / "ids.npy", b"x")
    assert e.value.filename == str(tmp_path / "ids.npy") and not list(tmp_path.glob(".ids.npy.tmp-*"))
    with pytest.raises(PermissionError) as e:
        hf_bpe.BPE.load(tmp_path / "tok").save(tmp_path / "new")
    assert e.value.filename == str(tmp_path / "new")


def test_an_output_that_is_a_folder_is_refused_cleanly(tmp_path, capsys):
    good = tmp_path / "good.txt"
    good.write_text("the cat sat on the mat " * 20)
    assert main(["train", str(good), "--vocab-size", "260", "--out", str(tmp_path / "tok"), "--quiet"]) == 0
    folder = tmp_path / "adir"
    folder.mkdir()
    assert main(["encode", "--tokenizer", str(tmp_path / "tok"), str(good), "--out", str(folder), "--quiet"]) == 1
    assert f"{folder} is a folder: --out names the .npy file to write" in capsys.readouterr().err
    assert main(["report", "--tokenizer", str(tmp_path / "tok"), str(good), "--out", str(folder), "--quiet"]) == 1
    assert f"{folder} is a folder" in capsys.readouterr().err
    assert list(folder.iterdir()) == [] and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
