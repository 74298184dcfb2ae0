"""hf_bpe.distributed on a real local Ray cluster (started here, bound to 127.0.0.1): counting,
training and encoding equal the single-machine calls, also when workers die mid-run; and the
shards it cuts tile a file so that their counts add up to the file's."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hf_bpe
from hf_bpe import _core
from conftest import corpus_docs, corpus_path, openai_files

ray = pytest.importorskip("ray", reason="Ray is in the test extra")
from hf_bpe import distributed  # noqa: E402

SPECIALS = ["<|endoftext|>"]


@settings(max_examples=25, deadline=None)
@given(text=st.lists(st.sampled_from(["the", " cat", "\n", "  ", "\n\n", "é", "🙂", "<|endoftext|>", "x\n",
                                      "123", " ", "\t", ".", "Ab"]), max_size=200).map("".join),
       size=st.integers(1, 40), jsonl=st.booleans())
def test_shards_tile_a_file_and_their_counts_add_up(tmp_path_factory, text, size, jsonl):
    d = tmp_path_factory.mktemp("shard")
    path = d / ("t.jsonl" if jsonl else "t.txt")
    if jsonl:
        path.write_text("".join(json.dumps({"text": line}) + "\n" for line in text.split("\n")), encoding="utf-8")
    else:
        path.write_bytes(text.encode())
    cut = distributed.shards([path], SPECIALS, shard_bytes=size)
    whole = hf_bpe.count_files(path, special_tokens=SPECIALS, progress=False)
    parts = []
    for p, rng in cut:
        c = _core.WordCounter("gpt2", SPECIALS, 1)
        c.add_file(p, "strict", "text", None, rng)
        parts.append(hf_bpe.WordCounts(c.arrays(), "gpt2", SPECIALS, c.documents, c.bytes))
    ranges = [r for _, r in cut if r is not None]
    if ranges:
        assert ranges[0][0] == 0 and ranges[-1][1] == path.stat().st_size
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    merged = hf_bpe.WordCounts.merge(parts)
    assert merged == whole and merged.documents == whole.documents and merged.text_bytes == whole.text_bytes


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    fault_dir = tmp_path_factory.mktemp("faults") / "armed"
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False,
             runtime_env={"env_vars": {"HF_BPE_FAULT_DIR": str(fault_dir)}})
    yield fault_dir
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    with gzip.open(corpus_path("english"), "rb") as f:
        (d / "english.txt").write_bytes(f.read(6_000_000))
    docs = corpus_docs("code", 400_000)
    (d / "code.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in docs), encoding="utf-8")
    (d / "multi.txt.gz").write_bytes(gzip.compress("\n".join(corpus_docs("multilingual", 400_000)).encode()))
    return [d / "english.txt", d / "code.jsonl", d / "multi.txt.gz"]


def test_train_files_equals_one_machine_with_workers_killed(cluster, corpus):
    cluster.mkdir()  # armed: each shard's first attempt kills its worker process
    try:
        counts = distributed.count_files(corpus, shard_bytes=1_000_000, fan_in=3, progress=False)
        assert len(os.listdir(cluster)) == len(distributed.shards(corpus, shard_bytes=1_000_000)) >= 8
    finally:
        shutil.rmtree(cluster)
    assert counts == hf_bpe.count_files(corpus, progress=False)
    for options in (dict(), dict(tie_break="hf", min_frequency=3)):
        got = distributed.train_files(corpus, vocab_size=1500, shard_bytes=1_000_000, progress=False, **options)
        assert got == hf_bpe.train_files(corpus, vocab_size=1500, progress=False, **options)
    pruned = distributed.train_files(corpus, vocab_size=1500, shard_bytes=2_000_000, min_word_count=2, progress=False)
    assert pruned == hf_bpe.train_from_counts(hf_bpe.count_files(corpus, progress=False), vocab_size=1500,
                                              min_word_count=2, progress=False)


def test_train_on_a_ray_dataset_equals_train(cluster):
    docs = corpus_docs("multilingual", 500_000)
    ds = ray.data.from_items([{"text": t, "id": i} for i, t in enumerate(docs)]).repartition(4)
    got = distributed.train(ds, vocab_size=900, batch_size=50, progress=False)
    assert got == hf_bpe.train(docs, vocab_size=900, progress=False)
    with pytest.raises(ValueError, match="no column 'body'"):
        distributed.train(ds, vocab_size=900, text_column="body")


def test_encode_dataset_and_files_equal_the_engine(cluster, corpus, tmp_path):
    bpe = hf_bpe.BPE.load(openai_files() / "gpt2")
    docs = corpus_docs("english", 300_000) + ["", "a<|endoftext|>b"]
    ds = ray.data.from_items([{"text": t, "n": i} for i, t in enumerate(docs)]).repartition(3)
    out = distributed.encode_dataset(ds, bpe, batch_size=64).to_arrow_refs()
    table = __import__("pyarrow").concat_tables(ray.get(out))
    rows = sorted(zip(table.column("n").to_pylist(), table.column("input_ids").to_pylist()))
    flat, off = bpe.encode_batch_flat(docs, allowed_special="all", disallowed_special=())
    assert [r for _, r in rows] == [flat[off[i]:off[i + 1]].tolist() for i in range(len(docs))]
    tok = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2")
    tok.add_tokens(["<|im_start|>"], special_tokens=True)
    got = ray.get(distributed.encode_dataset(ray.data.from_items([{"text": "hi<|im_start|>"}]), tok).to_arrow_refs())
    assert got[0].column("input_ids").to_pylist() == [tok("hi<|im_start|>")["input_ids"]]
    with pytest.raises(Exception, match="row 1 of column 'text' is None"):
        distributed.encode_dataset(ray.data.from_items([{"text": "a"}, {"text": None}]), bpe).materialize()

    index = distributed.encode_files(corpus, bpe, tmp_path / "ids")
    entries = json.loads(index.read_text())
    for e, path in zip(entries, corpus):
        bpe.encode_file(path, tmp_path / "one.npy", progress=False)
        assert np.array_equal(np.load(tmp_path / "ids" / e["output"]), np.load(tmp_path / "one.npy"))
        assert e["tokens"] == len(np.load(tmp_path / "one.npy"))


def test_cli_train_and_encode_on_the_cluster(cluster, corpus, tmp_path):
    from hf_bpe.tools.cli import main

    address = ray.get_runtime_context().gcs_address  # the cluster of this module, by address
    assert main(["train", *map(str, corpus), "--vocab-size", "800", "--out", str(tmp_path / "tok"), "--quiet",
                 "--ray", address]) == 0
    assert hf_bpe.BPE.load(tmp_path / "tok") == hf_bpe.train_files(corpus, vocab_size=800, progress=False)
    assert main(["encode", "--tokenizer", str(tmp_path / "tok"), *map(str, corpus[:2]), "--out",
                 str(tmp_path / "ids.npy"), "--quiet", "--ray", address]) == 0
    assert main(["encode", "--tokenizer", str(tmp_path / "tok"), *map(str, corpus[:2]), "--out",
                 str(tmp_path / "one.npy"), "--quiet"]) == 0
    assert np.array_equal(np.load(tmp_path / "ids.npy"), np.load(tmp_path / "one.npy"))


def test_a_task_bigger_than_the_cluster_is_refused(cluster, corpus):
    with pytest.raises(ValueError, match="cpus_per_task=3 is more than the cluster's 2 CPUs"):
        distributed.count_files(corpus, cpus_per_task=3, progress=False)


def test_a_shard_never_starts_inside_a_special_token_at_the_edge_of_the_search(tmp_path):
    specials = ["ab cd"]
    path = tmp_path / "edge.txt"  # the token's space falls on the last bytes of the first 64 KiB searched
    path.write_bytes(b"!" * 66519 + b"ab cd" + b"!" * 100 + b" xy zw" + b"!" * 50)
    cut = distributed.shards([path], specials, shard_bytes=1000)
    parts = []
    for p, rng in cut:
        c = _core.WordCounter("gpt2", specials, 1)
        c.add_file(p, "strict", "text", None, rng)
        parts.append(hf_bpe.WordCounts(c.arrays(), "gpt2", specials))
    assert hf_bpe.WordCounts.merge(parts) == hf_bpe.count_files(path, special_tokens=specials, progress=False)
    assert all(not (66519 < r[0] < 66524) for _, r in cut if r)
