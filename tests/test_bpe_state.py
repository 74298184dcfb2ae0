"""A `BPE` is its core: the constructor's checks are the core's (a clear error, never gigabytes for
one sparse id), it pickles as the core's state (the same bytes in every process), and a forked
child gets a fresh core."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

import hf_bpe
from hf_bpe import BPE, _core

DOCS = ["the cat sat on the mat. The hat is on the cat!", "héllo wörld 🙂 日本語 tests 123 <|x|> y"] * 20


@pytest.fixture(scope="module")
def small() -> BPE:
    return hf_bpe.train(DOCS, vocab_size=300, special_tokens=["<|endoftext|>", "<|x|>"], progress=False)


@pytest.fixture
def saved(small, tmp_path):
    return small.save(tmp_path / "tok")


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


def test_one_sparse_id_is_refused_with_a_clear_error_instead_of_gigabytes():
    vocab = {i: bytes([i]) for i in range(256)}
    with pytest.raises(ValueError, match=r"token ids go up to 268435454, far beyond the 257 tokens given; ids must be dense"):
        _core.Encoder(vocab, [], {"<|x|>": (1 << 28) - 2}, "gpt2")
    # cl100k's holes (a few ids between specials) stay fine.
    assert _core.Encoder(vocab, [], {"<|x|>": 4000}, "gpt2").n_vocab == 4001


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
