"""BPE-dropout (``encode*(..., dropout=p, seed=s)``) against HF ``tokenizers``' ``BPE(dropout=p)``,
and the StochasTok augmentation (``hf_bpe.stochastok``)."""

from __future__ import annotations

import gzip
import json
import statistics

import numpy as np
import pytest

import hf_bpe


@pytest.fixture(scope="module")
def docs() -> list[str]:
    with gzip.open(hf_bpe.sample_corpus(), "rt", encoding="utf-8") as f:
        return [p for p in f.read(300_000).split("\n\n") if p.strip()]


@pytest.fixture(scope="module")
def bpe(docs) -> hf_bpe.BPE:
    return hf_bpe.train(docs, 2000, progress=False)


def test_no_dropout_is_encode_and_full_dropout_is_bytes(bpe, docs):
    text = docs[3] + "<|endoftext|>" + docs[4]
    assert bpe.encode(text, allowed_special="all", dropout=0.0) == bpe.encode(text, allowed_special="all")
    ids = bpe.encode(text, allowed_special="all", dropout=1.0, seed=1)
    eot = bpe.special_tokens["<|endoftext|>"]
    assert ids.count(eot) == 1
    assert [i for i in ids if i != eot] == [bpe.token_to_id(bytes([b])) for b in (docs[3] + docs[4]).encode()]


def test_ids_decode_to_the_text_and_depend_on_text_and_seed_only(bpe, docs):
    texts = docs[:60]
    a = bpe.encode_batch(texts, dropout=0.3, seed=7)
    assert [bpe.decode(x) for x in a] == texts
    assert a == bpe.encode_batch(texts, dropout=0.3, seed=7, num_threads=1)
    assert a[5] == bpe.encode(texts[5], dropout=0.3, seed=7) == bpe.encode_batch(texts[5:1:-1], dropout=0.3, seed=7)[0]
    assert a != bpe.encode_batch(texts, dropout=0.3, seed=8)
    plain = bpe.encode_batch(texts)
    assert sum(map(len, a)) > sum(map(len, plain))
    assert bpe.encode_ordinary("<|endoftext|> x", dropout=1.0, seed=1)[0] == bpe.token_to_id(b"<")
    with pytest.raises(ValueError, match="disallowed special token"):
        bpe.encode("a <|endoftext|>", dropout=0.1)


def test_mean_token_count_matches_tokenizers(bpe, docs, tmp_path):
    """At p=0.1 the mean number of tokens of the same text is within 3% of ``tokenizers``'."""
    tokenizers = pytest.importorskip("tokenizers")
    bpe.save(tmp_path / "tok")
    spec = json.loads((tmp_path / "tok" / "tokenizer.json").read_text())
    spec["model"]["dropout"] = 0.1
    tok = tokenizers.Tokenizer.from_str(json.dumps(spec))
    text = "\n\n".join(docs[:40])
    theirs = statistics.mean(len(tok.encode(text).ids) for _ in range(20))
    ours = statistics.mean(len(bpe.encode(text, dropout=0.1, seed=s)) for s in range(20))
    plain = len(bpe.encode(text))
    assert theirs > plain * 1.02, "the peer's dropout did nothing"
    assert abs(ours / theirs - 1) < 0.03, (ours, theirs, plain)


def test_bad_dropout_is_refused(bpe):
    for p in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="dropout must be between 0 and 1"):
            bpe.encode("hello", dropout=p, seed=1)


def test_stochastok_splits_and_decodes_the_same(bpe, docs):
    ids = np.asarray(bpe.encode("\n\n".join(docs[:20]) + "<|endoftext|>", allowed_special="all"))
    same = hf_bpe.stochastok(bpe, ids, 0.0, seed=1)
    assert same.tolist() == ids.tolist()
    out = hf_bpe.stochastok(bpe, ids, 0.3, seed=1)
    assert bpe.decode(out.tolist()) == bpe.decode(ids.tolist())
    assert out.tolist() == hf_bpe.stochastok(bpe, ids.tolist(), 0.3, seed=1).tolist()
    splittable = sum(1 for i in ids if len(bpe.vocab[int(i)]) > 1 and int(i) not in bpe.special_tokens.values())
    everything = hf_bpe.stochastok(bpe, ids, 1.0, seed=2)
    assert len(everything) == len(ids) + splittable  # every merged token has a split (its merge)
    assert 0 < len(out) - len(ids) < splittable
    assert (everything == bpe.special_tokens["<|endoftext|>"]).sum() == 1
    deeper = hf_bpe.stochastok(bpe, ids, 1.0, seed=2, rounds=3)
    assert len(deeper) > len(everything) and bpe.decode(deeper.tolist()) == bpe.decode(ids.tolist())
    with pytest.raises(ValueError, match="id 99999 is not in the vocabulary"):
        hf_bpe.stochastok(bpe, [1, 99999], 0.5)


def test_a_tokenizer_json_with_dropout_applies_it_by_default(bpe, docs, tmp_path):
    import pickle

    bpe.save(tmp_path / "tok")
    spec = json.loads((tmp_path / "tok" / "tokenizer.json").read_text())
    spec["model"]["dropout"] = 0.2
    (tmp_path / "tok" / "tokenizer.json").write_text(json.dumps(spec))
    loaded = hf_bpe.BPE.load(tmp_path / "tok" / "tokenizer.json")
    assert loaded.dropout == pytest.approx(0.2) and bpe.dropout is None
    text = "\n\n".join(docs[:5])
    plain = bpe.encode(text)
    assert loaded.encode(text, dropout=0) == plain
    assert loaded.encode(text, seed=3) == bpe.encode(text, dropout=0.2, seed=3) != plain
    assert loaded.encode_batch([text], seed=3) == [loaded.encode_ordinary(text, seed=3)]
    assert pickle.loads(pickle.dumps(loaded)).dropout == pytest.approx(0.2)
    loaded.save(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "tokenizer.json").read_text())["model"]["dropout"] == pytest.approx(0.2)


def test_bpetokenizer_and_dataset_map_apply_a_files_dropout(bpe, docs, tmp_path):
    datasets = pytest.importorskip("datasets")
    pytest.importorskip("transformers")
    bpe.save(tmp_path / "tok")
    path = tmp_path / "tok" / "tokenizer.json"
    spec = json.loads(path.read_text())
    spec["model"]["dropout"] = 0.3
    path.write_text(json.dumps(spec))
    tok = hf_bpe.BPETokenizer.from_pretrained(tmp_path / "tok")
    tok.pad_token = "<|endoftext|>"
    rows = docs[:30]
    plain = bpe.encode_batch(rows)
    lists = tok(rows)["input_ids"]
    assert [bpe.decode(x) for x in lists] == rows and sum(map(len, lists)) > sum(map(len, plain)) * 1.05
    padded = tok(rows, return_tensors="np", padding=True)
    assert padded["attention_mask"].sum() > sum(map(len, plain)) * 1.05
    with pytest.raises(ValueError, match="drops merges at random"):
        tok(rows[:2], return_offsets_mapping=True)
    ds = datasets.Dataset.from_dict({"text": rows})
    first = ds.map(tok, batched=True, input_columns="text")["input_ids"]
    second = ds.map(tok, batched=True, input_columns="text")["input_ids"]
    assert first != second, "the second map was served from the cache (or dropout was not applied)"
    assert [bpe.decode(x) for x in first] == rows and sum(map(len, first)) > sum(map(len, plain)) * 1.05


def test_a_set_dropout_survives_pickle_save_and_added_tokens(bpe, docs, tmp_path):
    import pickle

    own = pickle.loads(pickle.dumps(bpe))
    own.dropout = 0.25
    assert pickle.loads(pickle.dumps(own)).dropout == 0.25
    own.save(tmp_path / "d")
    assert json.loads((tmp_path / "d" / "tokenizer.json").read_text())["model"]["dropout"] == 0.25
    assert hf_bpe.BPE.load(tmp_path / "d").dropout == 0.25
    own.dropout = None
    assert pickle.loads(pickle.dumps(own)).dropout is None
    text = docs[1]
    many = own.encode_batch([text] * 20, dropout=0.3)  # no seed: every text draws its own
    assert len({tuple(x) for x in many}) > 1 and all(own.decode(x) == text for x in many)
    pytest.importorskip("transformers")
    tok = hf_bpe.BPETokenizer.from_pretrained(tmp_path / "d")
    tok.add_tokens(["<extra>"])  # a second group of added tokens (normalized ones)
    ids = tok(text + " <extra>")["input_ids"]
    assert ids[-1] == tok.convert_tokens_to_ids("<extra>") and tok.decode(ids) == text + " <extra>"
    tok.bpe.dropout = None
    assert tok(text)["input_ids"] == bpe.encode(text) and tok(text, return_offsets_mapping=True)["offset_mapping"]
