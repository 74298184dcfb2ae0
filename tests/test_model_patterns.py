"""Parity of the released models' pre-tokenizer scanners with the `regex` module.

`llama3` (Llama-3, OLMo-2), `qwen2` (Qwen2/2.5/3), `qwen3.5`, `nemotron` (Mistral's Tekken),
`deepseek-v3` and `kimi` (Kimi-K2 / K3) are hand-written scanners (src/pretok/spec.rs). Each must split exactly as
the `regex` module runs its tokenizer.json regexes: `findall` for one regex; for DeepSeek-V3 its
three `Isolated` splits applied in sequence (each piece of one split is split again by the
next, and the text between two matches stays a piece). Checked on real corpora, hypothesis
text and every code point, as tests/test_pretokenize.py does for the tiktoken patterns.

Unicode versions: the scanners' tables come from the `regex` module (tests/test_pretokenize.py
pins its version), so parity is exact here; engines with older Unicode data (tokenizers'
Oniguruma, tiktoken's fancy-regex) can differ on letters assigned since (see
scripts/fuzz_parity.py's classifier and conftest.peer_stable_chars).
"""
from __future__ import annotations

import json

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from conftest import CL100K_PAT, corpus_slice, model_files, openai_files
from hf_bpe import _core
from pretok_harness import (ASSIGNED_CATEGORIES, assert_same_pieces, block_text, category_chars, code_point_texts,
                            code_points, fragment_text, isolated, leads, mixed_text, pretok_settings, trails,
                            random_texts_test, window_texts)

# The regexes as the models' tokenizer.json files hold them (JSON-decoded), typed here on
# purpose rather than read back from the extension.
LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN35 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
NEMOTRON = r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
DEEPSEEK_V3 = [
    r"""\p{N}{1,3}""",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
]
# Moonshot's tokenization_kimi.py `pat_str` (tiktoken): o200k's with Han runs first and Han out
# of the letter classes (class intersection `&&`).
KIMI = "|".join(
    [
        r"""[\p{Han}]+""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
# The `regex` module reads `&&` only with its V1 flag, which also turns on full case folding
# for `(?i:..)`, where tiktoken's regex-syntax folds simply. So the reference is V0 (simple
# folding, as for the others) with each intersection spelt as a negative lookahead;
# test_kimi_v1_reads_the_source_as_the_reference checks V1 on the source as written agrees.
KIMI_V0 = (KIMI.replace(r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]", r"(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])")
           .replace(r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]", r"(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])"))
assert "&&" not in KIMI_V0
SPLITS = {"llama3": [LLAMA3], "qwen2": [QWEN2], "qwen3.5": [QWEN35], "nemotron": [NEMOTRON], "deepseek-v3": DEEPSEEK_V3,
          "kimi": [KIMI]}
REFERENCE_SOURCES = {"kimi": [KIMI_V0]}
NAMES = list(SPLITS)
COMPILED = {name: [regex.compile(s) for s in REFERENCE_SOURCES.get(name, srcs)] for name, srcs in SPLITS.items()}

# Other spellings the scanners are also chosen for, each with the scanner it must equal.
ALIASES = [
    (LLAMA3.replace(r"\s*[\r\n]+|", r"\s*[\r\n]|"), "llama3"),
    (CL100K_PAT[:-len(r"\s")] + r"\s+", "cl100k"),
    (CL100K_PAT.replace(r"\p{N}{1,3}+", r"(?>\p{N}{1,3})"), "cl100k"),
]


def reference(name: str, text: str) -> list[str]:
    pieces = [text] if text else []
    for c in COMPILED[name]:
        pieces = [q for p in pieces for q in isolated(c, p)]
    return pieces


def check(name: str, text: str, spec: str | None = None) -> None:
    got = _core.pretokenize(spec or name, text)
    want = reference(name, text)
    if len(COMPILED[name]) == 1:
        assert want == COMPILED[name][0].findall(text) or not text
    assert_same_pieces(name, text, got, want)


def test_sources_and_names():
    for name, srcs in SPLITS.items():
        assert _core.pattern_splits(name) == srcs
        assert _core.pattern_source(name) == srcs[0]
        if len(srcs) == 1:
            assert _core.pattern_source(srcs[0]) == srcs[0]  # the scanner, not a regex
    for alias in ("olmo2", "llama-3", "qwen2.5", "qwen3", "qwen35", "tekken", "deepseek_v3", "kimi-k2"):
        _core.pattern_source(alias)
    assert _core.pattern_engine(KIMI) == "builtin"
    assert _core.pattern_source("kimi-k2") == KIMI


def test_unknown_names_fail_listing_the_known_ones():
    for bad in ("gpt4", "llama", "qwen-2", "deepseek"):
        with pytest.raises(ValueError, match="unknown pattern name.*llama3.*deepseek-v3"):
            _core.pretokenize(bad, "hello world")
    # A regex that is not name-shaped still works.
    assert _core.pretokenize(r"[a-z]+", "ab1cd") == ["ab", "1", "cd"]


def test_the_documented_differences():
    # Llama-3 lacks cl100k's `\s++$`; Qwen2 splits numbers one by one; Qwen3.5 keeps marks
    # in words; DeepSeek-V3's splits isolate numbers and CJK runs first.
    assert regex.findall(CL100K_PAT, "a \n ") == ["a", " \n "] == _core.pretokenize("cl100k", "a \n ")
    assert regex.findall(LLAMA3, "a \n ") == ["a", " \n", " "] == _core.pretokenize("llama3", "a \n ")
    assert _core.pretokenize("qwen2", "1234") == ["1", "2", "3", "4"]
    assert _core.pretokenize("qwen3.5", " \u0301x") == [" \u0301x"]
    assert _core.pretokenize("deepseek-v3", "a  1") == ["a", "  ", "1"]
    assert reference("deepseek-v3", "a  1") == ["a", "  ", "1"]


@pytest.mark.parametrize("spec,name", ALIASES)
def test_alias_spellings_choose_a_scanner_with_the_same_splits(spec, name):
    assert _core.pattern_source(spec) == _core.pattern_source(name)
    text = "It's 12345 words  \n\t x\u0301 \u3000y \r\n\r\n  z \n "
    assert regex.findall(spec, text) == _core.pretokenize(name, text)


def test_deepseek_spellings_from_tokenizer_json():
    # The CJK class as \x{..} / \u.... escapes, and CR/LF as literal chars, as other files and
    # converters write them; all mean DeepSeek-V3's three splits.
    forms = [
        r"[\x{4e00}-\x{9fa5}\x{3040}-\x{309f}\x{30a0}-\x{30ff}]+",
        r"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    ]
    lit = DEEPSEEK_V3[2].replace(r"\r", "\r").replace(r"\n", "\n")
    for cjk in forms:
        assert _core.pattern_from_splits([DEEPSEEK_V3[0], cjk, lit]) == "deepseek-v3"
    assert _core.pattern_from_splits(DEEPSEEK_V3[:2]) is None
    assert _core.pattern_from_splits([LLAMA3]) == "llama3"


def test_olmo2_file_holds_the_llama3_regex():
    path = model_files() / "olmo-2-dolma2" / "tokenizer.json"
    pre = json.loads(path.read_text())["pre_tokenizer"]
    src = pre["pretokenizers"][0]["pattern"]["Regex"]
    assert src == LLAMA3
    assert _core.pattern_source(src) == _core.pattern_source("llama3")


# ---------------------------------------------------------------------------------------------
# (a) real corpora: 1 MB slices


@pytest.fixture(scope="module", params=["english", "code", "multilingual"])
def corpus(request):
    return corpus_slice(request.param, 1_000_000, offset=3_000_000)


@pytest.mark.parametrize("name", NAMES)
def test_corpus_parity(corpus, name):
    assert len(corpus) > 200_000
    check(name, corpus)


# ---------------------------------------------------------------------------------------------
# (b) property tests

FRAGMENTS = [
    " ", "  ", "\t", "\n", "\r", "\r\n", "\r\n\r\n", "\n\n", "\x0b", "\x0c", "\xa0", "\u3000", "\u2003", "\x85",
    "\u2028", "\x1c", "\u200b", "\u200d", "\ufeff", "\x00",
    "0", "7", "12", "123", "4567", "\u0661", "\u00bd", "\u216b", "\u00b2", "\uff11",
    "'", "'s", "'S", "'t", "'T", "'re", "'RE", "'rE", "'ve", "'Ve", "'m", "'M", "'ll", "'LL", "'lL", "'d", "'D",
    "'\u017f", "\u017f", "\u212a", "'x", "\u2019s", "''", "'tis",
    "a", "s", "z", "A", "Z", "the", "The", "THE", "HTTPServer", "iPhone", "caf\xe9", "\xe9", "\xc9", "\xdf",
    "\u01c5", "\u1f88", "\u02b0", "\u3005", "\u00aa", "\u01bb",
    "\u0301", "\u0308", "\u0903", "\u20dd", "e\u0301", "\u0e01\u0e31", " \u0301",
    "\U0001f600", "\U0001f468\u200d\U0001f469", "\U0001f1e9\U0001f1ea", "\U0001f44d\U0001f3fd",
    "\u65e5\u672c\u8a9e", "\u3072\u3089\u304c\u306a", "\u30ab\u30bf\u30ab\u30ca", "\u30fc", "\u30fb", "\u309b",
    "\u3099", "\u3040", "\u30a0", "\u9fa5", "\u9fa6", "\u4dff", "\u3400", "\uac00", "\ud55c\uad6d",
    "\u0645\u0631\u062d\u0628\u0627", "\u0928\u092e\u0938\u094d\u0924\u0947", "\u0430\u0431",
    "/", "//", ".", ",", "!", "?", "-", "$", "\"", "(", ")", "\u2014", "\u201c", "...", "<|endoftext|>", "_", "#",
    "->", "_x", "(A", ".com", "\u3002", "\uff01", "\xd7", "\u20ac", "`", "~", "\\",
    # Han (Script=Han) beyond the ideographs: radicals (So), \u3007 (Nl), U+16FE2 (Po), U+16FF0 (Mc)
    "\u4e2d\u6587", "\u2e80", "\u2f00", "\u3007", "\u3021", "\U00016fe2", "\U00016ff0", "\uf900", "\U00020000",
]
fragment_texts = fragment_text(FRAGMENTS)
mixed_texts = mixed_text(FRAGMENTS, category_chars(ASSIGNED_CATEGORIES))
ASCII_FRAGMENTS = [
    "a", "Z", "the", "The", "HTTP", "x1", "1", "123", "4567", " ", "  ", "    ", "\t", "\n", "\r\n", "\n\n",
    "'", "'s", "'S", "'re", "'ll", "'x", ".", ",", "/", "//", "(", ")", "->", "_", "#", "\x00", "\r", " \n",
    "\t\n", "/\n", ";\n", ". ",
]
NON_ASCII_FRAGMENTS = ["\xe9", "\u0301", "\xa0", "\u3000", "\u65e5", "\u30fc", "\U0001f600", "\u201c", "\u2014",
                       "\u017f", "\u0661", "\u0430\u0431", "\u02b0", "\u20ac", "\u4e2d\u6587", "\u2e80", "\u3007"]
block_texts = block_text(ASCII_FRAGMENTS, NON_ASCII_FRAGMENTS, ascii_weight=2)

SETTINGS = pretok_settings(300)


test_random_texts = random_texts_test(check, NAMES, SETTINGS, {
    "arbitrary": st.text(), "fragments": fragment_texts, "mixed": mixed_texts, "long": block_texts})


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(lead=leads(["1"]), body=fragment_texts, trail=trails(["1"]))
def test_leading_and_trailing(name, lead, body, trail):
    check(name, lead + body + trail)


WINDOW_CASES = [
    "1711-12 Contributes", "//\r\n//'aaaa", "'re\r\n       \n", "it's's don'tcha HTTP'S OK'd", "x.\n(a ;\n/b .\n/.\n",
    "  \t.  (a \t(a \n(a", "12345678 1234 123a", "\u201cThe \u201c(a x\u2014y caf\xe9's '\u017f", "a \n \n",
    "147\n\r\r\n\r \x0c\x0b \x0b\x0c\x85\u2009\u2028\xa0\u3000\x85", "x;\n\r  \t\x85\n  y", "e\u0301 \u0301a",
    "x\u4e2d\u6587y 1\u3007 !\u2e80 x\u2e80! ;\n//x \u65e5's A\u3005b",
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", WINDOW_CASES)
def test_window_edge_cases(name, case):
    for text in window_texts(case):
        check(name, text)


@pytest.mark.parametrize("name", NAMES)
def test_every_code_point_in_context(name):
    for text in code_point_texts(("a{}b", " {}'s", "'{}\n", "\u0301{}A", "{}\u65e5 ")):
        check(name, text)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "text",
    ["", " ", "   ", "\n", "\r\n", " \n ", "a \n ", "\t\t", "a", "'", "'s", "\u0301", "\u0301'S", " ' s", "\xa0\xa0x",
     "x  ", "x \n", "1", " 1", "\x00", "\x00a", "\u65e5", "\u65e5 ", "\u30fb\u65e5"],
)
def test_small_cases(name, text):
    check(name, text)


@pytest.mark.parametrize("name", NAMES)
def test_pathological_inputs_are_linear(name):
    import time

    for text in ("A" * 1_000_000 + "1", " \u0301" * 500_000, " \n" * 1_000_000 + "x", "'" * 1_000_000,
                 "\u0301" * 1_000_000, "\x00" * 1_000_000, "\u65e5" * 1_000_000, "1" * 1_000_000):
        t = time.perf_counter()
        n = _core.count_pieces(name, text)
        assert time.perf_counter() - t < 1.0
        assert n >= 1
        check(name, text[:3000])


@pytest.mark.parametrize("name", NAMES)
def test_word_counter_cuts_do_not_change_pieces(name):
    # The word counter cuts long texts after "\n" (count/, corpus/read.rs): the pieces must not
    # change (they never span such a cut for the built-in patterns).
    from collections import Counter

    text = "".join(f"x{i % 97};\n// note {i} \u65e5\u672c\n  {i}\n" for i in range(100_000))
    wc = _core.WordCounter(name, [], 2)
    wc.add_texts([text])
    assert dict(wc.words()) == dict(Counter(p.encode() for p in reference(name, text)))


# ---------------------------------------------------------------------------------------------
# (c) ids: hf_bpe with the Llama-3 scanner equals tiktoken with the same ranks and regex


# Short texts at each scanner's edges: CRLF and space runs; Han runs, Han next to other
# letters, numbers and punctuation (Kimi takes Han out of its letter classes).
_EDGE_TEXTS = {
    "llama3": ("a \n ", "x  \n\t", "It's 12345!\r\n\r\n  "),
    "kimi": ("x\u4e2d\u6587y 1\u3007 !\u2e80 x\u2e80! ;\n//x", "\u65e5\u672c\u8a9e\u306e'S A\u3005b HTTPServer's",
             "\u2f00\u2e80 \u3021\u3007\u4e00 ::\u3038\r\n"),
}


@pytest.mark.parametrize("name,regex_src,offset", [("llama3", LLAMA3, 0), ("kimi", KIMI, 1_000_000)])
def test_ids_equal_tiktoken_with_the_same_regex(name, regex_src, offset):
    # tiktoken with cl100k's ranks and the model's regex (Kimi-K2 runs its pat_str in tiktoken;
    # only the split matters here). tiktoken's regex engine has older Unicode data; the corpus
    # slices hold no char it classes otherwise (see conftest.peer_stable_chars).
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    import hf_bpe

    path = openai_files() / "cl100k_base.tiktoken"
    enc = tiktoken.Encoding(f"{name}-regex", pat_str=regex_src, mergeable_ranks=load_tiktoken_bpe(str(path)), special_tokens={})
    ours = hf_bpe.BPE.from_tiktoken(str(path), pattern=name)
    for corpus in ("english", "code", "multilingual"):
        text = corpus_slice(corpus, 300_000 if name == "llama3" else 200_000, offset=offset)
        assert ours.encode_ordinary(text) == enc.encode_ordinary(text), corpus
    for text in _EDGE_TEXTS[name]:
        assert ours.encode_ordinary(text) == enc.encode_ordinary(text), text


def test_kimi_v1_reads_the_source_as_the_reference():
    # The `regex` module's V1 (full case folding) on the source as written, against the V0
    # reference: the same splits (no char full-folds into a contraction where simple folding
    # does not), on corpora and on every code point after an apostrophe and in a word.
    v1 = regex.compile(KIMI, regex.V1)
    chars = "".join(code_points())
    texts = [corpus_slice(n, 200_000, offset=3_000_000) for n in ("english", "code", "multilingual")]
    texts += ["".join("x'" + c + " " for c in chars), "".join("A" + c + "'re " for c in chars[::5])]
    for text in texts:
        assert v1.findall(text) == COMPILED["kimi"][0].findall(text)
