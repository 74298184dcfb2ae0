"""Folders we save, read by ``tokenizers`` 1.0 (a release candidate, in a virtual environment of
its own: ``transformers`` pins the 0.x line): ids identical to ours, or a refusal by 1.0, never
other ids.

1.0 as published splits text only with the patterns its native scanners know (it has no regex
engine unless built with its ``fancy-regex`` feature): GPT-2's, o200k's, the Llama-3 form of
cl100k (digits in runs of 1-3, 1-2, 1 or any), tekken's, Kimi's and DeepSeek-V3's three. Our
``cl100k`` is OpenAI's, whose ``\\s++$`` branch the Llama-3 form lacks (``"x\\n "`` ends in one
piece there, two in Llama-3's), so no spelling of it loads in 1.0; nor does Qwen3.5's or any
custom regex. The test pins what the pinned release lacks, so a change shows.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import hf_bpe
from hf_bpe.tools.cli import main
from conftest import corpus_docs, peer_python, openai_files

TOKENIZERS_1 = "1.0.0rc3"
LACKS = "needs a system-regex backend"  # 1.0's own words for a pattern it cannot run

READER = r"""
import json, sys, tokenizers
job = json.loads(sys.stdin.read())
out = {"version": tokenizers.__version__}
for name, path in job["files"].items():
    try:
        tok = tokenizers.Tokenizer.from_file(path)
        out[name] = [tok.encode(t, add_special_tokens=False).ids for t in job["texts"]]
    except Exception as e:
        out[name] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""

# pattern -> does tokenizers 1.0.0rc3 run it
PATTERNS = {"gpt2": True, "o200k": True, "llama3": True, "qwen2": True, "nemotron": True, "tekken": True,
            "kimi": True, "deepseek-v3": True, "cl100k": False, "qwen3.5": False,
            r"\p{L}+|\p{N}+|\s+|[^\s\p{L}\p{N}]+": False}


def _read1(files: dict, texts: list[str]) -> dict:
    job = json.dumps({"files": {k: str(v) for k, v in files.items()}, "texts": texts})
    run = subprocess.run([str(peer_python(f"tokenizers-{TOKENIZERS_1}", f"tokenizers=={TOKENIZERS_1}")), "-c", READER],
                         input=job, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": ""})
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_saved_files_read_alike_in_tokenizers_1_or_are_refused_by_it(tmp_path):
    train = corpus_docs("multilingual", 150_000) + corpus_docs("code", 100_000)
    texts = corpus_docs("english", 30_000)[:30] + corpus_docs("multilingual", 60_000)[-40:] + corpus_docs("code", 30_000)[:20] + [
        "", "x\n ", "a\n \n", "x\t\n\t", "12345678 ²³ ٣٤", "日本語のテキスト 中文", "it's THEY'RE", "<|endoftext|>a", "a\r\nb"]
    files, ours = {}, {}
    for k, pattern in enumerate(PATTERNS):
        bpe = hf_bpe.train(train, vocab_size=600, pattern=pattern, progress=False)
        files[pattern] = bpe.save(tmp_path / f"p{k}") / "tokenizer.json"
        ours[pattern] = bpe.encode_batch(texts, allowed_special="all")
    # OpenAI's published vocabularies, converted
    for name in ("r50k_base", "o200k_base", "cl100k_base"):
        src = openai_files() / f"{name}.tiktoken"
        assert main(["convert", str(src), str(tmp_path / name), "--to", "hf"]) == 0
        files[name] = tmp_path / name / "tokenizer.json"
        ours[name] = hf_bpe.BPE.load(tmp_path / name).encode_batch(texts, allowed_special="all")
    got = _read1(files, texts)
    assert got["version"].replace("-", "").replace(".", "") == TOKENIZERS_1.replace(".", "")
    runs = {**PATTERNS, "r50k_base": True, "o200k_base": True, "cl100k_base": False}
    for name, ids in ours.items():
        if runs[name]:
            assert isinstance(got[name], list), (name, got[name])
            bad = [t for t, a, b in zip(texts, got[name], ids) if a != b]
            assert not bad, (name, bad[:3])
        else:
            assert isinstance(got[name], str) and LACKS in got[name], (name, got[name] if isinstance(got[name], str) else "")
