"""The miss path (a piece no cache holds: whole-token lookup, folded characters, the short merge,
the long merge) equals independent merges on random pieces of 1 byte to 100 KB, for every
vocabulary in ``../shared/data``.

Each piece goes to the core as one word (``segment_words``: no pre-tokenization, no cache). The
references: the readable merge of ``hf_bpe.reference`` (pieces up to 200 bytes), and the real
libraries at every length: ``tokenizers``' BPE model (merges files) and tiktoken's
``encode_single_piece`` (rank files).
"""

from __future__ import annotations

import base64
import functools
import random

import numpy as np
import pytest

import hf_bpe
from hf_bpe import _core
from hf_bpe.reference import _encode_by_ranks, encode_word_reference
from conftest import corpus_slice, model_files, openai_files

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

tiktoken = pytest.importorskip("tiktoken")
import tiktoken.load  # noqa: E402
tokenizers = pytest.importorskip("tokenizers")

# GPT-2 and the rank files rebuilt from the package; the released models' files (tests/fixtures)
MERGES_FILES = {"gpt2": openai_files() / "gpt2" / "tokenizer.json"} | {
    p.parent.name: p for p in sorted(model_files().glob("*/tokenizer.json"))}
RANK_FILES = {p.stem: p for p in sorted(openai_files().glob("*.tiktoken"))}
VOCABS = sorted(MERGES_FILES) + sorted(RANK_FILES)
REFERENCE_MAX = 200  # the pure-Python merge is quadratic: short pieces only


def _byte_chars() -> list[str]:
    """GPT-2's byte -> printable character map (what a byte-level tokenizer.json spells)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


BYTE_CHARS = _byte_chars()


class Vocab:
    """hf_bpe's encoder of one vocabulary and the references for a raw piece."""

    def __init__(self, name: str):
        self.name = name
        if name in RANK_FILES:
            self.bpe = hf_bpe.BPE.from_tiktoken(RANK_FILES[name], pattern=r"\S+")
            ranks = tiktoken.load.load_tiktoken_bpe(str(RANK_FILES[name]))
            self.core = tiktoken.Encoding(name, pat_str=r"\S+", mergeable_ranks=ranks, special_tokens={})._core_bpe
        else:
            self.bpe = hf_bpe.BPE.load(MERGES_FILES[name])
            self.model = tokenizers.Tokenizer.from_file(str(MERGES_FILES[name])).model
            self.merges = self.bpe.merges
        self.id_of: dict[bytes, int] = {}
        for i, b in sorted(self.bpe.vocab.items()):  # (a special token's text never shadows a token)
            self.id_of.setdefault(b, i)
        # Bytes without a token (GPT-NeoX has a few) never reach the merge: the encoder's
        # pipeline takes them out first (tokenizers drops them). Pieces here leave them out.
        self.missing = bytes(b for b in range(256) if bytes([b]) not in self.id_of)

    def usable(self, piece: bytes) -> bytes:
        return piece.translate(None, self.missing) if self.missing else piece

    def ours(self, pieces: list[bytes]) -> list[list[int]]:
        flat = np.frombuffer(b"".join(pieces), dtype=np.uint8)
        offsets = np.cumsum([0] + [len(p) for p in pieces], dtype=np.int64)
        ids, offs = _core.segment_words(self.bpe._encoder(), flat, offsets)
        return [ids[offs[i]:offs[i + 1]].tolist() for i in range(len(pieces))]

    def library(self, piece: bytes) -> list[int]:
        if self.name in RANK_FILES:
            return list(self.core.encode_single_piece(piece))
        return [t.id for t in self.model.tokenize("".join(BYTE_CHARS[b] for b in piece))]

    def reference(self, piece: bytes) -> list[int]:
        if self.name in RANK_FILES:  # a piece that is a token is that token, as in tiktoken
            parts = [piece] if piece in self.id_of else _encode_by_ranks(piece, self._split_ranks())
            return [self.id_of[t] for t in parts]
        return [self.id_of[t] for t in encode_word_reference(piece, self.merges)]

    @functools.cache
    def _split_ranks(self) -> dict[tuple[bytes, bytes], int]:
        """tiktoken's rule as pairs: two parts merge with the rank of their concatenation."""
        out = {}
        for tok, rank in self.id_of.items():
            for k in range(1, len(tok)):
                out[(tok[:k], tok[k:])] = rank
        return out


@functools.cache
def vocab(name: str) -> Vocab:
    return Vocab(name)


@functools.cache
def texts() -> dict[str, bytes]:
    return {name: corpus_slice(name, 400_000).encode() for name in ("english", "code", "multilingual")}


KINDS = ("text", "run", "random", "base64", "cjk", "nospace")


def make_piece(kind: str, length: int, seed: int) -> bytes:
    """A piece of exactly ``length`` bytes (it may cut a character: pieces are bytes)."""
    rng = random.Random(seed)
    corpus = texts()[("english", "code", "multilingual")[seed % 3]]
    if kind == "text":
        start = rng.randrange(len(corpus) - length) if length < len(corpus) else 0
        out = corpus[start:start + length]
    elif kind == "run":
        unit = corpus[(s := rng.randrange(len(corpus) - 8)):s + rng.randint(1, 6)]
        out = unit * (length // len(unit) + 1)
    elif kind == "random":
        out = rng.randbytes(length)
    elif kind == "base64":
        out = base64.b64encode(rng.randbytes(length))
    elif kind == "cjk":
        out = "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(length // 3 + 1)).encode()
    else:  # words without their spaces, as a language without spaces or a superword piece
        words = corpus.split()
        i = rng.randrange(len(words))
        out = b"".join(words[i:i + length])
        while len(out) < length:
            out += out or b"x"
    out = out[:length]
    while len(out) < length:
        out += out or b"a"
    return out[:length]


LENGTHS = st.one_of(st.integers(1, 16), st.integers(17, REFERENCE_MAX), st.integers(REFERENCE_MAX + 1, 5_000),
                    st.integers(5_001, 100_000))


@pytest.mark.parametrize("name", VOCABS)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.lists(st.tuples(st.sampled_from(KINDS), LENGTHS, st.integers(0, 2**32)), min_size=1, max_size=6))
def test_random_pieces_equal_the_reference_merges(name, data):
    v = vocab(name)
    pieces = [p for kind, length, seed in data if (p := v.usable(make_piece(kind, length, seed)))]
    for piece, got in zip(pieces, v.ours(pieces)):
        want = v.library(piece)
        assert got == want, f"{name}: {len(piece)}-byte piece {piece[:60]!r}...: ours {got[:20]} library {want[:20]}"
        if len(piece) <= REFERENCE_MAX:
            assert got == v.reference(piece), f"{name}: {piece!r} differs from hf_bpe.reference"


@pytest.mark.parametrize("name", VOCABS)
def test_the_long_worst_cases_equal_the_library(name):
    # One run of a letter (every pair ties), a base64 blob and a CJK line, 100 KB each.
    v = vocab(name)
    pieces = [v.usable(p) for p in (b"a" * 100_000, make_piece("base64", 100_000, 1), make_piece("cjk", 99_999, 2), b" " * 100_000)]
    for piece, got in zip(pieces, v.ours(pieces)):
        assert got == v.library(piece), f"{name}: {piece[:20]!r}... ({len(piece)} bytes)"
