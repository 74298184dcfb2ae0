"""OpenAI tiktoken's own test suite (0.14.0, the ``tests/`` of its source release on PyPI), run
against hf_bpe with one change: ``import tiktoken`` gives the ``hf_bpe`` module. Code written for
tiktoken works by swapping the import, with tiktoken's exception types."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

VERSION = "0.14.0"
COUNT = 33  # the tests of that release


def tiktoken_tests() -> Path:
    """The ``tests`` folder of tiktoken's source release, fetched once into the test cache."""
    cache = Path(os.environ.get("HF_BPE_TEST_CACHE", Path.home() / ".cache" / "hf_bpe-tests"))
    out = cache / f"tiktoken-{VERSION}-tests"
    if (out / "tests" / "test_encoding.py").exists():
        return out / "tests"
    dl = cache / "downloads"
    run = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                          f"tiktoken=={VERSION}", "-d", str(dl)], capture_output=True, text=True, timeout=600)
    sdist = dl / f"tiktoken-{VERSION}.tar.gz"
    if run.returncode != 0 or not sdist.exists():
        why = (run.stderr.strip().splitlines() or ["no sdist"])[-1]
        if os.environ.get("CI"):
            pytest.fail(f"could not download tiktoken {VERSION}'s source release: {why}")
        pytest.skip(f"tiktoken {VERSION}'s source release could not be downloaded ({why}): no network?")
    staging = out.with_name(out.name + f".tmp-{os.getpid()}")
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(f"tiktoken-{VERSION}/tests/")]
        for m in members:
            m.name = m.name.split("/", 1)[1]
        try:
            tar.extractall(staging, members=members, filter="data")
        except TypeError:  # a Python without extraction filters (plain files of known names only here)
            tar.extractall(staging, members=members)
    os.replace(staging, out)
    return out / "tests"


def test_tiktoken_suite_passes_on_hf_bpe(tmp_path):
    tests = tiktoken_tests()
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "tiktoken.py").write_text("import sys\nimport hf_bpe\nsys.modules[__name__] = hf_bpe\n")
    work = tmp_path / "suite"
    (work / "tests").mkdir(parents=True)
    for f in tests.glob("*.py"):
        (work / "tests" / f.name).write_bytes(f.read_bytes())
    env = dict(os.environ, PYTHONPATH=str(shim))
    run = subprocess.run([sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "-W", "error::pytest.PytestUnknownMarkWarning"], cwd=work, env=env, capture_output=True,
                         text=True, timeout=900)
    tail = "\n".join(run.stdout.strip().splitlines()[-30:])
    assert run.returncode == 0, f"tiktoken's suite failed on hf_bpe:\n{tail}\n{run.stderr[-2000:]}"
    assert f"{COUNT} passed" in tail, tail
    # The shim really was the module under test (not an installed tiktoken).
    probe = subprocess.run([sys.executable, "-c", "import tiktoken, hf_bpe; print(tiktoken is hf_bpe)"], cwd=work,
                           env=env, capture_output=True, text=True)
    assert probe.stdout.strip() == "True", probe.stderr
