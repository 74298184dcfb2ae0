"""Parity of the hand-written pre-tokenization scanners with the `regex` module.

For every built-in pattern, `_core.pretokenize(name, text)` must equal
`regex.findall(source, text)` exactly: on real corpora, on arbitrary Unicode text and on
targeted strategies for the tricky parts of the regexes (whitespace look-ahead, `$`,
case-insensitive contractions, overlapping letter classes, marks).
"""
import gzip
from collections import Counter
import os
import subprocess
import sys
from pathlib import Path

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from hf_bpe import _core
from conftest import CL100K_PAT, GPT2_PAT, O200K_PAT, corpus_path
from pretok_harness import (PATTERN_CATEGORIES, assert_same_pieces, block_text, category_chars, code_point_texts,
                            fragment_text, leads, mixed_text, pretok_settings, random_texts_test, trails,
                            window_texts)

GPT2, CL100K, O200K = GPT2_PAT, CL100K_PAT, O200K_PAT
PATTERNS = {"gpt2": GPT2, "cl100k": CL100K, "o200k": O200K}
COMPILED = {name: regex.compile(src) for name, src in PATTERNS.items()}
NAMES = list(PATTERNS)

DOC_SEP = "\n<|endoftext|>\n"
SLICE_CHARS = 3_000_000  # per corpus; whole documents


def check(name: str, text: str) -> None:
    assert_same_pieces(name, text, _core.pretokenize(name, text), COMPILED[name].findall(text))


def test_pattern_sources_match_tiktoken():
    for name, src in PATTERNS.items():
        assert _core.pattern_source(name) == src


# ---------------------------------------------------------------------------------------------
# (a) real corpora


def corpus_slice(name: str) -> str:
    path = corpus_path(name)  # skips in a fresh clone, fails in CI
    # Read a bounded prefix, then take every k-th whole document so the slice spans the file's
    # variety (languages in multilingual, languages/styles in code) within the budget.
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        head = fh.read(40_000_000)
    docs = head.split(DOC_SEP)
    if len(docs) > 1:
        docs = docs[:-1]  # the last one may be cut by the read limit
    total = sum(len(d) for d in docs)
    step = max(1, total // SLICE_CHARS)
    picked, size = [], 0
    for d in docs[::step] if step > 1 else docs:
        if size >= SLICE_CHARS:
            break
        picked.append(d)
        size += len(d)
    if size < SLICE_CHARS and step > 1:  # top up from the start if the stride fell short
        for d in docs:
            if size >= SLICE_CHARS:
                break
            if d not in picked:
                picked.append(d)
                size += len(d)
    return DOC_SEP.join(picked)


@pytest.fixture(scope="module", params=["english", "code", "multilingual"])
def corpus(request):
    return corpus_slice(request.param)


@pytest.mark.parametrize("name", NAMES)
def test_corpus_parity(corpus, name):
    assert len(corpus) > 500_000  # (chars: 1 MB and more from ../shared; 0.8-1 MB in a user's clone)
    check(name, corpus)


# ---------------------------------------------------------------------------------------------
# (b) property tests

FRAGMENTS = [
    # whitespace of all sorts, and runs that end in CR/LF or at the end of the text
    " ", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", "\x0b", "\x0c", "\xa0", "\u3000",
    "\u2003", "\x85", "\u2028", "\u1680", "\x1c", "\u200b", "\ufeff",
    # numbers (Nd, Nl, No)
    "0", "7", "12", "123", "4567", "\u0661", "\u00bd", "\u216b", "\u00b2",
    # contractions in all cases, and look-alikes
    "'", "'s", "'S", "'t", "'T", "'re", "'RE", "'rE", "'ve", "'Ve", "'m", "'M", "'ll", "'LL",
    "'lL", "'d", "'D", "'\u017f", "\u017f", "\u212a", "'x", "\u2019s", "''",
    # letters: lower, upper, titlecase (Lt), modifier (Lm), other (Lo), mixed case words
    "a", "e", "s", "z", "A", "Z", "the", "The", "THE", "HTTPServer", "iPhone", "HTTP", "ABC1", "XML\u02b0", "OK\u00e9", "\u00e9", "\u00c9",
    "\u00df", "\u01c5", "\u1f88", "\u02b0", "\u02b0a", "\u3005", "\u00aa", "\u01bb", "K",
    # combining marks (Mn, Mc, Me), also to be placed at the start and after spaces
    "\u0301", "\u0308", "\u0903", "\u20dd", "e\u0301", "\u0e01\u0e31",
    # emoji, ZWJ sequences, flags, CJK, Hangul, Arabic, Devanagari
    "\U0001f600", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f1e9\U0001f1ea",
    "\U0001f44d\U0001f3fd", "\u65e5\u672c\u8a9e", "\ud55c\uad6d", "\u0645\u0631\u062d\u0628\u0627",
    "\u0928\u092e\u0938\u094d\u0924\u0947",
    # punctuation and symbols, including '/' (special in o200k)
    "/", "//", ".", ",", "!", "?", "-", "$", "\"", "(", ")", "\u2014", "\u201c", "...", "<|endoftext|>", "_", "#", "->", "_x", "(A", "'tis",
]

fragment_texts = fragment_text(FRAGMENTS)
mixed_texts = mixed_text(FRAGMENTS, category_chars(PATTERN_CATEGORIES))

# Long, mostly ASCII texts (see pretok_harness.block_text).
ASCII_FRAGMENTS = [
    "a", "Z", "the", "The", "HTTP", "x1", "1", "123", "4567", " ", " ", "  ", "    ", "\t", "\n", "\r\n",
    "\n\n", "\x0b", "\x0c", "'", "''", "'s", "'S", "'t", "'re", "'rE", "'ve", "'m", "'ll", "'lL", "'d", "'x",
    ".", ",", "/", "//", "(", ")", "->", "_", "#", "\x00", "\x1c", "\r", " \n", "\t\n", "/\n", ";\n", ". ",
]
# Non-ASCII chars that windows classify one by one (letters, numbers, marks, punctuation,
# symbols: `“The`, `café`, `'ſ`) and ones that end a window's trusted part (whitespace).
NON_ASCII_FRAGMENTS = [
    "\xe9", "\xc9", "\u0301", "\xa0", "\u3000", "\u2028", "\u65e5", "\U0001f600", "\u201c", "\u201d", "\u2019",
    "\u2018", "\u2014", "\u017f", "\u0661", "\xb2", "\u0430\u0431", "\u01c5", "\u02b0", "\xd7", "\u20ac", "\u212a",
]
block_texts = block_text(ASCII_FRAGMENTS, NON_ASCII_FRAGMENTS, ascii_weight=3)
ascii_block_texts = st.lists(
    st.sampled_from(ASCII_FRAGMENTS * 20 + NON_ASCII_FRAGMENTS), min_size=20, max_size=400
).map("".join)

SETTINGS = pretok_settings(400)  # PRETOK_EXAMPLES=5000 for a deeper run


test_random_texts = random_texts_test(check, NAMES, SETTINGS, {
    "arbitrary": st.text(), "fragments": fragment_texts, "mixed": mixed_texts,
    "long": st.one_of(ascii_block_texts, block_texts)})


# Cases the window paths once got wrong (each padded so that it sits inside a 64-byte window,
# and at every offset near a window's end).
WINDOW_CASES = [
    "1711-12 Contributes", "//\r\n//'aaaa", "'re\r\n       \n", "it's's don'tcha HTTP'S OK'd",
    "x.\n(a ;\n/b .\n/.\n", "  \t.  (a \t(a \n(a", "12345678 1234 123a",
    "\u201cThe \u201c(a x\u2014y .\n\u201cb ;\n/\u2019c caf\xe9's '\u017f", " \u0661\u0662\u0663\u0664 \xb2\xb2\xb2\xb2",
    "147\n\r\r\n\r \x0c\x0b \x0b\x0c\x85\u2009\u2028\xa0\u3000\x85", "x;\n\r  \t\x85\n  y",
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", WINDOW_CASES)
def test_window_edge_cases(name, case):
    for text in window_texts(case):
        check(name, text)


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(lead=leads(), body=fragment_texts, trail=trails())
def test_leading_and_trailing(name, lead, body, trail):
    check(name, lead + body + trail)


@pytest.mark.parametrize("name", NAMES)
def test_every_code_point_in_context(name):
    # Each non-surrogate code point between letters, after a space, and after an apostrophe:
    # catches any table entry that disagrees with the regex module.
    for text in code_point_texts(("a{}b", " {}'s", "'{}\n", "\u0301{}A")):
        check(name, text)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "text",
    ["", " ", "   ", "\n", "\r\n", " \n ", "\t\t", "a", "'", "'s", "\u0301", "\u0301'S", " ' s", "\xa0\xa0x", "x  ", "x \n"],
)
def test_small_cases(name, text):
    check(name, text)


@pytest.mark.parametrize("name", NAMES)
def test_huge_inputs(name):
    big = 100_000_000
    for text in ("a" * big, " " * big, "a" * 1_000_000 + " " * 1_000_000 + "1" * 999_999):
        pieces = _core.pretokenize(name, text)
        assert "".join(pieces) == text
        if len(text) == big:
            assert len(pieces) == 1
    check(name, "a" * 1_000_000)
    check(name, "\u65e5" * 300_000 + " \n" * 100_000)


# ---------------------------------------------------------------------------------------------
# (c) lone surrogates, (d) custom patterns


@pytest.mark.parametrize("name", NAMES)
def test_lone_surrogate_rejected(name):
    for text in ("\ud800", "abc\udfff def"):
        with pytest.raises(UnicodeEncodeError) as info:
            _core.pretokenize(name, text)
        assert "surrogate" in str(info.value)


def test_custom_lookaround_pattern():
    pat = r"\w+(?=!)|(?<=!)\s+\w+|\S"
    text = "hey! you there!! ok"
    # The matches are the regex's; the text between them (the space the pattern does not match)
    # is a piece of its own, as tokenizers' Split(behavior="isolated") keeps it.
    assert [p for p in _core.pretokenize(pat, text) if p != " "] == regex.findall(pat, text)
    assert _core.pretokenize(pat, text) == ["hey", "!", " you", " ", "there", "!", "!", " ok"]


def test_bad_pattern_raises_value_error():
    with pytest.raises(ValueError, match=r"\(\?<=a\+\)b\|\("):
        _core.pretokenize(r"(?<=a+)b|(", "aab")


# ---------------------------------------------------------------------------------------------
# The word counter cuts long texts at "safe cuts" and pre-tokenizes the parts in parallel;
# its counts must still be those of the whole text.


def counts_via_regex(name, text):
    return dict(Counter(p.encode("utf-8") for p in COMPILED[name].findall(text)))


@pytest.mark.parametrize("name", NAMES)
def test_word_counter_cuts_do_not_change_pieces(name):
    # Every line ends in punctuation and the next starts with '/': o200k makes ";\n//" one
    # piece, so a cut after the "\n" would split it (this failed before count.rs excluded '/').
    text = "".join(f"x{i % 97};\n// note {i}\n" for i in range(300_000))
    wc = _core.WordCounter(name, [], 2)
    wc.add_texts([text])
    assert dict(wc.words()) == counts_via_regex(name, text)


@pytest.mark.parametrize("name", NAMES)
def test_word_counter_matches_regex_on_code(name):
    text = corpus_slice("code")
    wc = _core.WordCounter(name, [], 2)
    wc.add_texts([text])
    assert dict(wc.words()) == counts_via_regex(name, text)


PATHOLOGICAL = {
    "upper run then digit": "A" * 1_000_000 + "1",
    "space+mark pairs": " \u0301" * 500_000,
    "titlecase run": "\u01c5" * 1_000_000,
    "lower+modifier": "a\u02b0" * 500_000,
    "upper+modifier+upper": "A\u02b0A" * 300_000,
    "space-newline pairs": " \n" * 1_000_000 + "x",
    "tabs": "\t" * 1_000_000 + "x",
    "apostrophes": "'" * 1_000_000,
    "contractions": "'s" * 1_000_000,
    "marks only": "\u0301" * 1_000_000,
    "nbsp run": "\xa0" * 1_000_000 + "a",
}


@pytest.mark.parametrize("name", NAMES)
def test_pathological_inputs_are_linear(name):
    # Backtracking regexes, hand-written scanners: each of these must stay fast (no rescans
    # of long runs per piece) and tile the text; parity on a small version of each.
    import time

    for label, text in PATHOLOGICAL.items():
        t = time.perf_counter()
        n = _core.count_pieces(name, text)
        took = time.perf_counter() - t
        assert took < 1.0, f"{label}: {took:.2f}s"
        assert n >= 1
        check(name, text[:3000])


def test_regex_module_is_the_version_the_tables_come_from():
    """The scanners' Unicode classes were generated from one `regex` release; parity over all
    code points is only meaningful against that release (newer ones carry newer Unicode data)."""
    import re as _re
    from pathlib import Path

    import regex as regex_module

    header = (Path(__file__).resolve().parent.parent / "src" / "unicode_tables.rs").read_text()[:2000]
    wanted = _re.search(r"`regex` module (\S+)", header).group(1)
    assert regex_module.__version__ == wanted, (
        f"src/unicode_tables.rs was generated from regex {wanted}, but regex {regex_module.__version__} is "
        f"installed: `pip install regex=={wanted}` (the test extra pins it) or regenerate the tables with "
        "scripts/gen_unicode_tables.py")


def test_fuzzer_script_finds_no_difference():
    # A short run of scripts/fuzz_pretokenize.py (millions of cases when run for minutes).
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(root / "scripts" / "fuzz_pretokenize.py"), "--seconds", "2", "--seed", "3"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " 0 failures" in proc.stdout
