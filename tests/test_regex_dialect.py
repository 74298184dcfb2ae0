"""A regex means what Oniguruma means when it comes from a ``tokenizer.json`` (``tokenizers``
compiles Split regexes with Oniguruma), and a pattern we write there means to Oniguruma what it
means to us: classes compared over every code point, whole patterns on generated text, possessive
repeats written as atomic groups (cl100k's digit runs), and the constructs without an exact
rewrite refused by name."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hf_bpe
from hf_bpe import _core
from hf_bpe.formats import FormatError
from hf_bpe.formats.regex_forms import for_oniguruma
from conftest import model_files, openai_files

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex, pre_tokenizers  # noqa: E402

CPS = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
EVERY_CHAR = "".join(map(chr, CPS))


def onig_class(cls: str) -> set[int]:
    """The code points Oniguruma's ``cls`` (one char) matches: what a removing Split removes."""
    kept = bytearray(len(CPS))
    for _, (a, b) in pre_tokenizers.Split(Regex(cls), "removed").pre_tokenize_str(EVERY_CHAR):
        kept[a:b] = b"\1" * (b - a)
    return {CPS[k] for k in range(len(CPS)) if not kept[k]}


def our_class(cls: str) -> set[int]:
    """The code points our engine's ``cls`` matches: ``(?:cls)+`` alternates runs in and out."""
    first = chr(CPS[0])
    inside = _core.pretokenize(f"(?:{cls})", first + first) == [first, first]
    out, pos = set(), 0
    for piece in _core.pretokenize(f"(?:{cls})+", EVERY_CHAR):
        if inside:
            out.update(CPS[pos:pos + len(piece)])
        pos += len(piece)
        inside = not inside
    return out


def _phi2_split(tmp_path, regex: str):
    """phi-2's tokenizer.json with one Split on ``regex`` (then ByteLevel), in ``tmp_path``."""
    raw = json.loads((model_files() / "phi-2" / "tokenizer.json").read_text(encoding="utf-8"))
    raw["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    (tmp_path / "tokenizer.json").write_text(json.dumps(raw), encoding="utf-8")
    return tmp_path / "tokenizer.json"


ONIG_CLASSES = [r"\w", r"\W", r"\d", r"\D", r"\s", r"\S", r"\h", r"\H", r"\p{L}", r"\p{^L}", r"\P{N}", r"\p{Han}"] + [
    f"[[:{n}:]]" for n in ("alpha", "alnum", "word", "punct", "space", "digit", "upper", "lower", "xdigit", "blank",
                           "cntrl", "graph", "print", "ascii", "^alpha", "^punct", "^word")] + [
    rf"\p{{{n}}}" for n in ("Alpha", "Word", "Alnum", "Punct", "Space", "Digit", "Upper", "Lower", "XDigit", "Graph",
                            "Print", "Cntrl", "Blank", "ASCII", "Any", "Assigned", "^Word")] + [
    r"[\w&&[^\d]]", r"[^\w\s]", r"[\W\d]", r"[\w]", r"[a-z[:digit:]]", r"[\h_]", r"(?m:.)", r".", r"(?i:k)"]


@pytest.mark.parametrize("cls", ONIG_CLASSES)
def test_a_tokenizer_json_class_means_what_oniguruma_means_on_every_code_point(cls):
    # e.g. Oniguruma's \w holds ²³¹¼½¾ but not ZWNJ/ZWJ, and [[:alpha:]] is Unicode's Alphabetic
    ours = _core.from_oniguruma(cls)
    a, b = onig_class(cls), our_class(ours)
    assert a == b, (cls, ours, sorted(a - b)[:8], sorted(b - a)[:8])


ONIG_PATTERNS = [
    r"^\s+|\S+|\s", r"\s+$|\S+|\s", r"\b\w+\b|\W|\w", r"\w+|\W+", r"[[:alpha:]]+|[^[:alpha:]]+",
    r"[[:punct:]]+|[[:^punct:]]+", r"\p{N}{1,3}+|\D+", r"\d{2}+|\D|\d", r"(?m).{1,5}|\n", r"(?i:the)|\w+|\W",
    r"\h+|\H+", r"\R|.", r"a{,2}|[^a]", r"\s+\Z|\S+|\s", r"\Bb|.|\n", r"(?m:a.b)|[\s\S]", r"x++|y*+z|[^xyz]|[xyz]",
    r"(?<=\w)\d+|\w+|\W", r"[[:word:]]+|\W",
    # (found in review) an inline option takes the later alternatives in; X{n}? is optional;
    # a $ in a nested class; \< is a literal; ^ is not after a final "\n"; [\p{Word}]; (?i)\p{Lu}
    r"x(?i)b|c|[\s\S]", r"a(?i)b|c(?-i)d|[\s\S]", r"xa{2}?y|.|\n", r"[\w$]+(?!x)|.|\n", r"x\<|.|\n",
    r".\n^|[\s\S]", r"[\p{Word}]+|.|\n", r"[\p{^Word}]+|.|\n", r"(?i)\p{Lu}+|[\s\S]", r"(?i:[\p{Lu}])+|[\s\S]",
    r"a{,2}+|[\s\S]",
]
TEXT = st.lists(st.sampled_from(list("abcdxyzBZ09 \n\r\t.,;_-$+<²³¼") + ["\u200c", "\u200d", "é", "日", "ǅ", "the",
                                                                        "The", "aa", "xc"]),
                max_size=30).map("".join)


@pytest.mark.parametrize("pattern", ONIG_PATTERNS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT)
def test_a_tokenizer_json_pattern_splits_as_oniguruma_does(pattern, text):
    # anchors are line anchors there, (?m) is dot-all, X{n,m}+ repeats X{n,m}, \b follows its \w
    theirs = [p for p, _ in pre_tokenizers.Split(Regex(pattern), "isolated").pre_tokenize_str(text)]
    assert _core.pretokenize(_core.from_oniguruma(pattern), text) == theirs


@pytest.mark.parametrize("regex,words", [
    (r"(?s).", "the group option (?s"), (r"\Ga", r"the escape \G"), (r"a\Kb", r"the escape \K"),
    (r"(?~ab)", "the group option (?~"), (r"(a)\g<1>", r"the escape \g"), (r"[\w--\d]", "'--' in a class"),
    (r"\pL", r"the escape \p"), (r"\X", r"the escape \X"), (r"(?x) a", "the group option (?x"),
    (r"[\xB2]", r"the raw byte \xB2"), (r"(?P<n>a)", "the group syntax (?P<name>"),
    (r"x(?i:ss)|.", "case-insensitively"), (r"(?i)ß|.", "case-insensitively"), (r"(?i)[ßa]", "case-insensitively"),
])
def test_what_has_no_exact_rewrite_is_refused_by_name(tmp_path, regex, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        _core.from_oniguruma(regex)
    _phi2_split(tmp_path, regex)
    with pytest.raises(FormatError, match=re.escape(words)):
        hf_bpe.BPE.load(tmp_path / "tokenizer.json")


@pytest.mark.parametrize("pattern", [r"[[:alpha:]]+|[^[:alpha:]]+", r"\w+|\W+", r"\s+$|\S+|\s", r"\b\w+|\W|\w"])
def test_a_released_file_with_such_a_split_encodes_as_tokenizers(tmp_path, pattern):
    _phi2_split(tmp_path, pattern)
    bpe, ref = hf_bpe.BPE.load(tmp_path / "tokenizer.json"), tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    texts = ["vê, fé² x\u200cy ¼ 12", "line one\nline two  \n", "THE the_x 3.14"]
    for t in texts:
        assert bpe.encode(t) == ref.encode(t, add_special_tokens=False).ids, t
    bpe.save(tmp_path / "again")
    again = tokenizers.Tokenizer.from_file(str(tmp_path / "again" / "tokenizer.json"))
    for t in texts:
        assert again.encode(t, add_special_tokens=False).ids == bpe.encode(t), t


OUR_CLASSES = [r"\w", r"\W", r"[\w]", r"[^\w]", r"[\W\d]", r"[[:alpha:]]", r"[[:^alpha:]]", r"[[:punct:]]", r"[[:space:]]",
               r"[[:word:]]", r"[[:print:]]", r"[[:cntrl:]]", r"[\w--\d]", r"[^\w--\d]", r"[\p{L}--\p{Lu}--[a-z]]",
               r"[\w&&\p{Greek}]", r"\pL", r"[\pN\s]", r"\p{Alphabetic}", r"(?s:.)", r".", r"[\xB2-\xBE\u00E9]"]


@pytest.mark.parametrize("cls", OUR_CLASSES)
def test_a_class_we_write_means_to_oniguruma_what_it_means_to_us(cls):
    # e.g. our [[:alpha:]] is ASCII (Oniguruma's is Unicode); our \w holds ZWNJ/ZWJ
    onig = for_oniguruma(cls)
    a, b = onig_class(onig), our_class(cls)
    assert a == b, (cls, onig, sorted(a - b)[:8], sorted(b - a)[:8])


OUR_PATTERNS = [
    r"^\s+|\S+|\s", r"(?m)^\s+|\S+|\s", r"\s+$|\S+|\s", r"\b\w+\b|\W|\w", r"\B.|\b|\n", r"\w+|\W+",
    r"[[:alpha:]]+|[^[:alpha:]]+", r"(?s).{1,5}", r"(?s:a.)|[\s\S]", r"\p{N}{1,3}+|\D+", r"[\w--\d]+|[^\w--\d]+",
    r"(?i:the)|\w+|\W", r"(?P<w>\w+)|\W", r"a$|[\s\S]", r"(?-s:.)+|\n",
    # (found in review) ours: an inline flag stops at "|"; X{n}? is X{n}; (?m)^ after a final "\n"
    r"x(?i)b|c|[\s\S]", r"xa{2}?y|[\s\S]", r"(?m).\n^|[\s\S]", r"(?i:\p{Lu}+)|[\s\S]", r"x\U0001F600|[\s\S]",
    r"a{,2}+|[\s\S]", r"[[:alpha:]b][x:]+|[\s\S]",
]


@pytest.mark.parametrize("pattern", OUR_PATTERNS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT)
def test_a_pattern_we_write_splits_in_oniguruma_as_we_split(pattern, text):
    theirs = [p for p, _ in pre_tokenizers.Split(Regex(for_oniguruma(pattern)), "isolated").pre_tokenize_str(text)]
    assert theirs == _core.pretokenize(pattern, text)


@pytest.mark.parametrize("pattern,words", [(r"[\w~~\d]", "'~~'"), (r"(?x) a b", "the flag 'x'"), (r"(?U)a+", "the flag 'U'"),
                                           (r"\<a", r"the word boundary \<"), (r"\b{start}a", r"the word boundary \b{start}"),
                                           (r"x(?i:st)", "case-insensitively")])
def test_what_oniguruma_cannot_read_as_we_do_is_refused_by_name(pattern, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        for_oniguruma(pattern)


def test_the_issues_case_trains_saves_and_reads_alike(tmp_path):
    # [[:alpha:]] is ASCII to us: "vê," was [118, 258] for us and [118, 257, 44] for tokenizers
    bpe = hf_bpe.train(["vê, fé"] * 20, vocab_size=270, pattern=r"[[:alpha:]]+|[^[:alpha:]]+", progress=False)
    bpe.save(tmp_path / "t")
    tok = tokenizers.Tokenizer.from_file(str(tmp_path / "t" / "tokenizer.json"))
    for t in ["vê,", "vê, fé", "x²y\u200dz"]:
        assert tok.encode(t).ids == bpe.encode(t), t
    assert hf_bpe.BPE.load(tmp_path / "t").encode("vê, fé") == bpe.encode("vê, fé")


def test_a_builtins_tiktoken_spelling_in_a_tokenizer_json_is_read_as_oniguruma_reads_it(tmp_path):
    # tiktoken's cl100k pat_str copied into a Split: Oniguruma reads \p{N}{1,3}+ as unbounded
    # digit runs, so it is not the cl100k scanner there (found in review)
    _phi2_split(tmp_path, _core.pattern_source("cl100k"))
    bpe, ref = hf_bpe.BPE.load(tmp_path / "tokenizer.json"), tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for t in ["abc 1234567 x", "it's 12 and 123456789\n\n  y"]:
        assert bpe.encode(t) == ref.encode(t, add_special_tokens=False).ids, t


@pytest.fixture(scope="module")
def cl100k():
    path = openai_files() / "cl100k_base.tiktoken"
    if not path.exists():
        pytest.skip(f"{path} is missing")
    return hf_bpe.BPE.from_tiktoken(path, pattern="cl100k", special_tokens={"<|endoftext|>": 100257})


def test_a_saved_cl100k_tokenizer_splits_numbers_alike_in_tokenizers(cl100k, tmp_path):
    cl100k.save(tmp_path / "cl")
    tok = tokenizers.Tokenizer.from_file(str(tmp_path / "cl" / "tokenizer.json"))
    texts = ["1948", "12345678 x 1234567", "a 99999 b", "3.14159265358979", "tel. 0049 30 123456789"]
    for t in texts:
        assert cl100k.encode(t) == tok.encode(t).ids, t
    # And it loads back as the built-in pattern (the fast scanner), not as a custom regex.
    assert hf_bpe.BPE.load(tmp_path / "cl").pattern == "cl100k"


def test_a_trained_cl100k_vocabulary_agrees_with_tokenizers_on_digit_runs(tmp_path):
    texts = [f"in {y} there were {n} people, {n * 7} cats" for y, n in zip(range(1900, 2000), range(1000, 100000, 997))]
    bpe = hf_bpe.train(texts * 3, vocab_size=400, pattern="cl100k", progress=False)
    bpe.save(tmp_path / "t")
    tok = tokenizers.Tokenizer.from_file(str(tmp_path / "t" / "tokenizer.json"))
    for t in texts[::7] + ["123456789012", "x1234y"]:
        assert bpe.encode(t) == tok.encode(t).ids, t


@pytest.mark.parametrize("src, want", [
    (r"\p{N}{1,3}+", r"(?>[\p{N}]{1,3})"),
    (r"a{2}+b", r"(?>a{2})b"),
    (r"(?:x{1,}+)+", r"(?:(?>x{1,}))+"),
    (r"[a{]{1,2}+|\d++", r"(?>[a{]{1,2})|\d++"),
    (r"a{1,3}|b+", r"a{1,3}|b+"),
    (r"\{1,3}+", r"\{1,3}+"),
])
def test_possessive_bounded_repeats_are_written_as_atomic_groups(src, want):
    assert for_oniguruma(src) == want
