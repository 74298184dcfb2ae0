"""Tests of the BPE merge loop (``hf_bpe._core.train_merges``) against the pure-Python
reference (``hf_bpe.reference``) and against HF ``tokenizers``' ``BpeTrainer``."""

from __future__ import annotations

import gzip
import json
from functools import lru_cache

import pytest
from hypothesis import given, settings, strategies as st

from hf_bpe import _core
from hf_bpe.reference import encode_word_reference, hf_byte_rank, train_reference
from conftest import corpus_path

CORPORA = ["english", "code", "multilingual"]
SEP = "\n<|endoftext|>\n"


def native(word_counts: dict[bytes, int], n: int, tie_break: str = "lexicographic", **kw):
    return _core.train_merges(sorted(word_counts.items()), n, tie_break=tie_break, **kw)


# ---------------------------------------------------------------- worked example (the blog)

BLOG_WORDS = {b" the": 5, b" then": 2, b" cat": 3, b" hat": 1}
BLOG_MERGES = [(b"t", b"h"), (b"th", b"e"), (b" ", b"the"), (b"a", b"t"), (b"c", b"at"), (b" ", b"cat")]


def test_blog_example_native():
    assert native(BLOG_WORDS, 6) == BLOG_MERGES


def test_blog_example_reference():
    assert train_reference(BLOG_WORDS, 6) == BLOG_MERGES


def test_blog_example_encode():
    assert encode_word_reference(b" then", BLOG_MERGES) == [b" the", b"n"]
    assert encode_word_reference(b" hat", BLOG_MERGES) == [b" ", b"h", b"at"]
    assert encode_word_reference(b" cat", BLOG_MERGES) == [b" cat"]
    assert encode_word_reference(b"", BLOG_MERGES) == []


def test_tie_rules_disagree_like_hf_unit_test():
    # HF's own test: with min_frequency 2 HF learns re, are, is; the lexicographic rule re, is, are.
    words = {b"roses": 1, b"are": 2, b"red": 1, b"voilets": 1, b"blue": 1, b"BERT": 1,
             b"is": 2, b"big": 1, b"and": 1, b"so": 1, b"GPT-2": 1}
    hf = [(b"r", b"e"), (b"a", b"re"), (b"i", b"s")]
    lex = [(b"r", b"e"), (b"i", b"s"), (b"a", b"re")]
    for impl in (native, train_reference):
        assert impl(words, 100, "hf", min_frequency=2) == hf
        assert impl(words, 100, "lexicographic", min_frequency=2) == lex


def test_byte_rank_table():
    rank = hf_byte_rank()
    assert sorted(rank) == list(range(256))
    assert rank[ord("!")] == 0 and rank[126] == 93 and rank[161] == 94 and rank[174] == 106
    assert rank[0] == 188 and rank[32] == 188 + 32 and rank[173] == 255


@pytest.mark.parametrize("tie_break", ["lexicographic", "hf"])
def test_overlapping_and_same_token_pairs(tie_break):
    for words in ({b"aaa": 1}, {b"aaaa": 1}, {b"abab": 3}, {b"aaaaa": 2, b"aa": 1}, {b"\xff" * 9: 4}):
        assert native(words, 20, tie_break) == train_reference(words, 20, tie_break)
    assert native({b"aaa": 1}, 5) == [(b"a", b"a"), (b"aa", b"a")]
    assert native({b"aaaa": 1}, 5) == [(b"a", b"a"), (b"aa", b"aa")]


def test_stop_rules_and_degenerate_input():
    assert native({}, 10) == []
    assert native({b"": 3, b"x": 5}, 10) == []
    assert native({b"ab": 5}, 0) == []
    assert native({b"ab": 5}, 10, min_frequency=6) == []
    assert native({b"ab": 5}, 10, min_frequency=5) == [(b"a", b"b")]
    assert native({b"abc": 2**62, b"bcd": 2**62}, 10)[0] == (b"b", b"c")
    with pytest.raises(ValueError):
        _core.train_merges([(b"ab", 1)], 10, tie_break="nope")


def test_progress_callback_and_stop():
    words = {bytes(range(i, i + 40)): 1 for i in range(0, 200, 40)}
    seen = []
    out = _core.train_merges(sorted(words.items()), 100, progress=lambda n: seen.append(n))
    assert len(out) == 100 and seen and seen[-1] == 100

    class Stop(Exception):
        pass

    def raise_at_5(n):
        if n >= 5:
            raise Stop

    with pytest.raises(Stop):
        _core.train_merges(sorted(words.items()), 100, progress=raise_at_5)


# ---------------------------------------------------------------- native == reference

@lru_cache(maxsize=None)
def corpus_text(name: str, nbytes: int) -> str:
    with gzip.open(corpus_path(name), "rt", encoding="utf-8") as f:
        return f.read(nbytes)


def corpus_docs(name: str, nbytes: int) -> list[str]:
    return [d for d in corpus_text(name, nbytes).split(SEP) if d]


def counted(docs: list[str]) -> dict[bytes, int]:
    wc = _core.WordCounter(pattern="gpt2")
    wc.add_texts(docs)
    return dict(wc.words())


@pytest.mark.parametrize("name", CORPORA)
@pytest.mark.parametrize("tie_break", ["lexicographic", "hf"])
def test_native_matches_reference_on_text(name, tie_break):
    words = counted(corpus_docs(name, 40_000))
    ref = train_reference(words, 150, tie_break)
    assert len(ref) >= 150
    assert native(words, 150, tie_break) == ref
    # A prefix of the run is the smaller run.
    assert native(words, 40, tie_break) == ref[: len(native(words, 40, tie_break))]


def test_native_matches_reference_min_frequency_and_max_len():
    words = counted(corpus_docs("english", 40_000))
    for mf in (3, 50):
        ref = train_reference(words, 250, "lexicographic", min_frequency=mf)
        assert native(words, 250, min_frequency=mf) == ref
        assert native(words, 250, "hf", min_frequency=mf) == train_reference(words, 250, "hf", min_frequency=mf)
    ref = train_reference(words, 150, "lexicographic", max_token_length=3)
    assert all(len(a + b) <= 3 for a, b in ref)
    assert native(words, 150, max_token_length=3) == ref


def _first_reuse(merges):
    """Index of the first merge whose string already existed (HF-exact runs may differ from the
    naive reference only after such a merge; see the note in src/train/mod.rs)."""
    seen = set()
    for i, (a, b) in enumerate(merges):
        if a + b in seen:
            return i
        seen.add(a + b)
    return len(merges)


small_words = st.dictionaries(
    st.one_of(
        st.binary(min_size=0, max_size=8),
        st.sampled_from([b"a", b"b", b"ab", b"aaaa", b"abab", b"\xff\xff\xff"]).map(lambda s: s * 3),
        st.text(alphabet="ab ü日本🙂", max_size=6).map(lambda s: s.encode()),
        st.tuples(st.sampled_from([b"a", b"\x00", b" ", b"\xe6"]), st.integers(1, 12)).map(lambda t: t[0] * t[1]),
    ),
    st.integers(1, 6),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(words=small_words, n=st.integers(0, 30), mf=st.sampled_from([0, 0, 2, 3]))
def test_native_matches_reference_generated(words, n, mf):
    ref_lex = train_reference(words, n, "lexicographic", min_frequency=mf)
    assert native(words, n, "lexicographic", min_frequency=mf) == ref_lex
    ref_hf = train_reference(words, n, "hf", min_frequency=mf)
    got_hf = native(words, n, "hf", min_frequency=mf)
    k = _first_reuse(ref_hf) + 1
    assert got_hf[:k] == ref_hf[:k]
    if k > len(ref_hf):
        assert got_hf == ref_hf


@settings(max_examples=100, deadline=None)
@given(words=small_words, n=st.integers(0, 30), maxlen=st.integers(1, 5))
def test_max_token_length_generated(words, n, maxlen):
    ref = train_reference(words, n, "lexicographic", max_token_length=maxlen)
    assert native(words, n, max_token_length=maxlen) == ref
    assert all(len(a) + len(b) <= maxlen for a, b in ref)


@settings(max_examples=100, deadline=None)
@given(words=small_words, n=st.integers(0, 30))
def test_encode_reference_reproduces_training_segmentation(words, n):
    merges = train_reference(words, n)
    vocab = {bytes([b]) for b in range(256)} | {a + b for a, b in merges}
    for w in words:
        toks = encode_word_reference(w, merges)
        assert b"".join(toks) == w
        assert all(t in vocab for t in toks)


# ---------------------------------------------------------------- parity with HF tokenizers

def _bytes_decoder() -> dict[str, int]:
    """GPT-2 bytes_to_unicode, inverted: byte-level char -> byte."""
    keep = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    chars = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return {c: b for b, c in chars.items()}


def hf_train(docs: list[str], vocab_size: int, min_frequency: int = 0, max_token_length=None):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    kw = {} if max_token_length is None else {"max_token_length": max_token_length}
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=min_frequency,
        show_progress=False,
        **kw,
    )
    tok.train_from_iterator(docs, trainer)
    dec = _bytes_decoder()
    out = []
    for m in json.loads(tok.to_str())["model"]["merges"]:
        a, b = m.split(" ") if isinstance(m, str) else m
        out.append((bytes(dec[c] for c in a), bytes(dec[c] for c in b)))
    return out


@lru_cache(maxsize=None)
def counter_for(name: str, nbytes: int):
    wc = _core.WordCounter(pattern="gpt2")
    wc.add_texts(corpus_docs(name, nbytes))
    return wc


HF_SLICE = {"english": 2_000_000, "code": 2_000_000, "multilingual": 1_000_000}


@pytest.mark.parametrize("name", CORPORA)
@pytest.mark.parametrize("vocab_size", [300, 1000, 5000])
def test_hf_parity(name, vocab_size):
    docs = corpus_docs(name, HF_SLICE[name])
    expected = hf_train(docs, vocab_size)
    assert len(expected) >= vocab_size - 257
    got = _core.train_merges(counter_for(name, HF_SLICE[name]), vocab_size - 257, tie_break="hf")
    assert got == expected


@pytest.mark.parametrize("name", ["english", "code"])
def test_hf_parity_min_frequency(name):
    docs = corpus_docs(name, 1_000_000)
    for mf in (20, 200):
        expected = hf_train(docs, 20000, min_frequency=mf)
        got = _core.train_merges(counter_for(name, 1_000_000), 20000 - 257, tie_break="hf", min_frequency=mf)
        assert got == expected
        assert len(got) < 20000 - 257  # the min_frequency stop really fired


@pytest.mark.parametrize("max_len", [2, 3, 5])
def test_hf_parity_max_token_length(max_len):
    docs = corpus_docs("english", 1_000_000)
    expected = hf_train(docs, 2000, max_token_length=max_len)
    got = _core.train_merges(counter_for("english", 1_000_000), 2000 - 257, tie_break="hf", max_token_length=max_len)
    assert got == expected
