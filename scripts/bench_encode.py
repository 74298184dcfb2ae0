"""Encoding throughput: hf_bpe against the other fast BPE encoders, side by side in one run.

    scripts/dev_build.sh
    PYTHONPATH=$PWD python scripts/bench_encode.py [--mb 20] [--runs 5] [--out-md bench_out/encode.md]

What is measured
  * Inputs: the first ``--mb`` MB of whole documents of each corpus in
    ../shared/data/corpus/{english,code,multilingual}.txt.gz (documents are separated by
    ``\\n<|endoftext|>\\n``). They are decompressed once into ``bench_out/corpus/`` as one text
    file with the documents joined by ``<|endoftext|>`` (the input of the file paths); the batch
    APIs get the same documents as a list of Python ``str``.
  * Vocabularies (``--vocabs``, default gpt2,o200k): GPT-2 (r50k_base), o200k_base and cl100k_base
    read from the local rank files; the model vocabularies ``olmo2`` (OLMo-2's released
    tokenizer.json), ``llama3`` and ``qwen2`` (those models' regexes on the cl100k ranks), and
    ``gpt2-n12`` (GPT-2's ranks with a regex no scanner has: the generic engine; the script stops
    if hf_bpe ran it on a scanner), and ``neox`` (GPT-NeoX-20B's released file, whose NFC
    normalizer takes hf_bpe's general pipeline path; reference ids from tokenizers). Vocabularies without a tokenizer.json of their own are saved
    as one by hf_bpe for the tools that load one; tiktoken gets the same ranks and regex.
  * The documents are dealt into two disjoint halves, A (even documents) and B (odd ones); B is
    the text that is timed, in three **cache states** (``--states``), each run with a tokenizer
    built afresh (building is not timed):
      - ``cold``: a fresh tokenizer encodes B;
      - ``warm``: a fresh tokenizer encodes A (not timed), then B, which it has not seen;
      - ``primed``: a fresh tokenizer encodes B (not timed), then B again: the word caches hold
        every word, so this is a lookup benchmark; a claim that holds only here says so.
    Every tool/output form, for 1 and 2 threads: up to ``--runs`` timed runs per state (fewer
    when they would take longer than ``--budget`` seconds, never fewer than 3). MB/s = UTF-8
    bytes of B (separators not counted) / median wall time, MB = 1e6. The texts' UTF-8 forms are
    made once before any timing (CPython caches them per string), so no tool pays for that.
  * ``--tokbench``: Hugging Face's tokbench view instead: the corpus cut into 10 KiB chunks, a
    fresh tokenizer warmed on one slice of chunks (not timed), then five other slices, unseen,
    timed once each (MB/s of the five together).
  * Ids: every timed output is compared with the reference: tiktoken's
    ``encode_ordinary_batch`` on the same documents (tokenizers' ids for ``neox``). A mismatch
    is reported in the table and printed with the first differing document; it is never hidden.
  * HF ``tokenizers`` 1.0 (release candidates, ``pip install --pre tokenizers``) is a peer
    (``tokenizers 1.0``); ``transformers`` pins the 0.x line, so the script runs it from a
    virtual environment of its own, ``bench_out/venv-tokenizers1``, which it creates.

How the thread count is enforced
  Every (vocab, threads, tool) runs in its own subprocess (``--worker``), which
    1. restricts itself to ``threads`` CPUs with ``os.sched_setaffinity`` before importing the
       tool, so a tool that sizes its pool from the visible cores sees only those;
    2. has ``RAYON_NUM_THREADS``, ``FASTOKENS_BPE_THREADS`` = threads and
       ``TOKENIZERS_PARALLELISM`` = false/true (1 / more threads) in its environment, and
       ``OPENBLAS_NUM_THREADS=1`` (no tool does linear algebra, but the OpenBLAS threads that
       numpy starts took ~9% of the CPU samples during the first timed runs on 2 cores);
    3. passes the tool's own argument where it has one: hf_bpe ``num_threads=``, tiktoken
       ``num_threads=``, gigatoken ``parallel=False`` for 1 thread, wordchipper
       ``TokenizerOptions.set_parallel``.
  The process CPU time over wall time of the timed runs is reported ("cpu/wall") as a check.

Noise
  The machine may be shared. Before each tool the script waits (up to ``--quiet-wait`` s) for
  other processes to go quiet, and it measures how many CPUs they used during the timed runs
  (``/proc/stat`` busy time minus our own CPU time, "other CPUs"); figures taken while others
  used more than half a CPU are marked with a dagger.

Optional peers (tokie, fastokens, wordchipper, kitoken, bpe-openai) are used if importable; to
install them without touching the environment: ``pip install --no-deps --target bench_out/peers
tokie fastokens wordchipper kitoken bpe-openai`` (``bench_out/peers`` is put on the workers'
path). wordchipper only loads OpenAI vocabularies by name from its disk cache; the local rank
files are copied into a cache folder under ``bench_out/`` so it never downloads. bpe-openai has
cl100k and o200k built in.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from benchlib import (CORPORA, DATA, EOT, ROOT, TOKENIZERS1_VENV, corpus_docs, emit, ensure_tokenizers1, git_state,
                      machine_info, package_version, pin, publish, thread_env, tiktoken_from_ranks)
from benchlib import run_worker as run_script

# Vocabularies. The OpenAI ones use tiktoken's own constructor (in tiktoken_ext.openai_public)
# with the local rank file; the model ones are a rank file with a model's regex ("pat"), and
# OLMo-2 is its released tokenizer.json ("file": what hf_bpe, tokenizers and the peers load;
# tiktoken gets the cl100k ranks its first 100,256 ids are, with its regex).
HF = DATA / "hf-tokenizers"
CL100K_RANKS = DATA / "tiktoken" / "cl100k_base.tiktoken"
LLAMA3_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2_RE = LLAMA3_RE.replace(r"\p{N}{1,3}", r"\p{N}")
# GPT-2's regex with numbers of at most two digits: no scanner has it, so it runs on the
# generic engine (the worker records which engine hf_bpe picked).
GPT2_N12_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}{1,2}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
VOCABS = {
    "gpt2": {"tiktoken_name": "r50k_base", "rank_file": DATA / "tiktoken" / "r50k_base.tiktoken",
             "eot": 50256},
    "o200k": {"tiktoken_name": "o200k_base", "rank_file": DATA / "tiktoken" / "o200k_base.tiktoken",
              "eot": 199999, "specials": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}},
    "cl100k": {"tiktoken_name": "cl100k_base", "rank_file": CL100K_RANKS, "eot": 100257,
               "specials": {"<|endoftext|>": 100257}},
    "olmo2": {"file": HF / "olmo-2-dolma2" / "tokenizer.json", "rank_file": CL100K_RANKS, "pat": LLAMA3_RE,
              "eot": 100257, "specials": {"<|endoftext|>": 100257}},
    "llama3": {"rank_file": CL100K_RANKS, "pat": LLAMA3_RE, "pattern": "llama3", "eot": 100257,
               "specials": {"<|endoftext|>": 100257}},
    "qwen2": {"rank_file": CL100K_RANKS, "pat": QWEN2_RE, "pattern": "qwen2", "eot": 100257,
              "specials": {"<|endoftext|>": 100257}},
    # GPT-NeoX-20B's file: an NFC normalizer, so hf_bpe runs its general pipeline path; no
    # tiktoken equivalent, the reference ids are tokenizers'.
    "neox": {"file": HF / "gpt-neox-20b" / "tokenizer.json", "reference": "tokenizers", "eot": 0},
    # A superword tokenizer (scripts/bench_superword.py saves it): spans of several words (a span
    # pattern, cut by gpt2's scanner); no tiktoken equivalent, the reference ids are tokenizers'.
    "superword": {"file": ROOT / "bench_out" / "superword" / "tokenizer" / "tokenizer.json", "reference": "tokenizers",
                  "eot": 256},
    "gpt2-n12": {"rank_file": DATA / "tiktoken" / "r50k_base.tiktoken", "pat": GPT2_N12_RE, "pattern": GPT2_N12_RE,
                 "eot": 50256, "specials": {"<|endoftext|>": 50256}},
}


# ---------------------------------------------------------------------------------------------
# Inputs (prepared once, in the parent process)
# ---------------------------------------------------------------------------------------------

@dataclass
class Paths:
    cache: Path

    def corpus(self, name: str, mb: float) -> Path:
        return self.cache / "corpus" / f"{name}-{mb:g}MB.txt"

    def half(self, name: str, mb: float, which: str) -> Path:
        return self.cache / "corpus" / f"{name}-{mb:g}MB-{which}.txt"

    def reference(self, vocab: str, name: str, mb: float, which: str = "all") -> Path:
        return self.cache / "reference" / f"{vocab}-{name}-{mb:g}MB-{which}.npz"

    def tokenizer_json(self, vocab: str) -> Path:
        if vocab == "gpt2":
            return DATA / "gpt2" / "tokenizer.json"
        if "file" in VOCABS[vocab]:
            return VOCABS[vocab]["file"]
        return self.cache / "vocab" / vocab / "tokenizer.json"

    @property
    def wordchipper_cache(self) -> Path:
        return self.cache / "wordchipper-cache"

    @property
    def peers(self) -> Path:
        return self.cache / "peers"


def prepare_corpus(paths: Paths, name: str, mb: float) -> Path:
    """Whole documents from the start of the corpus until ``mb`` MB, joined by ``<|endoftext|>``."""
    out = paths.corpus(name, mb)
    if out.exists():
        return out
    docs = corpus_docs(name, mb)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(EOT.join(docs), encoding="utf-8")
    tmp.rename(out)
    return out


def read_docs(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split(EOT)


def prepare_halves(paths: Paths, name: str, mb: float) -> None:
    """The corpus's documents dealt into halves A (even) and B (odd), one file each."""
    docs = read_docs(paths.corpus(name, mb))
    for which, part in (("A", docs[0::2]), ("B", docs[1::2])):
        out = paths.half(name, mb, which)
        if not out.exists():
            tmp = out.with_suffix(".tmp")
            tmp.write_text(EOT.join(part), encoding="utf-8")
            tmp.rename(out)


def utf8_cached(docs: list[str]) -> list[str]:
    """Makes CPython cache each string's UTF-8 form (what every tool reads), so the first timed
    call does not pay for it."""
    import ctypes

    as_utf8 = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
    as_utf8.argtypes, as_utf8.restype = [ctypes.py_object, ctypes.c_void_p], ctypes.c_void_p
    for d in docs:
        as_utf8(d, None)
    return docs


def tiktoken_encoding(vocab: str):
    """tiktoken's own definition of the encoding (pattern, special tokens), with the ranks read
    from the local file instead of downloaded; for a model vocabulary, its ranks and regex."""
    import tiktoken
    import tiktoken.load
    import tiktoken_ext.openai_public as openai_public

    v = VOCABS[vocab]
    if "rank_file" not in v:
        raise ValueError(f"{vocab} has no tiktoken equivalent")
    if "tiktoken_name" not in v:
        return tiktoken_from_ranks(v["rank_file"], v["pat"], v["specials"], name=vocab)
    local = lambda _url, expected_hash=None: tiktoken.load.load_tiktoken_bpe(str(v["rank_file"]), expected_hash)  # noqa: E731
    saved = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = local
    try:
        params = getattr(openai_public, v["tiktoken_name"])()
    finally:
        openai_public.load_tiktoken_bpe = saved
    return tiktoken.Encoding(**params)


def prepare_reference(paths: Paths, vocab: str, name: str, mb: float, which: str = "B") -> Path:
    """The reference ids for the documents of a half (tiktoken's, or tokenizers' where the
    vocabulary says so), as flat ids + offsets."""
    out = paths.reference(vocab, name, mb, which)
    if out.exists():
        return out
    if which == "tokbench":
        docs = [c for s in tokbench_slices(paths, name, mb)[1:] for c in s]
    else:
        docs = read_docs(paths.half(name, mb, which))
    if VOCABS[vocab].get("reference") == "tokenizers":
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(str(VOCABS[vocab]["file"]))
        lists = [e.ids for e in tok.encode_batch_fast(docs, add_special_tokens=False)]
    else:
        lists = tiktoken_encoding(vocab).encode_ordinary_batch(docs, num_threads=os.cpu_count() or 1)
    ids, offsets = flatten_lists(lists)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, ids=ids, offsets=offsets)
    return out


def prepare_vocab_files(paths: Paths, vocabs: list[str]) -> None:
    """The vocabularies without a tokenizer.json of their own as one (saved by hf_bpe) for
    tokenizers / gigatoken / tokie / fastokens; the OpenAI rank files where wordchipper's disk
    cache looks for them."""
    for vocab in vocabs:
        path = paths.tokenizer_json(vocab)
        if not path.exists():
            load_ours(vocab).save(path.parent)
        v = VOCABS[vocab]
        if "tiktoken_name" in v:
            name = v["tiktoken_name"]
            dst = paths.wordchipper_cache / "openai" / name / f"{name}.tiktoken"
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(v["rank_file"].read_bytes())


def load_ours(vocab: str):
    import hf_bpe

    v = VOCABS[vocab]
    if vocab == "gpt2":
        return hf_bpe.BPE.load(DATA / "gpt2", special_tokens=[EOT])
    if "file" in v:
        return hf_bpe.BPE.load(v["file"])
    return hf_bpe.BPE.from_tiktoken(v["rank_file"], pattern=v.get("pattern", vocab), special_tokens=v["specials"])


# ---------------------------------------------------------------------------------------------
# Output normalisation: every tool's result becomes (flat uint32 ids, int64 offsets)
# ---------------------------------------------------------------------------------------------

def flatten_lists(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lens = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    ids = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.uint32, count=int(offsets[-1]))
    return ids, offsets


def from_lengths(ids, lengths) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.asarray(lengths, dtype=np.int64), out=offsets[1:])
    return np.asarray(ids, dtype=np.uint32), offsets


def from_awkward(arr) -> tuple[np.ndarray, np.ndarray]:
    import awkward as ak

    return from_lengths(ak.to_numpy(ak.flatten(arr)), ak.to_numpy(ak.num(arr)))


def from_stream(stream: np.ndarray, eot: int) -> tuple[np.ndarray, np.ndarray]:
    """A file encoded as one stream with the separator's id between documents."""
    stream = np.asarray(stream, dtype=np.uint32)
    cuts = np.flatnonzero(stream == eot)
    offsets = np.concatenate([[0], cuts - np.arange(len(cuts)), [len(stream) - len(cuts)]]).astype(np.int64)
    return np.delete(stream, cuts), offsets


def compare(got: tuple[np.ndarray, np.ndarray], ref: tuple[np.ndarray, np.ndarray], docs: list[str]) -> str | None:
    """None if equal, else a description of the first differing document."""
    ids, offsets = got
    rids, roffsets = ref
    if len(offsets) == len(roffsets) and np.array_equal(offsets, roffsets) and np.array_equal(ids, rids):
        return None
    if len(offsets) != len(roffsets):
        return f"{len(offsets) - 1} documents instead of {len(roffsets) - 1}"
    for d in range(len(roffsets) - 1):
        a = ids[offsets[d]:offsets[d + 1]]
        b = rids[roffsets[d]:roffsets[d + 1]]
        if not np.array_equal(a, b):
            n = min(len(a), len(b))
            k = int(np.argmax(a[:n] != b[:n])) if n and (a[:n] != b[:n]).any() else n
            return (f"document {d} ({len(docs[d].encode())} bytes): {len(a)} ids vs {len(b)}, first "
                    f"difference at id #{k}: {a[k:k + 4].tolist()} vs {b[k:k + 4].tolist()}")
    return "ids differ"


# ---------------------------------------------------------------------------------------------
# Tools: name -> (package, build(vocab, threads, ctx) -> (run(corpus) -> output, normalise))
# ---------------------------------------------------------------------------------------------

@dataclass
class Ctx:
    paths: Paths
    mb: float
    threads: int


@dataclass
class Tool:
    name: str
    package: str
    input: str  # "docs" (list of str) or "file" (path of the joined text)
    build: Callable  # (vocab, ctx) -> (encode(input) -> output, to_flat(output) -> (ids, offsets))
    venv: str | None = None  # runs in this virtual environment (see `ensure_tokenizers1`)


def _ours(form: str, cache_bytes: int | None = None):
    def build(vocab, ctx):
        bpe = load_ours(vocab)
        if cache_bytes is not None:
            bpe.cache_bytes = cache_bytes
        n = ctx.threads
        eot = VOCABS[vocab]["eot"]
        if form == "flat":
            return (lambda docs: bpe.encode_batch_flat(docs, num_threads=n)), lambda out: (out[0], out[1].astype(np.int64))
        if form == "lists":
            return (lambda docs: bpe.encode_batch(docs, num_threads=n)), flatten_lists
        out_path = ctx.paths.cache / "tmp" / f"ours-{os.getpid()}.npy"
        out_path.parent.mkdir(parents=True, exist_ok=True)

        def encode_file(path):  # file -> .npy on disk
            bpe.encode_file(path, out_path, progress=False, num_threads=n)
            return out_path
        return encode_file, lambda p: from_stream(np.load(p), eot)
    return build


def _tiktoken(vocab, ctx):
    enc = tiktoken_encoding(vocab)
    return (lambda docs: enc.encode_ordinary_batch(docs, num_threads=ctx.threads)), flatten_lists


def _tokenizers(vocab, ctx):
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(str(ctx.paths.tokenizer_json(vocab)))
    # Timed: the call only (Encoding objects); the ids are read from them after the clock stops.
    # (1.0 has no encode_batch_fast: its encode_batch is the fast one.)
    batch = getattr(tok, "encode_batch_fast", tok.encode_batch)
    return (lambda docs: batch(docs, add_special_tokens=False)), lambda out: flatten_lists([e.ids for e in out])


def _gigatoken(form: str):
    def build(vocab, ctx):
        import gigatoken

        tok = gigatoken.Tokenizer(ctx.paths.tokenizer_json(vocab))
        par = ctx.threads > 1
        if form == "arrays":
            return (lambda docs: tok.encode_batch(docs, parallel=par)), from_awkward
        if form == "lists":
            return (lambda docs: tok.encode_batch_list(docs, parallel=par)), flatten_lists
        return (lambda path: tok.encode_files(gigatoken.TextFileSource([str(path)], separator=EOT), parallel=par)), from_awkward
    return build


def _tokie(form: str):
    def build(vocab, ctx):
        import tokie

        tok = tokie.Tokenizer.from_json(str(ctx.paths.tokenizer_json(vocab)))
        if form == "flat":
            return (lambda docs: tok.encode_batch_flat(docs, add_special_tokens=False)), lambda out: from_lengths(*out)
        return (lambda path: tok.encode_files([str(path)], separator=EOT.encode())), \
            lambda out: (np.asarray(out[0], dtype=np.uint32), np.asarray(out[1], dtype=np.int64))
    return build


def _fastokens(vocab, ctx):
    import fastokens

    if vocab != "o200k":
        tok = fastokens.Tokenizer.from_file(str(ctx.paths.tokenizer_json(vocab)))
    else:  # it refuses o200k's tokenizer.json: "non-contiguous tokens - token 199998 is missing"
        v = VOCABS[vocab]
        tok = fastokens.Tokenizer.from_tiktoken(str(v["rank_file"]), encoding=v["tiktoken_name"])
    return (lambda docs: tok.encode_batch_flat(docs, add_special_tokens=False)), \
        lambda out: (np.frombuffer(out[0], dtype="<u4"), np.frombuffer(out[1], dtype="<u8").astype(np.int64))


def _wordchipper(vocab, ctx):
    import wordchipper

    if "tiktoken_name" not in VOCABS[vocab]:
        raise ValueError("wordchipper loads OpenAI vocabularies by name only")
    opts = wordchipper.TokenizerOptions.default()
    opts.set_parallel(ctx.threads > 1)
    tok = wordchipper.Tokenizer.from_pretrained("openai:" + VOCABS[vocab]["tiktoken_name"], opts)
    none = wordchipper.SpecialFilter.include_none()
    return (lambda docs: tok.encode_batch(docs, special_filter=none)), flatten_lists


def _kitoken(vocab, ctx):
    import kitoken

    tok = kitoken.Kitoken.from_tokenizers_file(str(ctx.paths.tokenizer_json(vocab)))
    return (lambda docs: tok.encode_all(docs)), flatten_lists


def _bpe_openai(vocab, ctx):
    import bpe_openai

    if vocab not in ("cl100k", "o200k"):
        raise ValueError("bpe-openai has cl100k_base and o200k_base only")
    enc = bpe_openai.get_encoding(VOCABS[vocab]["tiktoken_name"])
    return (lambda docs: enc.encode_ordinary_batch(docs)), flatten_lists


TOOLS = [
    Tool("hf_bpe flat", "hf_bpe", "docs", _ours("flat")),
    Tool("hf_bpe lists", "hf_bpe", "docs", _ours("lists")),
    # No word cache at all: the miss path alone (every piece merged or found a whole token).
    Tool("hf_bpe flat cache_bytes=0", "hf_bpe", "docs", _ours("flat", cache_bytes=0)),
    Tool("hf_bpe file→npy", "hf_bpe", "file", _ours("file")),
    Tool("tiktoken lists", "tiktoken", "docs", _tiktoken),
    Tool("tokenizers fast", "tokenizers", "docs", _tokenizers),
    Tool("tokenizers 1.0", "tokenizers", "docs", _tokenizers, venv="tokenizers1"),
    Tool("gigatoken arrays", "gigatoken", "docs", _gigatoken("arrays")),
    Tool("gigatoken lists", "gigatoken", "docs", _gigatoken("lists")),
    Tool("gigatoken file", "gigatoken", "file", _gigatoken("file")),
    Tool("tokie flat", "tokie", "docs", _tokie("flat")),
    Tool("tokie file", "tokie", "file", _tokie("file")),
    Tool("fastokens flat", "fastokens", "docs", _fastokens),
    Tool("wordchipper lists", "wordchipper", "docs", _wordchipper),
    Tool("kitoken lists", "kitoken", "docs", _kitoken),
    Tool("bpe-openai lists", "bpe_openai", "docs", _bpe_openai),
]
BASELINE = "hf_bpe flat"
# The peers the issue of cache states holds hf_bpe against (the fastest of them per cell).
FASTEST_PEERS = ("gigatoken arrays", "tokenizers 1.0")


# ---------------------------------------------------------------------------------------------
# Worker: one (vocab, threads, tool), all corpora; prints one JSON line per corpus
# ---------------------------------------------------------------------------------------------

def worker(spec: dict) -> None:
    threads = spec["threads"]
    if spec["pin"]:
        pin(threads)
    sys.path[:0] = [str(ROOT), spec["peers"]]
    paths = Paths(Path(spec["cache"]))
    ctx = Ctx(paths, spec["mb"], threads)
    tool = next(t for t in TOOLS if t.name == spec["tool"])
    vocab = spec["vocab"]
    for corpus in spec["corpora"]:
        if spec.get("tokbench"):
            emit(tokbench_run(spec, tool, ctx, corpus))
            continue
        half = {w: paths.half(corpus, spec["mb"], w) for w in "AB"}
        docs = {w: utf8_cached(read_docs(p)) for w, p in half.items()}
        arg = docs if tool.input == "docs" else half
        nbytes = sum(len(d.encode("utf-8")) for d in docs["B"])
        with np.load(paths.reference(vocab, corpus, spec["mb"], "B")) as z:
            ref = (z["ids"], z["offsets"])
        for state in spec["states"]:
            res = {**spec, "corpus": corpus, "state": state, "bytes": nbytes, "docs": len(docs["B"]), "tokens": int(len(ref[0]))}
            if tool.package == "hf_bpe":
                res["engine"] = engine_of(vocab)
            try:
                times, cpu, others, mismatch = [], [], [], None
                while len(times) < spec["runs"] and (len(times) < 3 or sum(times) < spec["budget"]):
                    encode, to_flat = tool.build(vocab, ctx)  # a fresh tokenizer per run (not timed)
                    if state != "cold":
                        encode(arg["A" if state == "warm" else "B"])
                    b, c, t = busy_cpu_seconds(), time.process_time(), time.perf_counter()
                    out = encode(arg["B"])
                    times.append(time.perf_counter() - t)
                    cpu.append(time.process_time() - c)
                    others.append(max(0.0, busy_cpu_seconds() - b - cpu[-1]))
                    mismatch = mismatch or compare(to_flat(out), ref, docs["B"])
                    del out, encode
                res.update(times=times, cpu=cpu, others=others, mismatch=mismatch, load=os.getloadavg()[0])
            except Exception as e:  # report, don't crash the whole benchmark
                res["error"] = f"{type(e).__name__}: {e}"
            emit(res)


TOKBENCH_CHUNK = 10 * 1024


def tokbench_slices(paths: Paths, corpus: str, mb: float) -> list[list[str]]:
    """The corpus (separators as newlines) in 10 KiB chunks cut at character boundaries, as six
    equal slices: the first to warm up on, five to time."""
    b = paths.corpus(corpus, mb).read_text(encoding="utf-8").replace(EOT, "\n").encode("utf-8")
    chunks, i = [], 0
    while i < len(b):
        j = min(i + TOKBENCH_CHUNK, len(b))
        while j < len(b) and (b[j] & 0xC0) == 0x80:
            j -= 1
        chunks.append(b[i:j].decode("utf-8"))
        i = j
    per = len(chunks) // 6
    return [chunks[k * per:(k + 1) * per] for k in range(6)]


def tokbench_run(spec: dict, tool: Tool, ctx: Ctx, corpus: str) -> dict:
    """tokbench's view: 10 KiB chunks (cut at character boundaries), a fresh tokenizer warmed on
    slice 0, slices 1..5 (unseen) timed once each; ids checked against tiktoken's per chunk."""
    slices = [utf8_cached(s) for s in tokbench_slices(ctx.paths, corpus, spec["mb"])]
    res = {**spec, "corpus": corpus, "state": "tokbench", "docs": len(slices[0]), "bytes": sum(len(c.encode()) for s in slices[1:] for c in s)}
    if tool.input != "docs":
        return {**res, "error": "tokbench times lists of texts"}
    try:
        encode, to_flat = tool.build(spec["vocab"], ctx)
        encode(slices[0])
        times, cpu, others, mismatch = [], [], [], None
        with np.load(ctx.paths.reference(spec["vocab"], corpus, spec["mb"], "tokbench")) as z:
            ref = (z["ids"], z["offsets"])
        outs = []
        for sl in slices[1:]:
            b0, c, t = busy_cpu_seconds(), time.process_time(), time.perf_counter()
            out = encode(sl)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            others.append(max(0.0, busy_cpu_seconds() - b0 - cpu[-1]))
            outs.append(to_flat(out))
        ids = np.concatenate([o[0] for o in outs])
        offsets = np.concatenate([[0]] + [o[1][1:] + sum(len(p[0]) for p in outs[:k]) for k, o in enumerate(outs)])
        mismatch = compare((ids, offsets.astype(np.int64)), ref, [c for s in slices[1:] for c in s])
        # The five slices as one figure: total bytes over total time (each run is one slice).
        res.update(tokens=int(len(ref[0])), times=[sum(times) / 5] * 5, slice_times=times, cpu=cpu, others=others, mismatch=mismatch,
                   load=os.getloadavg()[0], bytes=res["bytes"] // 5)
    except Exception as e:
        res["error"] = f"{type(e).__name__}: {e}"
    return res


def engine_of(vocab: str) -> str:
    """Which engine splits hf_bpe's text for this vocabulary ("builtin" = a hand-written scanner)."""
    from hf_bpe import _core

    pattern = load_ours(vocab).pattern
    return "pipeline" if pattern.startswith("{") else _core.pattern_engine(pattern)


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (all processes, from /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def wait_quiet(max_wait: float, threshold: float = 0.3) -> float:
    """Waits (up to ``max_wait`` s) until other processes use less than ``threshold`` CPUs over
    a one-second sample; returns the last sample (CPUs busy)."""
    deadline = time.monotonic() + max_wait
    while True:
        b = busy_cpu_seconds()
        time.sleep(1.0)
        busy = busy_cpu_seconds() - b
        if busy < threshold or time.monotonic() >= deadline:
            return busy
        time.sleep(2.0)


def run_worker(spec: dict) -> list[dict]:
    threads = spec["threads"]
    env = thread_env(threads, pythonpath=(ROOT, spec["peers"]), FASTOKENS_BPE_THREADS=str(threads),
                     WORDCHIPPER_CACHE_DIR=str(Paths(Path(spec["cache"])).wordchipper_cache))
    results, code, err = run_script(__file__, spec, env, spec.get("python"))
    states = ["tokbench"] if spec.get("tokbench") else spec["states"]
    done = {(r["corpus"], r["state"]) for r in results}
    if code != 0 or len(done) < len(spec["corpora"]) * len(states):
        results += [{**spec, "corpus": c, "state": st, "error": f"worker exit {code}: {err}"}
                    for c in spec["corpora"] for st in states if (c, st) not in done]
    return results


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def mbps(r: dict) -> float | None:
    if "times" not in r:
        return None
    return r["bytes"] / 1e6 / statistics.median(r["times"])


def versions(peers: str) -> dict:
    sys.path.insert(0, peers)
    out = {pkg: package_version(pkg, peers) for pkg in ("tiktoken", "tokenizers", "gigatoken", "tokie", "fastokens",
                                                        "wordchipper", "kitoken", "bpe_openai", "awkward", "numpy")}
    venv_py = Path(peers).parent / TOKENIZERS1_VENV / "bin" / "python"
    if venv_py.exists():
        out["tokenizers 1.0"] = subprocess.run([str(venv_py), "-c", "import tokenizers; print(tokenizers.__version__)"],
                                               capture_output=True, text=True).stdout.strip() or None
    try:
        out["hf_bpe"] = f"{ROOT.name}@{git_state(ROOT)}"
    except OSError:
        out["hf_bpe"] = str(ROOT)
    return out


def cell(r: dict | None, base: float | None) -> str:
    if r is None:
        return "–"
    if "error" in r:
        return "error"
    v = mbps(r)
    s = f"{v:,.1f}" if v < 100 else f"{v:,.0f}"
    if base:
        s += f" ({v / base:.2f}x)"
    if busy_others(r) > BUSY:
        s += " †"
    if r.get("mismatch"):
        s += " **≠ids**"
    return s


BUSY = 0.5  # other processes using more CPUs than this during a measurement: flagged with †


def least_disturbed(results: list[dict]) -> list[dict]:
    """With several rounds: per measurement, the round during which other processes used the
    least CPU (a failed or mismatching round is kept in preference, so it is never hidden)."""
    best: dict[tuple, dict] = {}
    for r in results:
        key = (r["vocab"], r["corpus"], r["threads"], r["tool"], r.get("state"))
        old = best.get(key)
        bad = "error" in r or bool(r.get("mismatch"))
        if old is None or bad or ("error" not in old and not old.get("mismatch") and busy_others(r) < busy_others(old)):
            best[key] = r
    return list(best.values())


def busy_others(r: dict) -> float:
    """Average number of CPUs used by other processes during the timed runs."""
    return sum(r.get("others", [0.0])) / sum(r["times"]) if r.get("times") else 0.0


def report(results: list[dict], args, info: dict, vers: dict, load_before, load_after, wall: float) -> str:
    lines = ["# Encoding throughput: hf_bpe vs peers", ""]
    lines.append(f"Machine: {info['nproc']} CPUs ({info['affinity']} usable), {info['cpu']}; Python {info['python']}, "
                 f"Linux {info['kernel']}. Load average (1/5/15 min) before: {' / '.join(f'{x:.2f}' for x in load_before)}, "
                 f"after: {' / '.join(f'{x:.2f}' for x in load_after)}. Total {wall / 60:.1f} min.")
    lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in vers.items() if v) + ".")
    view = ("tokbench's view: 10 KiB chunks in six slices, a fresh tokenizer warmed on the first, the other five "
            "(unseen) timed once each" if args.tokbench else
            "the documents dealt into halves A and B; B timed in each cache state with a tokenizer built afresh per run: "
            "**cold** (nothing before), **warm** (A encoded first: B unseen), **primed** (B encoded first: every word "
            "cached, a lookup benchmark)")
    lines.append(f"Inputs: first {args.mb:g} MB of whole documents per corpus; {view}. {args.rounds} round(s), each "
                 f"figure from the round least disturbed by other processes; up to {args.runs} timed runs "
                 f"(≥3, stopping after {args.budget:g} s); **median MB/s** (MB = 1e6 bytes of UTF-8 text) and, "
                 f"in brackets, the ratio to `{BASELINE}` with the same vocabulary, corpus and threads. "
                 "`≠ids` = ids differ from the reference (tiktoken's; tokenizers' for neox) (see below). "
                 f"† = other processes used more than {BUSY} CPU on average during the timed runs (the machine is shared): "
                 "treat that figure, above all a 2-thread one, as a lower bound.")
    lines.append("")
    by_key = {(r["vocab"], r["corpus"], r["threads"], r["tool"], r["state"]): r for r in results}
    tools = [t.name for t in TOOLS if any(r["tool"] == t.name for r in results)]
    states = ["tokbench"] if args.tokbench else args.states
    for vocab in args.vocabs:
        for n in args.threads:
            lines += [f"## {vocab}, {n} thread{'s' if n > 1 else ''}", ""]
            cols = [(c, st) for c in args.corpora for st in states]
            lines.append("| tool | " + " | ".join(f"{c} {st}" for c, st in cols) + " |")
            lines.append("|---|" + "---:|" * len(cols))
            for tool in tools:
                row = []
                for c, st in cols:
                    base = by_key.get((vocab, c, n, BASELINE, st))
                    row.append(cell(by_key.get((vocab, c, n, tool, st)), mbps(base) if base else None))
                lines.append(f"| {tool} | " + " | ".join(row) + " |")
            # The ratio that matters: hf_bpe against the faster of the fastest peers, per cell.
            row = []
            for c, st in cols:
                ours = by_key.get((vocab, c, n, BASELINE, st))
                peers = [mbps(r) for t in FASTEST_PEERS if (r := by_key.get((vocab, c, n, t, st))) and mbps(r)]
                row.append(f"**{mbps(ours) / max(peers):.2f}x**" if ours and mbps(ours) and peers else "–")
            lines.append(f"| {BASELINE} / fastest of {', '.join(FASTEST_PEERS)} | " + " | ".join(row) + " |")
            lines.append("")
    # Details: every measurement, with spread, CPU use and the id check.
    lines += ["## Details", "",
              "| vocab | corpus | state | threads | tool | runs | median s | MB/s median (min–max) | cpu/wall | other CPUs | ids |",
              "|---|---|---|---:|---|---:|---:|---|---:|---:|---|"]
    for r in results:
        head = f"| {r['vocab']} | {r['corpus']} | {r['state']} | {r['threads']} | {r['tool']} |"
        if "error" in r:
            lines.append(f"{head} | | | | | **ERROR**: {r['error']} |")
            continue
        t = r["times"]
        med = statistics.median(t)
        lo, hi = r["bytes"] / 1e6 / max(t), r["bytes"] / 1e6 / min(t)
        util = sum(r["cpu"]) / sum(t)
        ids = "equal" if not r["mismatch"] else f"**MISMATCH**: {r['mismatch']}"
        lines.append(f"{head} {len(t)} | {med:.3f} | {mbps(r):,.1f} ({lo:,.1f}–{hi:,.1f}) | {util:.2f} | {busy_others(r):.2f} | {ids} |")
    lines.append("")
    engines = {r["vocab"]: r["engine"] for r in results if "engine" in r}
    lines.append("hf_bpe's splitter per vocabulary (`builtin` = a hand-written scanner, `dfa` / `fancy-regex` = the generic "
                 "regex engines): " + ", ".join(f"{v} `{e}`" for v, e in engines.items()) + ".")
    lines.append("")
    sizes = {(r["corpus"], r["vocab"]): r for r in results if "bytes" in r and "tokens" in r}
    lines.append("Inputs: " + "; ".join(
        f"{c} {r['bytes'] / 1e6:.1f} MB in {r['docs']} documents, {r['tokens']:,} {v} tokens"
        for (c, v), r in sorted(sizes.items())) + ".")
    lines.append("")
    lines.append("Notes: threads enforced per subprocess by CPU affinity (first N usable CPUs), RAYON_NUM_THREADS / "
                 "FASTOKENS_BPE_THREADS / TOKENIZERS_PARALLELISM (and OPENBLAS_NUM_THREADS=1 for every tool), and each tool's own argument where it has one "
                 "(hf_bpe `num_threads` (all three forms), tiktoken `num_threads`, gigatoken `parallel=False` at 1 thread, wordchipper "
                 "`set_parallel`); cpu/wall is the process CPU time over wall time of the timed runs; other CPUs = CPU time of all "
                 "other processes (from /proc/stat) over the same wall time. Before each tool the script waits "
                 "(up to --quiet-wait s) for the machine to be quiet. "
                 "`tokenizers fast` is timed for `encode_batch_fast` alone (reading `.ids` from the Encoding "
                 "objects is not timed). File paths read the joined text file (separator `<|endoftext|>`); "
                 "`hf_bpe file→npy` also writes the ids (with the separator's id between documents) to a `.npy`; "
                 "gigatoken and tokie file paths return arrays in memory. fastokens loads o200k from the rank "
                 "file (`from_tiktoken`): it refuses a tokenizer.json whose ids have a gap (o200k has none at 199998–200017).")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=20, help="MB of whole documents per corpus (default 20)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs after the warm-up (default 5)")
    ap.add_argument("--budget", type=float, default=30, help="stop timing a measurement after this many seconds (min 3 runs)")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma separated (default 1,2)")
    ap.add_argument("--vocabs", default="gpt2,o200k")
    ap.add_argument("--corpora", default=",".join(CORPORA))
    ap.add_argument("--tools", default="all", help="comma-separated tool names (see TOOLS) or 'all'")
    ap.add_argument("--skip", default="", help="comma-separated tool names to leave out")
    ap.add_argument("--cache", type=Path, default=ROOT / "bench_out")
    ap.add_argument("--no-pin", action="store_true", help="don't restrict workers' CPU affinity")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat the whole sweep; each figure is taken from the round least disturbed by other processes")
    ap.add_argument("--quiet-wait", type=float, default=60,
                    help="before each tool, wait up to this many seconds for other processes to use < 0.3 CPUs (0: don't)")
    ap.add_argument("--states", default="cold,warm,primed",
                    help="cache states, comma separated (default cold,warm,primed; see the module doc)")
    ap.add_argument("--tokbench", action="store_true",
                    help="tokbench's view instead of the states: 10 KiB chunks, warm on one slice, time five unseen slices")
    ap.add_argument("--out-md", type=Path, help="also write the report here")
    ap.add_argument("--out-json", type=Path, help="also write the raw results here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.threads = [int(x) for x in args.threads.split(",")]
    args.vocabs = args.vocabs.split(",")
    args.corpora = args.corpora.split(",")
    args.states = args.states.split(",")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker))
        return
    sys.path.insert(0, str(ROOT))
    import hf_bpe

    if Path(hf_bpe.__file__).resolve().parents[1] != ROOT:
        sys.exit(f"hf_bpe is imported from {hf_bpe.__file__}, not this checkout: run with PYTHONPATH={ROOT}")
    paths = Paths(args.cache)
    wanted = [t.name for t in TOOLS] if args.tools == "all" else args.tools.split(",")
    skip = set(filter(None, args.skip.split(",")))
    tools = [t for t in TOOLS if t.name in wanted and t.name not in skip]

    t0 = time.perf_counter()
    print(f"preparing inputs in {paths.cache} ...", file=sys.stderr)
    for c in args.corpora:
        prepare_corpus(paths, c, args.mb)
        prepare_halves(paths, c, args.mb)
        for v in args.vocabs:
            prepare_reference(paths, v, c, args.mb, "tokbench" if args.tokbench else "B")
    prepare_vocab_files(paths, args.vocabs)
    pythons = {"tokenizers1": str(ensure_tokenizers1(paths.cache))} if any(t.venv for t in tools) else {}

    info, vers = machine_info(), versions(str(paths.peers))
    load_before = os.getloadavg()
    results = []
    sweep = itertools.product(range(args.rounds), args.vocabs, args.threads, tools)
    for round_, vocab, threads, tool in sweep:
        spec = {"round": round_, "vocab": vocab, "threads": threads, "tool": tool.name, "corpora": args.corpora,
                "mb": args.mb, "runs": args.runs, "budget": args.budget, "cache": str(paths.cache),
                "peers": str(paths.peers), "pin": not args.no_pin, "states": args.states, "tokbench": args.tokbench,
                "python": pythons.get(tool.venv)}
        if args.quiet_wait > 0:
            wait_quiet(args.quiet_wait)
        for r in run_worker(spec):
            results.append(r)
            if "error" in r:
                msg = f"ERROR {r['error']}"
            else:
                msg = (f"{mbps(r):9.1f} MB/s  cpu/wall {sum(r['cpu']) / sum(r['times']):.2f}"
                       f"  others {busy_others(r):.2f} CPUs")
                if r["mismatch"]:
                    msg += f"  !!! IDS DIFFER FROM THE REFERENCE: {r['mismatch']}"
            print(f"r{round_} {vocab:6s} {r['corpus']:12s} {r['state']:8s} {threads}t {tool.name:20s} {msg}", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    results = least_disturbed(results)

    md = report(results, args, info, vers, load_before, load_after, time.perf_counter() - t0)
    publish(md, args.out_md)
    if args.out_json:
        args.out_json.write_text(json.dumps({"machine": info, "versions": vers, "results": results}, indent=1))
    # The generic-engine cell must have run on the generic engine, not a scanner.
    for r in results:
        if r["vocab"] == "gpt2-n12" and r.get("engine") == "builtin":
            sys.exit("gpt2-n12 ran on a built-in scanner: its figures do not measure the generic engine")
    bad = [r for r in results if r.get("mismatch") or "error" in r]
    if bad:
        print(f"\n!!! {len(bad)} measurement(s) with differing ids or errors: see the Details table.", file=sys.stderr)


if __name__ == "__main__":
    main()
