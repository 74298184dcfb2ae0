"""What the benchmarks in scripts/ share: where the data is, corpus slices, CPU pinning and the
thread settings of worker processes, worker output, peers (tiktoken on the local rank files, the
tokenizers 1.0 environment, versions), timing, memory and the machine header.

A script run as ``python scripts/x.py`` has scripts/ on ``sys.path``: ``from benchlib import ...``.
Only the standard library is imported here, so a worker can pin its CPUs before importing a tool.
"""
from __future__ import annotations

import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]  # the checkout
DATA = ROOT.parent / "shared" / "data"  # corpora, rank files, tokenizer.json files (beside the checkout)
EOT = "<|endoftext|>"
SEP = f"\n{EOT}\n"  # how the corpora join their documents
CORPORA = ("english", "code", "multilingual")


# Corpora ---------------------------------------------------------------------------------------

def corpus_path(name: str, data: Path = DATA) -> Path:
    """The gzipped corpus ``name`` (english, code, multilingual)."""
    return Path(data) / "corpus" / f"{name}.txt.gz"


def corpus_text(name: str, nbytes: int = -1, data: Path = DATA) -> str:
    """The first ``nbytes`` bytes of a corpus (-1: all) as text, separators included (a
    character cut at the end is dropped)."""
    with gzip.open(corpus_path(name, data), "rb") as f:
        return f.read(nbytes).decode("utf-8", errors="ignore")


def corpus_docs(name: str, mb: float) -> list[str]:
    """Whole documents from the start of a corpus while fewer than ``mb`` MB (1e6 bytes of UTF-8)
    are taken: the last one may end past it. Empty ones and any holding ``EOT`` are left out."""
    budget = int(mb * 1e6)
    docs, size, buf = [], 0, ""
    with gzip.open(corpus_path(name), "rt", encoding="utf-8") as f:
        while size < budget:
            chunk = f.read(1 << 22)
            buf += chunk
            *whole, buf = buf.split(SEP)
            if not chunk:  # end of the corpus: the rest is the last document
                whole.append(buf)
            for d in whole:
                if d and EOT not in d and size < budget:
                    docs.append(d)
                    size += len(d.encode("utf-8"))
            if not chunk:
                break
    return docs


def chunks(text: str, size: int = 10_000) -> list[str]:
    """``text`` cut into pieces of ``size`` characters (the "10 kB texts" of the A/B tools)."""
    return [text[i:i + size] for i in range(0, len(text), size)]


# Threads and workers ---------------------------------------------------------------------------

def pin(threads: int) -> None:
    """Restricts this process to its first ``threads`` usable CPUs (before importing a tool, so a
    tool that sizes its pool from the visible cores sees only those)."""
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])


def thread_env(threads: int, *, tokenizers_parallelism: bool | None = None,
               pythonpath: Sequence[str | Path] = (ROOT,), **extra: str) -> dict[str, str]:
    """``os.environ`` for a worker of ``threads`` threads: ``RAYON_NUM_THREADS``,
    ``OPENBLAS_NUM_THREADS=1`` (numpy's OpenBLAS threads otherwise take CPU from the tools),
    ``TOKENIZERS_PARALLELISM`` (default: ``threads > 1``); ``pythonpath`` goes before
    ``PYTHONPATH``; ``extra`` is added as is."""
    parallel = threads > 1 if tokenizers_parallelism is None else tokenizers_parallelism
    path = os.pathsep.join([*map(str, pythonpath), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, RAYON_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1",
                TOKENIZERS_PARALLELISM="true" if parallel else "false", PYTHONPATH=path, **extra)


def emit(result: dict) -> None:
    """Prints one result of a worker as a ``RESULT {json}`` line (read by ``run_worker``)."""
    print("RESULT " + json.dumps(result), flush=True)


def run_worker(script: str, spec: dict, env: dict[str, str],
               python: str | None = None) -> tuple[list[dict], int, str]:
    """Runs ``python script --worker JSON(spec)``: the results it emitted, its exit code and
    the last line of its error output (``"?"`` if none)."""
    proc = subprocess.run([python or sys.executable, script, "--worker", json.dumps(spec)], env=env,
                          capture_output=True, text=True)
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    return results, proc.returncode, (proc.stderr.strip().splitlines() or ["?"])[-1]


def child_json(cmd: Sequence[str], what: str = "child", **kwargs: Any) -> Any:
    """Runs ``cmd`` (``kwargs`` go to ``subprocess.run``) and reads its last line of output as
    JSON; exits with its error output if it fails."""
    proc = subprocess.run(list(cmd), capture_output=True, text=True, **kwargs)
    if proc.returncode:
        sys.exit(f"{what} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# Timing and memory -----------------------------------------------------------------------------

def times(fn: Callable[[], object], runs: int, *, clock: Callable[[], float] = time.perf_counter,
          before: Callable[[], object] | None = None) -> list[float]:
    """The time of each of ``runs`` calls of ``fn`` on ``clock``; ``before()`` (not timed) runs
    ahead of each call (fresh caches, a warm-up)."""
    out = []
    for _ in range(runs):
        if before is not None:
            before()
        t = clock()
        fn()
        out.append(clock() - t)
    return out


def median_time(fn: Callable[[], object], runs: int, *, clock: Callable[[], float] = time.perf_counter,
                before: Callable[[], object] | None = None) -> float:
    """The median of ``times(fn, runs, clock=clock, before=before)``."""
    return statistics.median(times(fn, runs, clock=clock, before=before))


def wall_and_cpu(fn: Callable[[], object], runs: int) -> tuple[list[float], list[float]]:
    """Wall time and process CPU time (all threads) of each of ``runs`` calls of ``fn``."""
    walls, cpus = [], []
    for _ in range(runs):
        c, t = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return walls, cpus


def status_kib(field: str) -> int:
    """A field of /proc/self/status in KiB: ``VmRSS`` (resident now), ``VmHWM`` (its peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


# Peers and the header --------------------------------------------------------------------------

def tiktoken_from_ranks(rank_file: str | Path, pattern: str, specials: dict[str, int] | None = None,
                        name: str = "bench") -> Any:
    """A ``tiktoken.Encoding`` of a local rank file with the regex ``pattern``."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    return tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(str(rank_file)),
                             special_tokens=specials or {})


TOKENIZERS1_VENV = "venv-tokenizers1"  # below a benchmark's cache folder


def ensure_tokenizers1(cache: Path) -> Path:
    """The Python of a virtual environment with HF tokenizers 1.0 (release candidates) in
    ``cache``, made once (``transformers`` pins the 0.x line, so 1.0 cannot share ours)."""
    venv = Path(cache) / TOKENIZERS1_VENV
    py = venv / "bin" / "python"
    if not py.exists():
        print(f"creating {venv} (tokenizers 1.0) ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--pre", "tokenizers>=1.0.0rc0", "numpy"], check=True)
    return py


def package_version(pkg: str, folder: str | Path | None = None) -> str | None:
    """The installed version of ``pkg``, else of a ``pkg-*.dist-info`` in ``folder``, else None."""
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        dist = next(Path(folder).glob(f"{pkg}-*.dist-info"), None) if folder else None
        return dist.name.split("-")[1] if dist else None


def git_state(where: str | Path) -> str:
    """The short commit of the checkout at ``where``, with ``+dirty`` if tracked files changed."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")


def machine_info() -> dict[str, Any]:
    """The machine for a report's header: ``cpu`` (model), ``nproc``, ``affinity`` (usable CPUs),
    ``mem`` (RAM), ``python``, ``kernel``, ``platform``."""
    def field(path: str, key: str) -> str | None:  # "key : value" in a /proc file
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            return None
        return next((x.split(":", 1)[1].strip() for x in lines if x.startswith(key)), None)

    cpu, mem_kb = field("/proc/cpuinfo", "model name"), field("/proc/meminfo", "MemTotal")
    mem = f"{int(mem_kb.split()[0]) / 1024**2:.1f} GiB" if mem_kb else "?"
    return {"nproc": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
            "cpu": cpu or platform.processor() or "?", "mem": mem, "python": platform.python_version(),
            "kernel": platform.release(), "platform": platform.platform()}


def publish(report: str, out_md: Path | None) -> None:
    """Prints a benchmark's report and, with ``--out-md``, writes it there too."""
    print(report)
    if out_md:
        out_md.parent.mkdir(parents=True, exist_ok=True)
        out_md.write_text(report, encoding="utf-8")

