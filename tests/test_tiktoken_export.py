"""Export to tiktoken: `BPE.to_tiktoken`, `BPE.save_tiktoken` and `hf-bpe convert`.

Ids equal ours and those of real `tiktoken.Encoding`s built straight from OpenAI's files; GPT-2's
files become OpenAI's r50k_base.tiktoken byte for byte; vocabularies that tiktoken's rule cannot
reproduce are refused naming the cause (and a real tiktoken with ids as ranks does differ)."""

from __future__ import annotations

import json

import base64
import itertools
import random
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hf_bpe
from hf_bpe import BPE, formats
from hf_bpe.formats import files as artifacts
from hf_bpe.formats.tiktoken_export import pat_str
from hf_bpe.tools.cli import main
from conftest import CL100K_PAT, O200K_PAT, R50K_PAT, corpus_docs, corpus_slice, openai_files, peer_stable_chars

tiktoken = pytest.importorskip("tiktoken")

EOT = "<|endoftext|>"
# tiktoken 0.14's encodings (../shared/data/README.md), written out here rather than taken from hf_bpe.
REF = {
    "r50k_base": (R50K_PAT, {EOT: 50256}),
    "cl100k_base": (CL100K_PAT, {EOT: 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                                 "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}),
    "o200k_base": (O200K_PAT, {EOT: 199999, "<|endofprompt|>": 200018}),
}
KINDS = ["gpt2", "r50k_base", "cl100k_base", "o200k_base", "trained-lexicographic", "trained-hf"]


def rank_path(name: str):
    return openai_files() / f"{name}.tiktoken"


def reference(name: str) -> "tiktoken.Encoding":
    """tiktoken's own encoding, built from OpenAI's file without hf_bpe's help."""
    ranks = {}
    for line in rank_path(name).read_bytes().splitlines():
        tok, rank = line.split()
        ranks[base64.b64decode(tok)] = int(rank)
    pat, specials = REF[name]
    return tiktoken.Encoding(f"{name}_ref", pat_str=pat, mergeable_ranks=ranks, special_tokens=specials)


_CACHE: dict = {}


def vocab(kind: str) -> tuple[BPE, "tiktoken.Encoding", "tiktoken.Encoding | None"]:
    """(our BPE, its to_tiktoken(), tiktoken's reference encoding if there is one)."""
    if kind not in _CACHE:
        if kind == "gpt2":
            bpe, ref = BPE.load(openai_files() / "gpt2"), reference("r50k_base")
        elif kind.startswith("trained-"):
            docs = corpus_docs("english", 300_000) + corpus_docs("code", 200_000) + corpus_docs("multilingual", 200_000)
            bpe, ref = hf_bpe.train(docs, vocab_size=2000, tie_break=kind[8:], progress=False), None
        else:
            bpe, ref = BPE.load(rank_path(kind)), reference(kind)
        _CACHE[kind] = (bpe, bpe.to_tiktoken(), ref)
    return _CACHE[kind]


def corpora() -> list[str]:
    if "corpora" not in _CACHE:
        _CACHE["corpora"] = [corpus_slice(n, 1_000_000) for n in ("english", "code", "multilingual")]
    return _CACHE["corpora"]


# ---- ids ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_ids_equal_ours_and_tiktokens_on_corpora(kind):
    bpe, enc, ref = vocab(kind)
    assert enc.special_tokens_set == set(bpe.special_tokens)
    for text in corpora():
        ours = bpe.encode(text, allowed_special="all")
        assert enc.encode(text, allowed_special="all") == ours
        if ref is not None:
            assert ref.encode(text, allowed_special="all") == ours
    assert enc.decode(ours) == bpe.decode(ours)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(peer_stable_chars(), max_size=120) | st.text(st.sampled_from(" \n\t'sSLlda1é日🙂<|>"), max_size=60))
def test_ids_equal_on_generated_text(kind, text):
    bpe, enc, ref = vocab(kind)
    ours = bpe.encode_ordinary(text)
    assert enc.encode_ordinary(text) == ours
    if ref is not None:
        assert ref.encode_ordinary(text) == ours


def test_rank_rule_reproduces_every_trained_and_small_vocabulary():
    """Random small vocabularies over 'a', 'b', 'c': every trained one is accepted, and whenever
    one is accepted a real tiktoken gives our ids on every string of up to 6 letters."""
    words = ["".join(w) for n in range(1, 7) for w in itertools.product("abc", repeat=n)]
    rng = random.Random(7)
    accepted = 0
    for seed in range(120):
        docs = [" ".join("".join(rng.choice("aabbc") for _ in range(rng.randint(1, 7))) for _ in range(30))]
        tie = "hf" if seed % 2 else "lexicographic"
        trained = hf_bpe.train(docs, vocab_size=257 + rng.randint(3, 25), tie_break=tie, progress=False)
        toks = [b"a", b"b", b"c"]
        merges = []
        for _ in range(rng.randint(2, 12)):
            a, b = rng.choice(toks), rng.choice(toks)
            merges.append((a, b))
            if a + b not in toks:
                toks.append(a + b)
        v = {i: bytes([i]) for i in range(256)}
        v.update({256 + k: t for k, t in enumerate(toks[3:])})
        for bpe in (trained, BPE(v, merges)):
            try:
                enc = bpe.to_tiktoken()
            except ValueError:
                assert bpe is not trained, "a trained vocabulary was refused"
                continue
            accepted += bpe is not trained
            assert enc.encode_ordinary_batch(words) == bpe.encode_batch(words)
    assert accepted >= 15  # the hand-built half is not vacuous


# ---- files --------------------------------------------------------------------------------


def test_gpt2_files_become_openais_r50k_byte_for_byte(tmp_path):
    bpe = vocab("gpt2")[0]
    out = bpe.save_tiktoken(tmp_path / "gpt2.tiktoken")
    assert out.read_bytes() == rank_path("r50k_base").read_bytes()


@pytest.mark.parametrize("name", ["r50k_base", "cl100k_base", "o200k_base"])
def test_tiktoken_files_save_back_byte_for_byte(name, tmp_path):
    original = rank_path(name).read_bytes()
    assert BPE.load(rank_path(name)).save_tiktoken(tmp_path / "a.tiktoken").read_bytes() == original
    pat = {"r50k_base": "gpt2", "cl100k_base": "cl100k", "o200k_base": "o200k"}[name]
    via = BPE.from_tiktoken(rank_path(name), pattern=pat, special_tokens=REF[name][1])
    assert via.save_tiktoken(tmp_path / f"{name}.tiktoken").read_bytes() == original
    # the reader's rule for well-known file names still gives pattern and specials
    assert BPE.load(tmp_path / f"{name}.tiktoken") == via


def test_gpt2_round_trip_through_tiktoken(tmp_path):
    """GPT-2 files -> .tiktoken -> BPE -> GPT-2 files: identical. The rank file holds neither the
    pattern nor <|endoftext|>, which are given back on loading; nothing else is lost."""
    gpt2_dir = openai_files() / "gpt2"
    bpe = vocab("gpt2")[0]
    path = bpe.save_tiktoken(tmp_path / "gpt2.tiktoken")
    back = BPE.from_tiktoken(path, pattern="gpt2", special_tokens={EOT: 50256})
    assert back.is_tiktoken and back == bpe
    out = back.save(tmp_path / "gpt2")
    for name in ("vocab.json", "merges.txt"):
        assert (out / name).read_bytes() == (gpt2_dir / name).read_bytes(), name
    # Equal but for the added token's `normalized` flag (GPT-2's own tokenizer.json sets it; a
    # .tiktoken file has no flags; without a normalizer it means nothing).
    def unflagged(p):
        raw = json.loads(p.read_bytes())
        for t in raw["added_tokens"]:
            t["normalized"] = False
        return raw
    assert unflagged(out / "tokenizer.json") == unflagged(bpe.save(tmp_path / "direct") / "tokenizer.json")


@pytest.mark.parametrize("kind", ["trained-lexicographic", "trained-hf"])
def test_trained_round_trip_through_tiktoken(kind, tmp_path):
    bpe = vocab(kind)[0]
    path = bpe.save_tiktoken(tmp_path / "mine.tiktoken")
    with pytest.raises(formats.FormatError, match="from_tiktoken"):
        BPE.load(path)  # an unknown name: the reader cannot guess pattern and specials
    back = BPE.from_tiktoken(path, pattern="gpt2", special_tokens=bpe.special_tokens)
    assert back == bpe and back.merges == bpe.merges


def test_without_tiktoken_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(ImportError, match=r"hf_bpe\[tiktoken\]"):
        vocab("trained-hf")[0].to_tiktoken()


def test_save_tiktoken_is_atomic(tmp_path, monkeypatch):
    bpe = vocab("trained-lexicographic")[0]
    path = tmp_path / "t.tiktoken"
    path.write_bytes(b"old")

    def fail(what):
        raise OSError(f"killed before {what}")

    monkeypatch.setattr(artifacts, "_step", fail)
    with pytest.raises(OSError, match="killed before rename"):
        bpe.save_tiktoken(path)
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["t.tiktoken"]
    monkeypatch.undo()
    assert bpe.save_tiktoken(path).read_bytes().startswith(base64.b64encode(b"\x00") + b" 0\n")
    with pytest.raises(IsADirectoryError):
        bpe.save_tiktoken(tmp_path)


# ---- refusals: one per cause; a real tiktoken with ids as ranks does differ ----------------


def small(tokens: list[bytes], merges: list[tuple[bytes, bytes]]) -> BPE:
    v = {i: bytes([i]) for i in range(256)}
    v.update({256 + k: t for k, t in enumerate(tokens)})
    return BPE(v, merges)


def ids_as_ranks(bpe: BPE) -> "tiktoken.Encoding":
    return tiktoken.Encoding("raw", pat_str=bpe.pattern_source, mergeable_ranks={t: i for i, t in bpe.vocab.items()},
                             special_tokens={})


REFUSALS = {
    "ids-not-in-merge-order": ([b"ab", b"bc"], [(b"b", b"c"), (b"a", b"b")], r"ids are not in merge order: merge #1 "
                               r"b'a' \+ b'b' makes b'ab' \(id 256\) after merge #0 made b'bc' \(id 257\)", "abc"),
    "part-made-later": ([b"abc", b"bc"], [(b"a", b"bc"), (b"b", b"c")], r"merge #0 b'a' \+ b'bc' \(id 256\) uses "
                        r"b'bc' \(id 257\), made by a later merge", None),
    "made-by-no-merge": ([b"ab", b"xy"], [(b"a", b"b")], r"vocabulary entry b'xy' \(id 257\) is made by no merge",
                         "xy"),
    "other-split": ([b"bc", b"ab", b"abc"], [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")], r"token b'abc' \(id 258\) "
                    r"is merge #2 b'ab' \+ b'c', but tiktoken.* builds it as b'a' \+ b'bc'", "abc"),
}


@pytest.mark.parametrize("cause", REFUSALS)
def test_refusal_names_the_cause(cause, tmp_path):
    tokens, merges, message, witness = REFUSALS[cause]
    bpe = small(tokens, merges)
    with pytest.raises(ValueError, match="tiktoken cannot reproduce this vocabulary's ids: " + message):
        bpe.to_tiktoken()
    with pytest.raises(ValueError, match=message):
        bpe.save_tiktoken(tmp_path / "x.tiktoken")
    assert not list(tmp_path.iterdir())
    if witness is not None:
        assert ids_as_ranks(bpe).encode_ordinary(witness) != bpe.encode_ordinary(witness)


def test_a_later_merge_of_a_made_token_never_fires_and_is_accepted():
    # (a, bc) comes after abc = ab + c: bc never sits right after a standalone a
    bpe = small([b"ab", b"abc", b"bc"], [(b"a", b"b"), (b"ab", b"c"), (b"b", b"c"), (b"a", b"bc")])
    words = ["".join(w) for n in range(1, 8) for w in itertools.product("abc", repeat=n)]
    assert bpe.to_tiktoken().encode_ordinary_batch(words) == bpe.encode_batch(words)


# ---- the command --------------------------------------------------------------------------


def test_convert_to_each_format_reads_back_equal(tmp_path, capsys):
    gpt2_dir = openai_files() / "gpt2"
    bpe = vocab("gpt2")[0]
    text = corpora()[0][:200_000]
    expected = bpe.encode(text, allowed_special="all")

    assert main(["convert", str(gpt2_dir), str(tmp_path / "hf"), "--to", "hf"]) == 0
    assert BPE.load(tmp_path / "hf") == bpe

    assert main(["convert", str(gpt2_dir), str(tmp_path / "g"), "--to", "gpt2"]) == 0
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == ["merges.txt", "vocab.json"]
    for name in ("vocab.json", "merges.txt"):
        assert (tmp_path / "g" / name).read_bytes() == (gpt2_dir / name).read_bytes()
    assert "special_tokens=['<|endoftext|>']" in capsys.readouterr().out
    assert BPE.load(tmp_path / "g", special_tokens=[EOT]).encode(text, allowed_special="all") == expected

    out = tmp_path / "r.tiktoken"
    assert main(["convert", str(tmp_path / "hf" / "tokenizer.json"), str(out), "--to", "tiktoken"]) == 0
    assert out.read_bytes() == rank_path("r50k_base").read_bytes()
    printed = capsys.readouterr().out
    assert "pattern='gpt2'" in printed and "{'<|endoftext|>': 50256}" in printed
    # the printed command rebuilds it
    line = next(s for s in printed.splitlines() if "hf-bpe convert" in s)
    cmd = line.split("hf-bpe ", 1)[1].replace("OUT", str(tmp_path / "back"))
    import shlex

    assert main(shlex.split(cmd)) == 0
    assert BPE.load(tmp_path / "back").encode(text, allowed_special="all") == expected
    # and so does the printed tiktoken call
    import tiktoken
    import tiktoken.load

    call = printed[printed.index("tiktoken.Encoding("):].replace("NAME", "'back'")
    enc = eval(call, {"tiktoken": tiktoken})
    assert enc.encode(text, allowed_special="all") == expected


def test_convert_carries_a_custom_pattern_through_tiktoken(tmp_path, capsys):
    docs = corpus_docs("code", 200_000)
    bpe = hf_bpe.train(docs, vocab_size=600, pattern="cl100k", special_tokens=[EOT, "<|pad|>"], progress=False)
    bpe.save(tmp_path / "tok")
    assert main(["convert", str(tmp_path / "tok"), str(tmp_path / "t.tiktoken"), "--to", "tiktoken"]) == 0
    assert main(["convert", str(tmp_path / "t.tiktoken"), str(tmp_path / "back"), "--to", "hf", "--pattern", "cl100k",
                 "--special-token", f"{EOT}=256", "--special-token", "<|pad|>=257"]) == 0
    back = BPE.load(tmp_path / "back")
    assert back == bpe
    text = "\n".join(docs)[:100_000] + EOT
    assert back.to_tiktoken().encode(text, allowed_special="all") == bpe.encode(text, allowed_special="all")


@pytest.mark.parametrize("argv, message", [
    (["{cl100k}", "{tmp}/g", "--to", "gpt2"], "no place for the pattern 'cl100k'"),
    (["{refused}", "{tmp}/x.tiktoken", "--to", "tiktoken"], "tiktoken cannot reproduce this vocabulary's ids: ids are not"),
    (["{gpt2}", "{tmp}/x", "--to", "hf", "--pattern", "gpt2"], "describe a .tiktoken INPUT"),
    (["{cl100k}", "{tmp}/x", "--to", "hf", "--special-token", "eot"], "expected TOKEN=ID"),
    (["{tmp}/hf", "{tmp}/hf", "--to", "gpt2"], "holds tokenizer.json"),
])
def test_convert_errors_are_clear(argv, message, tmp_path, capsys):
    small(*REFUSALS["ids-not-in-merge-order"][:2]).save(tmp_path / "refused")
    small([b"ab"], [(b"a", b"b")]).save(tmp_path / "hf")
    paths = {"cl100k": str(rank_path("cl100k_base")), "gpt2": str(openai_files() / "gpt2"),
             "refused": str(tmp_path / "refused"), "tmp": str(tmp_path)}
    assert main(["convert"] + [a.format(**paths) for a in argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("hf-bpe convert: error: ") and message in err


GAP_PATTERNS = [r"[a-z]+", r"\p{L}+| ?\p{N}", r"(?i)the|[aeiou]+", r"\w+(?=\s)", r"(?<=a)b+|c",
                r"\s+$|\S+|\s", r"[a-z]+$|\d"]  # ($: ours is the end or before a final "\n"; tiktoken's the end)


@pytest.mark.parametrize("pattern", GAP_PATTERNS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(st.sampled_from("abcTHE théº1 2\n\t.,日🙂"), max_size=40))
def test_the_text_between_a_patterns_matches_is_kept_by_tiktoken_too(pattern, text):
    # tiktoken drops what its pattern does not match; hf_bpe keeps those gaps as pieces, as
    # tokenizers' Split(Isolated) does: the exported pattern must keep them too.
    bpe = _gap_vocab(pattern)
    enc = bpe.to_tiktoken()
    assert enc.encode(text) == bpe.encode(text)
    assert enc.decode(enc.encode(text)) == text


_GAP_VOCABS: dict[str, BPE] = {}


def _gap_vocab(pattern: str) -> BPE:
    if pattern not in _GAP_VOCABS:
        _GAP_VOCABS[pattern] = hf_bpe.train(["ab1cd the cat. Théº 12 日日 abab"] * 20, vocab_size=290,
                                            pattern=pattern, progress=False)
    return _GAP_VOCABS[pattern]


def test_the_exported_pattern_of_a_realistic_letter_number_pattern_keeps_every_character():
    # The case: "º" (not a letter or number to this pattern) was lost in tiktoken's ids.
    bpe = hf_bpe.train(["the 1st and 2º, x = y + 1;"] * 20, vocab_size=300,
                       pattern=r" ?\p{L}+| ?\p{N}+", progress=False)
    enc = bpe.to_tiktoken()
    for text in ["the 2º place", "a\u00a0b", "x = y + 1;"]:
        assert enc.encode(text) == bpe.encode(text) and enc.decode(enc.encode(text)) == text


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k", "llama3", "qwen2", "qwen3.5", "nemotron", "tekken", "kimi"])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=60))
def test_built_in_patterns_go_as_they_are_because_they_match_every_character(name, text):
    import tiktoken

    source = hf_bpe._core.pattern_source(name)
    bpe = BPE({i: bytes([i]) for i in range(256)}, [], pattern=name)
    assert pat_str(bpe.pattern, bpe.pattern_source) == source
    enc = tiktoken.Encoding("t", pat_str=source, mergeable_ranks={bytes([i]): i for i in range(256)}, special_tokens={})
    text = text.encode("utf-8", "replace").decode("utf-8")
    assert enc.decode(enc.encode(text, disallowed_special=())) == text


@pytest.mark.parametrize("pattern", [r"a*|b", r"x?", r"\b", r"(?=a)|b"])
def test_a_pattern_that_may_match_empty_is_refused(pattern):
    # the gap alternative needs every match non-empty (tiktoken panicked or dropped text)
    bpe = BPE({i: bytes([i]) for i in range(256)}, [], pattern=pattern)
    with pytest.raises(ValueError, match="may match the empty string"):
        bpe.to_tiktoken()


def test_an_escaped_backslash_before_a_digit_is_no_back_reference():
    bpe = BPE({i: bytes([i]) for i in range(256)}, [], pattern=r"\\1|\w+|\W")
    enc = bpe.to_tiktoken()
    for t in ["a\\1b", "x 1"]:
        assert enc.encode(t) == bpe.encode(t)


def test_a_pattern_with_a_back_reference_is_refused_by_name():
    bpe = hf_bpe.train(["aa bb cc"] * 20, vocab_size=258, pattern=r"(a)\1|\w+", progress=False)
    with pytest.raises(ValueError, match=r"'\\\\1' \(a named group or back-reference\)"):
        bpe.to_tiktoken()


def test_deepseek_v3s_three_splits_are_refused_not_cut_to_the_first():
    # pattern_source is only the first of the three regexes (its digits): exporting it made
    # tiktoken drop every other character.
    bpe = BPE({i: bytes([i]) for i in range(256)}, [], pattern="deepseek-v3")
    with pytest.raises(ValueError, match="sequence of 3 splits"):
        bpe.to_tiktoken()
    counts = hf_bpe.count(["12 ab"], pattern="deepseek-v3", progress=False)
    other = hf_bpe.count(["12 ab"], pattern=hf_bpe._core.pattern_source("deepseek-v3"), progress=False)
    with pytest.raises(ValueError, match="cannot merge"):
        counts + other
    assert BPE({i: bytes([i]) for i in range(256)}, [], pattern=hf_bpe._core.pattern_source("deepseek-v3")) != bpe


def test_dollar_means_ours_in_the_exported_pattern():
    # ours: the end or before a final "\n" (so "ab" is a piece of "ab\n"); tiktoken's: the end
    # only, which left "ab\n" one gap piece, where the merge b + \n applies.
    bpe = BPE({i: bytes([i]) for i in range(256)} | {256: b"b\n"}, [(b"b", b"\n")], pattern=r"[a-z]+$|\d")
    enc = bpe.to_tiktoken()
    for text in ["ab\n", "ab", "x ab\n", "ab\n\n"]:
        assert enc.encode(text) == bpe.encode(text), text
    assert bpe.encode("ab\n") == [97, 98, 10]
