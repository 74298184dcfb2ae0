"""Methods of a fast tokenizer on `BPETokenizer`. `train_new_from_iterator`: our trainer, equal to
`hf_bpe.train` and, with `tie_break="hf"`, to transformers' own method on GPT2TokenizerFast."""

from __future__ import annotations

import pytest
from transformers import GPT2TokenizerFast

import hf_bpe
from conftest import corpus_docs, model_files, openai_files


def _batches(docs, size=50):
    for k in range(0, len(docs), size):
        yield docs[k:k + size]


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return [d for name in ("english", "code", "multilingual") for d in corpus_docs(name, 200_000)]


def test_same_merges_as_transformers_and_hf_bpe_train(docs, tmp_path):
    tok = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2")
    tok.model_max_length = 77
    ours = tok.train_new_from_iterator(_batches(docs), vocab_size=700, progress=False)
    assert type(ours) is hf_bpe.BPETokenizer and ours.eos_token == "<|endoftext|>" and ours.model_max_length == 77
    direct = hf_bpe.train((d for d in docs), vocab_size=700, special_tokens=["<|endoftext|>"], tie_break="hf", progress=False)
    assert ours.bpe == direct
    ref = GPT2TokenizerFast.from_pretrained(openai_files() / "gpt2").train_new_from_iterator(_batches(docs), vocab_size=700)
    assert ours.get_vocab() == ref.get_vocab()
    text = docs[3][:2000] + "<|endoftext|>" + docs[-1][:2000]
    assert ours(text)["input_ids"] == ref(text)["input_ids"]
    lex = tok.train_new_from_iterator(iter(docs), 700, tie_break="lexicographic", progress=False)
    assert lex.bpe == hf_bpe.train(docs, vocab_size=700, special_tokens=["<|endoftext|>"], progress=False)


def test_special_tokens_renamed_and_added_and_bad_options(docs):
    tok = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2")
    new = tok.train_new_from_iterator(docs[:20], 400, new_special_tokens=["<|pad|>"],
                                      special_tokens_map={"<|endoftext|>": "<eos>"}, progress=False)
    assert set(new.bpe.special_tokens) == {"<eos>", "<|pad|>"} and new.eos_token == "<eos>"
    assert new("a<eos>b")["input_ids"][1] == new.bpe.special_tokens["<eos>"]
    with pytest.raises(TypeError, match="unsupported option.*'dropout'"):
        tok.train_new_from_iterator(docs[:5], 300, dropout=0.1)


def test_backend_tokenizer_gives_the_same_ids(docs, tmp_path):
    import tokenizers

    tok = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2")
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
    ours, ref = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2", **kw), GPT2Tokenizer.from_pretrained(openai_files() / "gpt2", **kw)
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
    later, ref_later = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2"), GPT2Tokenizer.from_pretrained(openai_files() / "gpt2")
    for t in (later, ref_later):
        for k, v in kw.items():
            setattr(t, k, v)
    assert later(texts, pairs)["input_ids"] == ref_later(texts, pairs)["input_ids"]


def test_in_memory_constructor_equals_gpt2tokenizer_and_checks_its_input(docs):
    import json

    from transformers import GPT2Tokenizer

    g = openai_files() / "gpt2"
    vocab = json.loads((g / "vocab.json").read_text(encoding="utf-8"))
    merges = [tuple(line.split(" ")) for line in (g / "merges.txt").read_text(encoding="utf-8").split("\n")[1:] if line]
    ref = GPT2Tokenizer(vocab=vocab, merges=merges)
    texts = docs[:20] + ["Hello world<|endoftext|> again"]
    for ours in (hf_bpe.BPETokenizer(vocab=vocab, merges=merges), hf_bpe.BPETokenizer(vocab, [" ".join(m) for m in merges])):
        assert ours(texts)["input_ids"] == ref(texts)["input_ids"]
        assert (ours.eos_token, ours.eos_token_id) == (ref.eos_token, ref.eos_token_id)
        assert "bpe" in ours.init_kwargs and "cache_bytes" in ours.init_kwargs
    with pytest.raises(hf_bpe.formats.FormatError, match=r"line 2: token 'qqqqzz' is not in the vocabulary"):
        hf_bpe.BPETokenizer(vocab=vocab, merges=merges[:1] + [("qqqqzz", "a")])
    with pytest.raises(TypeError, match="takes a dict and a list of pairs"):
        hf_bpe.BPETokenizer(vocab=vocab)


def test_add_prefix_space_reports_the_files_pre_tokenizer(tmp_path):
    import json

    tok = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2")
    assert tok.add_prefix_space is False
    spec = json.loads((openai_files() / "gpt2" / "tokenizer.json").read_text(encoding="utf-8"))
    spec["pre_tokenizer"]["add_prefix_space"] = True
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    spaced = hf_bpe.BPETokenizer(tokenizer_file=str(tmp_path / "tokenizer.json"), add_prefix_space=True)
    assert spaced.add_prefix_space is True and spaced("Hello")["input_ids"] == tok(" Hello")["input_ids"]
    with pytest.raises(ValueError, match="add_prefix_space=True is not supported"):
        hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2", add_prefix_space=True)


def test_backend_is_the_fast_one_whatever_class_saved_the_folder(tmp_path):
    """transformers gates the fast features on ``backend == "tokenizers"`` (processors' assistant
    masks, pipelines, its own suite); BPETokenizer offers them, from any folder (one saved by
    ``GPT2Tokenizer`` or its own, which leaves the key to the reader)."""
    import json

    from transformers import GPT2Tokenizer

    GPT2Tokenizer.from_pretrained(openai_files() / "gpt2").save_pretrained(tmp_path / "theirs")
    assert json.loads((tmp_path / "theirs" / "tokenizer_config.json").read_text())["backend"] == "tokenizers"
    hf_bpe.BPE.load(openai_files() / "gpt2").save(tmp_path / "bpe")
    for folder in ("theirs", "bpe"):
        tok = hf_bpe.BPETokenizer.from_pretrained(tmp_path / folder)
        assert tok.backend == "tokenizers" and tok("a b", "c").sequence_ids() == [0, 0, 1]
    tok.save_pretrained(tmp_path / "ours")
    cfg = json.loads((tmp_path / "ours" / "tokenizer_config.json").read_text())
    assert "backend" not in cfg and "cache_bytes" not in cfg
    assert hf_bpe.BPETokenizer.from_pretrained(tmp_path / "ours").backend == "tokenizers"


FORCE = "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"


@pytest.mark.parametrize("model", ["phi-2", "whisper-large-v3"])
def test_decode_cleans_up_spaces_only_as_the_installed_transformers_does(model):
    # Both configs set clean_up_tokenization_spaces=True; transformers 5.25 ignores it for BPE
    # tokenizers (the cleanup turns "tela . Mutu" into "tela. Mutu") unless forced.
    from transformers import AutoTokenizer

    folder = model_files() / model
    texts = ["tela . Mutu", "a , b ! c ? don 't", "x n't y 's z 've"] + corpus_docs("english", 20_000)[:20]
    for kw in ({}, {FORCE: True}):
        ours, ref = hf_bpe.BPETokenizer.from_pretrained(folder, **kw), AutoTokenizer.from_pretrained(folder, **kw)
        assert ours.clean_up_tokenization_spaces is True
        ids = [ref(t)["input_ids"] for t in texts]
        for flag in (None, True, False):
            assert ours.batch_decode(ids, clean_up_tokenization_spaces=flag) == ref.batch_decode(ids, clean_up_tokenization_spaces=flag)
    if not hasattr(ref, FORCE):
        pytest.skip("this transformers applies the cleanup to BPE tokenizers (checked above)")
    assert ours.decode(ref("tela . Mutu", add_special_tokens=False)["input_ids"]) == "tela. Mutu"  # forced
    plain = hf_bpe.BPETokenizer.from_pretrained(folder)
    assert plain.decode(ref("tela . Mutu", add_special_tokens=False)["input_ids"]) == "tela . Mutu"
    # a transformers without the rule (before 5.25) cleans up: so do we
    delattr(plain, FORCE)
    assert plain.decode(ref("tela . Mutu", add_special_tokens=False)["input_ids"]) == "tela. Mutu"


@pytest.mark.parametrize("truncation,padding", [
    ({"direction": "Left", "max_length": 16, "strategy": "LongestFirst", "stride": 0},
     {"strategy": "BatchLongest", "direction": "Left", "pad_to_multiple_of": 8, "pad_id": 50256, "pad_type_id": 0,
      "pad_token": "<|endoftext|>"}),
    (None, {"strategy": {"Fixed": 24}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 50256,
            "pad_type_id": 1, "pad_token": "<|endoftext|>"}),
    ({"direction": "Right", "max_length": 7, "strategy": "OnlyFirst", "stride": 2}, None),
])
def test_truncation_and_padding_sections_of_a_tokenizer_json(tmp_path, truncation, padding):
    # tokenizers applies them in every encode: BPE.load refuses them by name (or ignores them when
    # told); BPETokenizer takes them as transformers does: its defaults for per-call rules.
    import json
    import shutil

    from transformers import AutoTokenizer

    folder = tmp_path / "g"
    shutil.copytree(openai_files() / "gpt2", folder)
    raw = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    raw.update(truncation=truncation, padding=padding)
    (folder / "tokenizer.json").write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(hf_bpe.FormatError, match="tokenizer.json sets (truncation|padding) .*truncation_and_padding='ignore'"):
        hf_bpe.BPE.load(folder)
    bpe = hf_bpe.BPE.load(folder, truncation_and_padding="ignore")
    assert bpe.encode("hello world " * 10) == hf_bpe.BPE.load(openai_files() / "gpt2").encode("hello world " * 10)
    ours, ref = hf_bpe.BPETokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    for name in ("pad_token", "padding_side", "truncation_side", "pad_token_type_id"):
        assert getattr(ours, name) == getattr(ref, name), name
    texts = ["hello world " * 10, "hi", "a b c d e f g h i j k"]
    for kw in ({}, {"padding": True}, {"truncation": True, "max_length": 5}, {"padding": "max_length", "max_length": 30},
               {"truncation": True, "padding": True, "max_length": 8, "pad_to_multiple_of": 4}):
        if "padding" in kw and ref.pad_token is None:
            continue
        a, b = ours(texts, **kw), ref(texts, **kw)
        assert a["input_ids"] == b["input_ids"] and a["attention_mask"] == b["attention_mask"], kw


def test_extend_and_train_new_keep_the_same_settings(docs):
    """Both rebuild the tokenizer around a new BPE the same way (one keep-list): its settings,
    ``add_bos_token``/``add_eos_token`` included, and the tokens they add."""
    tok = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2", model_max_length=77, padding_side="left",
                                              bos_token="<|endoftext|>", add_bos_token=True, add_eos_token=True)
    trained = tok.train_new_from_iterator(docs[:40], 400, progress=False)
    extended = hf_bpe.extend(tok, docs[:40], len(tok) + 20, progress=False)
    for new in (trained, extended):
        assert type(new) is hf_bpe.BPETokenizer
        assert (new.model_max_length, new.padding_side, new.add_bos_token, new.add_eos_token) == (77, "left", True, True)
        eot = new.convert_tokens_to_ids("<|endoftext|>")
        ids = new("a cat")["input_ids"]
        assert ids[0] == eot and ids[-1] == eot and len(ids) > 2
