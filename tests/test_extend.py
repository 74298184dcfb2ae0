"""Extending a vocabulary: every old id, merge and special token kept, new merges equal the
reference's, new ids after the largest old one, and the result reads alike in tokenizers,
tiktoken and transformers."""

from __future__ import annotations

import re

import pytest

import hf_bpe
from hf_bpe import reference
from conftest import corpus_docs, model_files, openai_files


@pytest.fixture(scope="module")
def new_docs():
    return corpus_docs("multilingual", 300_000)


def assert_extends(ext: hf_bpe.BPE, base: hf_bpe.BPE, texts: list[str]) -> None:
    """Old ids and merges kept; where no new token is used, the ids are the base's."""
    old, new = base.vocab, ext.vocab
    assert {i: new[i] for i in old} == old and ext.merges[:len(base.merges)] == base.merges
    assert ext.special_tokens == base.special_tokens and ext.added_tokens[:len(base.added_tokens)] == base.added_tokens
    for t, a, b in zip(texts, ext.encode_batch(texts, allowed_special="all"), base.encode_batch(texts, allowed_special="all")):
        if all(i < base.vocab_size for i in a):
            assert a == b, t[:80]
        assert ext.decode(a) == t


@pytest.mark.parametrize("tie_break", ["lexicographic", "hf"])
def test_new_merges_equal_the_reference(new_docs, tie_break):
    base = hf_bpe.train(corpus_docs("english", 200_000), vocab_size=700, tie_break=tie_break, progress=False)
    ext = hf_bpe.train(new_docs, vocab_size=900, tie_break=tie_break, base=base, progress=False)
    counts = hf_bpe.count(new_docs, progress=False)
    want = reference.train_reference(dict(counts.items()), 200, tie_break, base_merges=base.merges)
    assert ext.merges[len(base.merges):] == want and ext.vocab_size == 900
    assert sorted(set(ext.vocab) - set(base.vocab)) == list(range(700, 900))
    assert_extends(ext, base, new_docs[:30] + corpus_docs("english", 50_000))
    # the same from files and from counts
    assert hf_bpe.train_from_counts(counts, vocab_size=900, tie_break=tie_break, base=base, progress=False) == ext


def test_extending_gpt2_reads_alike_in_tokenizers_and_tiktoken(new_docs, tmp_path, capsys):
    import tiktoken  # noqa: F401  (the test extra)
    import tokenizers

    base = hf_bpe.BPE.load(openai_files() / "gpt2")
    ext = hf_bpe.train(new_docs, vocab_size=base.vocab_size + 300, base=base)
    report = capsys.readouterr().err
    assert "300 new tokens (ids 50257..50556)" in report
    before, after = (float(x) for x in report.split("new corpus ")[1].split()[0:3:2])
    assert after > before
    english = corpus_docs("english", 200_000)
    assert_extends(ext, base, new_docs[:40] + english)
    ext.save(tmp_path / "ext")
    file = tokenizers.Tokenizer.from_file(str(tmp_path / "ext" / "tokenizer.json"))
    texts = new_docs[:60] + english[:20]
    want = ext.encode_batch(texts)
    assert [e.ids for e in file.encode_batch(texts, add_special_tokens=False)] == want
    assert ext.to_tiktoken().encode_ordinary_batch(texts) == want
    assert hf_bpe.BPE.load(tmp_path / "ext") == ext


def test_extending_cl100k_keeps_its_holes(new_docs, tmp_path):
    import tokenizers

    base = hf_bpe.BPE.load(openai_files() / "cl100k_base.tiktoken")
    ext = hf_bpe.extend(base, new_docs, vocab_size=base.vocab_size + 200, progress=False)
    holes = set(range(base.vocab_size)) - set(base.vocab)
    assert holes and not holes & set(ext.vocab) and sorted(set(ext.vocab) - set(base.vocab)) == list(
        range(100277, 100477))
    texts = new_docs[:40] + corpus_docs("code", 100_000)
    assert_extends(ext, base, texts)
    want = ext.encode_batch(texts)
    assert ext.to_tiktoken().encode_ordinary_batch(texts) == want
    ext.save(tmp_path / "ext")
    file = tokenizers.Tokenizer.from_file(str(tmp_path / "ext" / "tokenizer.json"))
    assert [e.ids for e in file.encode_batch(texts, add_special_tokens=False)] == want


def test_extending_a_model_file_and_a_transformers_tokenizer(new_docs, tmp_path):
    import tokenizers

    base = hf_bpe.BPE.load(model_files() / "olmo-2-dolma2")
    ext = hf_bpe.extend(base, new_docs, vocab_size=base.vocab_size + 100, progress=False)
    assert_extends(ext, base, new_docs[:30])
    ext.save(tmp_path / "olmo")
    file = tokenizers.Tokenizer.from_file(str(tmp_path / "olmo" / "tokenizer.json"))
    assert [e.ids for e in file.encode_batch(new_docs[:30], add_special_tokens=False)] == ext.encode_batch(new_docs[:30])

    tok = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2", pad_token="<|endoftext|>", model_max_length=77)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    tok.add_tokens(["hello_token"])
    out = hf_bpe.extend(tok, new_docs, vocab_size=len(tok) + 50, progress=False)
    assert isinstance(out, hf_bpe.BPETokenizer) and len(out) == len(tok) + 50
    assert (out.pad_token, out.model_max_length) == ("<|endoftext|>", 77)
    for t in ("<|im_start|>", "hello_token"):
        assert out.convert_tokens_to_ids(t) == tok.convert_tokens_to_ids(t)
    text = "Hi <|im_start|> there hello_token!"
    assert out(text)["input_ids"] == tok(text)["input_ids"]
    out.save_pretrained(tmp_path / "tok")
    assert hf_bpe.BPETokenizer.from_pretrained(tmp_path / "tok")(new_docs[:5])["input_ids"] == out(new_docs[:5])["input_ids"]


def test_what_cannot_be_extended_is_a_clear_error(new_docs):
    base = hf_bpe.train(corpus_docs("english", 100_000), vocab_size=400, progress=False)
    with pytest.raises(ValueError, match="vocab_size=300 is below the base's vocabulary size 400"):
        hf_bpe.train(new_docs, vocab_size=300, base=base, progress=False)
    with pytest.raises(ValueError, match="pattern='cl100k' differs from the base's 'gpt2'"):
        hf_bpe.train(new_docs, vocab_size=500, pattern="cl100k", base=base, progress=False)
    with pytest.raises(ValueError, match=r"special_tokens=\['<\|pad\|>'\] differ from the base's"):
        hf_bpe.train(new_docs, vocab_size=500, special_tokens=["<|pad|>"], base=base, progress=False)
    with pytest.raises(ValueError, match="the counts were made with pattern 'o200k', the base uses 'gpt2'"):
        hf_bpe.train_from_counts(hf_bpe.count(new_docs, pattern="o200k", progress=False), vocab_size=500, base=base)
    neox = hf_bpe.BPE.load(model_files() / "gpt-neox-20b")
    with pytest.raises(ValueError, match="this base cannot be extended: its tokenizer.json pipeline"):
        hf_bpe.extend(neox, new_docs, vocab_size=neox.vocab_size + 10)
    with pytest.raises(TypeError, match="base must be an hf_bpe.BPE"):
        hf_bpe.train(new_docs, vocab_size=500, base="gpt2")


def test_a_base_merge_that_re_forms_is_not_learned_again(tmp_path):
    import tokenizers

    vocab = {i: bytes([i]) for i in range(256)} | {256: b"bc", 257: b"ab", 258: b"abc", 259: b"abcd"}
    base = hf_bpe.BPE(vocab, [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c"), (b"abc", b"d")], {}, "gpt2")
    texts = ["abc"] * 300 + ["dx"] * 200 + ["abcd"] * 100
    ext = hf_bpe.train(texts, vocab_size=base.vocab_size + 3, base=base, special_tokens=(), progress=False)
    new = ext.merges[len(base.merges):]
    assert len(set(ext.merges)) == len(ext.merges) and (b"abc", b"d") not in new
    counts = hf_bpe.count(texts, special_tokens=(), progress=False)
    assert new == reference.train_reference(dict(counts.items()), 3, base_merges=base.merges)
    ext.save(tmp_path / "ext")
    file = tokenizers.Tokenizer.from_file(str(tmp_path / "ext" / "tokenizer.json"))
    probe = ["abcdx", "abc dx abcd", "xabcd"]
    assert [e.ids for e in file.encode_batch(probe, add_special_tokens=False)] == ext.encode_batch(probe)
    with pytest.raises(ValueError, match="the counts were split on"):
        hf_bpe.train_from_counts(hf_bpe.count(texts, progress=False), vocab_size=base.vocab_size + 3, base=base)
    with pytest.raises(ValueError, match="max_token_length must be >= 1"):
        hf_bpe.extend(base, texts, vocab_size=base.vocab_size + 3, max_token_length=0)


def test_phi2_with_two_groups_of_added_tokens_extends_exactly(tmp_path):
    # phi-2's whitespace added tokens are matched after normalization (a second group), its
    # <|endoftext|> in the raw text: no overlap, so words counted split on all of them in one
    # pass are the encoder's pieces (checked below), and the extension is exact.
    import warnings
    from collections import Counter

    import tokenizers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = hf_bpe.BPE.load(model_files() / "phi-2")
    docs = [d + "<|endoftext|>" for d in corpus_docs("code", 200_000)]
    own = [t.content for t in base.added_tokens]
    counts = hf_bpe.count(docs, special_tokens=own, progress=False)
    ids, _, words, rows = base.encode_spans(docs, allowed_special="all")
    added = {t.id for t in base.added_tokens}
    pieces: Counter = Counter()
    for r in range(len(docs)):
        cur: dict = {}
        for i, w in zip(ids[rows[r]:rows[r + 1]], words[rows[r]:rows[r + 1]]):
            if int(i) not in added:
                cur[int(w)] = cur.get(int(w), b"") + base.vocab[int(i)]
        pieces.update(cur.values())
    assert dict(counts.items()) == dict(pieces)

    ext = hf_bpe.extend(base, docs, vocab_size=base.vocab_size + 200, progress=False)
    assert ext.merges[len(base.merges):] == reference.train_reference(dict(counts.items()), 200, "lexicographic",
                                                                       base_merges=base.merges)
    assert_extends(ext, base, docs[:20])
    ext.save(tmp_path / "phi")
    file = tokenizers.Tokenizer.from_file(str(tmp_path / "phi" / "tokenizer.json"))
    assert [e.ids for e in file.encode_batch(docs[:50], add_special_tokens=False)] == ext.encode_batch(docs[:50], allowed_special="all")


@pytest.mark.parametrize("change,words", [
    ({"rstrip": True}, "sets rstrip"),
    ({"normalized": True, "content": "<|endoftext|>x"}, "can overlap in text"),
])
def test_added_tokens_that_split_otherwise_name_the_cause(new_docs, change, words):
    base = hf_bpe.train(corpus_docs("english", 50_000), vocab_size=300, progress=False)
    from hf_bpe.formats import AddedToken

    b = base.derive([AddedToken(**dict(dict(content="<|x|>", id=300, special=False, lstrip=False, rstrip=False,
                                            single_word=False, normalized=True), **change))])
    with pytest.raises(ValueError, match="cannot be extended exactly: .*" + words):
        hf_bpe.extend(b, new_docs[:20], vocab_size=400, progress=False)


def test_a_flagged_added_token_is_refused_in_one_group_too(new_docs):
    from hf_bpe.formats import AddedToken

    base = hf_bpe.train(corpus_docs("english", 50_000), vocab_size=300, progress=False)
    b = base.derive([AddedToken("<|x|>", 300, True, True, False, False, False)])  # lstrip, matched in the raw text
    with pytest.raises(ValueError, match=re.escape("'<|x|>' sets lstrip")):
        hf_bpe.extend(b, new_docs[:20], vocab_size=400, progress=False)
