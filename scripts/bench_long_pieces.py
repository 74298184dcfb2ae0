"""Long pieces: the merge alone, on text whose pieces no cache holds, hf_bpe against the peers.

    scripts/dev_build.sh
    PYTHONPATH=$PWD python scripts/bench_long_pieces.py [--runs 5] [--out-md bench_out/long.md]

What is measured
  * Inputs (made here, deterministic): ``a``, the letter a 10**6 times (one piece of 1 MB: the
    worst case of a heap merge, every pair ties); ``base64``, 1 MB of base64 of seeded random
    bytes (pieces of a few hundred bytes between the ``+`` and ``/``); ``cjk``, the Han
    characters of Tatoeba's Mandarin sentences (``/work/shared/data/parallel``) run together and
    repeated to 900 KB (a language without spaces: one piece per line for GPT-2's and o200k's
    regexes).
  * ``--document``: instead, one long document: the first 8 MB of the English books as one
    string, encoded with ``--threads`` threads (hf_bpe cuts it at safe places for its threads;
    gigatoken gets ``parallel=True``; tokenizers 1.0 ``TOKENIZERS_PARALLELISM=true``).
  * Vocabularies: GPT-2 and o200k_base (``--vocabs``), as in ``bench_encode.py``.
  * Tools, in a subprocess pinned to ``--threads`` CPUs (default 1), a fresh tokenizer per run
    (cold: building is not timed): hf_bpe with ``cache_bytes=0`` (no cache at all) and with its default
    cache, HF ``tokenizers`` 1.0 (from the virtual environment ``bench_encode.py`` creates) and
    gigatoken. tiktoken is left out: its merge is quadratic in a piece's length (hours on ``a``).
  * MB/s = UTF-8 bytes / median wall time of ``--runs`` runs (MB = 1e6) of the call alone (its
    output as the tool gives it: a numpy array, an ``Encoding``, a list; ids read after the clock). The ids of every tool
    must equal hf_bpe's (count and checksum); a difference is reported, never hidden.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import random
import statistics
import sys
import time
import unicodedata
from pathlib import Path

from bench_encode import VOCABS, Paths, load_ours, prepare_vocab_files
from benchlib import DATA, EOT, ROOT, corpus_text, emit, ensure_tokenizers1, pin, run_worker, thread_env

INPUTS = ("a", "base64", "cjk")
DOCUMENT_MB = 8
TOOLS = ("hf_bpe cache_bytes=0", "hf_bpe", "tokenizers 1.0", "gigatoken")
PEERS = ("tokenizers 1.0", "gigatoken")


def make_inputs(folder: Path) -> dict[str, Path]:
    """The three texts, written once under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / f"{name}.txt" for name in INPUTS}
    if not paths["a"].exists():
        paths["a"].write_text("a" * 10**6)
    if not paths["base64"].exists():
        rng = random.Random(31)
        paths["base64"].write_text(base64.b64encode(rng.randbytes(750_000)).decode())
    if not paths["cjk"].exists():
        han = []
        with gzip.open(DATA / "parallel" / "tatoeba-eng.jsonl.gz", "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                if row["lang"] == "cmn":
                    han.extend(c for c in row["text"] if unicodedata.name(c, "").startswith("CJK UNIFIED"))
        line = "".join(han)
        text = (line * (300_000 // max(1, len(line)) + 1))[:300_000]  # 900 KB of 3-byte characters
        paths["cjk"].write_text(text)
    return paths


def make_document(folder: Path) -> dict[str, Path]:
    """The first DOCUMENT_MB MB of the English books as one text (no separators)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"document-{DOCUMENT_MB}MB.txt"
    if not path.exists():
        text = corpus_text("english", DOCUMENT_MB * 10**6).replace(EOT, "")
        path.write_text(text)
    return {"document": path}


def build(tool: str, vocab: str, paths: Paths, threads: int = 1):
    """A fresh encoder of one text, and its output to a list of ids (not timed)."""
    if tool.startswith("hf_bpe"):
        bpe = load_ours(vocab)
        if tool.endswith("=0"):
            bpe.cache_bytes = 0
        return (lambda text: bpe.encode_batch_flat([text], num_threads=threads)[0]), lambda out: out.tolist()
    if tool == "tokenizers 1.0":
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(str(paths.tokenizer_json(vocab)))
        return (lambda text: tok.encode_batch([text], add_special_tokens=False)[0]), lambda out: out.ids
    import gigatoken

    tok = gigatoken.Tokenizer(paths.tokenizer_json(vocab))
    return (lambda text: tok.encode_batch_list([text], parallel=threads > 1)[0]), list


def worker(spec: dict) -> None:
    pin(spec["threads"])
    paths = Paths(Path(spec["cache"]))
    for name, file in spec["inputs"].items():
        text = Path(file).read_text()
        text.encode()  # (CPython caches a str's UTF-8 form: no tool pays for it)
        times, ids = [], []
        while len(times) < spec["runs"]:
            encode, to_ids = build(spec["tool"], spec["vocab"], paths, spec["threads"])
            t = time.perf_counter()
            out = encode(text)
            times.append(time.perf_counter() - t)
            ids = to_ids(out)
        res = {"tool": spec["tool"], "vocab": spec["vocab"], "input": name, "bytes": len(text.encode()), "times": times,
               "tokens": len(ids), "checksum": sum((i + 1) * (k % 1000 + 1) for k, i in enumerate(ids))}
        emit(res)


def run(spec: dict, python: str) -> list[dict]:
    out, code, err = run_worker(__file__, spec, thread_env(spec["threads"]), python)
    if code != 0:
        out.append({"tool": spec["tool"], "vocab": spec["vocab"], "error": err})
        print(f"  {spec['tool']} {spec['vocab']}: {err}", file=sys.stderr)
    return out


def report(results: list[dict], vocabs: list[str], runs: int, inputs: list[str], threads: int) -> str:
    by = {(r["tool"], r["vocab"], r.get("input")): r for r in results}
    speed = {k: r["bytes"] / 1e6 / statistics.median(r["times"]) for k, r in by.items() if "times" in r}
    # Long pieces are never cached, so their ratio is the miss path's; a document's is the default's.
    ours_tool = "hf_bpe" if inputs == ["document"] else "hf_bpe cache_bytes=0"
    lines = [f"{', '.join(inputs)}; {threads} thread(s), a fresh tokenizer per run, MB/s (median of {runs}); ratio = "
             f"{ours_tool} / the faster peer.", "",
             "| vocab | input | " + " | ".join(TOOLS) + " | ratio | ids |", "|---|---|" + "---:|" * (len(TOOLS) + 1) + "---|"]
    for vocab in vocabs:
        for name in inputs:
            ref = by.get(("hf_bpe cache_bytes=0", vocab, name))
            cells, same = [], True
            for tool in TOOLS:
                r, s = by.get((tool, vocab, name)), speed.get((tool, vocab, name))
                cells.append("error" if s is None else f"{s:.1f}")
                if r and ref and "times" in r and (r["tokens"], r["checksum"]) != (ref["tokens"], ref["checksum"]):
                    same = False
                    cells[-1] += " (ids differ)"
            peer = max((speed.get((p, vocab, name), 0.0) for p in PEERS), default=0.0)
            ours = speed.get((ours_tool, vocab, name))
            ratio = f"{ours / peer:.2f}x" if ours and peer else "-"
            lines.append(f"| {vocab} | {name} | " + " | ".join(cells) + f" | {ratio} | {'equal' if same else 'DIFFER'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocabs", default="gpt2,o200k")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cache", default=str(ROOT / "bench_out"), help="folder for inputs and the tokenizers 1.0 venv")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--document", action="store_true", help="one long document instead of the long pieces")
    ap.add_argument("--out-md", default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(json.loads(args.worker))
    paths = Paths(Path(args.cache))
    vocabs = args.vocabs.split(",")
    unknown = [v for v in vocabs if v not in VOCABS]
    if unknown:
        ap.error(f"unknown vocabularies {unknown}; known: {sorted(VOCABS)}")
    made = make_document(paths.cache / "long") if args.document else make_inputs(paths.cache / "long")
    inputs = {k: str(v) for k, v in made.items()}
    prepare_vocab_files(paths, vocabs)
    tk1 = str(ensure_tokenizers1(paths.cache))
    results = []
    for vocab in vocabs:
        for tool in TOOLS:
            print(f"{vocab}: {tool} ...", file=sys.stderr, flush=True)
            spec = {"tool": tool, "vocab": vocab, "runs": args.runs, "cache": str(paths.cache), "inputs": inputs,
                    "threads": args.threads}
            results += run(spec, tk1 if tool == "tokenizers 1.0" else sys.executable)
    md = report(results, vocabs, args.runs, list(inputs), args.threads)
    print(md)
    if args.out_md:
        Path(args.out_md).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out_md).write_text(md)


if __name__ == "__main__":
    main()
