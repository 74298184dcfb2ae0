"""``merge_filter=``: a callable or a regex (run in the core) vetoes merges; the training stays
exact otherwise (equal to the reference trainer given the same filter), on every trainer."""

from __future__ import annotations

import gzip
import re

import pytest

import hf_bpe
from hf_bpe import _core, reference
from hf_bpe.training.superword import span_pattern


@pytest.fixture(scope="module")
def docs() -> list[str]:
    with gzip.open(hf_bpe.sample_corpus(), "rt", encoding="utf-8") as f:
        return [p for p in f.read(60_000).split("\n\n") if p.strip()]


@pytest.fixture(scope="module")
def counts(docs) -> dict[bytes, int]:
    return dict(hf_bpe.count(docs, special_tokens=[], progress=False).items())


def no_the(left: bytes, right: bytes) -> bool:
    return b"th" not in left + right


@pytest.mark.parametrize("tie_break", ["lexicographic", "hf"])
def test_callable_filter_equals_the_reference(docs, counts, tie_break):
    asked = []

    def spy(left, right):
        asked.append((left, right))
        return no_the(left, right)

    got = hf_bpe.train(docs, 600, special_tokens=[], tie_break=tie_break, merge_filter=spy, progress=False)
    assert got.merges == reference.train_reference(counts, 600 - 256, tie_break, merge_filter=no_the)
    assert got.vocab_size == 600 and not any(b"th" in t for t in got.vocab.values())
    assert len(asked) == len(set(asked)), "a pair was asked about twice"
    plain = hf_bpe.train(docs, 600, special_tokens=[], tie_break=tie_break, progress=False)
    assert any(b"th" in t for t in plain.vocab.values())


@pytest.mark.parametrize("pattern", [r"\n", r"[.,;!?] ?\w", r"e ?$|^ t", r"\p{Lu}{2}", r"(?-u:\xE2)"])
def test_regex_filter_runs_in_the_core_as_re_would(docs, counts, pattern):
    got = hf_bpe.train(docs, 600, special_tokens=[], merge_filter=pattern, max_token_length=9, progress=False)
    py = re.compile(pattern.replace(r"\p{Lu}", "[A-Z]").replace("(?-u:\\xE2)", "\\xe2").encode())
    want = reference.train_reference(counts, 600 - 256, max_token_length=9,
                                     merge_filter=lambda a, b: py.search(a + b) is None)
    assert got.merges == want


def test_files_counts_and_superwords_take_the_filter(docs, tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text("<|endoftext|>".join(docs), encoding="utf-8")
    want = hf_bpe.train(docs, 600, merge_filter=no_the, progress=False)
    assert hf_bpe.train_files(path, 600, merge_filter=no_the, progress=False).merges == want.merges
    counted = hf_bpe.count(docs, progress=False)
    assert hf_bpe.train_from_counts(counted, 600, merge_filter=no_the, progress=False).merges == want.merges
    sw = hf_bpe.train(docs, 700, special_tokens=[], superword_transition=520, merge_filter=r"[,.] ", progress=False)
    py = re.compile(rb"[,.] ")
    ref = reference.train_superword_reference(docs, 520 - 256, 700 - 256, _core.pattern_source("gpt2"),
                                              span_pattern("gpt2"), merge_filter=lambda a, b: py.search(a + b) is None)
    assert sw.merges == ref and not any(py.search(t) for t in sw.vocab.values())


def test_extending_never_asks_about_the_base_merges(docs):
    base = hf_bpe.train(docs[: len(docs) // 2], 450, progress=False)
    base_pairs = set(base.merges)
    asked = []

    def veto_all_asked(left, right):
        asked.append((left, right))
        return False

    ext = hf_bpe.train(docs, 600, base=base, merge_filter=veto_all_asked, progress=False)
    assert ext.merges == base.merges and ext.vocab == base.vocab  # everything new was vetoed
    assert asked and not base_pairs & set(asked)


def test_a_filter_exception_stops_training_and_is_raised(docs):
    def boom(left, right):
        if len(left + right) > 3:
            raise RuntimeError("no long tokens today")
        return True

    with pytest.raises(RuntimeError, match="no long tokens today"):
        hf_bpe.train(docs, 600, merge_filter=boom, progress=False)


@pytest.mark.parametrize(("bad", "error", "match"), [
    (3, TypeError, "must be a callable"),
    ("(", ValueError, "merge_filter regex"),
    ("a*", ValueError, "matches the empty string"),
])
def test_bad_filters_are_clear_errors(docs, bad, error, match):
    with pytest.raises(error, match=match):
        hf_bpe.train(docs, 600, merge_filter=bad, progress=False)


def test_cli_merge_filter(docs, tmp_path, capsys):
    from hf_bpe.tools.cli import main

    path = tmp_path / "docs.txt"
    path.write_text("<|endoftext|>".join(docs), encoding="utf-8")
    assert main(["train", str(path), "--vocab-size", "600", "--merge-filter", "th", "--out", str(tmp_path / "o"),
                 "--quiet"]) == 0
    got = hf_bpe.BPE.load(tmp_path / "o")
    assert got.merges == hf_bpe.train_files(path, 600, merge_filter="th", progress=False).merges
    assert not any(b"th" in t for t in got.vocab.values())
    capsys.readouterr()
    assert main(["train", str(path), "--merge-filter", "(", "--out", str(tmp_path / "p"), "--quiet"]) == 1
    assert "merge_filter regex" in capsys.readouterr().err
