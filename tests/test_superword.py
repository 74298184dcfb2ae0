"""Superword training (``superword_transition=``): both stages equal the reference trainer, stage 1
equals plain training, the spans' re-split counts equal counting the words, the span pattern
cuts as the ``regex`` module and ``tokenizers`` do, and a saved superword tokenizer encodes
alike in stock ``tokenizers``, ``transformers`` and ``BPE.load``."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

import hf_bpe
from hf_bpe import _core, reference
from hf_bpe.training.superword import span_pattern, word_pattern_of
from pretok_harness import pretok_settings

GPT2 = _core.pattern_source("gpt2")


def sample_docs(max_chars: int, skip: int = 0) -> list[str]:
    """Paragraphs of the corpus shipped in the package (no ../shared needed), about ``max_chars``."""
    with gzip.open(hf_bpe.sample_corpus(), "rt", encoding="utf-8") as f:
        text = f.read(skip + max_chars)[skip:]
    return [p for p in text.split("\n\n") if p.strip()]


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return sample_docs(60_000)


@pytest.fixture(scope="module")
def held_out() -> list[str]:
    return sample_docs(200_000, skip=3_000_000)


@pytest.mark.parametrize("tie_break", ["lexicographic", "hf"])
@pytest.mark.parametrize("max_words", [2, 4])
def test_both_stages_equal_the_reference(docs, tie_break, max_words):
    got = hf_bpe.train(docs, 700, special_tokens=[], tie_break=tie_break, superword_transition=520,
                       superword_max_words=max_words, progress=False)
    want = reference.train_superword_reference(docs, 520 - 256, 700 - 256, GPT2, span_pattern("gpt2", max_words),
                                               tie_break=tie_break)
    assert got.merges == want and got.vocab_size == 700
    assert got.pattern == span_pattern("gpt2", max_words)
    superwords = [t for i, t in got.vocab.items() if i >= 520 and b" " in t.strip(b" ")]
    assert superwords, "no token spans a word boundary"


def test_options_reach_both_stages(docs):
    got = hf_bpe.train(docs, 650, special_tokens=[], superword_transition=450, min_frequency=3, max_token_length=7,
                       progress=False)
    want = reference.train_superword_reference(docs, 450 - 256, 650 - 256, GPT2, span_pattern("gpt2"),
                                               min_frequency=3, max_token_length=7)
    assert got.merges == want
    assert max(len(t) for t in got.vocab.values()) <= 7


@pytest.mark.parametrize("tie_break", ["lexicographic", "hf"])
def test_stage_one_is_plain_training(docs, tie_break):
    plain = hf_bpe.train(docs, 600, tie_break=tie_break, progress=False)
    sw = hf_bpe.train(docs, 800, tie_break=tie_break, superword_transition=600, progress=False)
    assert sw.merges[:len(plain.merges)] == plain.merges
    assert {i: sw.vocab[i] for i in plain.vocab} == plain.vocab and sw.special_tokens == plain.special_tokens
    assert sorted(set(sw.vocab) - set(plain.vocab)) == list(range(600, 800))


def test_transition_at_vocab_size_is_plain_merges_over_spans(docs):
    plain = hf_bpe.train(docs, 600, progress=False)
    sw = hf_bpe.train(docs, 600, superword_transition=600, progress=False)
    assert sw.merges == plain.merges and sw.vocab == plain.vocab and sw.pattern == span_pattern("gpt2")


def test_files_and_counts_give_the_same_tokenizer(docs, tmp_path):
    sw = hf_bpe.train(docs, 700, superword_transition=550, progress=False)
    path = tmp_path / "docs.txt"
    path.write_text("<|endoftext|>".join(docs), encoding="utf-8")
    from_files = hf_bpe.train_files(path, 700, superword_transition=550, progress=False)
    spans = hf_bpe.count(docs, pattern=span_pattern("gpt2"), progress=False)
    from_counts = hf_bpe.train_from_counts(spans, 700, superword_transition=550, progress=False)
    assert from_files.merges == sw.merges == from_counts.merges
    with pytest.raises(ValueError, match="span counts"):
        hf_bpe.train_from_counts(hf_bpe.count(docs, progress=False), 700, superword_transition=550, progress=False)


@pytest.mark.parametrize("max_words", [1, 3, 4])
def test_split_spans_are_the_word_counts_and_each_span_its_words(held_out, max_words):
    spans = hf_bpe.count(held_out, pattern=span_pattern("gpt2", max_words), progress=False)
    (b, o, c), span_words, span_ends = _core.split_spans((spans.bytes, spans.offsets, spans.counts), "gpt2")
    words = hf_bpe.count(held_out, progress=False)
    assert (b.tobytes(), o.tolist(), c.tolist()) == (words.bytes.tobytes(), words.offsets.tolist(),
                                                     words.counts.tolist())
    word = [b[o[i]:o[i + 1]].tobytes() for i in range(len(o) - 1)]
    for i in range(len(spans)):
        got = [word[w] for w in span_words[span_ends[i]:span_ends[i + 1]]]
        assert got == [x.encode() for x in regex.findall(GPT2, spans.word(i).decode())]


def test_split_names_a_span_that_is_not_utf8_and_refuses_bad_offsets():
    import numpy as np

    arrays = (np.frombuffer(b"ok\xff\xfe", np.uint8), np.array([0, 2, 4], np.int64), np.array([2, 1], np.uint64))
    with pytest.raises(ValueError, match="span 1 .* not UTF-8"):
        _core.split_spans(arrays, "gpt2")
    text = np.frombuffer(b"ab c", np.uint8)
    for offsets, counts in (([0, 2**40], [1]), ([0, 3, 2, 4], [1, 1, 1]), ([0, 1, 2, 4], [1, 1])):
        with pytest.raises(ValueError, match="offsets must rise"):
            _core.split_spans((text, np.array(offsets, np.int64), np.array(counts, np.uint64)), "gpt2")


def test_a_span_of_count_zero_adds_no_word_and_is_given_none():
    import numpy as np

    b = b"ab cdab efgh"
    arrays = (np.frombuffer(b, np.uint8), np.array([0, 5, 7, 12], np.int64), np.array([0, 2, 1], np.uint64))
    (wb, wo, wc), span_words, span_ends = _core.split_spans(arrays, "gpt2")
    words = [wb[wo[i]:wo[i + 1]].tobytes() for i in range(len(wc))]
    assert list(zip(words, wc.tolist())) == [(b" efgh", 1), (b"ab", 2)]
    assert span_ends.tolist() == [0, 0, 1, 2] and [words[w] for w in span_words] == [b"ab", b" efgh"]


def test_split_and_segment_do_not_depend_on_the_threads(held_out, docs):
    code = textwrap.dedent("""
        import hashlib, sys
        import hf_bpe
        from hf_bpe import _core
        from hf_bpe.training.superword import span_pattern
        texts = sys.stdin.read().split("\\x00")
        stage1 = hf_bpe.train(texts[:200], 500, progress=False, num_threads=1)
        spans = hf_bpe.count(texts, pattern=span_pattern("gpt2"), progress=False)
        (b, o, c), sw, se = _core.split_spans((spans.bytes, spans.offsets, spans.counts), "gpt2")
        ids, offs = _core.segment_spans(stage1._encoder(), spans.bytes, spans.offsets, b, o, sw, se)
        h = hashlib.sha256()
        for a in (b, o, c, sw, se, ids, offs):
            h.update(a.tobytes())
        print(h.hexdigest())
    """)
    texts = "\x00".join(held_out)
    got = {n: subprocess.run([sys.executable, "-c", code], input=texts, capture_output=True, text=True, check=True,
                             env={**os.environ, "RAYON_NUM_THREADS": str(n)}).stdout for n in (1, 2, 5)}
    assert len(set(got.values())) == 1, got


_FRAGMENTS = ["the", " of", " the", " cat", ",", ".", "!", "?", "'s", "'ll", " 42", "7", "\n", "\n\n", "  ", "\t", " ",
              "é", " über", "...", " (x)", "—", "日本", " 3.14", "?!", "sup", "\u3000", "\u00a0"]
_TEXT = st.lists(st.sampled_from(_FRAGMENTS), max_size=40).map("".join)


@pretok_settings(300)
@given(text=_TEXT, max_words=st.integers(1, 16))
def test_span_pieces_equal_the_regex_module_and_split_at_word_boundaries(text, max_words):
    pattern = span_pattern("gpt2", max_words)
    want = [m.group() for m in regex.finditer(pattern, text)]
    assert _core.pretokenize(pattern, text) == want
    words = [m.group() for m in regex.finditer(GPT2, text)]
    assert [w for s in want for w in regex.findall(GPT2, s)] == words
    for s in want:
        assert "\n" not in s.strip() or not s.strip(), s
        assert len(regex.findall(GPT2, s)) <= max_words or not s.strip(), s


def test_saved_superword_tokenizer_encodes_alike_everywhere(docs, held_out, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    sw = hf_bpe.train(docs * 3, 900, superword_transition=600, progress=False)
    sw.save(tmp_path / "sw")
    stock = tokenizers.Tokenizer.from_file(str(tmp_path / "sw" / "tokenizer.json"))
    loaded = hf_bpe.BPE.load(tmp_path / "sw")
    texts = held_out[:300] + ["  indented  twice\n\tand\r\ntabs", "end. The start", "don't 'sup 1,234.5 über"]
    ours = sw.encode_batch(texts)
    assert [e.ids for e in stock.encode_batch(texts)] == ours
    assert loaded.encode_batch(texts) == ours
    assert all(_core.pretokenize(loaded.pattern, t) == _core.pretokenize(sw.pattern, t) for t in texts)
    assert word_pattern_of(sw.pattern) == word_pattern_of(loaded.pattern) == ("gpt2", 4)
    assert _core.pattern_engine(loaded.pattern) == "spans"
    used = {i for ids in ours for i in ids}
    assert any(i >= 600 and b" " in sw.vocab[i].strip(b" ") for i in used), "held-out text uses no superword"
    code = (f"from transformers import AutoTokenizer; t = AutoTokenizer.from_pretrained({str(tmp_path / 'sw')!r}); "
            f"import json, sys; print(json.dumps([t(x, add_special_tokens=False)['input_ids'] for x in "
            f"json.loads(sys.stdin.read())]))")
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(texts[:50]), capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout) == ours[:50]


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    (dict(superword_transition=200), ValueError, "between 257"),
    (dict(superword_transition=901), ValueError, "vocab_size=900"),
    (dict(superword_transition=600.0), TypeError, "must be an int"),
    (dict(superword_transition=600, superword_max_words=0), ValueError, "superword_max_words"),
    (dict(superword_transition=600, pattern="cl100k"), ValueError, "gpt2 pattern"),
])
def test_bad_options_are_clear_errors(docs, kwargs, error, match):
    with pytest.raises(error, match=match):
        hf_bpe.train(docs, 900, progress=False, **kwargs)


def test_superwords_and_a_base_do_not_combine(docs):
    base = hf_bpe.train(docs, 400, progress=False)
    with pytest.raises(ValueError, match="cannot be combined"):
        hf_bpe.train(docs, 600, base=base, superword_transition=500, progress=False)


def test_cli_trains_superwords(docs, tmp_path, capsys):
    from hf_bpe.tools.cli import main

    path = tmp_path / "docs.txt"
    path.write_text("<|endoftext|>".join(docs), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["train", str(path), "--vocab-size", "700", "--superword-transition", "550",
                 "--superword-max-words", "3", "--out", str(out), "--quiet"]) == 0
    want = hf_bpe.train_files(path, 700, superword_transition=550, superword_max_words=3, progress=False)
    got = hf_bpe.BPE.load(out)
    assert got.merges == want.merges and got.vocab == want.vocab
    capsys.readouterr()
    assert main(["train", str(path), "--vocab-size", "700", "--superword-transition", "100", "--out",
                 str(tmp_path / "bad"), "--quiet"]) == 1
    assert "superword_transition=100 must be between 257" in capsys.readouterr().err


def test_viz_page_shows_superword_tokens(docs):
    from hf_bpe.tools.viz import Viz

    sw = hf_bpe.train(docs * 3, 900, superword_transition=600, progress=False)
    text = "It was the best of times, it was the worst of times. The end"
    page = Viz({"sw": sw})
    shown = page.handle("/api/encode", {"name": "sw", "text": text})
    assert [t["id"] for t in shown["tokens"]] == sw.encode(text)
    assert [text[t["start"]:t["end"]] for t in shown["tokens"]] == [sw.decode([i]) for i in sw.encode(text)]
    first = page.handle("/api/encode", {"name": "sw", "text": text, "merges": 600 - 257})
    plain = hf_bpe.BPE(sw.vocab, sw.merges[:600 - 257], sw.special_tokens, sw.pattern)
    assert [t["id"] for t in first["tokens"]] == plain.encode(text)


@pytest.mark.parametrize("name", ["sample", "code", "multilingual"])
def test_spans_cut_from_their_words_equal_the_span_merge(docs, name):
    from conftest import corpus_docs

    texts = sample_docs(400_000, skip=1_000_000) if name == "sample" else corpus_docs(name, 400_000)
    texts += ["'sup it's,.. x , y日本 語 \u3000 a\u2003 b €\u00a0c", "ab'sup 'll,.!? 3.14 x2 2x"]
    stage1 = hf_bpe.train(docs + texts[:50], 700, progress=False)
    spans = hf_bpe.count(texts, pattern=span_pattern("gpt2"), progress=False)
    fast = _segment_spans(stage1._encoder(), spans)
    plain = _core.segment_words(stage1._encoder(), spans.bytes, spans.offsets)
    assert fast[0].tolist() == plain[0].tolist() and fast[1].tolist() == plain[1].tolist()
    with pytest.raises(ValueError, match="gpt2 pattern"):
        _segment_spans(hf_bpe.BPE(stage1.vocab, stage1.merges, stage1.special_tokens, "o200k")._encoder(), spans)


def _segment_spans(enc, spans):
    """The spans cut from their words, checked, vouched for and given as their words alone (all three alike)."""
    (b, o, _), span_words, span_ends = _core.split_spans((spans.bytes, spans.offsets, spans.counts), "gpt2")
    got = _core.segment_spans(enc, spans.bytes, spans.offsets, b, o, span_words, span_ends)
    vouched = _core.segment_spans(enc, spans.bytes, spans.offsets, b, o, span_words, span_ends, checked=True)
    alone = _core.segment_spans(enc, None, None, b, o, span_words, span_ends, checked=True)
    for other in (vouched, alone):
        assert got[0].tolist() == other[0].tolist() and got[1].tolist() == other[1].tolist()
    return got


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_counter_splits_its_spans_in_place_as_their_arrays_split(held_out, threads):
    import numpy as np

    pattern = span_pattern("gpt2")
    counter = hf_bpe.training.counting.count_words(held_out, pattern=pattern, num_threads=threads)
    spans = hf_bpe.count(held_out, pattern=pattern, progress=False)
    (b, o, c), sw, se = _core.split_spans((spans.bytes, spans.offsets, spans.counts), "gpt2")
    (gb, go, gc), gsw, gse, counts = counter.split_spans("gpt2")
    assert (gb.tobytes(), go.tolist(), gc.tolist()) == (b.tobytes(), o.tolist(), c.tolist())
    assert len(counter) == 0 and counts.dtype == np.uint64 and len(counts) == len(spans) > 1000
    word = [b[o[i]:o[i + 1]].tobytes() for i in range(len(o) - 1)]
    as_words = sorted((b"".join(word[w] for w in gsw[gse[i]:gse[i + 1]]), int(counts[i])) for i in range(len(counts)))
    assert as_words == sorted(zip((spans.word(i) for i in range(len(spans))), spans.counts.tolist()))
    with pytest.raises(ValueError, match="both bytes and offsets"):
        _core.segment_spans(hf_bpe.train(held_out[:50], 300, progress=False)._encoder(), spans.bytes, None, b, o,
                            sw, se)


@pytest.fixture(scope="module")
def two_units() -> list[str]:
    """Text of several work units (each about half a MiB), so that two threads both count."""
    return sample_docs(1_600_000)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("max_words", [3, 6])
def test_a_split_only_counter_gives_the_same_words_and_spans(two_units, threads, max_words):
    """A counter made for ``split_spans`` alone (superword training counts so: spans of up to 4
    words by their words' ids) splits into the same word counts and the same spans, each once
    (two threads meet the same spans here), also with the words first and the spans gathered
    meanwhile (``split_words``); its counts cannot be read any other way."""
    from collections import Counter

    pattern = span_pattern("gpt2", max_words)
    split = []
    for split_only, words_first in ((False, False), (True, False), (True, True)):
        counter = hf_bpe.training.counting.count_words(two_units, pattern=pattern, num_threads=threads,
                                                       split_only=split_only)
        if words_first:
            (b, o, c), gathering = counter.split_words("gpt2")
            sw, se, counts = gathering.take()
            with pytest.raises(ValueError, match="taken already"):
                gathering.take()
        else:
            (b, o, c), sw, se, counts = counter.split_spans("gpt2")
        word = [b[o[i]:o[i + 1]].tobytes() for i in range(len(o) - 1)]
        spans = Counter()
        for i in range(len(counts)):
            spans[b"".join(word[w] for w in sw[se[i]:se[i + 1]])] += int(counts[i])
        assert len(spans) == len(counts)
        split.append((b.tobytes(), o.tolist(), c.tolist(), spans))
    assert split[0] == split[1] == split[2] and len(split[0][3]) > 1000
    counter = _core.WordCounter(pattern, [], threads, True)
    counter.add_texts(two_units[:20])
    for read in (counter.words, counter.arrays, lambda: _core.train_merges(counter, 10)):
        with pytest.raises(ValueError, match="split_only=True: read it with split_spans"):
            read()
    if max_words <= 4:
        with pytest.raises(ValueError, match="split by their word pattern, gpt2"):
            counter.split_spans("cl100k")
    with pytest.raises(ValueError, match="only a counter of superword spans"):
        _core.WordCounter("gpt2", [], 1, True)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_spans_gathered_in_the_parent_are_refused_in_a_forked_child(two_units):
    """The thread gathering ``split_words``' spans is the parent's: a child forked meanwhile gets
    a clear error from ``take`` (it would wait for a thread it does not have), the parent its spans."""
    counter = hf_bpe.training.counting.count_words(two_units, pattern=span_pattern("gpt2"), num_threads=2,
                                                   split_only=True)
    (_, _, c), gathering = counter.split_words("gpt2")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            try:
                gathering.take()
                said = b"took"
            except ValueError as e:
                said = str(e).encode()
            os.write(w, said)
        finally:
            os._exit(0)
    os.close(w)
    # (Without the guard the child would wait for the parent's thread for ever: bounded here.)
    deadline = time.monotonic() + 60
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung in take()")
        time.sleep(0.01)
    said = os.read(r, 1000).decode()
    os.close(r)
    assert "were being gathered when this process was forked; gather them in the parent" in said
    sw, se, counts = gathering.take()
    assert len(counts) > 1000 and len(se) == len(counts) + 1 and se[-1] == len(sw)
    assert int(counts.sum()) > int(c.sum()) // 4  # (spans of up to 4 words hold every word)


def test_segment_spans_refuses_arrays_that_do_not_fit(docs, tmp_path):
    import numpy as np

    stage1 = hf_bpe.train(docs, 400, progress=False)
    spans = hf_bpe.count(docs[:20], pattern=span_pattern("gpt2"), progress=False)
    (b, o, _), sw, se = _core.split_spans((spans.bytes, spans.offsets, spans.counts), "gpt2")
    enc = stage1._encoder()
    with pytest.raises(ValueError, match="word id"):
        _core.segment_spans(enc, spans.bytes, spans.offsets, b[:o[-2]].copy(), o[:-1].copy(), sw, se)
    with pytest.raises(ValueError, match="span_ends"):
        _core.segment_spans(enc, spans.bytes, spans.offsets, b, o, sw, se[:-1].copy())
    with pytest.raises(ValueError, match="word offsets"):
        _core.segment_spans(enc, spans.bytes, spans.offsets, b, np.zeros(len(o), np.int64), sw, se)
    with pytest.raises(ValueError, match="do not spell"):
        _core.segment_spans(enc, spans.bytes, spans.offsets, b, o, sw[::-1].copy(), se)
    # Vouched for, only the lengths are checked: words that overrun a span are still refused.
    longest = int(np.argmax(np.diff(o)))
    with pytest.raises(ValueError, match="do not spell"):
        _core.segment_spans(enc, spans.bytes, spans.offsets, b, o, np.full_like(sw, longest), se, checked=True)
    # An encoder that looks whole pieces up by rank (tiktoken) is refused: a word looked up whole
    # may differ from its merge inside the span.
    ranks = hf_bpe.BPE.from_tiktoken(stage1.save_tiktoken(tmp_path / "s.tiktoken"), pattern="gpt2")
    with pytest.raises(ValueError, match="merges"):
        _core.segment_spans(ranks._encoder(), spans.bytes, spans.offsets, b, o, sw, se)
    # A span given no words (as one of count 0) merges whole.
    none = np.zeros(len(se), np.int64)
    assert (_core.segment_spans(enc, spans.bytes, spans.offsets, b, o, sw[:0].copy(), none)[0].tolist()
            == _core.segment_words(enc, spans.bytes, spans.offsets)[0].tolist())


@pretok_settings(300)
@given(spans=st.lists(_TEXT.filter(bool), min_size=1, max_size=30))
def test_any_strings_split_into_their_gpt2_pieces(spans):
    # Not only a span pattern's spans: whitespace, newlines and non-ASCII at either end, so both
    # the spans scanned together and those scanned alone are met.
    import numpy as np

    data = [x.encode() for x in spans]
    arrays = (np.frombuffer(b"".join(data), np.uint8), np.cumsum([0] + [len(x) for x in data]).astype(np.int64),
              np.ones(len(data), np.uint64))
    (b, o, _), span_words, span_ends = _core.split_spans(arrays, "gpt2")
    word = [b[o[i]:o[i + 1]].tobytes() for i in range(len(o) - 1)]
    for i, x in enumerate(spans):
        assert [word[w] for w in span_words[span_ends[i]:span_ends[i + 1]]] == [p.encode() for p in
                                                                               regex.findall(GPT2, x)]


_STAGE1: list = []


@pretok_settings(200)
@given(texts=st.lists(_TEXT, min_size=1, max_size=5))
def test_spans_cut_from_their_words_on_random_text(texts):
    if not _STAGE1:  # (a hypothesis test takes no module fixture)
        pairs = [a + b for a in _FRAGMENTS for b in _FRAGMENTS]  # so tokens such as ",." and "'ssup" exist
        _STAGE1.append(hf_bpe.train(sample_docs(60_000) + pairs * 5, 800, progress=False))
    enc = _STAGE1[0]._encoder()
    spans = hf_bpe.count(texts, pattern=span_pattern("gpt2"), progress=False)
    if not len(spans):
        return
    fast = _segment_spans(enc, spans)
    plain = _core.segment_words(enc, spans.bytes, spans.offsets)
    assert fast[0].tolist() == plain[0].tolist() and fast[1].tolist() == plain[1].tolist()


def test_span_counting_cuts_files_and_documents_at_lines(tmp_path):
    import gzip as gz

    from conftest import READ_BLOCK

    with gz.open(hf_bpe.sample_corpus(), "rt", encoding="utf-8") as f:
        text = f.read(6_000_000).replace("<|endoftext|>", "")
    path = tmp_path / "no-specials.txt"
    path.write_text(text, encoding="utf-8")
    pattern = span_pattern("gpt2", 3)
    wc = _core.WordCounter(pattern, [], 2)
    wc.add_file(str(path))
    max_carry, _ = wc.read_stats
    assert max_carry <= READ_BLOCK + 4096, max_carry  # held: a block, never the file
    one = _core.WordCounter(pattern, [], 1)  # one document of 6 MB, cut into segments at lines
    one.add_texts([text])
    want = {}
    for m in regex.finditer(pattern, text):
        want[m.group().encode()] = want.get(m.group().encode(), 0) + 1
    assert dict(wc.words()) == want and dict(one.words()) == want
    cuts = wc.shard_cuts(str(path), [1_000_000, 3_000_000])
    assert all(text.encode()[c - 1:c] == b"\n" or text.encode()[c:c + 1] == b"\n" for c in cuts)
    with pytest.raises(ValueError, match="read whole"):
        _core.WordCounter(r"\w+|\W", [], 1).shard_cuts(str(path), [1_000_000])
