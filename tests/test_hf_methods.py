"""Methods of a fast tokenizer on `BPETokenizer`. `train_new_from_iterator`: our trainer, equal to
`hf_bpe.train` and, with `tie_break="hf"`, to transformers' own method on GPT2TokenizerFast."""

from __future__ import annotations

import pytest
from transformers import GPT2TokenizerFast

import hf_bpe
from conftest import corpus_docs, shared_data


def _batches(docs, size=50):
    for k in range(0, len(docs), size):
        yield docs[k:k + size]


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return [d for name in ("english", "code", "multilingual") for d in corpus_docs(name, 200_000)]


def test_same_merges_as_transformers_and_hf_bpe_train(docs, tmp_path):
    tok = hf_bpe.BPETokenizer.from_pretrained(shared_data() / "gpt2")
    tok.model_max_length = 77
    ours = tok.train_new_from_iterator(_batches(docs), vocab_size=700, progress=False)
    assert type(ours) is hf_bpe.BPETokenizer and ours.eos_token == "<|endoftext|>" and ours.model_max_length == 77
    direct = hf_bpe.train((d for d in docs), vocab_size=700, special_tokens=["<|endoftext|>"], tie_break="hf", progress=False)
    assert ours.bpe == direct
    ref = GPT2TokenizerFast.from_pretrained(shared_data() / "gpt2").train_new_from_iterator(_batches(docs), vocab_size=700)
    assert ours.get_vocab() == ref.get_vocab()
    text = docs[3][:2000] + "<|endoftext|>" + docs[-1][:2000]
    assert ours(text)["input_ids"] == ref(text)["input_ids"]
    lex = tok.train_new_from_iterator(iter(docs), 700, tie_break="lexicographic", progress=False)
    assert lex.bpe == hf_bpe.train(docs, vocab_size=700, special_tokens=["<|endoftext|>"], progress=False)


def test_special_tokens_renamed_and_added_and_bad_options(docs):
    tok = hf_bpe.BPETokenizer.from_pretrained(shared_data() / "gpt2")
    new = tok.train_new_from_iterator(docs[:20], 400, new_special_tokens=["<|pad|>"],
                                      special_tokens_map={"<|endoftext|>": "<eos>"}, progress=False)
    assert set(new.bpe.special_tokens) == {"<eos>", "<|pad|>"} and new.eos_token == "<eos>"
    assert new("a<eos>b")["input_ids"][1] == new.bpe.special_tokens["<eos>"]
    with pytest.raises(TypeError, match="unsupported option.*'dropout'"):
        tok.train_new_from_iterator(docs[:5], 300, dropout=0.1)


def test_backend_tokenizer_gives_the_same_ids(docs, tmp_path):
    import tokenizers

    tok = hf_bpe.BPETokenizer.from_pretrained(shared_data() / "gpt2")
    tok.add_tokens(["<|im_start|>"], special_tokens=True)
    tok.add_tokens(["zqxzqx"])
    trained = hf_bpe.BPETokenizer.from_bpe(hf_bpe.train(docs, vocab_size=600, progress=False))
    for t in (tok, trained):
        backend = t.backend_tokenizer
        assert isinstance(backend, tokenizers.Tokenizer)
        for text in docs[:30] + ["<|im_start|>a zqxzqx<|endoftext|>b"]:
            assert backend.encode(text, add_special_tokens=False).ids == t(text)["input_ids"]
