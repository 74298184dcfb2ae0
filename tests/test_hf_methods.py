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


@pytest.mark.parametrize("kw", [dict(add_bos_token=True), dict(add_eos_token=True),
                                dict(add_bos_token=True, add_eos_token=True), dict(add_bos_token=False)])
def test_add_bos_and_eos_tokens_equal_transformers_and_persist(kw, tmp_path):
    """``add_bos_token``/``add_eos_token`` as transformers' tokenizers backend applies them (a
    template replacing the post-processor), set at load or later, and kept in the saved
    ``tokenizer.json``: every reader of the folder adds the same tokens."""
    import json
    import subprocess
    import sys

    import tokenizers
    from transformers import GPT2Tokenizer

    texts, pairs = ["Hello world", "", "a<|endoftext|>b"], ["x y", "z", ""]
    ours, ref = hf_bpe.BPETokenizer.from_pretrained(shared_data() / "gpt2", **kw), GPT2Tokenizer.from_pretrained(shared_data() / "gpt2", **kw)
    for args in ((texts,), (texts, pairs)):
        for extra in ({}, dict(return_token_type_ids=True, return_special_tokens_mask=True, return_offsets_mapping=True)):
            assert dict(ours(*args, **extra)) == dict(ref(*args, **extra)), (args, extra)
    assert ours.add_bos_token == ref.add_bos_token and ours.add_eos_token == ref.add_eos_token
    want = ref(texts)["input_ids"]
    ours.save_pretrained(tmp_path / "saved")
    assert hf_bpe.BPETokenizer.from_pretrained(tmp_path / "saved")(texts)["input_ids"] == want
    file = tokenizers.Tokenizer.from_file(str(tmp_path / "saved" / "tokenizer.json"))
    assert [e.ids for e in file.encode_batch(texts)] == want
    code = ("import sys, json; sys.modules['hf_bpe'] = None\nfrom transformers import AutoTokenizer\n"
            f"print(json.dumps(AutoTokenizer.from_pretrained({str(tmp_path / 'saved')!r})({texts!r})['input_ids']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300).stdout
    assert json.loads(out.strip().splitlines()[-1]) == want
    later, ref_later = hf_bpe.BPETokenizer.from_pretrained(shared_data() / "gpt2"), GPT2Tokenizer.from_pretrained(shared_data() / "gpt2")
    for t in (later, ref_later):
        for k, v in kw.items():
            setattr(t, k, v)
    assert later(texts, pairs)["input_ids"] == ref_later(texts, pairs)["input_ids"]
