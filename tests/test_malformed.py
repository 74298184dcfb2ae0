"""The malformed-input catalogue: every bad file or argument gets the exact error class and a
message that names the file and line, the token, or the argument at fault, never a panic or a
bare OverflowError/TypeError from deep inside (also for a vocabulary saved here and then broken)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import hf_bpe
from hf_bpe import BPE, FormatError, _core
from hf_bpe.formats.alphabet import token_to_str

BYTES = {token_to_str(bytes([b])): b for b in range(256)}


def _gpt2(d: Path, vocab=None, merges="#version: 0.2\nĠ t\n", raw_vocab: bytes | None = None) -> Path:
    d.mkdir(exist_ok=True)
    v = dict(BYTES) if vocab is None else vocab
    if vocab is None:
        v["Ġt"] = 256
    (d / "vocab.json").write_bytes(raw_vocab if raw_vocab is not None else json.dumps(v).encode())
    (d / "merges.txt").write_bytes(merges.encode() if isinstance(merges, str) else merges)
    return d


def _tj(d: Path, edit) -> Path:
    d.mkdir(exist_ok=True)
    raw = {"version": "1.0", "added_tokens": [], "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                                                                   "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "vocab": {**BYTES, "Ġt": 256}, "merges": [["Ġ", "t"]]}}
    edit(raw)
    (d / "tokenizer.json").write_text(json.dumps(raw))
    return d / "tokenizer.json"


def _split(regex: str) -> dict:
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


def _tik(d: Path, body: bytes, name: str = "x.tiktoken") -> Path:
    import base64

    d.mkdir(exist_ok=True)
    p = d / name
    lines = body if body is not None else b""
    if body == b"FULL":
        lines = b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256))
    p.write_bytes(lines)
    return p


def _full_tik() -> bytes:
    import base64

    return b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256))


# (id, make(tmp) -> callable, exception, regex the message must match)
FILES = [
    # vocab.json
    ("vocab-invalid-json", lambda t: lambda: BPE.load(_gpt2(t / "d", raw_vocab=b"{oops")), FormatError, r"vocab\.json: line 1 column \d+: invalid JSON"),
    ("vocab-not-object", lambda t: lambda: BPE.load(_gpt2(t / "d", raw_vocab=b"[1, 2]")), FormatError, r"vocab\.json: expected a JSON object"),
    ("vocab-negative-id", lambda t: lambda: BPE.load(_gpt2(t / "d", vocab={**BYTES, "x": -1})), FormatError, r"vocab\.json: token 'x' has id -1"),
    ("vocab-string-id", lambda t: lambda: BPE.load(_gpt2(t / "d", vocab={**BYTES, "x": "7"})), FormatError, r"vocab\.json: token 'x' has id '7'"),
    ("vocab-float-id", lambda t: lambda: BPE.load(_gpt2(t / "d", vocab={**BYTES, "x": 3.5})), FormatError, r"vocab\.json: token 'x' has id 3\.5"),
    ("vocab-duplicate-id", lambda t: lambda: BPE.load(_gpt2(t / "d", vocab={**BYTES, "Ġt": 5})), FormatError, r"vocab\.json: id 5 is used by both"),
    ("vocab-huge-id", lambda t: lambda: BPE.load(_gpt2(t / "d", vocab={**BYTES, "Ġt": 2**32})), FormatError, r"vocab\.json: token 'Ġt' has id 4294967296, beyond the largest id"),
    ("vocab-key-twice", lambda t: lambda: BPE.load(_gpt2(t / "d", raw_vocab=b'{"a": 1, "a": 2}')), FormatError, r"vocab\.json: key 'a' appears twice"),
    ("vocab-not-utf8", lambda t: lambda: BPE.load(_gpt2(t / "d", raw_vocab=b'{"\xff": 1}')), FormatError, r"vocab\.json: line 1: not valid UTF-8"),
    # merges.txt
    ("merges-bad-header", lambda t: lambda: BPE.load(_gpt2(t / "d", merges="#version: 9\nĠ t\n")), FormatError, r"merges\.txt: line 1: unknown header"),
    ("merges-three-tokens", lambda t: lambda: BPE.load(_gpt2(t / "d", merges="#version: 0.2\nĠ t x\n")), FormatError, r"merges\.txt: line 2: expected two tokens"),
    ("merges-unknown-token", lambda t: lambda: BPE.load(_gpt2(t / "d", merges="#version: 0.2\nĠ zz\n")), FormatError, r"merges\.txt: line 2: token 'zz' is not in the vocabulary"),
    ("merges-result-missing", lambda t: lambda: BPE.load(_gpt2(t / "d", merges="#version: 0.2\nĠ t\na b\n")), FormatError, r"merges\.txt: line 3: the merge result 'ab' is not in the vocabulary"),
    ("merges-not-utf8", lambda t: lambda: BPE.load(_gpt2(t / "d", merges=b"#version: 0.2\n\xff t\n")), FormatError, r"merges\.txt: line 2: not valid UTF-8"),
    ("merges-double-space", lambda t: lambda: BPE.load(_gpt2(t / "d", merges="#version: 0.2\nĠ  t\n")), FormatError, r"merges\.txt: line 2: expected two tokens separated by one space"),
    # tokenizer.json
    ("tj-invalid-json", lambda t: lambda: (t.joinpath("tokenizer.json").write_text("{"), BPE.load(t / "tokenizer.json")), FormatError, r"tokenizer\.json: line 1 column \d+: invalid JSON"),
    ("tj-no-model", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r.pop("model"))), FormatError, r"tokenizer\.json: no 'model' object"),
    ("tj-wordpiece", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r["model"].update(type="WordPiece"))), FormatError, r"tokenizer\.json: model type 'WordPiece' is not BPE"),
    ("tj-bad-merge", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r["model"].update(merges=[["Ġ"]]))), FormatError, r"tokenizer\.json: merge #1 is \['Ġ'\], not a pair of tokens"),
    ("tj-added-no-content", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r.update(added_tokens=[{"id": 300}]))), FormatError, r"tokenizer\.json: added token #1 is .*not an object with a non-empty 'content'"),
    ("tj-added-bad-id", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r.update(added_tokens=[{"id": "x", "content": "<s>", "special": True}]))), FormatError, r"tokenizer\.json: added token '<s>' has id 'x'"),
    # tokenizers reads version "1.0" (or none) only, a string (issue 32, defect 11)
    ("tj-version-2", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r.update(version="2.0"))), FormatError, r"tokenizer\.json: version '2\.0': tokenizers reads version '1\.0' only"),
    ("tj-version-number", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r.update(version=1))), FormatError, r"tokenizer\.json: version 1: tokenizers reads version '1\.0' only"),
    ("tj-unsupported-pre", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r.update(pre_tokenizer={"type": "Metaspace"}))), FormatError, r"tokenizer\.json: pre_tokenizer Metaspace is not supported"),
    ("tj-truncation", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r.update(truncation={"max_length": 8}))), FormatError, r"tokenizer\.json: the tokenizer\.json sets truncation \{\"max_length\": 8\}"),
    ("tj-padding", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r.update(padding={"pad_id": 0}))), FormatError, r"tokenizer\.json: the tokenizer\.json sets padding .*truncation_and_padding='ignore'"),
    ("tj-split-dotall-s", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r.update(pre_tokenizer=_split(r"(?s).")))), FormatError, r"tokenizer\.json: pre_tokenizer Split: the regex .* uses the group option \(\?s"),
    ("tj-split-anchor-G", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r.update(pre_tokenizer=_split(r"\Ga|.")))), FormatError, r"uses the escape \\G"),
    ("tj-split-raw-byte", lambda t: lambda: BPE.load(_tj(t / "d", lambda r: r.update(pre_tokenizer=_split(r"[\xE9]|.")))), FormatError, r"uses the raw byte \\xE9"),
    # .tiktoken
    ("tik-one-field", lambda t: lambda: BPE.from_tiktoken(_tik(t, _full_tik() + b"QUJD\n")), FormatError, r"x\.tiktoken: line 257: expected 'base64-token rank'"),
    ("tik-bad-base64", lambda t: lambda: BPE.from_tiktoken(_tik(t, _full_tik() + b"!!! 300\n")), FormatError, r"x\.tiktoken: line 257: bad token or rank"),
    ("tik-negative-rank", lambda t: lambda: BPE.from_tiktoken(_tik(t, _full_tik() + b"QUJD -4\n")), FormatError, r"x\.tiktoken: line 257: negative rank -4"),
    ("tik-token-twice", lambda t: lambda: BPE.from_tiktoken(_tik(t, _full_tik() + b"QQ== 300\n")), FormatError, r"x\.tiktoken: line 257: token b'A' already has rank 65"),
    ("tik-rank-twice", lambda t: lambda: BPE.from_tiktoken(_tik(t, _full_tik() + b"QUJD 65\n")), FormatError, r"x\.tiktoken: line 257: rank 65 already used on line 66"),
    ("tik-empty", lambda t: lambda: BPE.from_tiktoken(_tik(t, b"")), FormatError, r"x\.tiktoken: no tokens"),
    ("tik-missing-byte", lambda t: lambda: BPE.from_tiktoken(_tik(t, b"\n".join(_full_tik().split(b"\n")[1:]))), FormatError, r"x\.tiktoken: the vocabulary lacks 1 of the 256 byte tokens \(e\.g\. byte 0x00\)"),
    ("tik-unknown-name", lambda t: lambda: BPE.load(_tik(t, _full_tik(), "mine.tiktoken")), FormatError, r"mine\.tiktoken: .*use BPE\.from_tiktoken"),
    ("tik-special-clash", lambda t: lambda: BPE.from_tiktoken(_tik(t, _full_tik()), special_tokens={"<x>": 65}), FormatError, r"x\.tiktoken: special token \"<x>\" has id 65, which the vocab gives to different bytes b'A'"),
    # corpora
    ("corpus-missing", lambda t: lambda: hf_bpe.train_files([t / "nope.txt"], vocab_size=300, progress=False), FileNotFoundError, r"nope\.txt: no such file"),
    ("corpus-latin1", lambda t: lambda: (t.joinpath("l.txt").write_bytes(b"abc \xe9t\xe9"), hf_bpe.train_files([t / "l.txt"], vocab_size=300, progress=False)), ValueError, r"l\.txt: invalid UTF-8 at byte offset 4"),
    ("jsonl-bad-json", lambda t: lambda: (t.joinpath("d.jsonl").write_text('{"text": "a"}\n{oops\n'), hf_bpe.train_files([t / "d.jsonl"], vocab_size=300, progress=False)), ValueError, r"d\.jsonl: line 2: invalid JSON"),
    ("jsonl-no-field", lambda t: lambda: (t.joinpath("d.jsonl").write_text('{"body": "a"}\n'), hf_bpe.train_files([t / "d.jsonl"], vocab_size=300, progress=False)), ValueError, r"d\.jsonl: line 1: no field \"text\""),
    ("jsonl-not-string", lambda t: lambda: (t.joinpath("d.jsonl").write_text('{"text": 5}\n'), hf_bpe.train_files([t / "d.jsonl"], vocab_size=300, progress=False)), ValueError, r"d\.jsonl: line 1: field \"text\" is not a string"),
    ("corpus-corrupt-gz", lambda t: lambda: (t.joinpath("c.txt.gz").write_bytes(_corrupt_gz()), hf_bpe.train_files([t / "c.txt.gz"], vocab_size=300, progress=False)), ValueError, r"c\.txt\.gz: .*(gzip-compressed: it may be corrupt|corrupt gzip data)"),
    ("corpus-directory", lambda t: lambda: hf_bpe.train_files([t], vocab_size=300, progress=False), (FileNotFoundError, IsADirectoryError, ValueError), r"test_a_malformed_file_is_named"),
]


def _corrupt_gz() -> bytes:
    data = bytearray(gzip.compress(("the quick brown fox " * 5000).encode()))
    for i in range(40, len(data) - 20, 97):
        data[i] ^= 0x5A
    return bytes(data)


@pytest.mark.parametrize("make, exc, pattern", [c[1:] for c in FILES], ids=[c[0] for c in FILES])
def test_a_malformed_file_is_named_in_the_error(tmp_path, make, exc, pattern):
    with pytest.raises(exc, match=pattern):
        make(tmp_path)()


def _bpe() -> BPE:
    return hf_bpe.train(["the cat sat on the mat"] * 5, vocab_size=270, progress=False)


ARGS = [
    ("vocab-size-float", lambda: hf_bpe.train(["a b"], vocab_size=1000.0), TypeError, r"vocab_size must be an int, not float"),
    ("vocab-size-small", lambda: hf_bpe.train(["a b"], vocab_size=257, special_tokens=["<a>", "<b>"]), ValueError, r"vocab_size=257 is below 256 byte tokens \+ 2 special tokens = 258"),
    ("vocab-size-huge", lambda: hf_bpe.train(["a b"], vocab_size=2**64), ValueError, r"vocab_size=18446744073709551616 is above the largest vocabulary"),
    ("tie-break", lambda: hf_bpe.train(["a b"], vocab_size=300, tie_break="random"), ValueError, r"tie_break must be 'lexicographic' or 'hf', not 'random'"),
    ("pattern-compile", lambda: hf_bpe.train(["a b"], vocab_size=300, pattern="(unclosed"), ValueError, r"\(unclosed"),
    ("special-twice", lambda: hf_bpe.train(["a b"], vocab_size=300, special_tokens=["<a>", "<a>"]), ValueError, r"special token '<a>' is listed twice"),
    ("special-one-byte", lambda: hf_bpe.train(["a b"], vocab_size=300, special_tokens=["a"]), ValueError, r"special token 'a' is one byte"),
    ("special-not-str", lambda: hf_bpe.train(["a b"], vocab_size=300, special_tokens="<a>"), TypeError, r"special_tokens must be a list of strings, not the string '<a>'"),
    ("texts-a-str", lambda: hf_bpe.train("a b c", vocab_size=300), TypeError, r"not a single string"),
    ("doc-not-str", lambda: hf_bpe.train(["a", 5], vocab_size=300), TypeError, r"document #1 is a int"),
    ("threads-negative", lambda: hf_bpe.train(["a b"], vocab_size=300, num_threads=-1), ValueError, r"num_threads=-1 must be 0 or more"),
    ("threads-huge", lambda: _bpe().encode_batch(["a"], num_threads=2**20), ValueError, r"num_threads=1048576 is more than 1024 threads"),
    ("encode-batch-str", lambda: _bpe().encode_batch("hello"), TypeError, r"expected a list of str, got a single str"),
    ("decode-bytes", lambda: _bpe().decode(b"hi"), TypeError, r"expected a sequence of token ids, got bytes"),
    ("decode-unknown", lambda: _bpe().decode([99999]), ValueError, r"unknown token id 99999"),
    ("decode-float", lambda: _bpe().decode([1.5]), ValueError, r"token id 1\.5 is not a valid id"),
    ("hf-decode-float", lambda: hf_bpe.BPETokenizer.from_bpe(_bpe()).decode([104.0, 105.7]), ValueError, r"token id 104\.0 is not a valid id"),
    ("allowed-bad-str", lambda: _bpe().encode("a", allowed_special="some"), TypeError, r"expected 'all' or a collection of special tokens, got the string 'some'"),
    ("errors-bad", lambda: _bpe()._encoder().encode_file(__file__, "/tmp/x.npy", errors="loose"), ValueError, r"errors must be 'strict', 'replace' or 'ignore', not \"loose\""),
    ("separator-not-special", lambda: _bpe()._encoder().encode_file(__file__, "/tmp/x.npy", separator="<nope>"), ValueError, r"separator \"<nope>\" is not a special token"),
    ("cache-bytes-negative", lambda: setattr(_bpe(), "cache_bytes", -5), ValueError, r"cache_bytes must be a number of bytes"),
    ("core-merge-missing", lambda: _core.Encoder({i: bytes([i]) for i in range(256)}, [(b"a", b"b")], {}, "gpt2"), ValueError, r"merge #0 \(b'a', b'b'\) uses b'ab', which is not in the vocabulary"),
    ("core-sparse-id", lambda: _core.Encoder({i: bytes([i]) for i in range(256)}, [], {"<x>": 2**30}, "gpt2"), ValueError, r"token ids go up to 1073741824, far beyond the 257 tokens given"),
    ("core-empty-token", lambda: _core.Encoder({**{i: bytes([i]) for i in range(256)}, 300: b""}, None, {}, "gpt2"), ValueError, r"token 300 has empty bytes"),
]


@pytest.mark.parametrize("call, exc, pattern", [c[1:] for c in ARGS], ids=[c[0] for c in ARGS])
def test_a_bad_argument_is_named_in_the_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_the_catalogue_is_large_enough():
    assert len(FILES) + len(ARGS) >= 40


# ---- the same defects in a vocabulary saved here ------------------------------------------


def small_bpe(tmp_path: Path) -> BPE:
    docs = ["the cat sat on the mat. The hat is on the cat!", "héllo wörld 🙂 日本語 tests 123"] * 20
    return hf_bpe.train(docs, vocab_size=300, tie_break="lexicographic", progress=False)


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


@pytest.mark.parametrize(("line", "text", "error"), [
    (3, "Ġzz qq", r"merges\.txt: line 4: token 'Ġzz' is not in the vocabulary"),
    (2, "onlyonetoken", r"merges\.txt: line 3: expected two tokens"),
])
def test_a_bad_merges_line_is_named(tmp_path, good_pair, line, text, error):
    vocab, merges = good_pair
    lines = merges.split("\n")
    lines[line] = text
    d = write_pair(tmp_path / "bad", vocab, "\n".join(lines))
    with pytest.raises(FormatError, match=error):
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


def test_extending_words_of_ids_outside_the_base_or_the_map():
    import numpy as np

    ids, offsets, counts = np.array([1, 2, 300], np.uint32), np.array([0, 3], np.int64), np.array([5], np.uint64)
    with pytest.raises(ValueError, match=r"token id 300 is not below len\(internal\) = 10"):
        _core.train_merges_extending([], [], ids, offsets, counts, 3, internal=np.arange(10, dtype=np.uint32))
    with pytest.raises(ValueError, match="token id 300 of a word is not in the base vocabulary"):
        _core.train_merges_extending([], [], ids, offsets, counts, 3, internal=np.arange(400, dtype=np.uint32))
    with pytest.raises(ValueError, match="offsets must rise"):
        _core.train_merges_extending([], [], ids, np.array([0, 4], np.int64), counts, 3)
    mapped = _core.train_merges_extending([], [], np.array([3, 4, 3, 4], np.uint32), np.array([0, 4], np.int64), counts,
                                          2, internal=np.array([0, 0, 0, 1, 2], dtype=np.uint32))
    assert mapped == [(b"\x01", b"\x02"), (b"\x01\x02", b"\x01\x02")]
