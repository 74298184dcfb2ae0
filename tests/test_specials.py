"""One special-token matcher with one rule, wherever text is split at special tokens.

The rule (``src/specials.rs``): left to right, at the leftmost position where an *allowed*
special starts, the longest allowed special there wins; a special that is not allowed is plain
text and never hides an allowed one. The disallowed check names the special that starts first
(the shorter of two at one start). Training splits on every special.

Checked here against a small reference implementation of the rule, across counting (texts and
files), encoding (single calls, parallel batches, files) and the check; and against tiktoken
wherever its answer does not depend on chance: where two specials start at one position,
tiktoken takes whichever its regex alternation lists first, an order that comes from a hash
map (it may take the shorter, or a disallowed one that then hides an allowed one), so the
comparison leaves out texts where an allowed special starts together with another special.
"""
from __future__ import annotations

import collections
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hf_bpe
from hf_bpe import _core

SPECIALS = ["<a>", "<a><b>", "<<a>>", "<b>"]
IDS = {s: 300 + i for i, s in enumerate(SPECIALS)}
PATTERNS = ["gpt2", "cl100k", "o200k", r"\w+|\s+|[^\w\s]+"]
BYTES = {i: bytes([i]) for i in range(256)}


def ref_split(text: str, allowed: set[str]) -> list[str | tuple[str]]:
    """The rule, written plainly: text runs as str, specials as 1-tuples. (Every special here
    starts with '<', so only those positions are tried.)"""
    out: list[str | tuple[str]] = []
    last = 0
    for i in (m.start() for m in re.finditer("<", text)):
        if i < last:
            continue
        found = [s for s in allowed if text.startswith(s, i)]
        if found:
            s = max(found, key=len)
            if last < i:
                out.append(text[last:i])
            out.append((s,))
            last = i + len(s)
    if last < len(text):
        out.append(text[last:])
    return out


def ref_first(text: str, disallowed: set[str]) -> str | None:
    """The disallowed special that starts first; the shorter of two at one start."""
    hits = [(m.start(), len(s), s) for s in disallowed for m in re.finditer(f"(?={re.escape(s)})", text)]
    return min(hits)[2] if hits else None


def ref_ids(enc: _core.Encoder, text: str, allowed: set[str]) -> list[int]:
    ids: list[int] = []
    for part in ref_split(text, allowed):
        ids.extend([IDS[part[0]]] if isinstance(part, tuple) else enc.encode_ordinary(part))
    return ids


def ref_counts(pattern: str, text: str) -> dict[bytes, int]:
    c: collections.Counter[bytes] = collections.Counter()
    for part in ref_split(text, set(SPECIALS)):
        if isinstance(part, str):
            c.update(p.encode() for p in _core.pretokenize(pattern, part))
    return dict(c)


ENCODERS = {p: _core.Encoder(BYTES, None, IDS, p) for p in PATTERNS}
pieces = st.sampled_from(SPECIALS + ["<", ">", "<a", "b>", "<<", ">>", "a", " b", "x y", "\n", "é", "12", "  "])
texts = st.lists(pieces, max_size=25).map("".join)
subsets = st.sets(st.sampled_from(SPECIALS))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, allowed=subsets, pattern=st.sampled_from(PATTERNS))
def test_encoding_and_the_check_follow_the_rule(text, allowed, pattern):
    enc = ENCODERS[pattern]
    arg = sorted(allowed)
    assert enc.encode(text, allowed_special=arg, disallowed_special=()) == ref_ids(enc, text, allowed)
    first = ref_first(text, set(SPECIALS) - allowed)
    if first is None:
        assert enc.encode(text, allowed_special=arg) == ref_ids(enc, text, allowed)
    else:
        with pytest.raises(ValueError, match=re.escape(repr(first).replace("'", '"'))):
            enc.encode(text, allowed_special=arg)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, pattern=st.sampled_from(PATTERNS))
def test_counting_splits_on_every_special_by_the_rule(text, pattern):
    wc = _core.WordCounter(pattern, SPECIALS, 2)
    wc.add_texts([text])
    assert dict(wc.words()) == ref_counts(pattern, text)


def _big_text(specials_at: list[int], size: int) -> str:
    """About `size` characters of filler (with near-misses such as "<a" and "b>") with each
    special of SPECIALS placed to start at the given offsets, and a special at the very end."""
    filler = "a<b c< <a b> lorem ipsum\n"
    base = (filler * (size // len(filler) + 1))[:size]
    out = list(base)
    for k, at in enumerate(specials_at):
        s = SPECIALS[k % len(SPECIALS)]
        out[at:at + len(s)] = list(s)
    return "".join(out) + "<a><b>"


BLOCK = 2 << 20  # the reader's block size (src/corpus/read.rs BLOCK_BYTES)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_files_batches_and_texts_agree_at_block_and_unit_cuts(tmp_path, pattern):
    # Specials straddling the reader's first block boundary and the batch's unit cuts.
    at = [BLOCK - k for k in range(1, 7)] + [BLOCK + 3, 70_000, 131_069, 262_141]
    text = _big_text(sorted(set(at)), BLOCK + 200_000)
    enc = ENCODERS[pattern]
    want = ref_ids(enc, text, set(SPECIALS))
    assert enc.encode(text, allowed_special="all") == want
    ids, off = enc.encode_batch_flat([text, text[:300_000]], allowed_special="all", num_threads=2)
    assert ids[: off[1]].tolist() == want
    assert ids[off[1]:].tolist() == ref_ids(enc, text[:300_000], set(SPECIALS))
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    import numpy as np

    enc.encode_file(str(path), str(tmp_path / "out.npy"), allowed_special="all", num_threads=2)
    assert np.load(tmp_path / "out.npy").tolist() == want
    # Counting the file and the text give the rule's counts.
    wc = _core.WordCounter(pattern, SPECIALS, 2)
    wc.add_file(str(path))
    assert dict(wc.words()) == ref_counts(pattern, text)
    # The check finds a disallowed special deep in a big batch, named as the rule says.
    with pytest.raises(ValueError, match='"<<a>>"'):
        enc.encode_batch_flat([text.replace("<", "(") + "<<a>>"], num_threads=2)


def test_a_disallowed_special_never_hides_an_allowed_one():
    enc = ENCODERS["gpt2"]
    got = enc.encode("x<a><b>y", allowed_special=["<a>"], disallowed_special=())
    assert got == [ord("x"), IDS["<a>"], *b"<b>y"]
    assert enc.encode("x<a><b>y", allowed_special="all") == [ord("x"), IDS["<a><b>"], ord("y")]


tiktoken = pytest.importorskip("tiktoken")
TIK = tiktoken.Encoding("bytes", pat_str=_core.pattern_source("gpt2"),
                        mergeable_ranks={bytes([i]): i for i in range(256)}, special_tokens=IDS)


def _unambiguous(text: str, allowed: set[str]) -> bool:
    """No allowed special starts at a position where another special starts too."""
    for i in range(len(text)):
        here = [s for s in SPECIALS if text.startswith(s, i)]
        if len(here) > 1 and allowed & set(here):
            return False
    return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, allowed=subsets)
def test_tiktoken_agrees_wherever_its_answer_is_not_left_to_chance(text, allowed):
    enc = ENCODERS["gpt2"]
    # The disallowed check raises exactly when tiktoken's does, whatever the order.
    ours_raises = ref_first(text, set(SPECIALS) - allowed) is not None
    try:
        TIK.encode(text, allowed_special=allowed)
        theirs_raises = False
    except ValueError:
        theirs_raises = True
    assert ours_raises == theirs_raises
    if not _unambiguous(text, allowed):
        return
    assert enc.encode(text, allowed_special=sorted(allowed), disallowed_special=()) == \
        TIK.encode(text, allowed_special=allowed, disallowed_special=())
    if not ours_raises:
        assert enc.encode(text, allowed_special=sorted(allowed)) == TIK.encode(text, allowed_special=allowed)


def test_where_two_specials_start_together_the_longest_allowed_wins():
    # tiktoken's answer here depends on its alternation order; ours does not.
    enc = ENCODERS["gpt2"]
    assert enc.encode("<a><b>", allowed_special="all") == [IDS["<a><b>"]]
    assert enc.encode("<a><b>", allowed_special=["<a><b>"], disallowed_special=()) == [IDS["<a><b>"]]
    assert enc.encode("<a><b>", allowed_special=["<a>"], disallowed_special=()) == [IDS["<a>"], *b"<b>"]


def test_the_rule_holds_through_offsets_the_hf_class_and_training(tmp_path):
    bpe = hf_bpe.BPE({i: bytes([i]) for i in range(256)}, [], IDS, "gpt2")
    ids, offsets = bpe.encode_with_offsets("x<a><b>y", allowed_special={"<a>"}, disallowed_special=())
    assert ids == [ord("x"), IDS["<a>"], *b"<b>y"]
    assert offsets[:2] == [(0, 1), (1, 4)]
    assert bpe.encode_with_offsets("x<a><b>y", allowed_special="all")[0] == [ord("x"), IDS["<a><b>"], ord("y")]
    pytest.importorskip("transformers")
    tok = hf_bpe.BPETokenizer.from_bpe(bpe)
    assert tok("x<a><b>y<<a>>")["input_ids"] == ref_ids(ENCODERS["gpt2"], "x<a><b>y<<a>>", set(SPECIALS))
    # Training splits on every special by the rule: no learned token holds a part of one.
    trained = hf_bpe.train(["x<a><b>y <<a>> z<b>"] * 20, vocab_size=300, special_tokens=SPECIALS, progress=False)
    learned = [t for i, t in trained.vocab.items() if i >= 256 and i not in trained.special_tokens.values()]
    assert learned and not any(b"<a" in t or b"b>" in t or b"<<" in t for t in learned), learned
