"""The transformers/datasets/hub integration: BPETokenizer against transformers' own GPT2Tokenizer
(the `tokenizers`-backed class) built from the same files, over a grid of call options and real
corpus text; save/load round trips; AutoTokenizer with and without hf_bpe; datasets.map (batched,
unbatched, num_proc=2, Arrow, fingerprints and cache reuse); push_to_hub over real HTTP against
the local fake hub in tests/fakehub.py; the examples."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")

import hf_bpe  # noqa: E402
from conftest import corpus_docs, openai_files  # noqa: E402
from transformers import AutoTokenizer, GPT2Tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
EDGE = ["", " ", "<|endoftext|>", "x<|endoftext|>y", "a😀b", "  leading and trailing  ", "tab\tand\nnewlines\n\n\n",
        "日本語のテキスト、中文，한국어", "it's 'S'LL'd 12345 6.5", "emoji 👩‍👩‍👧 🇫🇷 and nbsp\u00a0here"]


def run_py(code: str, env: dict | None = None, timeout: int = 300) -> str:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(REPO), str(TESTS), e.get("PYTHONPATH", "")])
    e.update(env or {})
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=timeout, env=e, cwd=str(TESTS))
    assert "could not register" not in res.stderr, res.stderr[-3000:]
    assert res.returncode == 0, f"stdout:\n{res.stdout[-3000:]}\nstderr:\n{res.stderr[-5000:]}"
    return res.stdout


def last_json(out: str):
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def texts() -> list[str]:
    docs = []
    for name in ("english", "code", "multilingual"):
        text = "\n".join(corpus_docs(name, 60_000))
        step = max(len(text) // 14, 1)
        docs += [text[k * step:k * step + 500] for k in range(14)]
    return docs + EDGE


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory) -> Path:
    docs = [d for name in ("english", "code", "multilingual") for d in corpus_docs(name, 150_000)]
    bpe = hf_bpe.train(docs, vocab_size=1200, special_tokens=["<|endoftext|>"], progress=False)
    return bpe.save(tmp_path_factory.mktemp("trained") / "tok")


@pytest.fixture(scope="module", params=["gpt2", "trained"])
def pair(request, trained_dir):
    folder = openai_files() / "gpt2" if request.param == "gpt2" else trained_dir
    ours = hf_bpe.BPETokenizer.from_pretrained(folder)
    ref = GPT2Tokenizer.from_pretrained(folder)
    for t in (ours, ref):
        t.pad_token = t.eos_token
    return ours, ref


def plain(x):
    if isinstance(x, np.ndarray):
        return ("nd", str(x.dtype), x.tolist())
    if isinstance(x, dict) or hasattr(x, "keys"):
        return {k: plain(x[k]) for k in x.keys()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


def call(tok, args, kw):
    try:
        return ("ok", plain(tok(*args, **kw)))
    except Exception:  # both must fail (tokenizers raises a bare Exception, we raise ValueError)
        return ("error",)


# ---------------------------------------------------------------------------------------------
# Parity with transformers' GPT2Tokenizer


def test_plain_ids_and_decode_equal_gpt2tokenizer(pair, texts):
    ours, ref = pair
    a, b = ours(texts), ref(texts)
    assert a["input_ids"] == b["input_ids"]
    assert a["attention_mask"] == b["attention_mask"]
    assert sum(map(len, a["input_ids"])) > 2000
    for t in texts:
        assert ours(t)["input_ids"] == ref(t)["input_ids"]
        assert ours.encode(t) == ref.encode(t)
        ids = ref(t)["input_ids"]
        for skip in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip) == ref.decode(ids, skip_special_tokens=skip)
        assert ours.tokenize(t) == ref.tokenize(t)
        assert ours.convert_tokens_to_string(ours.tokenize(t)) == ref.convert_tokens_to_string(ref.tokenize(t))
    assert ours.batch_decode(a["input_ids"]) == ref.batch_decode(b["input_ids"])
    assert ours.vocab_size == ref.vocab_size and len(ours) == len(ref)
    assert ours.get_vocab() == ref.get_vocab()
    assert (ours.eos_token_id, ours.bos_token_id, ours.unk_token_id) == (ref.eos_token_id, ref.bos_token_id, ref.unk_token_id)


def _grid():
    base = list(itertools.product(
        [False, True, "max_length"],            # padding
        ["right", "left"],                      # padding_side
        [False, True, "only_first", "only_second"],  # truncation
        ["right", "left"],                      # truncation_side
        [None, 9, 32],                          # max_length
        [False, True],                          # pairs
        [False, True],                          # overflow (+stride)
    ))
    rnd = random.Random(1234)
    extras = itertools.cycle(itertools.product([None, "np"], [None, True, False], [False, True], [False, True],
                                               [True, False], [False, True], [False, True], [None, 8]))
    out = []
    for combo, ex in zip(base, extras):
        out.append(combo + ex)
    rnd.shuffle(out)
    return out


def test_option_grid_equals_gpt2tokenizer(pair, texts):
    """Every combination of padding / sides / truncation / max_length / pairs / overflow, with the
    other options cycled through: the same output as GPT2Tokenizer, or the same kind of error."""
    ours, ref = pair
    rnd = random.Random(7)
    batch = rnd.sample(texts, 6) + ["", "x<|endoftext|>y"]
    batch_b = [t[::-1][:200] for t in batch[::-1]]
    n_ok = n_err = 0
    for (padding, pside, trunc, tside, max_len, pairs, overflow, tensors, attn, stm, length, add_sp, sst, offs,
         multiple) in _grid():
        if tensors == "np" and not padding:
            tensors = None  # ragged rows cannot become an array (both raise; keep the grid informative)
        kw = dict(padding=padding, truncation=trunc, max_length=max_len, return_overflowing_tokens=overflow,
                  stride=2 if overflow else 0, return_tensors=tensors, return_attention_mask=attn,
                  return_special_tokens_mask=stm, return_length=length, add_special_tokens=add_sp,
                  split_special_tokens=sst, return_offsets_mapping=offs, pad_to_multiple_of=multiple,
                  padding_side=pside)
        for t in (ours, ref):
            t.truncation_side = tside
        for args in ([batch, batch_b] if pairs else [batch],) + (([batch[1], batch_b[1]] if pairs else [batch[1]]),):
            a, b = call(ours, args, kw), call(ref, args, kw)
            assert a == b, f"options {kw}, truncation_side={tside}, pairs={pairs}, single={isinstance(args[0], str)}"
            n_ok += a[0] == "ok"
            n_err += a[0] == "error"
    for t in (ours, ref):
        t.truncation_side = "right"
    assert n_ok > 500 and n_err > 0


def test_offsets_equal_gpt2tokenizer_on_corpus(pair, texts):
    ours, ref = pair
    a = ours(texts, return_offsets_mapping=True)
    b = ref(texts, return_offsets_mapping=True)
    assert plain(a["offset_mapping"]) == plain(b["offset_mapping"])
    assert a["input_ids"] == b["input_ids"]


def test_offsets_are_never_silently_dropped(pair):
    ours, _ = pair
    ids = ours("hello world")["input_ids"]
    with pytest.raises(NotImplementedError, match="return_offsets_mapping"):
        ours([ids], return_offsets_mapping=True)  # ids in, no text to point into


def test_return_tensors_pt_when_torch_is_installed(pair, texts):
    pytest.importorskip("torch")
    ours, ref = pair
    a = ours(texts[:5], padding=True, return_tensors="pt")
    b = ref(texts[:5], padding=True, return_tensors="pt")
    assert a["input_ids"].tolist() == b["input_ids"].tolist()


def _add_tokens(tok):
    tok.add_tokens(["<foo>", "日本語トークン", "zebra_token"])
    tok.add_special_tokens({"extra_special_tokens": ["<|im_start|>", "<|Ω|>"]})


def test_added_tokens_after_loading(pair, texts):
    ours, ref = pair
    ours, ref = ours.__class__.from_pretrained(ours.name_or_path), ref.__class__.from_pretrained(ref.name_or_path)
    for t in (ours, ref):
        t.pad_token = t.eos_token
        _add_tokens(t)
    assert len(ours) == len(ref) and ours.get_vocab() == ref.get_vocab()
    extra = ["a<foo>b 日本語トークンです <|im_start|>user\nhi<|Ω|><|endoftext|>", "zebra_tokens<foo><foo>",
             "<|im_start|><|im_start|> 日本語トークン"] + texts[:5]
    for kw in ({}, dict(split_special_tokens=True), dict(return_offsets_mapping=True), dict(padding=True)):
        if kw.get("split_special_tokens"):
            # transformers documents split_special_tokens=True as "no added token matched, special or
            # not" (`_encode_without_added_tokens`); the tokenizers backend still matches
            # non-special ones. Compare on text whose added tokens are all special.
            docs = ["<|im_start|>user\nhi<|Ω|><|endoftext|>"] + texts[:5]
        else:
            docs = extra
        assert plain(ours(docs, **kw)) == plain(ref(docs, **kw)), kw
    ids = ref(extra)["input_ids"]
    for skip in (False, True):
        assert ours.batch_decode(ids, skip_special_tokens=skip) == ref.batch_decode(ids, skip_special_tokens=skip)
    assert ours.decode(ours.encode(extra[0])) == extra[0]


def test_call_on_ids_and_split_words_is_delegated(pair):
    ours, _ = pair
    ids = ours("hello world")["input_ids"]
    assert ours(ids)["input_ids"] == ids
    words = ours(["hello", " world"], is_split_into_words=True)["input_ids"]
    assert words == ours.encode("hello") + ours.encode(" world")
    assert ours("")["input_ids"] == []


# ---------------------------------------------------------------------------------------------
# Conversions, saving and loading


def test_bpe_and_tokenizer_convert_both_ways(gpt2_dir):
    bpe = hf_bpe.BPE.load(gpt2_dir)
    tok = hf_bpe.BPETokenizer.from_bpe(bpe, model_max_length=1024)
    assert isinstance(tok, hf_bpe.BPETokenizer) and tok.bpe is bpe
    assert tok.model_max_length == 1024 and tok.eos_token == "<|endoftext|>"
    text = "Hello world<|endoftext|> again"
    assert tok(text)["input_ids"] == bpe.encode(text, allowed_special="all")
    assert hf_bpe.BPETokenizer(bpe=bpe)(text)["input_ids"] == tok(text)["input_ids"]
    with pytest.raises(TypeError):
        hf_bpe.BPETokenizer(bpe="not a bpe")
    with pytest.raises(ValueError, match="vocab_file"):
        hf_bpe.BPETokenizer()


def test_save_pretrained_round_trip_with_added_tokens(pair, tmp_path):
    ours, ref = pair
    tok = ours.__class__.from_pretrained(ours.name_or_path)
    tok.pad_token = tok.eos_token
    _add_tokens(tok)
    text = "x<foo> 日本語トークン<|im_start|>héllo<|Ω|><|endoftext|> 🙂"
    tok.save_pretrained(tmp_path / "saved")
    cfg = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "BPETokenizer"
    assert "is_local" not in cfg and "local_files_only" not in cfg
    assert {"vocab.json", "merges.txt", "tokenizer.json"} <= {p.name for p in (tmp_path / "saved").iterdir()}
    back = hf_bpe.BPETokenizer.from_pretrained(tmp_path / "saved")
    again = AutoTokenizer.from_pretrained(tmp_path / "saved")
    for t in (back, again):
        assert type(t) is hf_bpe.BPETokenizer
        assert t(text)["input_ids"] == tok(text)["input_ids"]
        assert t.get_vocab() == tok.get_vocab() and len(t) == len(tok)
        assert t.pad_token == tok.pad_token and t.all_special_tokens == tok.all_special_tokens
        assert t.decode(t(text)["input_ids"]) == text
        assert t.decode(t(text)["input_ids"], skip_special_tokens=True) == "x<foo> 日本語トークンhéllo 🙂"
    # Every other reader of the folder gets the same ids: the added tokens are in tokenizer.json.
    import tokenizers
    ids = tok(text)["input_ids"]
    assert hf_bpe.BPE.load(tmp_path / "saved").encode(text, allowed_special="all") == ids
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "saved" / "tokenizer.json")).encode(text).ids == ids
    # re-saving a loaded tokenizer does not leak load-time keys either
    again.save_pretrained(tmp_path / "resaved")
    cfg2 = json.loads((tmp_path / "resaved" / "tokenizer_config.json").read_text())
    assert "is_local" not in cfg2 and "local_files_only" not in cfg2


def test_autotokenizer_with_and_without_hf_bpe(pair, tmp_path, texts):
    ours, _ = pair
    tok = ours.__class__.from_pretrained(ours.name_or_path)
    tok.pad_token = tok.eos_token
    tok.add_special_tokens({"extra_special_tokens": ["<|im_start|>"]})
    tok.add_tokens(["日本語トークン"])
    out = tok.save_pretrained(tmp_path / "saved")
    assert out
    sample = texts[:8] + ["a<|im_start|>b 日本語トークン<|endoftext|>"]
    code = f"""
        import sys, json
        {'sys.modules["hf_bpe"] = None' if True else ''}
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained({str(tmp_path / "saved")!r})
        texts = json.loads({json.dumps(json.dumps(sample))})
        print(json.dumps([type(tok).__name__, tok(texts)["input_ids"], tok.eos_token, tok.pad_token,
                          tok.decode(tok(texts[-1])["input_ids"])]))
    """
    name, ids, eos, pad, dec = last_json(run_py(code))
    assert name != "BPETokenizer"
    assert ids == tok(sample)["input_ids"]
    assert (eos, pad) == (tok.eos_token, tok.pad_token)
    assert dec == sample[-1]
    auto = AutoTokenizer.from_pretrained(tmp_path / "saved")
    assert type(auto) is hf_bpe.BPETokenizer and auto(sample)["input_ids"] == ids


def test_bpe_save_folder_loads_as_bpetokenizer_and_without_hf_bpe(tmp_path, trained_dir):
    folder = hf_bpe.BPE.load(trained_dir).save(tmp_path / "bpe_saved")
    assert json.loads((folder / "tokenizer_config.json").read_text())["tokenizer_class"] == "BPETokenizer"
    auto = AutoTokenizer.from_pretrained(folder)
    assert type(auto) is hf_bpe.BPETokenizer
    ref = GPT2Tokenizer.from_pretrained(folder)
    text = "The cat sat<|endoftext|> héllo 🙂 999"
    assert auto(text)["input_ids"] == ref(text)["input_ids"]
    out = run_py(f"""
        import sys, json
        sys.modules["hf_bpe"] = None
        from transformers import AutoTokenizer
        t = AutoTokenizer.from_pretrained({str(folder)!r})
        print(json.dumps([t({text!r})["input_ids"], t.eos_token, t.decode(t({text!r})["input_ids"])]))
    """)
    assert last_json(out) == [ref(text)["input_ids"], "<|endoftext|>", text]


def test_import_is_lazy_and_registers_after_transformers_import(gpt2_dir, tmp_path):
    tok = hf_bpe.BPETokenizer.from_pretrained(gpt2_dir)
    tok.save_pretrained(tmp_path / "saved")
    out = run_py(f"""
        import sys, json
        import hf_bpe
        lazy = "transformers" not in sys.modules
        from transformers import AutoTokenizer
        from transformers.models.auto.tokenization_auto import tokenizer_class_from_name
        cls = tokenizer_class_from_name("BPETokenizer")
        t = AutoTokenizer.from_pretrained({str(tmp_path / "saved")!r})
        print(json.dumps([lazy, cls is hf_bpe.BPETokenizer, type(t).__name__, t("hi there")["input_ids"]]))
    """)
    assert last_json(out) == [True, True, "BPETokenizer", tok("hi there")["input_ids"]]
    # transformers imported first: registration happens at `import hf_bpe`
    out = run_py("""
        import json
        import transformers
        import hf_bpe
        from transformers.models.auto.tokenization_auto import tokenizer_class_from_name
        print(json.dumps(tokenizer_class_from_name("BPETokenizer") is hf_bpe.BPETokenizer))
    """)
    assert last_json(out) is True


def test_a_missing_hf_extra_is_named():
    out = run_py("""
        import json, sys
        sys.modules["transformers"] = None  # as if the 'hf' extra were not installed
        import hf_bpe
        bpe_ok = hf_bpe.BPE is not None
        try:
            hf_bpe.BPETokenizer
        except ModuleNotFoundError as e:
            print(json.dumps([bpe_ok, str(e)]))
    """)
    ok, msg = last_json(out)
    assert ok and "'hf' extra" in msg and "transformers" in msg and "pip install 'hf_bpe[hf]'" in msg


# ---------------------------------------------------------------------------------------------
# datasets


def _ds(texts):
    return datasets.Dataset.from_dict({"text": texts, "n": list(range(len(texts)))})


def test_dataset_map_batched_unbatched_and_num_proc(gpt2_dir, texts):
    tok = hf_bpe.BPETokenizer.from_pretrained(gpt2_dir)
    ref = GPT2Tokenizer.from_pretrained(gpt2_dir)
    expected = ref(texts)["input_ids"]
    ds = _ds(texts)
    batched = ds.map(tok, batched=True, batch_size=7)
    assert batched["input_ids"] == expected
    assert batched.features["input_ids"].feature.dtype == "int32"
    assert batched["attention_mask"] == [[1] * len(x) for x in expected]
    assert batched["n"] == list(range(len(texts)))
    unbatched = ds.map(tok)
    assert unbatched["input_ids"] == expected
    multi = ds.map(tok, batched=True, batch_size=5, num_proc=2, load_from_cache_file=False)
    assert multi["input_ids"] == expected
    tok.text_column = "body"
    renamed = ds.rename_column("text", "body").map(tok, batched=True)
    assert renamed["input_ids"] == expected
    with pytest.raises(KeyError, match="body"):
        ds.map(tok, batched=True)


def test_arrow_table_and_map_fn(gpt2_dir, texts):
    import pyarrow as pa

    tok = hf_bpe.BPETokenizer.from_pretrained(gpt2_dir)
    expected = GPT2Tokenizer.from_pretrained(gpt2_dir)(texts)["input_ids"]
    table = pa.table({"text": texts})
    out = tok(table)
    assert out.column("input_ids").type == pa.list_(pa.int32())
    assert out.column("input_ids").to_pylist() == expected and out.column("text").to_pylist() == texts
    ds = _ds(texts).with_format("arrow")
    for fn in (tok, hf_bpe.map_fn(tok), hf_bpe.map_fn(tok.bpe)):
        res = ds.map(fn, batched=True, batch_size=9).with_format(None)
        assert res["input_ids"] == expected and res["n"] == list(range(len(texts)))
        assert res.features["input_ids"].feature.dtype == "int32"
    fn = hf_bpe.map_fn(tok)
    res = _ds(texts).with_format("arrow").map(fn, batched=True, num_proc=2, load_from_cache_file=False)
    assert res.with_format(None)["input_ids"] == expected
    # added tokens go through map_fn too
    tok.add_tokens(["日本語トークン"])
    t2 = ["a日本語トークンb", "plain"]
    res = _ds(t2).with_format("arrow").map(hf_bpe.map_fn(tok), batched=True).with_format(None)
    assert res["input_ids"] == tok(t2)["input_ids"] and len(tok) - 1 in res["input_ids"][0]


FP_CODE = """
    import json, sys, time
    import hf_bpe
    from datasets.fingerprint import Hasher
    tok = hf_bpe.BPETokenizer.from_pretrained(sys.argv[1])
    tok.pad_token = tok.eos_token
    fn = hf_bpe.map_fn(tok)
    t0 = time.perf_counter(); h0 = Hasher.hash(tok); dt = time.perf_counter() - t0
    f0 = Hasher.hash(fn)
    tok(["some text", "more text<|endoftext|>"], padding=True, return_offsets_mapping=True)
    tok.decode([1, 2, 3]); tok.tokenize("hello")
    fn({"text": ["x"]})
    print(json.dumps([h0, Hasher.hash(tok), f0, Hasher.hash(fn), dt]))
"""


def test_fingerprint_deterministic_across_processes_and_after_use(gpt2_dir):
    code = FP_CODE.replace("sys.argv[1]", repr(str(gpt2_dir)))
    a = last_json(run_py(code))
    b = last_json(run_py(code))
    assert a[0] == a[1] == b[0] == b[1], "tokenizer hash differs between processes or after use"
    assert a[2] == a[3] == b[2] == b[3], "map_fn hash differs between processes or after use"
    assert a[4] < 2.0, f"hashing the tokenizer took {a[4]:.2f}s"


def test_map_cache_is_reused_in_a_fresh_process(gpt2_dir, tmp_path, texts):
    _ds(texts).save_to_disk(str(tmp_path / "ds"))
    code = f"""
        import json, hf_bpe, datasets
        tok = hf_bpe.BPETokenizer.from_pretrained({str(gpt2_dir)!r})
        ds = datasets.load_from_disk({str(tmp_path / "ds")!r})
        out = ds.map(tok, batched=True)
        fast = ds.with_format("arrow").map(hf_bpe.map_fn(tok), batched=True)
        print(json.dumps([out._fingerprint, [c["filename"] for c in out.cache_files],
                          fast._fingerprint, out["input_ids"][:3]]))
    """
    first = last_json(run_py(code))
    cache_files = sorted((tmp_path / "ds").glob("cache-*.arrow"))
    assert cache_files, "no cache file written"
    mtimes = {p: p.stat().st_mtime_ns for p in cache_files}
    second = last_json(run_py(code))
    assert first == second
    assert {p: p.stat().st_mtime_ns for p in sorted((tmp_path / "ds").glob("cache-*.arrow"))} == mtimes, \
        "the second run rewrote the cache instead of reusing it"


# ---------------------------------------------------------------------------------------------
# Hub round trip over HTTP against tests/fakehub.py


def _hub_env(port: int, home: Path) -> dict:
    return {"HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_TOKEN": "hf_fake_token_for_local_tests",
            "HF_HOME": str(home), "HF_HUB_DISABLE_XET": "1", "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_TELEMETRY": "1"}


def test_push_to_hub_and_from_pretrained_round_trip(gpt2_dir, tmp_path):
    jinja2 = pytest.importorskip("jinja2")  # noqa: F841  (model cards need it)
    code = f"""
        import json, os
        import fakehub
        srv, store = fakehub.serve()
        os.environ.update(HF_ENDPOINT=f"http://127.0.0.1:{{srv.server_address[1]}}",
                          HF_TOKEN="hf_fake_token_for_local_tests", HF_HOME={str(tmp_path / "home")!r},
                          HF_HUB_DISABLE_XET="1")
        from transformers import AutoTokenizer
        import hf_bpe
        tok = hf_bpe.BPETokenizer.from_pretrained({str(gpt2_dir)!r})
        tok.pad_token = tok.eos_token
        tok.add_tokens(["日本語トークン"])
        tok.add_special_tokens({{"extra_special_tokens": ["<|im_start|>"]}})
        tok.push_to_hub("tester/hf-bpe-a")
        tok.save_pretrained({str(tmp_path / "local")!r}, push_to_hub=True, repo_id="tester/hf-bpe-b")
        text = "Hello 日本語トークン<|im_start|> world<|endoftext|>"
        res = []
        for repo in ("tester/hf-bpe-a", "tester/hf-bpe-b"):
            t = AutoTokenizer.from_pretrained(repo)
            res.append([type(t).__name__, t(text)["input_ids"], t.pad_token, sorted(store.repos[repo]["files"])])
        print(json.dumps([tok(text)["input_ids"], res, any(l.startswith("POST /api/models/tester/hf-bpe-a/commit")
                                                            for l in store.log)]))
    """
    ids, res, committed = last_json(run_py(code))
    assert committed
    for name, got, pad, files in res:
        assert name == "BPETokenizer" and got == ids and pad == "<|endoftext|>"
        assert {"tokenizer_config.json", "vocab.json", "merges.txt", "tokenizer.json"} <= set(files)


def _start_fakehub():
    proc = subprocess.Popen([sys.executable, str(TESTS / "fakehub.py")], stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    return proc, port


def test_examples_push_to_hub(tmp_path, trained_dir):
    pytest.importorskip("jinja2")
    proc, port = _start_fakehub()
    try:
        env = _hub_env(port, tmp_path / "home")
        run_py(f"""
            import runpy, sys
            sys.argv = ["push_to_hub.py", "tester/example-repo", {str(trained_dir)!r}]
            runpy.run_path({str(REPO / "examples" / "push_to_hub.py")!r}, run_name="__main__")
        """, env=env)
        out = run_py("""
            import json, hf_bpe
            from transformers import AutoTokenizer
            t = AutoTokenizer.from_pretrained("tester/example-repo")
            print(json.dumps([type(t).__name__, t("hello world")["input_ids"]]))
        """, env=env)
        ref = hf_bpe.BPE.load(trained_dir).encode("hello world")
        assert last_json(out) == ["BPETokenizer", ref]
    finally:
        proc.kill()
        proc.wait()


def test_example_train_and_use(tmp_path):
    out = run_py(f"""
        import runpy, sys
        sys.argv = ["train_and_use.py", {str(tmp_path / "out")!r}]
        runpy.run_path({str(REPO / "examples" / "train_and_use.py")!r}, run_name="__main__")
    """, timeout=600)
    assert "input_ids" in out
    tok = AutoTokenizer.from_pretrained(tmp_path / "out")
    assert type(tok) is hf_bpe.BPETokenizer and tok.vocab_size > 256
