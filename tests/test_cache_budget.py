"""The encoder's cache budget is a public knob: `cache_bytes` given to every constructor and
loader, read and set on a `BPE`, 0 turning the cache off, never changing the ids."""

from __future__ import annotations

import pytest

import hf_bpe
from conftest import openai_files


def test_the_cache_budget_is_a_public_knob(tmp_path, gpt2_dir):
    bpe = hf_bpe.BPE.load(gpt2_dir, cache_bytes=0)
    assert bpe.cache_bytes == 0
    ids = bpe.encode("the cat sat on the mat " * 20)
    info = bpe.cache_info()
    assert info["budget"] == 0 and info["bytes"] == 0 and info["hits"] == 0
    bpe.cache_bytes = 1 << 20
    assert bpe.cache_bytes == 1 << 20 and bpe.encode("the cat sat on the mat " * 20) == ids
    assert bpe.cache_info()["hits"] > 0
    with pytest.raises(ValueError, match="cache_bytes must be"):
        bpe.cache_bytes = -1
    small = hf_bpe.BPE(bpe.vocab, bpe.merges, bpe.special_tokens, cache_bytes=4096)
    assert small.cache_bytes == 4096 and small.encode("the cat") == bpe.encode("the cat")
    cl = hf_bpe.BPE.from_tiktoken(openai_files() / "r50k_base.tiktoken", pattern="gpt2", cache_bytes=0)
    assert cl.cache_bytes == 0
    pytest.importorskip("transformers")
    bpe.save(tmp_path / "t")
    tok = hf_bpe.BPETokenizer.from_pretrained(str(tmp_path / "t"), cache_bytes=12345)
    assert tok.bpe.cache_bytes == 12345
