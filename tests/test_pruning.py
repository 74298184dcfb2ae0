"""``hf_bpe.prune``: removed tokens are never emitted, kept tokens keep their bytes, every kept
token is built from kept tokens, encoding equals the reference encoder on the pruned merges,
and stock ``tokenizers`` and ``tiktoken`` give our ids for the saved result."""

from __future__ import annotations

import gzip
import random

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hf_bpe
from hf_bpe import reference

from conftest import openai_files

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@pytest.fixture(scope="module")
def docs() -> list[str]:
    with gzip.open(hf_bpe.sample_corpus(), "rt", encoding="utf-8") as f:
        return [p for p in f.read(400_000).split("\n\n") if p.strip()]


@pytest.fixture(scope="module")
def base(docs) -> hf_bpe.BPE:
    return hf_bpe.train(docs, 1500, progress=False)


def check_pruned(old: hf_bpe.BPE, new: hf_bpe.BPE, id_map: list[int], texts: list[str]) -> None:
    """Every property pruning promises, on ``texts``."""
    gone = {i for i, j in enumerate(id_map) if j < 0 and i in old.vocab}
    for i, b in old.vocab.items():
        if id_map[i] >= 0:
            assert new.vocab[id_map[i]] == b
    assert len(new) == len(old) - len(gone)
    removed = {old.vocab[i] for i in gone}
    for a, b in new.merges:  # each kept token is made of kept tokens
        assert new.token_to_id(a) is not None and new.token_to_id(b) is not None and new.token_to_id(a + b) is not None
    for t in texts:
        ids = new.encode(t)
        assert all(i in new.vocab and new.vocab[i] not in removed for i in ids)
        assert new.decode(ids) == t
        want = [new.token_to_id(tok) for m in regex.finditer(GPT2, t)
                for tok in reference.encode_word_reference(m.group().encode(), new.merges)]
        assert ids == want


def test_nothing_removed_changes_nothing(base, docs):
    same, id_map = hf_bpe.prune(base, remove=[])
    assert same.merges == base.merges and same.vocab == base.vocab and id_map == list(range(base.vocab_size))


def test_an_intermediate_token_is_rebuilt_through_its_children(base, docs):
    """Removing a token used by later merges keeps those tokens, made of other kept tokens."""
    users = {}
    for a, b in base.merges:
        for part in (a, b):
            if len(part) > 1:
                users.setdefault(part, []).append(a + b)
    inner = max(users, key=lambda t: len(users[t]))
    new, id_map = hf_bpe.prune(base, remove=[inner])
    assert new.token_to_id(inner) is None
    kept = [t for t in users[inner] if new.token_to_id(t) is not None]
    assert kept, "no token built on the removed one survived"
    check_pruned(base, new, id_map, docs[:40])


def test_vocab_size_by_use_on_texts(base, docs):
    new, id_map = hf_bpe.prune(base, 1000, texts=docs[:200])
    assert new.vocab_size == 1000 == len(new)
    uses = {}
    for ids in base.encode_batch(docs[:200]):
        for i in ids:
            uses[i] = uses.get(i, 0) + 1
    removed = [i for i in base.vocab if id_map[i] < 0]
    kept_merged = [i for i in base.vocab if id_map[i] >= 0 and len(base.vocab[i]) > 1 and i not in
                   base.special_tokens.values()]
    assert sum(uses.get(i, 0) for i in removed) / len(removed) < sum(uses.get(i, 0) for i in kept_merged) / len(
        kept_merged)
    check_pruned(base, new, id_map, docs[200:240])
    holes, hole_map = hf_bpe.prune(base, 1000, texts=docs[:200], keep_ids=True)
    assert hole_map == [i if j >= 0 else -1 for i, j in enumerate(id_map)]
    assert holes.vocab_size == max(i for i, j in enumerate(id_map) if j >= 0) + 1 and len(holes) == 1000
    inverse = {j: i for i, j in enumerate(id_map) if j >= 0}
    assert holes.encode_batch(docs[:5]) == [[inverse[j] for j in x] for x in new.encode_batch(docs[:5])]


def test_keep_and_without_texts(base, docs):
    keep = [t for i, t in base.vocab.items() if len(t) > 1 and i % 3 == 0 and i not in base.special_tokens.values()]
    new, id_map = hf_bpe.prune(base, keep=keep)
    assert all(len(t) == 1 or t in keep or t == b"<|endoftext|>" for t in new.vocab.values())
    check_pruned(base, new, id_map, docs[:20])
    cut, _ = hf_bpe.prune(base, 800)  # without texts: the last merged go first, a prefix of the merges
    assert cut.merges == base.merges[:800 - 257]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), share=st.floats(0.05, 0.6))
def test_random_removals_on_random_vocabularies(seed, share):
    rng = random.Random(seed)
    alphabet = "ab cdé\n日"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(5, 60))) for _ in range(80)]
    old = hf_bpe.train(texts, 256 + 1 + rng.randint(5, 80), progress=False, tie_break=rng.choice(["lexicographic", "hf"]))
    merged = [t for i, t in old.vocab.items() if len(t) > 1 and i not in old.special_tokens.values()]
    remove = rng.sample(merged, int(len(merged) * share))
    new, id_map = hf_bpe.prune(old, remove=remove)
    assert not any(new.token_to_id(t) is not None for t in remove)
    check_pruned(old, new, id_map, texts[:20])


def test_stock_tokenizers_and_tiktoken_give_our_ids(base, docs, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tiktoken = pytest.importorskip("tiktoken")
    new, _ = hf_bpe.prune(base, 900, texts=docs[:100])
    new.save(tmp_path / "out")
    tok = tokenizers.Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    sample = docs[100:160]
    assert [e.ids for e in tok.encode_batch(sample)] == new.encode_batch(sample)
    enc = new.to_tiktoken()
    assert isinstance(enc, tiktoken.Encoding)
    assert [enc.encode_ordinary(t) for t in sample] == [new.encode_ordinary(t) for t in sample]
    assert hf_bpe.BPE.load(tmp_path / "out").merges == new.merges
    transformers = pytest.importorskip("transformers")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "out" / "tokenizer.json"))
    assert fast(sample)["input_ids"] == new.encode_batch(sample)
    auto = transformers.AutoTokenizer.from_pretrained(tmp_path / "out")
    assert auto(sample)["input_ids"] == new.encode_batch(sample)


def test_gpt2_to_40000_keeps_its_compression_and_cl100k_stays_ranks(docs, tmp_path):
    """GPT-2 pruned to 40,000 tokens by use on some books keeps >= 0.95x its bytes/token on others;
    cl100k (ranks) pruned stays a rank vocabulary that tiktoken reads with our ids."""
    tiktoken = pytest.importorskip("tiktoken")
    gpt2 = hf_bpe.BPE.load(openai_files() / "gpt2")
    train, held = docs[: len(docs) // 2], docs[len(docs) // 2:]
    small, id_map = hf_bpe.prune(gpt2, 40000, texts=train)
    assert small.vocab_size == 40000

    def bpt(b):
        return sum(len(d.encode()) for d in held) / sum(map(len, b.encode_batch(held)))

    assert bpt(small) >= 0.95 * bpt(gpt2)
    cl = hf_bpe.BPE.load(openai_files() / "cl100k_base.tiktoken")
    pruned, _ = hf_bpe.prune(cl, 90000, texts=train)
    assert pruned.is_tiktoken and pruned.vocab_size == 90000
    enc = pruned.to_tiktoken()
    assert isinstance(enc, tiktoken.Encoding)
    assert [enc.encode_ordinary(t) for t in held[:30]] == [pruned.encode_ordinary(t) for t in held[:30]]


def test_bad_requests_are_refused_by_name(base):
    with pytest.raises(ValueError, match="exactly one of"):
        hf_bpe.prune(base, 1000, remove=[b"th"])
    with pytest.raises(ValueError, match=r"b'e' \(id 101\) is a byte or special/added token"):
        hf_bpe.prune(base, remove=[b"e"])
    with pytest.raises(ValueError, match="'<|endoftext|>'"):
        hf_bpe.prune(base, remove=["<|endoftext|>"])
    with pytest.raises(ValueError, match="not a token of this vocabulary"):
        hf_bpe.prune(base, remove=[b"zzzzzz"])
    with pytest.raises(ValueError, match="below the 257 byte and special/added tokens"):
        hf_bpe.prune(base, 100)
    with pytest.raises(TypeError, match="prune takes an hf_bpe.BPE .* or a BPETokenizer"):
        hf_bpe.prune("gpt2", 100)


def test_cli_prunes_and_reports_the_cost(base, docs, tmp_path, capsys):
    import numpy as np

    from hf_bpe.tools.cli import main

    base.save(tmp_path / "base")
    texts = tmp_path / "texts.txt"
    texts.write_text("<|endoftext|>".join(docs[:100]), encoding="utf-8")
    assert main(["prune", "--tokenizer", str(tmp_path / "base"), "--vocab-size", "1100", "--texts", str(texts),
                 "--out", str(tmp_path / "small"), "--id-map", str(tmp_path / "map.npy")]) == 0
    out = capsys.readouterr().out
    assert "1500 -> 1100" in out and "bytes/token on the texts" in out
    want, id_map = hf_bpe.prune(base, 1100, texts=[d for d in "<|endoftext|>".join(docs[:100]).split("<|endoftext|>")])
    assert hf_bpe.BPE.load(tmp_path / "small").merges == want.merges
    assert np.load(tmp_path / "map.npy").tolist() == id_map
    assert main(["prune", "--tokenizer", str(tmp_path / "base"), "--remove", " the", "--out",
                 str(tmp_path / "x")]) == 0
    assert hf_bpe.BPE.load(tmp_path / "x").token_to_id(b" the") is None
    assert main(["prune", "--tokenizer", str(tmp_path / "base"), "--out", str(tmp_path / "y")]) == 1
    assert "exactly one of" in capsys.readouterr().err


def test_a_bpetokenizer_comes_back_as_one_with_its_added_tokens(base, docs):
    pytest.importorskip("transformers")
    tok = hf_bpe.BPETokenizer.from_bpe(base)
    tok.add_tokens(["<extra>"])
    extra = tok.convert_tokens_to_ids("<extra>")
    small, id_map = hf_bpe.prune(tok, 1100, texts=docs[:100])
    assert isinstance(small, hf_bpe.BPETokenizer) and len(small) == 1100
    assert small.convert_tokens_to_ids("<extra>") == id_map[extra] >= 0
    assert small.eos_token == tok.eos_token
    text = docs[120] + " <extra>"
    ids = small(text)["input_ids"]
    assert small.decode(ids) == text and ids[-1] == id_map[extra]
    assert all(i in small.get_vocab().values() for i in ids)


def test_a_post_processor_template_follows_the_new_ids(base, docs, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from hf_bpe.formats import AddedToken
    from hf_bpe.hf.post import bos_eos_template

    n = base.vocab_size
    with_bos = base.derive([AddedToken("<s>", n), AddedToken("</s>", n + 1)],
                           post_processor=bos_eos_template(("<s>", n, True), (None, None, False)))
    small, id_map = hf_bpe.prune(with_bos, remove=[with_bos.vocab[n - 1], with_bos.vocab[n - 2]])
    assert id_map[n] == n - 2 and small.token_to_id("<s>") == n - 2
    assert "[" + str(n - 2) + "]" in small.pipeline.replace(" ", "") and str(n) not in small.pipeline
    small.save(tmp_path / "out")
    tok = tokenizers.Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    assert tok.encode(docs[0][:200]).ids[0] == n - 2


def test_keep_may_list_bytes_and_specials(base):
    keep = [b"a", "<|endoftext|>", b"he", b"th"]
    new, _ = hf_bpe.prune(base, keep=keep)
    assert new.merges == [(b"t", b"h"), (b"h", b"e")] or new.merges == [(b"h", b"e"), (b"t", b"h")]
    assert len(new) == 256 + 1 + 2
    alone, _ = hf_bpe.prune(base, keep=[b" the"])  # its parts gone, no two kept tokens make it: it goes too
    assert alone.merges == [] and len(alone) == 257
