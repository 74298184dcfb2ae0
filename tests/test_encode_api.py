"""Encoding through the public `BPE` API with vocabularies trained by hf_bpe: ids equal those of
real `tokenizers` and `tiktoken` objects built from the saved files, for both tie rules; bad
arguments are refused naming the argument."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hf_bpe
from hf_bpe import formats
from hf_bpe.reference import encode_word_reference
from conftest import CL100K_PAT, GPT2_PAT, corpus_docs, peer_stable_chars, openai_files

tiktoken = pytest.importorskip("tiktoken")
tokenizers = pytest.importorskip("tokenizers")



def tiktoken_from_folder(d, pat_str: str) -> "tiktoken.Encoding":
    """A tiktoken Encoding built from a saved vocab.json + merges.txt, without hf_bpe's help."""
    vocab = json.loads((d / "vocab.json").read_text(encoding="utf-8"))
    specials = json.loads((d / "tokenizer_config.json").read_text())["added_tokens_decoder"]
    special = {v["content"]: int(i) for i, v in specials.items()}
    ranks = {formats.str_to_token(t): i for t, i in vocab.items() if t not in special}
    return tiktoken.Encoding("trained", pat_str=pat_str, mergeable_ranks=ranks, special_tokens=special)


@pytest.fixture(scope="module", params=["lexicographic", "hf"])
def trained(request, tmp_path_factory):
    docs = corpus_docs("english", 600_000) + corpus_docs("code", 300_000) + corpus_docs("multilingual", 300_000)
    bpe = hf_bpe.train(docs, vocab_size=3000, tie_break=request.param, progress=False)
    out = bpe.save(tmp_path_factory.mktemp(request.param) / "tok")
    return bpe, out


def texts_for_parity() -> list[str]:
    docs = corpus_docs("english", 300_000)[-1:] + corpus_docs("code", 200_000)[-1:] + corpus_docs("multilingual", 200_000)[-1:]
    return [d[:200_000] for d in docs] + ["", " ", "a", "<|endoftext|>", "x<|endoftext|>y  \n\n", "🙂👍🏽 日本語 ſ 'S'LL"]


def test_every_trained_token_encodes_to_itself(trained):
    bpe, _ = trained
    merges = bpe.merges
    specials = set(bpe.special_tokens.values())
    checked = 0
    for i, t in bpe.vocab.items():
        if i in specials:
            continue
        assert encode_word_reference(t, merges) == [t]
        try:
            text = t.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if hf_bpe._core.pretokenize("gpt2", text) == [text]:
            assert bpe.encode_ordinary(text) == [i], t
            checked += 1
    assert checked > 2000


def test_ids_equal_tokenizers_and_tiktoken_built_from_the_files(trained):
    bpe, out = trained
    hf = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    tt = tiktoken_from_folder(out, GPT2_PAT)
    for text in texts_for_parity():
        ours = bpe.encode(text, allowed_special="all")
        assert ours == hf.encode(text).ids
        assert ours == tt.encode(text, allowed_special="all")
        assert bpe.decode_bytes(ours) == text.encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=peer_stable_chars(), max_size=300)
       | st.text(alphabet=" \t\n\r'sltvedmabcT0123456789.,!?é🙂日本", max_size=300))
def test_hypothesis_ids_equal_peers(trained, text):
    bpe, out = trained
    tt = tiktoken_from_folder(out, GPT2_PAT)
    assert bpe.encode_ordinary(text) == tt.encode_ordinary(text)
    assert bpe.decode(bpe.encode_ordinary(text)) == text


def test_batch_flat_and_single_agree(trained):
    bpe, _ = trained
    texts = texts_for_parity() * 3
    single = [bpe.encode(t, allowed_special="all") for t in texts]
    assert bpe.encode_batch(texts, allowed_special="all") == single
    ids, offsets = bpe.encode_batch_flat(texts, allowed_special="all")
    assert ids.dtype == np.uint32 and offsets.dtype == np.int64 and len(offsets) == len(texts) + 1
    assert [ids[offsets[k]:offsets[k + 1]].tolist() for k in range(len(texts))] == single
    for n in (1, 2):
        assert bpe.encode_batch(texts, num_threads=n, allowed_special="all") == single


def test_one_thread_output_survives_a_change_of_ids_per_byte(trained):
    # One thread reserves room from the previous batch's ids-per-byte ratio: a batch of plain
    # words (few ids per byte) then one of rare chars (about one id per byte) must regrow.
    bpe, _ = trained
    words = ["the cat sat on the mat " * 4000] * 3
    dense = ["".join(chr(0x4E00 + (i * 7919 + k) % 20000) + "\u0301!" for i in range(30000)) for k in range(2)]
    for texts in (words, dense, words, dense):
        ids, offsets = bpe.encode_batch_flat(texts, num_threads=1)
        assert sum(len(t.encode()) for t in texts) > 256 << 10  # the batch path, not one small text
        assert [ids[offsets[k]:offsets[k + 1]].tolist() for k in range(len(texts))] == [bpe.encode_ordinary(t) for t in texts]


def test_batch_output_buffers_are_recycled_only_once_released(trained):
    # Big flat outputs are views of a buffer that goes back to a pool when the array and all
    # its views are gone, and the next batch reuses it; never while anything still sees it.
    bpe, _ = trained
    texts = [f"the cat {k} sat on the mat, and the dog {k} did not " * 3000 for k in range(6)]
    want = [bpe.encode_ordinary(t) for t in texts]

    def flat(n):
        ids, offsets = bpe.encode_batch_flat(texts, num_threads=n)
        assert [ids[offsets[k]:offsets[k + 1]].tolist() for k in range(len(texts))] == want
        return ids

    for n in (1, 2):
        bpe.clear_cache()
        assert bpe.cache_info()["kept_output_bytes"] == 0
        a = flat(n)
        assert type(a.base).__name__ == "IdBuffer" and a.nbytes >= 1 << 20
        view = a[10:20]
        snapshot = a.copy()
        del a
        b = flat(n)  # the buffer is still seen through `view`: not reused
        assert not np.shares_memory(view, b)
        b_addr = b.ctypes.data
        del b
        assert bpe.cache_info()["kept_output_bytes"] >= 1 << 20
        c = flat(n)  # `b`'s buffer came back: reused, with the right ids in it
        assert c.ctypes.data == b_addr
        assert (view == snapshot[10:20]).all() and not np.shares_memory(view, c)
        del view, c


def test_special_token_rules_like_tiktoken(trained):
    bpe, _ = trained
    eot = bpe.special_tokens["<|endoftext|>"]
    with pytest.raises(ValueError, match=r"<\|endoftext\|>"):
        bpe.encode("hello <|endoftext|> world")
    assert eot in bpe.encode("hello <|endoftext|>", allowed_special={"<|endoftext|>"})
    assert eot not in bpe.encode_ordinary("hello <|endoftext|>")
    assert eot not in bpe.encode("hello <|endoftext|>", disallowed_special=())
    with pytest.raises(TypeError, match="got the string"):
        bpe.encode("x", allowed_special="<|endoftext|>")


def test_offsets_cover_the_text(trained):
    bpe, _ = trained
    text = "The cat's hat — 日本語 🙂 costs 1234 yen.\n\n  ok"
    ids, offs = bpe.encode_with_offsets(text)
    assert ids == bpe.encode_ordinary(text)
    assert offs[0][0] == 0 and offs[-1][1] == len(text)
    assert "".join(text[s:e] for s, e in offs) == text


def test_pickle_is_compact_deterministic_and_cacheless(trained):
    bpe, _ = trained
    before = pickle.dumps(bpe)
    bpe.encode_batch(texts_for_parity(), allowed_special="all")  # fills the cache
    after = pickle.dumps(bpe)
    assert before == after and len(after) < 200_000
    clone = pickle.loads(after)
    assert clone == bpe and clone.encode("the cat") == bpe.encode("the cat")


def test_decode_bad_ids(trained):
    bpe, _ = trained
    with pytest.raises(ValueError, match="3000"):
        bpe.decode([1, 2, 3000])
    with pytest.raises(ValueError):
        bpe.decode([-1])
    half = [bpe.token_to_id(b"\xe6"), bpe.token_to_id(b"\x97")]  # half of a 3-byte character
    assert bpe.decode(half) == "\ufffd"  # replaced, never an error
    assert bpe.decode_bytes(half) == b"\xe6\x97"


def test_from_tiktoken_equals_tiktoken(tmp_path):
    path = openai_files() / "cl100k_base.tiktoken"
    specials = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
    bpe = hf_bpe.BPE.from_tiktoken(path, pattern="cl100k", special_tokens=specials)
    ranks = {formats.str_to_token(formats.token_to_str(t)): i for t, i in formats.read_tiktoken(path).items()}
    tt = tiktoken.Encoding("cl100k_local", pat_str=CL100K_PAT, mergeable_ranks=ranks, special_tokens=specials)
    for text in texts_for_parity():
        assert bpe.encode(text, allowed_special="all") == tt.encode(text, allowed_special="all")


@pytest.mark.parametrize("call, exc, match", [
    (lambda b: b.encode_batch("hello"), TypeError, "single str"),
    (lambda b: b.encode_batch_flat("hello"), TypeError, "single str"),
    (lambda b: b.decode(b"hi"), TypeError, "sequence of token ids, got bytes"),
    (lambda b: b.decode("hi"), TypeError, "sequence of token ids, got str"),
    (lambda b: b.decode([104.0]), ValueError, "not a valid id"),
    (lambda b: b.encode_batch(["a"], num_threads=-1), ValueError, "num_threads=-1 must be 0 or more"),
    (lambda b: b.encode_batch(["a"], num_threads=10**6), ValueError, "is more than 1024 threads"),
])
def test_bad_arguments_are_refused_naming_the_argument(call, exc, match):
    bpe = hf_bpe.train(["the cat sat on the mat"] * 5, vocab_size=270, progress=False)
    with pytest.raises(exc, match=match):
        call(bpe)
