"""Word counts as data: ``count``/``count_files`` give ``WordCounts`` that merge exactly, save,
load and pickle compactly, refuse to mix patterns or special tokens, and train to the vocabulary
``train``/``train_files`` give."""

from __future__ import annotations

import gzip
import os
import json
import pickle
import re
import struct
import zlib
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hf_bpe
from hf_bpe import _core
from hf_bpe.training.counts import MAGIC
from conftest import corpus_docs

SPECIALS = ("<|endoftext|>", "<|pad|>")
PIECES = st.sampled_from(["the", " cat", " ", "  ", "\n", "é", "🙂", "'s", "123", ",", "<|endoftext|>", "<|pad|>",
                          "<|endo", "ftext|>", "ab", " the", "\t"])
DOC = st.lists(PIECES, max_size=12).map("".join)


def direct_count(docs: list[str], pattern: str = "gpt2", specials=SPECIALS) -> Counter:
    """The counts of pre-tokens, from the pre-tokenizer, one document at a time."""
    out: Counter = Counter()
    for d in docs:
        parts = [d]
        for s in specials:
            parts = [q for p in parts for q in p.split(s)]
        for p in parts:
            out.update(w.encode() for w in _core.pretokenize(pattern, p))
    return out


def write(path, docs: list[str], kind: str) -> None:
    if kind == "jsonl":
        path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    else:
        data = "<|endoftext|>".join(docs).encode()
        path.write_bytes(gzip.compress(data) if kind == "gz" else data)


@settings(max_examples=60, deadline=None)
@given(docs=st.lists(DOC, max_size=12), cuts=st.lists(st.integers(0, 12), max_size=4))
def test_shards_merged_equal_one_count_of_the_whole(docs, cuts):
    bounds = sorted({min(c, len(docs)) for c in cuts} | {0, len(docs)})
    shards = [docs[a:b] for a, b in zip(bounds, bounds[1:])] or [[]]
    whole = hf_bpe.count(docs, special_tokens=SPECIALS, progress=False)
    parts = [hf_bpe.count(iter(s), special_tokens=SPECIALS, progress=False) for s in shards]  # generators too
    assert hf_bpe.WordCounts.merge(parts) == whole == sum(parts)
    assert dict(whole.items()) == direct_count(docs)
    assert whole.total == sum(direct_count(docs).values()) and len(whole) == len(direct_count(docs))


@settings(max_examples=15, deadline=None)
@given(docs=st.lists(DOC, min_size=1, max_size=10), kind=st.sampled_from(["txt", "gz", "jsonl"]),
       cut=st.integers(0, 10))
def test_file_shards_merge_to_the_count_of_one_file(tmp_path_factory, docs, kind, cut):
    d = tmp_path_factory.mktemp("shards")
    write(d / f"all.{kind}", docs, kind)
    write(d / f"a.{kind}", docs[:cut], kind)
    write(d / f"b.{kind}", docs[cut:], kind)
    whole = hf_bpe.count_files(d / f"all.{kind}", special_tokens=SPECIALS, progress=False)
    assert hf_bpe.count_files(d / f"a.{kind}", special_tokens=SPECIALS, progress=False) + hf_bpe.count_files(
        d / f"b.{kind}", special_tokens=SPECIALS, progress=False) == whole
    assert whole == hf_bpe.count_files([d / f"a.{kind}", d / f"b.{kind}"], special_tokens=SPECIALS, progress=False)
    assert dict(whole.items()) == direct_count(docs)


def test_datasets_and_lists_count_alike():
    datasets = pytest.importorskip("datasets")
    docs = corpus_docs("multilingual", 200_000)
    ds = datasets.Dataset.from_dict({"body": docs})
    assert hf_bpe.count(ds, text_column="body", progress=False) == hf_bpe.count(docs, progress=False)


@pytest.mark.parametrize("options", [
    dict(), dict(tie_break="hf"), dict(min_frequency=5), dict(max_token_length=4),
    dict(pattern="cl100k", special_tokens=("<|endoftext|>", "<|fim|>")), dict(tie_break="hf", pattern="o200k"),
])
def test_train_from_counts_equals_train_files(tmp_path, options):
    docs = corpus_docs("english", 400_000) + corpus_docs("code", 200_000)
    path = tmp_path / "c.txt.gz"
    write(path, docs, "gz")
    count_opts = {k: v for k, v in options.items() if k in ("pattern", "special_tokens")}
    train_opts = {k: v for k, v in options.items() if k not in count_opts}
    counts = hf_bpe.count_files(path, progress=False, **count_opts)
    want = hf_bpe.train_files(path, vocab_size=1200, progress=False, **options)
    assert hf_bpe.train_from_counts(counts, vocab_size=1200, progress=False, **train_opts) == want
    assert hf_bpe.train_from_counts(hf_bpe.count(docs, progress=False, **count_opts), vocab_size=1200,
                                    progress=False, **train_opts) == hf_bpe.train(docs, vocab_size=1200, progress=False,
                                                                                  **options)


def test_save_load_pickle_round_trip_and_compact(tmp_path):
    counts = hf_bpe.count(corpus_docs("multilingual", 300_000), special_tokens=SPECIALS, progress=False)
    path = counts.save(tmp_path / "shard.counts")
    back = hf_bpe.WordCounts.load(path)
    assert back == counts and back.special_tokens == SPECIALS and back.documents == counts.documents > 0
    assert back.text_bytes == counts.text_bytes > 0
    compact = len(counts.bytes) + 16 * len(counts) + 8
    assert path.stat().st_size < compact + 1000
    blob = pickle.dumps(counts)
    assert pickle.loads(blob) == counts and len(blob) < compact + 1000
    assert counts.most_common(3) == sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    word, n = counts.most_common(1)[0]
    assert counts[word] == n and counts[b"\xff never"] == 0


def test_bad_files_are_clear_errors(tmp_path):
    counts = hf_bpe.count(["the cat sat on the mat"] * 3, progress=False)
    path = counts.save(tmp_path / "c.counts")
    data = path.read_bytes()
    (tmp_path / "short.counts").write_bytes(data[:-5])
    with pytest.raises(hf_bpe.FormatError, match=r"short.counts: truncated: the counts array"):
        hf_bpe.WordCounts.load(tmp_path / "short.counts")
    (tmp_path / "foreign.counts").write_bytes(b"PK\x03\x04 a zip file")
    with pytest.raises(hf_bpe.FormatError, match=r"foreign.counts: not an hf_bpe word counts file"):
        hf_bpe.WordCounts.load(tmp_path / "foreign.counts")
    flipped = bytearray(data)
    flipped[-20] ^= 1
    (tmp_path / "flipped.counts").write_bytes(bytes(flipped))
    with pytest.raises(hf_bpe.FormatError, match=r"flipped.counts: corrupt"):
        hf_bpe.WordCounts.load(tmp_path / "flipped.counts")
    (tmp_path / "long.counts").write_bytes(data + b"\0")
    with pytest.raises(hf_bpe.FormatError, match=r"bytes after the word counts"):
        hf_bpe.WordCounts.load(tmp_path / "long.counts")


def test_counts_refuse_to_merge_across_patterns_and_specials():
    a = hf_bpe.count(["the cat"], progress=False)
    with pytest.raises(ValueError, match=r"pattern 'gpt2' cannot merge with counts made with pattern 'cl100k'"):
        a + hf_bpe.count(["the cat"], pattern="cl100k", progress=False)
    with pytest.raises(ValueError, match=r"special tokens \['<\|endoftext\|>'\] cannot merge"):
        a + hf_bpe.count(["the cat"], special_tokens=("<|pad|>",), progress=False)
    with pytest.raises(TypeError, match="can only merge WordCounts"):
        a + Counter({b"x": 1})
    assert a + hf_bpe.count(["the cat"], pattern=_core.pattern_source("gpt2"), progress=False) is not None


def test_arrays_are_checked_and_errors_name_the_word():
    ok = (np.frombuffer(b"abc", np.uint8), np.array([0, 1, 3]), np.array([2, 1], np.uint64))
    assert len(hf_bpe.WordCounts(ok)) == 2
    with pytest.raises(ValueError, match=r'word #1 \("a"\) is not after word #0 \("bc"\)'):
        hf_bpe.WordCounts((np.frombuffer(b"bca", np.uint8), np.array([0, 2, 3]), np.array([1, 1], np.uint64)))
    with pytest.raises(ValueError, match=r'word #0 \("a"\) has count 0'):
        hf_bpe.WordCounts((ok[0], ok[1], np.array([0, 1], np.uint64)))
    with pytest.raises(ValueError, match="offsets"):
        hf_bpe.WordCounts((ok[0], np.array([0, 1, 9]), ok[2]))
    big = (np.frombuffer(b"a", np.uint8), np.array([0, 1]), np.array([2**64 - 1], np.uint64))
    with pytest.raises(ValueError, match="overflows 64 bits"):
        hf_bpe.WordCounts(big) + hf_bpe.WordCounts(big)


def test_min_word_count_prunes_before_training():
    docs = corpus_docs("english", 300_000)
    counts = hf_bpe.count(docs, progress=False)
    kept = {w: n for w, n in counts.items() if n >= 3}
    pruned = counts.pruned(3)
    assert dict(pruned.items()) == kept and pruned.total == sum(kept.values())
    got = hf_bpe.train_from_counts(counts, vocab_size=800, min_word_count=3, progress=False)
    want = _core.train_merges(sorted(kept.items()), 800 - 257)
    assert got.merges == want
    assert hf_bpe.train_from_counts(counts, vocab_size=800, min_word_count=0, progress=False) == hf_bpe.train(
        docs, vocab_size=800, progress=False)
    with pytest.raises(ValueError, match="min_word_count must be >= 0"):
        hf_bpe.train_from_counts(counts, vocab_size=800, min_word_count=-1)


def test_module_doctest():
    import doctest

    import hf_bpe.training.counts

    res = doctest.testmod(hf_bpe.training.counts)
    assert res.attempted >= 2 and res.failed == 0


def test_huge_counts_stay_exact_and_arrays_are_not_cast_lossily():
    words = (np.frombuffer(b"abc", np.uint8), np.array([0, 1, 2, 3]), np.array([2**60, 2**60 + 1, 2**63], np.uint64))
    c = hf_bpe.WordCounts(words)
    assert c.most_common(2) == [(b"c", 2**63), (b"b", 2**60 + 1)] and c.total == 2**63 + 2**61 + 1
    with pytest.raises(ValueError, match="the counts array holds a negative value"):
        hf_bpe.WordCounts((words[0], words[1], np.array([1, -1, 2])))
    with pytest.raises(ValueError, match="the offsets array must hold integers"):
        hf_bpe.WordCounts((words[0], np.array([0, 1.5, 2, 3]), words[2]))
    with pytest.raises(ValueError, match="min_word_count=99 removed all 3 distinct words"):
        hf_bpe.train_from_counts(hf_bpe.WordCounts((words[0], words[1], np.array([1, 2, 3], np.uint64))),
                                 vocab_size=300, min_word_count=99)


def test_a_long_document_is_never_cut_inside_a_special_token():
    specials = ("ab cd",)
    doc = "!" * 3_000_000 + "ab cd" + "!!" + " xy zw " * 10
    got = hf_bpe.count([doc], special_tokens=specials, progress=False)
    assert dict(got.items()) == direct_count([doc], specials=specials)
    assert got[b"ab"] == 0 and got[b" cd"] == 0


def test_the_core_checks_arrays_it_trains_on():
    unsorted = (np.frombuffer(b"bca", np.uint8), np.array([0, 2, 3]), np.array([1, 1], np.uint64))
    with pytest.raises(ValueError, match="words must be distinct and sorted by bytes"):
        _core.train_merges(unsorted, 10)


def _dead_pid() -> int:
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_killed_save_leaves_nothing_a_later_save_keeps(tmp_path):
    # A save killed mid-write leaves its hidden temporary file; the next save of the same path
    # removes it (its process is gone) and keeps a live process's.
    counts = hf_bpe.count(["the cat sat on the mat"] * 3)
    path = tmp_path / "x.counts"
    dead = tmp_path / f".x.counts.tmp-{_dead_pid()}-0badc0de"
    live = tmp_path / f".x.counts.tmp-{os.getppid()}-0badc0de"
    dead.write_bytes(b"half a file")
    live.write_bytes(b"being written")
    counts.save(path)
    assert not dead.exists() and live.exists()
    assert hf_bpe.WordCounts.load(path) == counts


def test_the_same_specials_in_another_order_merge():
    texts = ["a<|a|>b the cat<|b|> sat", "the<|b|> mat<|a|>"]
    one = hf_bpe.count(texts[:1], special_tokens=["<|a|>", "<|b|>"])
    two = hf_bpe.count(texts[1:], special_tokens=["<|b|>", "<|a|>"])
    both = one + two
    assert both.special_tokens == one.special_tokens
    assert both == hf_bpe.count(texts, special_tokens=["<|a|>", "<|b|>"])


def test_every_single_bit_flip_is_a_format_error(tmp_path):
    # The header is under a checksum too: a flipped special token ("<" -> "=") or pattern
    # ("gpt2" -> "gpt3") would otherwise load and train into the vocabulary.
    counts = hf_bpe.count(["the cat sat on the mat, 12"] * 3, progress=False)
    data = counts.save(tmp_path / "c.counts").read_bytes()
    bad = tmp_path / "bad.counts"
    for i in range(len(data)):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[i] ^= 1 << bit
            bad.write_bytes(bytes(flipped))
            with pytest.raises(hf_bpe.FormatError, match="bad.counts: "):
                hf_bpe.WordCounts.load(bad)


def _with_header(data: bytes, head: dict, version: int) -> bytes:
    n = struct.unpack("<I", data[len(MAGIC):len(MAGIC) + 4])[0]
    arrays = data[len(MAGIC) + 4 + n + 4:]
    text = json.dumps(head).encode()
    crc = struct.pack("<I", zlib.crc32(text)) if version == 2 else b""
    return MAGIC + struct.pack("<I", len(text)) + text + crc + arrays


@pytest.mark.parametrize("change,words", [
    ({"words": 1e14}, "'words' is '100000000000000.0', not a non-negative integer"),
    ({"words": 10**14}, "truncated: the offsets array"),  # checked against the file's size, not allocated
    ({"word_bytes": -1}, "'word_bytes' is '-1'"),
    ({"words": True}, "'words' is 'True'"),
    ({"special_tokens": "<|endoftext|>"}, "'special_tokens' is '<|endoftext|>', not a list"),
    ({"special_tokens": ["a", "a"]}, "distinct non-empty strings"),
    ({"special_tokens": [5]}, "distinct non-empty strings"),
    ({"pattern": None}, "'pattern' is 'None', not a str"),
    ({"pattern": ""}, "'pattern' is empty"),
    ({"crc32": 2**40}, "'crc32'"),
    ({"version": 9}, "version 9; this hf_bpe reads versions 1 and 2"),
    ({"extra": 1}, "unknown field extra"),
    ({"words": None, "text_bytes": None}, "'words' is 'None'"),
])
def test_every_header_field_is_checked(tmp_path, change, words):
    counts = hf_bpe.count(["the cat sat on the mat"] * 3, progress=False)
    data = counts.save(tmp_path / "c.counts").read_bytes()
    n = struct.unpack("<I", data[len(MAGIC):len(MAGIC) + 4])[0]
    head = json.loads(data[len(MAGIC) + 4:len(MAGIC) + 4 + n])
    head.update(change)
    (tmp_path / "h.counts").write_bytes(_with_header(data, head, 2))
    with pytest.raises(hf_bpe.FormatError, match="h.counts: .*" + re.escape(words)):
        hf_bpe.WordCounts.load(tmp_path / "h.counts")
    del head["documents"]
    (tmp_path / "m.counts").write_bytes(_with_header(data, {**head, **change}, 2))
    with pytest.raises(hf_bpe.FormatError, match="m.counts: "):
        hf_bpe.WordCounts.load(tmp_path / "m.counts")


def test_version_1_files_still_load(tmp_path):
    counts = hf_bpe.count(["the cat sat on the mat"] * 3, progress=False)
    data = counts.save(tmp_path / "c.counts").read_bytes()
    n = struct.unpack("<I", data[len(MAGIC):len(MAGIC) + 4])[0]
    head = json.loads(data[len(MAGIC) + 4:len(MAGIC) + 4 + n])
    (tmp_path / "v1.counts").write_bytes(_with_header(data, dict(head, version=1), 1))
    assert hf_bpe.WordCounts.load(tmp_path / "v1.counts") == counts
