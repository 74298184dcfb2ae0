#!/usr/bin/env python3
"""Training benchmark: hf_bpe against the real peers, side by side, in one run.

    scripts/dev_build.sh
    PYTHONPATH=$PWD python scripts/bench_train.py --sizes 20M,full --runs 3 --out-md bench_out/train.md

What is compared
  Every tool trains a byte-level BPE of ``--vocab`` tokens on the same text: a prefix of the corpus
  cut at a document boundary (``20M`` = the whole documents that fit in 20,000,000 bytes) or the
  whole corpus (``full``), stored once, uncompressed, in the cache dir (``bench_out/inputs``).
  Each tool gets that text in the form that suits it best:
    * tools that read files themselves (hf_bpe ``train_files``, gigatoken ``TextFileSource``) get
      the path;
    * iterator APIs (tokenizers, rustbpe, bpeasy, hf_bpe ``train``) get a Python generator that
      reads the same file in 1 MiB blocks and yields the documents between ``<|endoftext|>``
      separators. That reading happens inside the timed region, as it would in real use.
  The pre-tokenizer is the GPT-2 regex everywhere (tokenizers' ByteLevel and gigatoken's built-in
  scanner are GPT-2's and take no pattern; rustbpe and bpeasy are given it). ``<|endoftext|>`` is
  a separator/special token for hf_bpe and gigatoken; the generator splits on it for the others,
  so no tool ever sees it as text. rustbpe and bpeasy have no special tokens, so they are asked
  for ``vocab - 1`` tokens: every tool then learns the same number of merges (vocab - 257).

How it is measured
  Each (tool, size, repetition) runs in a fresh subprocess of this script. The child imports the
  tool, records its peak RSS, VmHWM (the baseline: an idle interpreter plus the imports), then times the
  training call alone with ``time.perf_counter``: reading + pre-tokenizing + counting + merging +
  building the returned object. Peak RSS is VmHWM (or ``ru_maxrss`` of waited children) at the end of the child (self and any
  children of it). Repetitions are interleaved across tools; the table shows medians. Every tool
  uses all cores (its own default).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchlib import EOT, ROOT, SEP, corpus_path, git_state, machine_info, package_version, publish, status_kib

DEFAULT_CORPUS = corpus_path("english")
DOC_SEP = SEP.encode()  # how the corpus joins its documents
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
ALL_TOOLS = ("ours", "ours-iter", "tokenizers", "tokenizers-files", "gigatoken", "rustbpe", "bpeasy")
DEFAULT_TOOLS = "ours,ours-iter,tokenizers,gigatoken,rustbpe,bpeasy"
REFERENCE = "ours"  # the ratio column is (tool time) / (this tool's time)
PACKAGES = ("hf_bpe", "tokenizers", "gigatoken", "rustbpe", "bpeasy")


# --------------------------------------------------------------------------------------------
# The tools. Each runner takes (path, vocab) and returns the learned tokens in merge order, as
# byte strings, plus the merge pairs when the tool exposes them. Everything a runner does is
# timed, except the `finish` callable it returns (conversion of the result for the sanity check).
# --------------------------------------------------------------------------------------------

@dataclass
class Tool:
    name: str
    package: str
    input_form: str
    notes: str


TOOLS = {
    "ours": Tool("ours", "hf_bpe", "file (Rust reader)",
                 "`train_files`; splits on <|endoftext|>; GPT-2 regex; ties -> greatest bytes (lexicographic)"),
    "ours-iter": Tool("ours-iter", "hf_bpe", "Python doc generator",
                      "`train` on the generator's documents; GPT-2 regex; ties -> greatest bytes"),
    "ours-hf": Tool("ours-hf", "hf_bpe", "file (Rust reader)",
                    "`train_files(tie_break='hf')`, for --check"),
    "tokenizers": Tool("tokenizers", "tokenizers", "Python doc generator",
                       "`train_from_iterator`; ByteLevel pre-tokenizer (GPT-2 regex, not configurable); "
                       "<|endoftext|> added as special token"),
    "tokenizers-files": Tool("tokenizers-files", "tokenizers", "file (Rust reader, per line)",
                             "`train(files)`: reads line by line and cannot split on <|endoftext|>, "
                             "which is learned as text"),
    "gigatoken": Tool("gigatoken", "gigatoken", "file (Rust reader)",
                      "`TextFileSource(separator=<|endoftext|>)`; built-in GPT-2 scanner (no custom regex); "
                      "HF tie-breaking"),
    "rustbpe": Tool("rustbpe", "rustbpe", "Python doc generator",
                    "`train_from_iterator(pattern=GPT-2)`; no special tokens (asked for vocab-1); ties -> smallest raw byte ids, "
                    "so its order leaves HF's at the first tie"),
    "bpeasy": Tool("bpeasy", "bpeasy", "Python doc generator",
                   "`train_bpe(GPT-2 regex, max_token_length=1e6)`; no special tokens (asked for vocab-1); "
                   "returns a vocab only, no merges; ties -> smallest raw byte ids"),
}


def iter_documents(path: str, block: int = 1 << 20):
    """Yields the documents of a text file, split on <|endoftext|>, reading ``block`` chars at a time."""
    with open(path, encoding="utf-8", newline="") as f:
        pending = ""
        while True:
            chunk = f.read(block)
            if not chunk:
                break
            pieces = (pending + chunk).split(EOT)
            pending = pieces.pop()
            yield from pieces
        yield pending


def _bytes_to_gpt2_chars() -> dict[str, int]:
    """GPT-2's printable stand-ins for bytes (as in HF's ByteLevel), inverted: char -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


def _from_ranks(ranked):
    """Tokens of rank >= 256, in rank order, from (bytes, rank) pairs."""
    return [tok for tok, rank in sorted(ranked, key=lambda kv: kv[1]) if rank >= 256]


def setup_tool(name: str):
    """Imports a tool and returns its runner: ``run(path, vocab) -> finish() -> (tokens, merges, vocab_size)``."""
    if name in ("ours", "ours-iter", "ours-hf"):
        import hf_bpe

        def run(path, vocab):
            if name == "ours-iter":
                bpe = hf_bpe.train(iter_documents(path), vocab_size=vocab, special_tokens=[EOT],
                                   pattern="gpt2", progress=False)
            else:
                tie = "hf" if name == "ours-hf" else "lexicographic"
                bpe = hf_bpe.train_files([path], vocab_size=vocab, special_tokens=[EOT], pattern="gpt2",
                                         tie_break=tie, progress=False)

            def finish():
                merges = bpe.merges
                return [a + b for a, b in merges], merges, bpe.vocab_size
            return finish
        return run

    if name in ("tokenizers", "tokenizers-files"):
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        def run(path, vocab):
            tok = Tokenizer(models.BPE())
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[EOT], show_progress=False,
                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
            if name == "tokenizers":
                tok.train_from_iterator(iter_documents(path), trainer=trainer)
            else:
                tok.train([path], trainer=trainer)

            def finish():
                to_byte = _bytes_to_gpt2_chars()
                raw = json.loads(tok.to_str())["model"]["merges"]
                pairs = [m if isinstance(m, list) else m.split(" ", 1) for m in raw]
                merges = [tuple(bytes(to_byte[c] for c in s) for s in p) for p in pairs]
                return [a + b for a, b in merges], merges, tok.get_vocab_size()
            return finish
        return run

    if name == "gigatoken":
        import gigatoken

        def run(path, vocab):
            source = gigatoken.TextFileSource([path], separator=EOT)
            vocab_map, merges = gigatoken.train_bpe(source, vocab, [EOT], tie_breaking="huggingface")

            def finish():
                return [a + b for a, b in merges], [tuple(m) for m in merges], len(vocab_map)
            return finish
        return run

    if name == "rustbpe":
        import rustbpe

        def run(path, vocab):
            tok = rustbpe.Tokenizer()
            tok.train_from_iterator(iter_documents(path), vocab - 1, pattern=GPT2_PATTERN)

            def finish():
                return _from_ranks(tok.get_mergeable_ranks()), None, tok.vocab_size
            return finish
        return run

    if name == "bpeasy":
        import bpeasy

        def run(path, vocab):
            ranks = bpeasy.train_bpe(iter_documents(path), GPT2_PATTERN, 1_000_000, vocab - 1)

            def finish():
                return _from_ranks(ranks.items()), None, len(ranks)
            return finish
        return run

    raise ValueError(f"unknown tool {name!r}")


def _max_rss_mib() -> float:
    """Peak RSS so far of this process (and of any children it waited for), in MiB. This
    process's own peak is VmHWM: after ``exec``, ``ru_maxrss`` still holds the parent's RSS at
    the fork."""
    try:
        own = status_kib("VmHWM")
    except (OSError, KeyError):
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024  # Linux reports KiB


def _cpu_seconds() -> float:
    """User + system CPU time of this process, all threads."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def child_main(args) -> None:
    """One measurement, in a fresh process: writes a JSON result to ``args.result``."""
    run = setup_tool(args.child)
    baseline = _max_rss_mib()
    c0, t0 = _cpu_seconds(), time.perf_counter()
    finish = run(args.input, args.vocab)
    wall = time.perf_counter() - t0
    cpu = _cpu_seconds() - c0
    peak = _max_rss_mib()
    tokens, merges, vocab_size = finish()
    if args.dump:
        dump = {"tokens": [t.hex() for t in tokens],
                "merges": None if merges is None else [[a.hex(), b.hex()] for a, b in merges]}
        Path(args.dump).write_text(json.dumps(dump))
    Path(args.result).write_text(json.dumps({
        "wall_s": wall, "cpu_s": cpu, "peak_mib": peak, "baseline_mib": baseline,
        "merges": len(tokens), "vocab_size": vocab_size,
    }))


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------

def parse_size(text: str) -> int | None:
    """'20M' -> 20_000_000 bytes (also K, G; decimal units); 'full' -> None."""
    text = text.strip()
    if text.lower() == "full":
        return None
    units = {"K": 10**3, "M": 10**6, "G": 10**9}
    if text[-1:].upper() in units:
        return int(float(text[:-1]) * units[text[-1].upper()])
    return int(text)


def prepare_input(corpus: Path, label: str, limit: int | None, cache: Path) -> Path:
    """The uncompressed corpus, or its longest prefix of whole documents within ``limit`` bytes."""
    stem = corpus.name.removesuffix(".gz").removesuffix(".txt")
    out = cache / "inputs" / f"{stem}-{label}.txt"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    opener = gzip.open if corpus.suffix == ".gz" else open
    with opener(corpus, "rb") as src, open(tmp, "wb") as dst:
        if limit is None:
            shutil.copyfileobj(src, dst, 1 << 22)
        else:
            head = src.read(limit + len(DOC_SEP))
            if len(head) > limit:  # the corpus is bigger than the slice: cut after the last whole document
                cut = head.rfind(DOC_SEP, 0, limit + len(DOC_SEP))
                if cut <= 0:
                    raise SystemExit(f"no document boundary in the first {limit} bytes of {corpus}")
                head = head[:cut]
            dst.write(head)
    tmp.rename(out)
    return out


def describe_input(path: Path) -> str:
    size = path.stat().st_size
    with open(path, "rb") as f:
        docs = sum(block.count(EOT.encode()) for block in iter(lambda: f.read(1 << 22), b"")) + 1
    return f"`{path.name}`, {size:,} bytes, {docs} documents"


# --------------------------------------------------------------------------------------------
# Running the children
# --------------------------------------------------------------------------------------------

def run_child(tool: str, path: Path, vocab: int, timeout: float, cache: Path, tag: str,
              dump: Path | None) -> dict:
    """Runs one measurement; returns its result or {'error': ...}."""
    logs = cache / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    result = logs / f"{tag}.json"
    result.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", tool, "--input", str(path),
           "--vocab", str(vocab), "--result", str(result)]
    if dump is not None:
        cmd += ["--dump", str(dump)]
    env = dict(os.environ, TOKENIZERS_PARALLELISM="true")
    with open(logs / f"{tag}.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"error": f"timeout > {timeout:g} s"}
    if code != 0 or not result.exists():
        last = ((logs / f"{tag}.log").read_text(errors="replace").strip().splitlines() or [""])[-1]
        why = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        return {"error": f"{why}: {last.strip()[-200:]}"}
    return json.loads(result.read_text())


def median(values):
    return statistics.median(values) if values else None


# --------------------------------------------------------------------------------------------
# Sanity: what each tool learned, compared with HF tokenizers
# --------------------------------------------------------------------------------------------

def load_dump(path: Path) -> dict | None:
    if not path.exists():
        return None
    d = json.loads(path.read_text())
    d["tokens"] = [bytes.fromhex(t) for t in d["tokens"]]
    if d["merges"] is not None:
        d["merges"] = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in d["merges"]]
    return d


def common_prefix(a: list, b: list) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def compare_tokens(tokens: list[bytes], reference: list[bytes]) -> str:
    same = common_prefix(tokens, reference)
    shared = len(set(tokens) & set(reference)) / max(1, len(set(reference)))
    return f"first {same} tokens identical, {shared:.1%} of its vocabulary shared"


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def machine_lines() -> list[str]:
    m = machine_info()
    return [f"- machine: {m['cpu']}, nproc {m['affinity']} (os.cpu_count {m['nproc']}), RAM {m['mem']}",
            f"- {m['platform']}, Python {m['python']}"]


def versions() -> str:
    parts = []
    for pkg in PACKAGES:
        v = package_version(pkg) or "not installed"
        if pkg == "hf_bpe":
            try:
                import hf_bpe
                where = Path(hf_bpe.__file__).parent.parent
                v = f"{hf_bpe.__version__} ({where}, git {git_state(where)})"
            except Exception as e:  # noqa: BLE001 - reported, not fatal
                v = f"import failed: {e}"
        parts.append(f"{pkg} {v}")
    return "- versions: " + ", ".join(parts)


def fmt(x, spec):
    return "—" if x is None else format(x, spec)


def build_table(results, sizes, tools, inputs, sanity) -> list[str]:
    lines = ["| tool | input form | size | median wall s | ratio vs hf_bpe (wall) | median CPU s | median peak RSS MiB | "
             "above baseline MiB | merges | notes |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for label in sizes:
        ref = median([r["wall_s"] for r in results.get((REFERENCE, label), []) if "error" not in r])
        for tool in tools:
            runs = results.get((tool, label), [])
            ok = [r for r in runs if "error" not in r]
            wall = median([r["wall_s"] for r in ok])
            cpu = median([r["cpu_s"] for r in ok])
            peak = median([r["peak_mib"] for r in ok])
            above = median([r["peak_mib"] - r["baseline_mib"] for r in ok])
            ratio = f"{wall / ref:.2f}×" if wall is not None and ref else "—"
            notes = []
            if ok:
                notes.append(f"{len(ok)} runs {min(r['wall_s'] for r in ok):.2f}–{max(r['wall_s'] for r in ok):.2f} s; "
                             f"vocab {ok[0]['vocab_size']}")
            errors = sorted({r["error"] for r in runs if "error" in r})
            if errors:
                notes.append(f"**{len(runs) - len(ok)}/{len(runs)} failed**: " + "; ".join(errors))
            if (tool, label) in sanity:
                notes.append(sanity[(tool, label)])
            merges = ok[0]["merges"] if ok else None
            lines.append(f"| {tool} | {TOOLS[tool].input_form} | {label} | {fmt(wall, '.2f')} | {ratio} | {fmt(cpu, '.1f')} | "
                         f"{fmt(peak, '.0f')} | {fmt(above, '.0f')} | {fmt(merges, 'd')} | {'; '.join(notes)} |")
    lines += ["", "Inputs: " + "; ".join(f"{label} = {desc}" for label, desc in inputs.items()) + ".", "", "Tools:"]
    lines += [f"- **{t}** ({TOOLS[t].package}): {TOOLS[t].notes}" for t in tools]
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="20M", help="comma-separated slice sizes (20M, 500K, 1G) or 'full' [20M]")
    p.add_argument("--tools", default=DEFAULT_TOOLS, help=f"comma-separated, from {', '.join(ALL_TOOLS)} [{DEFAULT_TOOLS}]")
    p.add_argument("--vocab", type=int, default=32000, help="vocabulary size, bytes and <|endoftext|> included [32000]")
    p.add_argument("--runs", type=int, default=3, help="repetitions per (tool, size); medians are reported [3]")
    p.add_argument("--timeout", type=float, default=600, help="seconds per run before it is killed [600]")
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="text or .gz corpus, documents joined by "
                   "'\\n<|endoftext|>\\n'")
    p.add_argument("--cache", type=Path, default=ROOT / "bench_out", help="inputs, logs and dumps [bench_out/]")
    p.add_argument("--check", action="store_true", help="also check that hf_bpe with tie_break='hf' learns exactly "
                   "tokenizers' merges, on the smallest size")
    p.add_argument("--out-md", type=Path, help="also write the report to this markdown file")
    # internal: one measurement in a child process
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--input", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--dump", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child_main(args)
        return

    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    for t in tools:
        if t not in ALL_TOOLS:
            p.error(f"unknown tool {t!r}; choose from {', '.join(ALL_TOOLS)}")
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    paths, inputs = {}, {}
    for label in sizes:
        print(f"preparing {label} slice of {args.corpus} ...", file=sys.stderr)
        paths[label] = prepare_input(args.corpus, label, parse_size(label), args.cache)
        inputs[label] = describe_input(paths[label])
    dumps = args.cache / "dumps"
    dumps.mkdir(parents=True, exist_ok=True)

    load_before = os.getloadavg()
    # Repetitions are interleaved (all tools once, then all again) so slow drifts hit everyone.
    results: dict[tuple[str, str], list[dict]] = {}
    for label in sizes:
        for rep in range(args.runs):
            for tool in tools:
                dump = dumps / f"{tool}-{label}.json" if rep == 0 else None
                if dump is not None:
                    dump.unlink(missing_ok=True)
                r = run_child(tool, paths[label], args.vocab, args.timeout, args.cache, f"{tool}-{label}-{rep}", dump)
                results.setdefault((tool, label), []).append(r)
                shown = r.get("error") or f"{r['wall_s']:.2f} s, peak {r['peak_mib']:.0f} MiB, {r['merges']} merges"
                print(f"[{label} run {rep + 1}/{args.runs}] {tool:<16} {shown}", file=sys.stderr)

    # Sanity: each tool's learned tokens against HF tokenizers' (same data, same number of merges).
    load_after = os.getloadavg()
    sanity: dict[tuple[str, str], str] = {}
    for label in sizes:
        ref = load_dump(dumps / f"tokenizers-{label}.json")
        if ref is None:
            continue
        for tool in tools:
            d = load_dump(dumps / f"{tool}-{label}.json")
            if tool != "tokenizers" and d is not None:
                sanity[(tool, label)] = "vs tokenizers: " + compare_tokens(d["tokens"], ref["tokens"])

    check_lines = []
    if args.check:
        label = min(sizes, key=lambda s: paths[s].stat().st_size)
        ref_dump = dumps / f"tokenizers-{label}.json"
        if not ref_dump.exists():
            run_child("tokenizers", paths[label], args.vocab, args.timeout, args.cache, f"check-tokenizers-{label}", ref_dump)
        ours_dump = dumps / f"ours-hf-{label}.json"
        ours_dump.unlink(missing_ok=True)
        r = run_child("ours-hf", paths[label], args.vocab, args.timeout, args.cache, f"check-ours-hf-{label}", ours_dump)
        ref, ours = load_dump(ref_dump), load_dump(ours_dump)
        if "error" in r or ref is None or ours is None:
            verdict = f"could not run: {r.get('error', 'tokenizers failed')}"
        elif ours["merges"] == ref["merges"]:
            verdict = f"PASS: identical {len(ref['merges'])} merges"
        else:
            k = common_prefix(ours["merges"], ref["merges"])
            at = lambda m: m[k] if k < len(m) else "(end)"  # noqa: E731
            verdict = (f"FAIL: {len(ours['merges'])} vs {len(ref['merges'])} merges, first {k} identical; "
                       f"#{k}: hf_bpe {at(ours['merges'])!r} vs tokenizers {at(ref['merges'])!r}")
        if "error" not in r:
            verdict += f" (ours-hf took {r['wall_s']:.2f} s)"
        check_lines = ["", f"--check, {label}: hf_bpe `train_files(tie_break='hf')` vs tokenizers merges: {verdict}"]

    report = [f"## BPE training benchmark: vocab {args.vocab}, corpus `{args.corpus.name}`", "",
              *machine_lines(), versions(),
              f"- load average (1/5/15 min) before {'/'.join(f'{x:.1f}' for x in load_before)}, after "
              f"{'/'.join(f'{x:.1f}' for x in load_after)}: other work on the machine inflates wall time, "
              "CPU time (user + system, all threads) much less",
              f"- {args.runs} run(s) per cell, each in a fresh process; timeout {args.timeout:g} s per run",
              "- wall = the training call alone (reading + pre-tokenizing + counting + merging), "
              "for generator inputs including Python reading/splitting the file; peak RSS = VmHWM at the end "
              "of the run; 'above baseline' subtracts the child's RSS after importing the tool",
              "- all tools: GPT-2 pre-tokenization regex; tokenizers and gigatoken take no custom pattern, "
              "their built-in one is GPT-2's", "",
              *build_table(results, sizes, tools, inputs, sanity), *check_lines]
    publish("\n".join(report) + "\n", args.out_md)


if __name__ == "__main__":
    main()
