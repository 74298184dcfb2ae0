"""The custom-regex engine (`src/pretok/regex.rs`) equals the Python `regex` module.

For tokenizer regexes given as `pattern=` (GPT-2 / cl100k / o200k sources edited so they are not
recognised as built-in, Qwen2's, DeepSeek-V3's Split regexes, ...) the pieces of
`_core.pretokenize` must be those of `regex.finditer` with the gaps-become-pieces rule of
`Pattern::for_each_piece`: on real corpus slices, hypothesis text, and every code point. Ids
through `hf_bpe.BPE(..., pattern=regex)` must equal tiktoken's with the same ranks and regex, and
short custom regexes split as `tokenizers`' `Split(behavior="isolated")`, in a saved folder too.

Unicode versions: the engines use regex-syntax's tables, older than the `regex` module's. The
code points classed differently (`CAVEAT`, found per code point and per class below, all
assigned in Unicode 17 except U+0295, Ll -> Lo) are removed from the texts; the test checks that
the difference is only that.
"""
import base64
import functools

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hf_bpe
from hf_bpe import _core
from conftest import CL100K_PAT, GPT2_PAT, O200K_PAT, corpus_docs, openai_files
from pretok_harness import assert_same_pieces, code_points, isolated, mixed_text, pretok_settings

FAST = {
    "gpt2-n12": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}{1,2}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    "gpt2": f"(?:{GPT2_PAT})",
    "cl100k": f"(?:{CL100K_PAT})",
    "cl100k-n12": CL100K_PAT.replace(r"\p{N}{1,3}+", r"\p{N}{1,2}+"),
    "o200k": f"(?:{O200K_PAT})",
    "o200k-n1": O200K_PAT.replace(r"\p{N}{1,3}", r"\p{N}"),
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "deepseek-v3": r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "deepseek-digits": r"\p{N}{1,3}",
    # DeepSeek-V3 splits digits, then CJK runs, then with the regex above; as one covering regex
    # (tiktoken drops the text between matches, so only such a regex can be compared with it).
    "deepseek-all": r"\p{N}{1,3}|[一-龥぀-ゟ゠-ヿ]+|[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+|.",
    "deepseek-cjk": r"[一-龥぀-ゟ゠-ヿ]+",
}
# Regexes the DFA cannot take: fancy-regex runs them (also checked, on less text).
SLOW = {
    "lookbehind": r"(?<=\s)\p{L}+|\p{N}+|\s+(?!\S)|\s+|\S",
    "word-dollar": r"\w+$|\w+|\W",
}
ALL = {**FAST, **SLOW}
COMPILED = {k: regex.compile(v) for k, v in ALL.items()}
CLASSES = [r"\p{L}", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{N}", r"\p{M}", r"\p{P}", r"\p{S}", r"\s", r"\w"]
EVERY = "".join(code_points())


@functools.cache
def classes() -> dict[str, tuple[set[int], set[int]]]:
    """Per class: (code points of the `regex` module, code points of our engine)."""
    out = {}
    text = "".join("\0" + c for c in EVERY)  # "\0" is in no class, so a match is one char
    for cls in CLASSES:
        py = {ord(m.group()) for m in regex.finditer(cls, text)}
        ours = {ord(p) for p in _core.pretokenize(cls, text) if len(p) == 1 and p != "\0"}
        out[cls] = (py, ours)
    return out


@functools.cache
def caveat() -> frozenset[int]:
    return frozenset(cp for py, ours in classes().values() for cp in py ^ ours)


def clean(text: str) -> str:
    return text.translate(dict.fromkeys(caveat()))


def check(name: str, text: str) -> None:
    assert_same_pieces(name, text, _core.pretokenize(ALL[name], text), isolated(COMPILED[name], text))


def test_engines_chosen():
    for name, src in FAST.items():
        # (A released model's regex, e.g. Qwen2's, has a hand-written scanner.)
        known = _core.pattern_from_splits([src]) is not None
        assert _core.pattern_engine(src) == ("builtin" if known else "dfa"), name
    assert sum(_core.pattern_from_splits([s]) is None for s in FAST.values()) >= 5
    for name, src in SLOW.items():
        assert _core.pattern_engine(src) == "fancy-regex", name
    assert _core.pattern_engine(GPT2_PAT) == "builtin"


def test_unicode_differences_are_only_newer_unicode():
    """Every code point classed differently is one the `regex` module puts in a class and we in
    none of the general categories (unassigned in regex-syntax's Unicode), or U+0295 (Ll in
    Unicode 16, Lo in 17)."""
    c = classes()
    ours_any = set().union(*(c[k][1] for k in (r"\p{L}", r"\p{N}", r"\p{M}", r"\p{P}", r"\p{S}")))
    for cls, (py, ours) in c.items():
        assert not (ours - py) - {0x295}, cls
        assert not ((py - ours) & ours_any) - {0x295}, cls
    assert c[r"\s"][0] == c[r"\s"][1]
    assert 4_000 < len(caveat()) < 6_000


@pytest.mark.parametrize("name", list(ALL))
@pytest.mark.parametrize("corpus", ["english", "code", "multilingual"])
def test_real_corpora(name, corpus):
    docs = corpus_docs(corpus, 1_000_000 if name in FAST else 200_000)
    check(name, clean("\n<|endoftext|>\n".join(docs)))


FRAGMENTS = [
    " ", "  ", "   ", "\t", "\n", "\r", "\r\n", "\n\n", "\r\n\r\n", "\x0b", "\x0c", "\xa0", "\u3000", "\u2003", "\x85",
    "\u2028", "\u1680", "\x1c", "\u200b", "\ufeff", "0", "7", "12", "123", "4567", "\u0661\u0662", "\u00bd", "\u216b",
    "'", "'s", "'S", "'t", "'T", "'re", "'RE", "'rE", "'ve", "'Ve", "'m", "'M", "'ll", "'LL", "'d", "'D", "'\u017f",
    "\u212a", "'x", "\u2019s", "a", "s", "Z", "the", "The", "THE", "HTTPServer", "iPhone", "\u00e9", "\u00df", "\u01c5",
    "\u02b0", "\u3005", "\u0301", "\u0308", "\u0903", "\u20dd", "e\u0301", "\u0e01\u0e31", "\U0001f600",
    "\U0001f468\u200d\U0001f469", "\U0001f1e9\U0001f1ea", "\u65e5\u672c\u8a9e", "\u3072\u3089\u304c\u306a",
    "\u30ab\u30bf", "\ud55c\uad6d", "\u0645\u0631\u062d\u0628\u0627", "\u0928\u092e\u0938\u094d\u0924\u0947",
    "\u041f\u0440\u0438\u0432\u0435\u0442", "/", "//", ".", ",", "!", "?", "-", "$", "\"", "(", ")", "\u2014",
    "\u201c", "...", "_", "#", "->", "+=", "\\", "`", "\u00a9", "\u20ac",
]
texts = mixed_text(FRAGMENTS, st.characters(exclude_categories=["Cs"]), max_size=50)
SETTINGS = pretok_settings(150)


@pytest.mark.parametrize("name", list(ALL))
@SETTINGS
@given(text=texts)
def test_generated_text(name, text):
    check(name, clean(text))


@pytest.mark.parametrize("name", list(FAST))
def test_every_code_point(name):
    chars = [c for c in code_points() if ord(c) not in caveat()]
    check(name, "".join(f"a{c} " for c in chars))
    check(name, "".join(f"'{c}\n" for c in chars[::5]))


@pytest.mark.parametrize("name", ["gpt2-n12", "cl100k-n12", "o200k-n1", "qwen2", "deepseek-all", "lookbehind"])
def test_ids_equal_tiktoken(name):
    import tiktoken

    path = openai_files() / "cl100k_base.tiktoken"
    ranks = {base64.b64decode(t): int(r) for t, r in (line.split() for line in path.read_bytes().splitlines() if line)}
    tt = tiktoken.Encoding(f"cl100k_{name}", pat_str=ALL[name], mergeable_ranks=ranks, special_tokens={})
    bpe = hf_bpe.BPE.from_tiktoken(path, pattern=ALL[name])
    docs = [clean(d) for c in ("english", "code", "multilingual") for d in corpus_docs(c, 300_000)]
    docs += ["", " ", "a  b\n\n c \n", "x'\u017f 12345 \u3000\u3000y\r\n\r\n"]
    assert bpe.encode_batch(docs, disallowed_special=()) == tt.encode_batch(docs, disallowed_special=())


# Against tokenizers: the Split(behavior="isolated") we write into a tokenizer.json.
CUSTOM = [r"\p{L}+", "a*", r"\d+|[a-z]+", r"(?<=a)b", r" ?\w+", r"\b", "x?", r"[A-Z][a-z]*|\d{2}"]
text_st = st.lists(st.sampled_from(list("ab xyzAB12,!\n\té") + ["ab", "  ", "日本"]), max_size=40).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=st.sampled_from(CUSTOM), text=text_st)
def test_a_custom_regex_splits_like_tokenizers_isolated_split_and_keeps_all_text(pattern, text):
    pytest.importorskip("tokenizers")
    from tokenizers import Regex, pre_tokenizers

    # Text between matches is a piece of its own and an empty match cuts where it stands, as the
    # Split(behavior="isolated") we write into tokenizer.json.
    theirs = [s for s, _ in pre_tokenizers.Split(Regex(pattern), "isolated").pre_tokenize_str(text)]
    assert _core.pretokenize(pattern, text) == theirs
    assert "".join(_core.pretokenize(pattern, text)) == text


def test_a_custom_regex_vocabulary_gives_back_its_text_and_matches_tokenizers(tmp_path):
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer

    bpe = hf_bpe.train(["the cat sat"] * 5, vocab_size=300, pattern=r"\p{L}+", progress=False)
    for text in ["a b, c!", "the cat sat on the mat.", "  x\n"]:
        assert bpe.decode(bpe.encode(text)) == text
    bpe.save(tmp_path / "t")
    tok = Tokenizer.from_file(str(tmp_path / "t" / "tokenizer.json"))
    for text in ["a b, c!", "the cat sat on the mat.", "cats and hats"]:
        assert bpe.encode(text) == tok.encode(text).ids
    star = hf_bpe.train(["the cat"] * 5, vocab_size=260, pattern="a*", progress=False)
    assert star.decode(star.encode("the cat")) == "the cat"
