"""The public training API: inputs of every kind (lone surrogates repaired), special tokens, ids
(`tie_break="hf"` and its layout), and bad input or options."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import hf_bpe
from hf_bpe import BPE, formats
from conftest import corpus_docs

WORKED = [" the"] * 5 + [" then"] * 2 + [" cat"] * 3 + [" hat"]


def test_worked_example_through_the_api():
    bpe = hf_bpe.train(WORKED, vocab_size=256 + 1 + 6, progress=False)
    assert bpe.merges == [(b"t", b"h"), (b"th", b"e"), (b" ", b"the"), (b"a", b"t"), (b"c", b"at"), (b" ", b"cat")]
    # ids: bytes by value, then the special token, then merged tokens in training order
    assert bpe.special_tokens == {"<|endoftext|>": 256}
    assert [bpe.vocab[i] for i in range(257, 263)] == [b"th", b"the", b" the", b"at", b"cat", b" cat"]
    assert all(bpe.vocab[b] == bytes([b]) for b in range(256))


def test_vocab_size_counts_every_token():
    docs = corpus_docs("english", 300_000)
    bpe = hf_bpe.train(docs, vocab_size=1000, special_tokens=["<|endoftext|>", "<|pad|>"], progress=False)
    assert bpe.vocab_size == 1000 == len(bpe.vocab)
    assert sorted(bpe.vocab) == list(range(1000))


def test_special_tokens_once_and_never_merged():
    # A corpus full of special tokens: they must split the text and never appear inside a token.
    sp = ["<|endoftext|>", "<sep>"]
    docs = ["<|endoftext|>" + "<sep>".join(["a<b|c", "<sep<sep>>", "end<|endoftext|>of"] * 50) + "<|endoftext|>"] * 20
    bpe = hf_bpe.train(docs, vocab_size=400, special_tokens=sp, progress=False)
    values = list(bpe.vocab.values())
    for s in sp:
        assert values.count(s.encode()) == 1
    for i, t in bpe.vocab.items():
        if i in bpe.special_tokens.values():
            continue
        for s in sp:
            assert s.encode() not in t, (t, s)
    for a, b in bpe.merges:
        assert (a + b) not in {s.encode() for s in sp}
    assert b"<sep>" not in b"".join(a + b for a, b in bpe.merges)


def test_no_merge_crosses_documents():
    # "ab" never occurs inside a document, only across the boundary of two documents.
    bpe = hf_bpe.train(["xa", "bx"] * 100, vocab_size=300, special_tokens=[], progress=False)
    assert (b"a", b"b") not in bpe.merges


def test_inputs_of_every_kind_give_the_same_vocab(tmp_path):
    docs = corpus_docs("english", 400_000)
    ref = hf_bpe.train(docs, vocab_size=600, progress=False)
    assert hf_bpe.train((d for d in docs), vocab_size=600, progress=False) == ref
    sep = "\n<|endoftext|>\n"
    txt = tmp_path / "c.txt"
    txt.write_text(sep.join(docs), encoding="utf-8")
    gz = tmp_path / "c.txt.gz"
    gz.write_bytes(gzip.compress(txt.read_bytes()))
    jl = tmp_path / "c.jsonl"
    jl.write_text("".join(json.dumps({"text": d, "id": i}) + "\n" for i, d in enumerate(docs)), encoding="utf-8")
    assert hf_bpe.train_files(txt, vocab_size=600, progress=False) == ref
    assert hf_bpe.train_files([gz], vocab_size=600, progress=False) == ref
    assert hf_bpe.train_files(jl, vocab_size=600, progress=False) == ref
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": docs, "n": list(range(len(docs)))})
    assert hf_bpe.train(ds, vocab_size=600, progress=False) == ref
    ids = datasets.IterableDataset.from_generator(lambda: ({"body": d} for d in docs))
    assert hf_bpe.train(ids, vocab_size=600, text_column="body", progress=False) == ref


def test_hf_tie_break_vocab_equals_tokenizers(tmp_path):
    """With tie_break='hf' the saved vocabulary is interchangeable with BpeTrainer's."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    docs = corpus_docs("english", 1_000_000)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=0)
    tok.train_from_iterator(docs, trainer)
    tok.model.save(str(tmp_path))
    bpe = hf_bpe.train(docs, vocab_size=2000, tie_break="hf", progress=False)
    out = bpe.save(tmp_path / "ours")
    assert json.loads((out / "vocab.json").read_text()) == json.loads((tmp_path / "vocab.json").read_text())
    assert (out / "merges.txt").read_text().split("\n")[1:] == (tmp_path / "merges.txt").read_text().split("\n")[1:]


def test_progress_bars_do_not_change_results(capsys):
    docs = corpus_docs("english", 200_000)
    assert hf_bpe.train(docs, vocab_size=400, progress=True) == hf_bpe.train(docs, vocab_size=400, progress=False)
    err = capsys.readouterr().err
    assert "merging" in err and "counting" in err


def test_min_frequency_stops_early():
    bpe = hf_bpe.train(["aaab"] * 3 + ["xyz"], vocab_size=400, special_tokens=[], min_frequency=3, progress=False)
    assert all(len(a + b) >= 2 for a, b in bpe.merges)
    assert bpe.vocab_size < 400 and (b"x", b"y") not in bpe.merges


def test_max_token_length():
    bpe = hf_bpe.train(["abcdefgh" * 4] * 50, vocab_size=300, special_tokens=[], max_token_length=3, progress=False)
    assert max(len(t) for t in bpe.vocab.values()) <= 3


# ---- bad input ----------------------------------------------------------------------------


def test_empty_corpus():
    with pytest.raises(ValueError, match="corpus is empty"):
        hf_bpe.train([], vocab_size=300, progress=False)
    with pytest.raises(ValueError, match="corpus is empty"):
        hf_bpe.train(["", "<|endoftext|>"], vocab_size=300, progress=False)


def test_vocab_size_too_small():
    with pytest.raises(ValueError, match=r"vocab_size=257 is below 256 byte tokens \+ 2 special tokens = 258"):
        hf_bpe.train(["abc"], vocab_size=257, special_tokens=["<a>", "<b>"], progress=False)


def test_bad_options():
    with pytest.raises(TypeError, match="not a single string"):
        hf_bpe.train("just one string", vocab_size=300, progress=False)
    with pytest.raises(TypeError, match="document #1 is a int"):
        hf_bpe.train(["ok", 5], vocab_size=300, progress=False)
    with pytest.raises(ValueError, match="tie_break"):
        hf_bpe.train(["ok"], vocab_size=300, tie_break="random", progress=False)
    with pytest.raises(ValueError, match="does not compile"):
        hf_bpe.train(["ok"], vocab_size=300, pattern="(unclosed", progress=False)
    with pytest.raises(ValueError, match="listed twice"):
        hf_bpe.train(["ok"], vocab_size=300, special_tokens=["<a>", "<a>"], progress=False)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt: no such file"):
        hf_bpe.train_files(tmp_path / "nope.txt", vocab_size=300, progress=False)


def test_non_utf8_file_names_file_and_offset(tmp_path):
    p = tmp_path / "latin1.txt"
    p.write_bytes(("hello world\n" * 1000).encode() + "café".encode("latin-1") + b"\nmore text\n")
    with pytest.raises(ValueError, match=r"latin1\.txt: invalid UTF-8 at byte offset 12003"):
        hf_bpe.train_files(p, vocab_size=300, progress=False)
    bpe = hf_bpe.train_files(p, vocab_size=300, errors="replace", progress=False)
    assert any(b"\xef\xbf\xbd" in t for t in bpe.vocab.values()) or bpe.vocab_size <= 300
    hf_bpe.train_files(p, vocab_size=300, errors="ignore", progress=False)


def test_bad_jsonl_names_line(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"text": "fine"}\n{"text": "also fine"}\n{"txt": "wrong field"}\n')
    with pytest.raises(ValueError, match=r"d\.jsonl: line 3: no field .text."):
        hf_bpe.train_files(p, vocab_size=300, progress=False)
    p.write_text('{"text": "fine"}\n{broken\n')
    with pytest.raises(ValueError, match=r"d\.jsonl: line 2: invalid JSON"):
        hf_bpe.train_files(p, vocab_size=300, progress=False)


def test_single_50mb_line(tmp_path):
    p = tmp_path / "line.txt"
    word = "lorem ipsum dolor sit amet, consectetur adipiscing elit "
    with open(p, "w") as f:
        f.write(word * (50_000_000 // len(word)))
    bpe = hf_bpe.train_files(p, vocab_size=400, progress=False)
    # Nine distinct words: training runs out of pairs once every word is a single token.
    tokens = set(bpe.vocab.values())
    for w in ["lorem", " ipsum", " dolor", " sit", " amet", ",", " consectetur", " adipiscing", " elit", " lorem"]:
        assert w.encode() in tokens
    assert bpe.vocab_size < 400
    # and as one in-memory document
    text = p.read_text()
    assert hf_bpe.train([text], vocab_size=400, progress=False) == bpe


def test_custom_pattern_file_counts_are_exact(tmp_path):
    # A regex that matches across newlines and spaces (where the built-in patterns may be cut):
    # a file of several read blocks must count exactly like the whole text, split only at the
    # special tokens.
    import collections
    import random
    import re

    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "eps"]
    parts = []
    size = 0
    while size < 12_000_000:
        doc = "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(rng.randint(1, 400)))
        parts.append(doc)
        size += len(doc) + 13
    text = "<|endoftext|>".join(parts)
    p = tmp_path / "custom.txt"
    p.write_text(text)
    pattern = r"[a-z \n]+|[^a-z \n]"
    c = hf_bpe._core.WordCounter(pattern, ["<|endoftext|>"], 2)
    c.add_file(str(p))
    expect = collections.Counter()
    for d in text.split("<|endoftext|>"):
        expect.update(m.encode() for m in re.findall(pattern, d))
    assert dict(c.words()) == dict(expect)
    # The built-in cut rule would have split runs such as "beta\ngamma" that this regex keeps.
    assert any(b"\n" in w and len(w) > 3 for w in expect)


@pytest.mark.parametrize("kw, exc, match", [
    ({"vocab_size": 1000.0}, TypeError, "vocab_size must be an int, not float"),
    ({"vocab_size": True}, TypeError, "vocab_size must be an int, not bool"),
    ({"vocab_size": 2**64}, ValueError, "above the largest vocabulary"),
    ({"num_threads": -1}, ValueError, "num_threads=-1 must be 0 or more"),
])
def test_bad_training_options_are_refused(kw, exc, match):
    with pytest.raises(exc, match=match):
        hf_bpe.train(["the cat"] * 3, **{"vocab_size": 300, "progress": False, **kw})


def test_a_lone_surrogate_is_repaired_in_training_as_in_encoding():
    text = "ab\ud800cd ab"
    bpe = hf_bpe.train([text] * 5, vocab_size=270, progress=False)
    assert bpe.decode(bpe.encode(text)) == "ab\ufffdcd ab"


def test_hf_tie_break_vocab_layout(tmp_path):
    """tie_break='hf': specials first, then the byte alphabet by code point, then merges."""
    docs = ["the cat sat on the mat. The hat is on the cat!", "héllo wörld 🙂 日本語 tests 123"] * 20
    bpe = hf_bpe.train(docs, vocab_size=300, tie_break="hf", progress=False)
    assert bpe.special_tokens == {"<|endoftext|>": 0}
    assert bpe.vocab[1] == b"!" and bpe.vocab[256] == b"\xad"
    chars = [formats.token_to_str(bpe.vocab[i]) for i in range(1, 257)]
    assert chars == sorted(chars, key=ord) and len(set(chars)) == 256
