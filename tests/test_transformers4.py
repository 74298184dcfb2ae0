"""Folders we save, read by the last transformers 4 release in a virtual environment of its own
(no hf_bpe there): ``AutoTokenizer`` gives the ids hf_bpe gives, added tokens included.

transformers 4 resolves ``tokenizer_class`` by name and raises on a name it does not know, so a
folder meant for it names ``PreTrainedTokenizerFast`` (``save_pretrained(..., tokenizer_class=...)``,
``BPE.save(..., tokenizer_class=...)``, ``hf-bpe train --tokenizer-class``); the default name,
``BPETokenizer``, is what makes ``AutoTokenizer`` give hf_bpe's class in transformers 5.

The environment is made once in the test cache (``HF_BPE_TEST_CACHE``, default
``~/.cache/hf_bpe-tests``); without network the test skips, in CI it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import hf_bpe
from hf_bpe.tools.cli import main
from conftest import corpus_docs, corpus_path, openai_files, peer_python

pytest.importorskip("transformers")
TRANSFORMERS_4 = "4.57.6"  # the last 4.x release

READER = r"""
import json, sys
from transformers import AutoTokenizer
job = json.loads(sys.stdin.read())
out = {}
for name, folder in job["folders"].items():
    try:
        tok = AutoTokenizer.from_pretrained(folder)
    except Exception as e:
        out[name] = {"error": f"{type(e).__name__}: {e}"}
        continue
    out[name] = {"class": type(tok).__name__, "ids": [tok.encode(t, add_special_tokens=False) for t in job["texts"]],
                 "eos": [tok.eos_token, tok.eos_token_id]}
print(json.dumps(out))
"""


def _python4() -> Path:
    """The interpreter of a virtual environment with transformers 4 and without hf_bpe (made once)."""
    return peer_python(f"transformers-{TRANSFORMERS_4}", f"transformers=={TRANSFORMERS_4}")


def _read4(folders: dict[str, Path], texts: list[str]) -> dict:
    job = json.dumps({"folders": {k: str(v) for k, v in folders.items()}, "texts": texts})
    run = subprocess.run([str(_python4()), "-c", READER], input=job, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": "", "TRANSFORMERS_VERBOSITY": "error"})
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_saved_folders_load_in_transformers_4_with_identical_ids(tmp_path):
    texts = corpus_docs("english", 20_000)[:20] + corpus_docs("multilingual", 20_000)[:10] + [
        "", "  two  spaces\n\n\ttab", "<|endoftext|>x<|endoftext|>", "<|im_start|>user\nhi<|im_end|>",
        "say hello_world_token twice: hello_world_tokenhello_world_token", "\xf0 caf\u00e9 \U0001f642"]
    tok = hf_bpe.BPETokenizer.from_pretrained(openai_files() / "gpt2")
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.add_tokens(["hello_world_token"])
    tok.save_pretrained(tmp_path / "added", tokenizer_class="PreTrainedTokenizerFast")
    tok.save_pretrained(tmp_path / "default")
    trained = hf_bpe.train(corpus_docs("english", 300_000), vocab_size=1_000, special_tokens=("<|endoftext|>",))
    trained.save(tmp_path / "trained", tokenizer_class="PreTrainedTokenizerFast")
    assert main(["train", str(corpus_path("code")), "--vocab-size", "600", "--quiet",
                 "--out", str(tmp_path / "cli"), "--tokenizer-class", "PreTrainedTokenizerFast"]) == 0

    got = _read4({"added": tmp_path / "added", "trained": tmp_path / "trained", "cli": tmp_path / "cli",
                  "default": tmp_path / "default"}, texts)
    want = {"added": tok(texts, add_special_tokens=False)["input_ids"], "trained": trained.encode_batch(texts, allowed_special="all"),
            "cli": hf_bpe.BPE.load(tmp_path / "cli").encode_batch(texts, allowed_special="all")}
    for name, ids in want.items():
        assert "error" not in got[name], got[name]
        assert got[name]["class"] == "PreTrainedTokenizerFast" and got[name]["eos"][0] == "<|endoftext|>"
        bad = [t for t, a, b in zip(texts, got[name]["ids"], ids) if a != b]
        assert not bad, (name, bad[:3])
    assert got["added"]["ids"][texts.index("<|im_start|>user\nhi<|im_end|>")][0] == tok.convert_tokens_to_ids("<|im_start|>")
    # the default name is transformers 5's (with hf_bpe: BPETokenizer; without: its tokenizers backend)
    assert "BPETokenizer does not exist" in got["default"]["error"]
