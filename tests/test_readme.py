"""Every Python code block of the README, run as written: in order, in one fresh interpreter,
in a folder holding the files the blocks name (the tiktoken and model files of ../shared/data),
with `push_to_hub` going to the local stand-in hub."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import shared_data

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", (REPO / "README.md").read_text(), flags=re.S | re.M)


def test_readme_has_python_blocks():
    assert len(blocks()) >= 5


def test_readme_python_blocks_run_as_written(tmp_path):
    pytest.importorskip("jinja2")
    data = shared_data()
    (tmp_path / "cl100k_base.tiktoken").symlink_to(data / "tiktoken" / "cl100k_base.tiktoken")
    (tmp_path / "olmo-2-dolma2").symlink_to(data / "hf-tokenizers" / "olmo-2-dolma2")
    hub = subprocess.Popen([sys.executable, str(TESTS / "fakehub.py")], stdout=subprocess.PIPE, text=True)
    try:
        port = int(hub.stdout.readline())
        env = dict(os.environ, HF_ENDPOINT=f"http://127.0.0.1:{port}", HF_TOKEN="hf_fake_token_for_local_tests",
                   HF_HOME=str(tmp_path / "home"), HF_HUB_DISABLE_XET="1", HF_HUB_OFFLINE="0",
                   HF_HUB_DISABLE_TELEMETRY="1", PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        code = "\n".join(blocks()) + "\nimport json\nprint(json.dumps([type(tok).__name__, ds.column_names]))\n"
        res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=600)
        assert res.returncode == 0, f"stdout:\n{res.stdout[-3000:]}\nstderr:\n{res.stderr[-5000:]}"
        assert json.loads(res.stdout.strip().splitlines()[-1]) == ["BPETokenizer", ["text", "input_ids", "attention_mask"]]
        assert {"vocab.json", "merges.txt", "tokenizer.json"} <= {p.name for p in (tmp_path / "out").iterdir()}
        assert (tmp_path / "ids.npy").stat().st_size > 0 and (tmp_path / "mine.tiktoken").stat().st_size > 0
        pulled = subprocess.run([sys.executable, "-c", "from transformers import AutoTokenizer; import hf_bpe; "
                                 "t = AutoTokenizer.from_pretrained('user/my-tokenizer'); print(type(t).__name__)"],
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert pulled.stdout.strip().splitlines()[-1] == "BPETokenizer", pulled.stderr[-3000:]
    finally:
        hub.kill()
        hub.wait()
