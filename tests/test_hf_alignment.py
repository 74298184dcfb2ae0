"""``BatchEncoding`` word and character alignment of :class:`hf_bpe.BPETokenizer` (``word_ids``,
``sequence_ids``, ``char_to_token``, ``token_to_chars``, ``token_to_word``, ``word_to_chars``,
``word_to_tokens``, ``char_to_word``, ``tokens``) equals transformers' ``tokenizers``-backed class
on the same files, across options; pre-split words equal ``tokenizers``' pre-tokenized input;
assistant masks equal those of ``apply_chat_template``."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

tokenizers = pytest.importorskip("tokenizers")

pytest.importorskip("transformers")

import hf_bpe  # noqa: E402
from conftest import corpus_docs, model_files, openai_files  # noqa: E402
from transformers import AddedToken, GPT2Tokenizer, PreTrainedTokenizerFast  # noqa: E402

MODELS = ["phi-2", "whisper-large-v3", "olmo-2-dolma2", "gpt-neox-20b"]
TEXTS = ["Hello world, it's  me!", "naïve café — 日本語のテキスト ok  12345", "", "a<|endoftext|>b  \n\n c",
         "def f():\n        return 1", "  lead and trail  ", "😀 emoji\u00a0nbsp\ttab"]
PAIRS = ["second one", "x", "yy zz", "q", "  w", " p ", "日本"]
OPTIONS = [{}, {"text_pair": PAIRS}, {"padding": True}, {"padding": True, "padding_side": "left", "text_pair": PAIRS},
           {"truncation": True, "max_length": 6, "return_overflowing_tokens": True, "stride": 2},
           {"truncation": True, "max_length": 7, "return_overflowing_tokens": True, "text_pair": PAIRS},
           {"add_special_tokens": False, "text_pair": PAIRS}, {"padding": "max_length", "max_length": 48,
                                                              "return_tensors": "np"}]


def alignment(enc, b: int, n_tokens: int, n_chars: int, n_words: int = 16, tokens: bool = True) -> dict:
    """Every alignment answer of row ``b``."""
    def safe(f, *a):
        try:
            return f(*a)
        except Exception as e:  # word_to_chars of a missing word: both raise
            return type(e).__name__
    out = {m: getattr(enc, m)(b) for m in ("word_ids", "sequence_ids") + (("tokens",) if tokens else ())}
    for m in ("token_to_chars", "token_to_word", "token_to_sequence"):
        out[m] = [getattr(enc, m)(b, t) for t in range(n_tokens)]
    for s in (0, 1):
        out["char_to_token", s] = [enc.char_to_token(b, c, s) for c in range(n_chars + 1)]
        out["char_to_word", s] = [enc.char_to_word(b, c, s) for c in range(n_chars + 1)]
        out["word_to_chars", s] = [safe(enc.word_to_chars, b, w, s) for w in range(n_words)]
        out["word_to_tokens", s] = [enc.word_to_tokens(b, w, s) for w in range(n_words)]
    return out


def plain(x):
    """Arrays (object arrays of rows too) and lists as comparable lists, with the dtype."""
    if isinstance(x, np.ndarray):
        return ("nd", str(x.dtype), [plain(v) for v in x] if x.dtype == object else x.tolist())
    return [plain(v) for v in x] if isinstance(x, (list, tuple)) else x


def assert_same_alignment(ours, ref, texts, tokens: bool = True, **kw) -> int:
    o, r = ours(texts, **kw), ref(texts, **kw)
    assert plain(o["input_ids"]) == plain(r["input_ids"]) and plain(o.get("attention_mask")) == plain(r.get("attention_mask"))
    assert o.is_fast and o.n_sequences == r.n_sequences and len(o.encodings) == len(r.encodings)
    every = [texts] if isinstance(texts, str) else texts
    pair_texts = kw.get("text_pair") or []
    n_chars = max(map(len, every + ([pair_texts] if isinstance(pair_texts, str) else pair_texts)))
    checked = 0
    for b in range(len(r.encodings)):
        n = len(r.encodings[b].ids)
        got, want = alignment(o, b, n, n_chars, tokens=tokens), alignment(r, b, n, n_chars, tokens=tokens)
        for key in want:
            assert got[key] == want[key], (kw, b, key)
        assert o.encodings[b].offsets == r.encodings[b].offsets, (kw, b)
        checked += n
    return checked


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory):
    docs = [d for name in ("english", "code", "multilingual") for d in corpus_docs(name, 100_000)]
    bpe = hf_bpe.train(docs, vocab_size=900, special_tokens=["<|endoftext|>"], progress=False)
    return bpe.save(tmp_path_factory.mktemp("trained") / "tok")


@pytest.fixture(scope="module", params=["gpt2", "trained"] + MODELS)
def pair(request, trained_dir):
    if request.param in MODELS:
        path = str(model_files() / request.param / "tokenizer.json")
        ours, ref = hf_bpe.BPETokenizer(tokenizer_file=path), PreTrainedTokenizerFast(tokenizer_file=path)
    else:
        folder = openai_files() / "gpt2" if request.param == "gpt2" else trained_dir
        ours, ref = hf_bpe.BPETokenizer.from_pretrained(folder), GPT2Tokenizer.from_pretrained(folder)
    pad = str(ours.eos_token or ours.convert_ids_to_tokens(0))  # (PreTrainedTokenizerFast names no eos)
    for t in (ours, ref):
        t.pad_token = pad
    return request.param, ours, ref


def test_alignment_equals_tokenizers_backend(pair):
    name, ours, ref = pair
    docs = TEXTS + [d[:300] for d in corpus_docs("multilingual", 3_000)[:3]]
    total = 0
    for kw in OPTIONS:
        kw = dict(kw, text_pair=kw["text_pair"] + ["pair"] * (len(docs) - len(PAIRS))) if "text_pair" in kw else kw
        total += assert_same_alignment(ours, ref, docs, **kw)
        total += assert_same_alignment(ours, ref, docs[1], **{k: (v[1] if k == "text_pair" else v) for k, v in kw.items()})
    assert total > 500


def test_alignment_with_added_tokens_of_every_flag(pair):
    name, ours, ref = pair
    pad = ours.pad_token
    ours, ref = copy.deepcopy(ours), copy.deepcopy(ref)  # (the fixture's pair stays as it is)
    new = [AddedToken("<ls>", lstrip=True), AddedToken("<rs>", rstrip=True), AddedToken("word", single_word=True),
           AddedToken("<n>", normalized=False), "<foo>", "日本語"]
    for t in (ours, ref):
        t.add_tokens(new)
        t.add_special_tokens({"extra_special_tokens": ["<|im_start|>"]})
        t.pad_token = pad
    texts = ["a <foo>b 日本語です <|im_start|>user\nhi  <ls> x", "<foo><foo>", "q <ls>", "   ", "a word, words wordy",
             "x <rs>   y<n>z", "<|endoftext|> <ls><rs>"]
    # tokenizers spells an added token that took spaces with them ('  <ls>'); hf_bpe spells it as
    # its content. Ids, offsets and every alignment answer are compared.
    if name == "phi-2":  # its whitespace tokens overlap the stripped spaces in tokenizers' offsets
        texts = [t for t in texts if "<ls>" not in t and "<rs>" not in t]
    for kw in ({}, {"text_pair": texts[::-1]}, {"padding": True}):
        assert_same_alignment(ours, ref, texts, tokens=False, **kw)


def test_split_words_equal_tokenizers_pretokenized(pair):
    name, ours, ref = pair
    rows = [["Hello", " world", "naïve", "", "日本語"], ["a<|endoftext|>b", "  x ", "tab\tx"], [], ["😀", " ok"]]
    got = ours(rows, is_split_into_words=True, return_offsets_mapping=True, add_special_tokens=False)
    backend = tokenizers.Tokenizer.from_str(ref.backend_tokenizer.to_str())
    backend.no_padding(), backend.no_truncation()  # (the fixture's calls may have left them set)
    want = backend.encode_batch(rows, is_pretokenized=True, add_special_tokens=False)
    for b, w in enumerate(want):
        assert got["input_ids"][b] == w.ids
        assert got["offset_mapping"][b] == w.offsets
        assert got.word_ids(b) == w.word_ids and got.sequence_ids(b) == w.sequence_ids
    one = ours(rows[0], is_split_into_words=True, add_special_tokens=False)
    assert one["input_ids"] == got["input_ids"][0] and one.word_ids() == got.word_ids(0)


def test_encodings_are_built_only_when_asked_and_pickle():
    ours = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2")
    calls = []
    real = ours._batch
    ours._batch = lambda *a, **k: calls.append(k["spans"]) or real(*a, **k)
    out = ours(["Hello world", "second"])
    assert calls == [False]
    assert out.word_ids(1) == [0] and calls == [False, True]
    back = pickle.loads(pickle.dumps(out))
    assert back.word_ids(0) == [0, 1] and back.token_to_chars(0, 1) == (5, 11)


def test_assistant_masks_equal_tokenizers_backend():
    template = ("{% for m in messages %}{% if m['role'] == 'assistant' %}{% generation %}A: {{ m['content'] }}"
                "<|endoftext|>{% endgeneration %}{% else %}U: {{ m['content'] }}\n{% endif %}{% endfor %}")
    chat = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "日本語"}, {"role": "assistant", "content": "はい、どうぞ"}]
    outs = []
    for cls in (hf_bpe.BPETokenizer, GPT2Tokenizer):
        t = cls.from_pretrained(openai_files() / "gpt2")
        t.chat_template, t.pad_token = template, t.eos_token
        one = t.apply_chat_template(chat, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        batch = t.apply_chat_template([chat, chat[:2]], tokenize=True, return_dict=True, padding=True,
                                      return_assistant_tokens_mask=True, return_tensors="np")
        cut = t.apply_chat_template(chat, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                    truncation=True, max_length=9)
        outs.append((one["input_ids"], one["assistant_masks"], batch["input_ids"].tolist(),
                     batch["assistant_masks"].tolist(), cut["assistant_masks"]))
    assert outs[0] == outs[1]
    assert 0 < sum(outs[0][1]) < len(outs[0][1])


def test_offsets_of_text_a_normalizer_changes_are_an_error():
    """NeoX normalizes to NFC: offsets into a text that changes would not point into it. The ids
    stay those of tokenizers; asking for offsets (or alignment) names the normalizer."""
    path = str(model_files() / "gpt-neox-20b" / "tokenizer.json")
    ours, ref = hf_bpe.BPETokenizer(tokenizer_file=path), PreTrainedTokenizerFast(tokenizer_file=path)
    decomposed = "Cafe\u0301 au lait"
    assert ours(decomposed)["input_ids"] == ref(decomposed)["input_ids"]
    with pytest.raises(ValueError, match="normalizer changes it"):
        ours(decomposed, return_offsets_mapping=True)
    with pytest.raises(ValueError, match="normalizer changes it"):
        ours([decomposed]).word_ids(0)
    assert ours("Café au lait", return_offsets_mapping=True)["offset_mapping"] == \
        ref("Café au lait", return_offsets_mapping=True)["offset_mapping"]
