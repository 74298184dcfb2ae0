"""Stage 2 of superword training on pieces (``_core.segment_pieces``): the spans cut where no
merge can cross and identical pieces counted once train to the merges of the whole spans, and a
merge below the floor sends the training back to the whole spans."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hf_bpe
from hf_bpe import _core, reference
from hf_bpe.training.superword import span_pattern
from test_superword import _TEXT, GPT2, sample_docs

# Spans a stage-1 merge may join inside (contractions, non-ASCII, punctuation runs), repeated so
# that their pairs count.
ODD = ["'sup it's,.. x , y日本 語 \u3000 a\u2003 b €\u00a0c", "ab'sup 'll,.!? 3.14 x2 2x", "Don't—no; «quoted» text."] * 30


def _stage2_inputs(texts: list[str], transition: int):
    stage1 = hf_bpe.train(texts, transition, special_tokens=[], progress=False)
    spans = hf_bpe.count(texts, pattern=span_pattern("gpt2"), special_tokens=[], progress=False)
    (b, o, word_counts), span_words, span_ends = _core.split_spans((spans.bytes, spans.offsets, spans.counts), "gpt2")
    return stage1, (b, o, word_counts, span_words, span_ends, spans.counts)


def _train(stage1: hf_bpe.BPE, ids, offsets, counts, new: int, floor: int = 0, **options):
    special = {t.id for t in stage1.added_tokens}
    multi = sorted((i, t) for i, t in stage1.vocab.items() if len(t) >= 2 and i not in special)
    lut = np.zeros(stage1.vocab_size, dtype=np.uint32)
    for i, t in stage1.vocab.items():
        if len(t) == 1:
            lut[i] = t[0]
    lut[[i for i, _ in multi]] = np.arange(256, 256 + len(multi), dtype=np.uint32)
    return _core.train_merges_extending([t for _, t in multi], stage1.merges, ids, offsets, counts, new,
                                        internal=lut, floor=floor, **options)


@pytest.mark.parametrize("name", ["sample", "code", "multilingual"])
@pytest.mark.parametrize("options", [{}, {"tie_break": "hf"}, {"min_frequency": 4, "max_token_length": 9}])
def test_pieces_train_to_the_merges_of_the_whole_spans(name, options):
    from conftest import corpus_docs

    texts = sample_docs(300_000, skip=1_000_000) if name == "sample" else corpus_docs(name, 300_000)
    stage1, (b, o, wc, sw, se, sc) = _stage2_inputs(texts + ODD, 600)
    new = 300
    pieces = _core.segment_pieces(stage1._encoder(), b, o, wc, sw, se, sc, new)
    assert pieces is not None
    ids, offsets, counts, floor = pieces
    assert floor > options.get("min_frequency", 0), "the floor is not active"
    whole_ids, whole_offsets = _core.segment_spans(stage1._encoder(), None, None, b, o, sw, se, checked=True)
    assert floor >= 2 and len(ids) < len(whole_ids), "nothing was cut or counted once"
    # Each piece once, and no more pair occurrences than the spans hold.
    assert len({tuple(ids[offsets[i]:offsets[i + 1]]) for i in range(len(counts))}) == len(counts)
    assert int(((np.diff(offsets) - 1) * counts).sum()) <= int(((np.diff(whole_offsets) - 1) * sc).sum())
    want = _train(stage1, whole_ids, whole_offsets, sc, new, **options)
    got = _train(stage1, ids, offsets, counts, new, floor, **options)
    assert want is not None and got == want


def test_a_floor_above_every_count_is_reported_unless_min_frequency_stops_first(docs):
    stage1, (b, o, wc, sw, se, sc) = _stage2_inputs(docs, 500)
    ids, offsets = _core.segment_spans(stage1._encoder(), None, None, b, o, sw, se, checked=True)
    top = int(sc.max()) * 64
    assert _train(stage1, ids, offsets, sc, 50, floor=top) is None
    assert _train(stage1, ids, offsets, sc, 50, floor=top, min_frequency=top) == []
    assert _train(stage1, ids, offsets, sc, 50, floor=2) == _train(stage1, ids, offsets, sc, 50)


def test_a_merge_below_the_floor_trains_the_whole_spans(docs, monkeypatch):
    """With the floor raised above every count, the pieces' training gives up and the whole
    spans give the reference's merges."""
    seen: list[object] = []
    cut, train = _core.segment_pieces, _core.train_merges_extending

    def high_floor(*args):
        out = cut(*args)
        assert out is not None, "the pieces were not cut"
        return (*out[:3], 10**12)

    def recorded(*args, **kwargs):
        seen.append(out := train(*args, **kwargs))
        return out

    monkeypatch.setattr(_core, "segment_pieces", high_floor)
    monkeypatch.setattr(_core, "train_merges_extending", recorded)
    got = hf_bpe.train(docs, 700, special_tokens=[], superword_transition=520, progress=False)
    want = reference.train_superword_reference(docs, 520 - 256, 700 - 256, GPT2, span_pattern("gpt2"))
    assert got.merges == want
    assert seen[0] is None and seen[1] is not None and len(seen) == 2


@pytest.fixture(scope="module")
def stage1() -> hf_bpe.BPE:
    # (Merges across contractions, digits, punctuation runs and non-ASCII letters and spaces.)
    return hf_bpe.train(sample_docs(60_000) + ODD, 900, special_tokens=[], progress=False)


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(_TEXT, min_size=1, max_size=8))
def test_spans_cut_at_their_words_equal_each_span_merged_whole(stage1, texts):
    """Where a span is cut at its words (``may_join``: classes, contractions, a space after a char
    that is not whitespace) it gets the tokens of the span merged whole."""
    spans = hf_bpe.count(texts, pattern=span_pattern("gpt2"), special_tokens=[], progress=False)
    (b, o, _), span_words, span_ends = _core.split_spans((spans.bytes, spans.offsets, spans.counts), "gpt2")
    got = _core.segment_spans(stage1._encoder(), None, None, b, o, span_words, span_ends, checked=True)
    want = _core.segment_words(stage1._encoder(), spans.bytes, spans.offsets)
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    # The same texts many times over: pieces with a floor train to the whole spans' merges.
    counts = spans.counts * 40
    pieces = _core.segment_pieces(stage1._encoder(), b, o, _words_in(span_words, span_ends, counts, len(o) - 1),
                                  span_words, span_ends, counts, 20)
    if pieces is not None:
        whole = _train(stage1, *got, counts, 20)
        cut = _train(stage1, pieces[0], pieces[1], pieces[2], 20, pieces[3])
        assert cut is None or cut == whole


def _words_in(span_words, span_ends, span_counts, n_words):
    """Each word's count in all spans (what the split gives as the word counts)."""
    per_word = np.repeat(span_counts, np.diff(span_ends))
    return np.bincount(span_words, weights=per_word, minlength=n_words).astype(np.uint64)


def test_a_reused_token_or_hf_with_max_token_length_gives_up_or_refuses():
    syms = np.array([97, 98] * 50, dtype=np.uint32)
    offsets = np.arange(0, 101, 2, dtype=np.int64)
    counts = np.ones(50, dtype=np.uint64)
    train = _core.train_merges_extending
    # "a" "b" merge into "ab", a token of the base: its occurrences would have two make-ups.
    assert train([b"ab"], [(b"a", b"b")], syms, offsets, counts, 5) == []
    assert train([b"ab"], [(b"a", b"b")], syms, offsets, counts, 5, floor=2) is None
    assert train([b"ab"], [(b"a", b"b")], syms, offsets, counts, 5, min_frequency=9, floor=2) is None
    assert train([b"xy"], [], syms, offsets, counts, 1, floor=2) == [(b"a", b"b")]
    # (With no pair left, the whole spans might still hold pairs below the floor.)
    assert train([b"xy"], [], syms, offsets, counts, 5, floor=2) is None
    with pytest.raises(ValueError, match="not with tie_break='hf' and max_token_length"):
        train([b"xy"], [], syms, offsets, counts, 5, tie_break="hf", max_token_length=4, floor=2)


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return sample_docs(60_000)


def test_segment_pieces_names_counts_that_do_not_fit(docs):
    stage1, (b, o, wc, sw, se, sc) = _stage2_inputs(docs, 500)
    with pytest.raises(ValueError, match="span counts for"):
        _core.segment_pieces(stage1._encoder(), b, o, wc, sw, se, sc[:-1], 50)
    with pytest.raises(ValueError, match="word counts for"):
        _core.segment_pieces(stage1._encoder(), b, o, wc[:-1], sw, se, sc, 50)
    with pytest.raises(ValueError, match="span_ends must rise"):
        _core.segment_pieces(stage1._encoder(), b, o, wc, sw, se[::-1].copy(), sc, 50)
    assert _core.segment_pieces(stage1._encoder(), b, o, wc, sw, se, sc, 0) is None
