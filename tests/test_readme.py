"""Every code block of the README, run as written in an empty folder, with nothing but the
package (no ``../shared``): the Python blocks in order in one fresh interpreter (``push_to_hub``
going to the local stand-in hub), then the shell blocks in order (but the set-up commands, which
install), each line as a newcomer pastes it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def blocks(lang: str = "python") -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", (REPO / "README.md").read_text(), flags=re.S | re.M)


def test_readme_has_blocks():
    assert len(blocks()) >= 5 and len(blocks("sh")) >= 6
    quick = blocks()[0]
    assert len(quick.strip().splitlines()) <= 5, "the quick start is five lines"


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory):
    pytest.importorskip("jinja2")
    work = tmp_path_factory.mktemp("readme")
    hub = subprocess.Popen([sys.executable, str(TESTS / "fakehub.py")], stdout=subprocess.PIPE, text=True)
    try:
        port = int(hub.stdout.readline())
        bin_dir = Path(sys.executable).parent
        env = dict(os.environ, HF_ENDPOINT=f"http://127.0.0.1:{port}", HF_TOKEN="hf_fake_token_for_local_tests",
                   HF_HOME=str(work / "home"), HF_HUB_DISABLE_XET="1", HF_HUB_OFFLINE="0",
                   HF_HUB_DISABLE_TELEMETRY="1", PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
                   PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        code = "\n".join(blocks()) + "\nimport json\nprint(json.dumps([type(tok).__name__, ds.column_names]))\n"
        res = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True,
                             timeout=900)
        yield work, env, res
    finally:
        hub.kill()
        hub.wait()


def test_readme_python_blocks_run_as_written(readme_run):
    work, env, res = readme_run
    assert res.returncode == 0, f"stdout:\n{res.stdout[-3000:]}\nstderr:\n{res.stderr[-5000:]}"
    assert json.loads(res.stdout.strip().splitlines()[-1]) == ["BPETokenizer", ["text", "input_ids", "attention_mask"]]
    for folder in ("quickstart", "out", "out_superword", "out_parity", "out_pruned"):
        assert {"vocab.json", "merges.txt", "tokenizer.json"} <= {p.name for p in (work / folder).iterdir()}, folder
    assert (work / "ids.npy").stat().st_size > 0 and (work / "mine.tiktoken").stat().st_size > 0
    assert "unknown: unknown token id 200001" in res.stdout
    pulled = subprocess.run([sys.executable, "-c", "from transformers import AutoTokenizer; import hf_bpe; "
                             "t = AutoTokenizer.from_pretrained('user/my-tokenizer'); print(type(t).__name__)"],
                            cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert pulled.stdout.strip().splitlines()[-1] == "BPETokenizer", pulled.stderr[-3000:]


def _serves(line: str, work: Path, env: dict) -> None:
    """A line that serves until Ctrl-C (``hf-bpe viz``): it must answer on its port, then it is stopped."""
    port = int(re.search(r"--port (\d+)", line).group(1))
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
            pytest.skip(f"port {port} of the README's viz line is taken on this machine")
    proc = subprocess.Popen(line, shell=True, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        pytest.fail(f"{line!r} did not serve on port {port}: {proc.stderr.read() if proc.poll() is not None else ''}")
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_readme_shell_blocks_run_as_written(readme_run):
    work, env, res = readme_run
    assert res.returncode == 0, "the Python blocks come first"
    assert shutil.which("hf-bpe", path=env["PATH"]), "the console script is installed"
    ran = 0
    for block in blocks("sh"):
        if "pip install" in block:  # the set-up commands (the install this suite runs in)
            continue
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if shlex.split(line, comments=True)[:2] == ["hf-bpe", "viz"]:
                _serves(line, work, env)
                ran += 1
                continue
            run = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", line], cwd=work, env=env, capture_output=True,
                                 text=True, timeout=600)
            assert run.returncode == 0, f"{line}\nstdout:\n{run.stdout[-2000:]}\nstderr:\n{run.stderr[-3000:]}"
            ran += 1
    assert ran >= 10
    assert (work / "out_cli" / "tokenizer.json").exists() and (work / "report.html").stat().st_size > 10_000
    assert (work / "cl100k" / "tokenizer.json").exists() and (work / "mine" / "tokenizer.json").exists()
