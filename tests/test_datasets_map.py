"""`ds.map(tok, batched=True)` straight from Arrow: the same dataset as `tok(text)` row by row,
from every kind of dataset, and the Arrow column reader on every string layout."""

from __future__ import annotations

import datasets
import numpy as np
import pyarrow as pa
import pytest

import hf_bpe
import hf_bpe.hf.tokenizer as hf_mod
from hf_bpe.hf.arrow import column_flat
from conftest import corpus_docs, openai_files

datasets.disable_progress_bars()


@pytest.fixture(scope="module")
def tok():
    return hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2")


@pytest.fixture(scope="module")
def rows() -> list[str]:
    docs = [d for name in ("english", "code", "multilingual") for d in corpus_docs(name, 30_000)]
    text = "\n".join(docs)
    return [text[k:k + 300] for k in range(0, len(text), 2_700)] + ["", "x<|endoftext|>y", " ", "日本語"]


def _expected(tok, rows):
    one = [tok(t) for t in rows]
    return [r["input_ids"] for r in one], [r["attention_mask"] for r in one]


@pytest.fixture
def spy(monkeypatch):
    """Counts the batches that took the Arrow path."""
    calls = []
    real = hf_mod.map_batch

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(hf_mod, "map_batch", counted)
    return calls


def test_batched_map_takes_the_arrow_path_and_equals_row_by_row(tok, rows, spy):
    ids, masks = _expected(tok, rows)
    ds = datasets.Dataset.from_dict({"text": rows, "n": list(range(len(rows)))})
    out = ds.map(tok, batched=True, batch_size=16)
    assert len(spy) == -(-len(rows) // 16)
    assert out["input_ids"] == ids and out["attention_mask"] == masks and out["n"] == list(range(len(rows)))
    assert out.features["input_ids"] == datasets.List(datasets.Value("int32"))
    assert out.features["attention_mask"] == datasets.List(datasets.Value("int8"))
    gone = ds.map(tok, batched=True, remove_columns=["text"])
    assert gone.column_names == ["n", "input_ids", "attention_mask"] and gone["input_ids"] == ids
    # the same as before the Arrow path: lists through transformers
    spy.clear()
    slow = ds.map(lambda b: dict(tok(list(b["text"]))), batched=True)
    assert slow["input_ids"] == ids and not spy
    assert ds.map(tok)["input_ids"] == ids  # unbatched: one row at a time
    # re-tokenized, dropping the old columns: the new ones come back as numpy rows
    spy.clear()
    again = out.map(tok, batched=True, remove_columns=["input_ids", "attention_mask"])
    assert again["input_ids"] == ids and again["attention_mask"] == masks and spy
    assert again.features["input_ids"] == datasets.List(datasets.Value("int32"))


def test_file_backed_num_proc_streaming_and_input_columns(tok, rows, tmp_path):
    ids, _ = _expected(tok, rows)
    datasets.Dataset.from_dict({"text": rows}).save_to_disk(tmp_path / "ds")
    ds = datasets.load_from_disk(str(tmp_path / "ds"))
    assert ds.map(tok, batched=True)["input_ids"] == ids
    assert ds.map(tok, batched=True, batch_size=10, num_proc=2, load_from_cache_file=False)["input_ids"] == ids
    stream = ds.to_iterable_dataset(num_shards=2).map(tok, batched=True, batch_size=8)
    assert [r["input_ids"] for r in stream] == ids
    body = ds.rename_column("text", "body")
    assert body.map(tok, batched=True, input_columns=["body"])["input_ids"] == ids


def test_a_function_calling_the_tokenizer_on_a_batch_gets_lists(tok, rows, spy):
    ds = datasets.Dataset.from_dict({"text": rows[:20]})
    seen = []

    def fn(batch):
        out = tok(batch)
        seen.append(type(out["input_ids"][0]))
        return {"ids_plus_eos": [x + [tok.eos_token_id] for x in out["input_ids"]]}

    out = ds.map(fn, batched=True)
    assert seen == [list] and not spy
    assert out["ids_plus_eos"] == [x + [50256] for x in _expected(tok, rows[:20])[0]]


def test_options_added_tokens_and_none_rows(tok, rows, spy):
    ds = datasets.Dataset.from_dict({"text": rows[:30]})
    cut = ds.map(tok, batched=True, fn_kwargs={"truncation": True, "max_length": 8})
    assert cut["input_ids"] == [tok(t, truncation=True, max_length=8)["input_ids"] for t in rows[:30]] and not spy
    tok2 = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2")
    tok2.add_tokens(["日本語トークン"])
    t2 = ["a日本語トークンb", "plain", ""]
    got = datasets.Dataset.from_dict({"text": t2}).map(tok2, batched=True)["input_ids"]
    assert got == [tok2(t)["input_ids"] for t in t2] and len(tok2) - 1 in got[0] and spy
    with pytest.raises(ValueError, match=r"row 1 of column 'text' is None"):
        datasets.Dataset.from_dict({"text": ["a", None, "b"]}).map(tok, batched=True)


def test_column_reader_on_every_layout(tok, rows):
    bpe = tok.bpe
    flat, off = bpe.encode_batch_flat(rows, allowed_special="all", disallowed_special=())
    want = [flat[off[i]:off[i + 1]].tolist() for i in range(len(rows))]

    def got(col):
        f, o = column_flat(bpe, col)
        assert f.dtype == np.int32 and o.dtype == np.int64 and len(o) == len(col) + 1
        return [f[o[i]:o[i + 1]].tolist() for i in range(len(col))]

    arr = pa.array(rows)
    assert got(arr) == want
    assert got(pa.array(rows, type=pa.large_string())) == want
    assert got(arr.cast(pa.string_view())) == want
    assert got(arr.slice(5, 20)) == want[5:25]  # an offset into the buffers
    assert got(pa.chunked_array([arr.slice(0, 7), arr.slice(7)])) == want
    assert got(pa.chunked_array([], type=pa.string())) == []
    assert got(pa.array(["", ""])) == [[], []]
    with pytest.raises(ValueError, match="row 8 of column 'text' is None"):
        column_flat(bpe, pa.chunked_array([arr.slice(0, 7), pa.array(["a", None])]))
    with pytest.raises(TypeError, match="column 'text' holds int64, not strings"):
        column_flat(bpe, pa.array([1, 2]))


def test_numpy_batches_take_the_flat_path_and_equal_gpt2tokenizer(rows, monkeypatch):
    """`tok(rows, padding=..., return_tensors="np")` is written from the flat ids (no lists) and
    equals transformers' GPT2Tokenizer on the same files, option by option."""
    from transformers import GPT2Tokenizer

    ours = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2")
    ref = GPT2Tokenizer.from_pretrained(openai_files() / "gpt2")
    for t in (ours, ref):
        t.pad_token = t.eos_token
    calls = []
    real = hf_mod.numpy_batch
    monkeypatch.setattr(hf_mod, "numpy_batch", lambda *a, **k: calls.append(1) or real(*a, **k))
    batch = rows[:40]
    grid = [dict(padding=True), dict(padding="max_length", max_length=700), dict(padding=True, truncation=True, max_length=16),
            dict(padding=True, pad_to_multiple_of=8, return_attention_mask=False), dict(padding=True, padding_side="left"),
            dict(padding="longest", truncation="only_first", max_length=5)]
    for kw in grid:
        for side in ("right", "left"):
            ours.truncation_side = ref.truncation_side = side
            a, b = ours(batch, return_tensors="np", **kw), ref(batch, return_tensors="np", **kw)
            assert a.keys() == b.keys(), kw
            for k in a:
                assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), (kw, side, k)
    assert len(calls) == 2 * len(grid)
    equal = ["same length"] * 3
    assert np.array_equal(ours(equal, return_tensors="np")["input_ids"], ref(equal, return_tensors="np")["input_ids"])
    for kw in ({}, dict(padding="max_length", max_length=2)):  # ragged rows: object arrays, as transformers
        a, b = ours(["a", "a b c"], return_tensors="np", **kw), ref(["a", "a b c"], return_tensors="np", **kw)
        assert a["input_ids"].dtype == object and [r.tolist() for r in a["input_ids"]] == [r.tolist() for r in b["input_ids"]]
