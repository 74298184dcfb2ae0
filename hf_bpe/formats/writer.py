"""The contents of a tokenizer folder: GPT-2 ``vocab.json`` + ``merges.txt``, HF ``tokenizer.json``
and ``tokenizer_config.json`` (:func:`folder_files`), as bytes by file name. Putting them on disk
is :mod:`hf_bpe.formats.files`' job."""

from __future__ import annotations

import json
from typing import Sequence

from hf_bpe import _core
from hf_bpe.formats.alphabet import token_to_str
from hf_bpe.formats.regex_forms import for_oniguruma

__all__ = ["ARTIFACTS", "folder_files", "gpt2_files", "pipeline_parts", "tokenizer_json", "tokenizer_config",
           "with_dropout"]

# The files `save` writes, in the order they are moved into place (the config last).
ARTIFACTS = ("vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")


def _vocab_strings(vocab: dict[int, bytes], special_tokens: dict[str, int]) -> dict[str, int]:
    special_ids = {i: s for s, i in special_tokens.items()}
    out: dict[str, int] = {}
    for i in sorted(vocab):
        s = special_ids.get(i)
        if s is None:
            s = token_to_str(vocab[i])
        if s in out:
            raise ValueError(f"two tokens ({out[s]} and {i}) are both spelled {s!r}")
        out[s] = i
    return out


def _pre_tokenizer_json(pattern: str) -> dict:
    """GPT-2's regex is ByteLevel's own; any other pattern is a Split on each of its regexes (DeepSeek-V3
    has three, the third with CR, LF as its file has them: tokenizers 1.0 knows that spelling), then ByteLevel."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if _core.pattern_source(pattern) == _core.pattern_source("gpt2"):
        return byte_level
    splits = [s.replace("\\r", "\r").replace("\\n", "\n") if k == 2 else s
              for k, s in enumerate(_core.pattern_splits(pattern))]
    return {
        "type": "Sequence",
        "pretokenizers": [
            # Written so that Oniguruma (tokenizers' engine) splits exactly as we do; a built-in's
            # regex and a superword span pattern as they are spelled (readers recognize them).
            *({"type": "Split",
               "pattern": {"Regex": for_oniguruma(s, builtin=_core.pattern_from_splits(splits) is not None
                                                  or _core.span_words(s) is not None)},
               "behavior": "Isolated", "invert": False} for s in splits),
            dict(byte_level, use_regex=False),
        ],
    }


def _added_json(special_tokens: dict[str, int], added_tokens: Sequence) -> list[dict]:
    """``added_tokens`` entries: every added token with its flags (specials given only by name
    have none)."""
    entries = {t.content: {"id": t.id, "content": t.content, "single_word": t.single_word, "lstrip": t.lstrip,
                           "rstrip": t.rstrip, "normalized": t.normalized, "special": t.special}
               for t in added_tokens}
    for s, i in special_tokens.items():
        entries.setdefault(s, {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                               "normalized": False, "special": True})
    return sorted(entries.values(), key=lambda e: e["id"])


def pipeline_parts(pattern: str, pipeline: str | None) -> dict:
    """The ``tokenizer.json`` components around the model: an imported file's (``pipeline``), or
    hf_bpe's own for ``pattern`` (split -> ByteLevel, ByteLevel post-processor and decoder)."""
    return json.loads(pipeline) if pipeline else {
        "normalizer": None,
        "pre_tokenizer": _pre_tokenizer_json(pattern),
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {},
    }


def with_dropout(pattern: str, pipeline: str | None, dropout: float | None) -> str | None:
    """``pipeline`` whose model sets ``dropout`` (the components written for ``pattern`` if there
    are none); ``pipeline`` itself when it says so already."""
    parts = pipeline_parts(pattern, pipeline)
    if parts["model"].get("dropout") == dropout:
        return pipeline
    return json.dumps({**parts, "model": {**parts["model"], "dropout": dropout}})


def tokenizer_json(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: dict[str, int],
    pattern: str,
    added_tokens: Sequence = (),
    pipeline: str | None = None,
) -> dict:
    """The HF ``tokenizers`` pipeline: split (regex) -> ByteLevel -> BPE -> ByteLevel decoder, or
    the components of an imported ``tokenizer.json`` (``pipeline``) as they were.
    ``pattern`` is ``"gpt2"``, ``"cl100k"``, ``"o200k"`` or a regex."""
    added = _added_json(special_tokens, added_tokens)
    names = {e["content"]: e["id"] for e in added}
    parts = pipeline_parts(pattern, pipeline)
    options = {"dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
               "fuse_unk": False, "byte_fallback": False, "ignore_merges": False}
    options.update({k: v for k, v in parts["model"].items() if k in options})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": parts["normalizer"],
        "pre_tokenizer": parts["pre_tokenizer"],
        "post_processor": parts["post_processor"],
        "decoder": parts["decoder"],
        "model": {
            "type": "BPE",
            **options,
            "vocab": _vocab_strings(vocab, names),
            "merges": [[token_to_str(a), token_to_str(b)] for a, b in merges],
        },
    }


def tokenizer_config(special_tokens: dict[str, int], tokenizer_class: str | None = None,
                     added_tokens: Sequence = ()) -> dict:
    """``tokenizer_config.json``: what ``AutoTokenizer`` reads to pick and set up the class.

    The default class is ``BPETokenizer``: with ``hf_bpe`` imported, ``AutoTokenizer`` gives
    hf_bpe's own tokenizer; without it, transformers 5 does not know the name and falls back to
    its ``tokenizers`` backend reading ``tokenizer.json`` (same ids, same eos/bos/unk). For
    consumers on transformers 4.x without hf_bpe, pass ``tokenizer_class="GPT2Tokenizer"`` (GPT-2
    pattern) or ``"PreTrainedTokenizerFast"``.
    """
    if tokenizer_class is None:
        tokenizer_class = "BPETokenizer"
    eos = "<|endoftext|>" if "<|endoftext|>" in special_tokens else next(iter(special_tokens), None)
    cfg: dict = {
        "tokenizer_class": tokenizer_class,
        "add_prefix_space": False,
        "errors": "replace",
        "clean_up_tokenization_spaces": False,
        "bos_token": eos,
        "eos_token": eos,
        "unk_token": eos,
        "added_tokens_decoder": {
            str(e["id"]): {k: e[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
            for e in _added_json(special_tokens, added_tokens)
        },
    }
    return cfg


def _dump(obj: dict, *, compact_ascii: bool = False) -> bytes:
    if compact_ascii:  # byte-for-byte GPT-2 style: one line, ASCII escapes
        return json.dumps(obj, ensure_ascii=True).encode("ascii")
    return (json.dumps(obj, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def gpt2_files(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: dict[str, int]
               ) -> dict[str, bytes]:
    """GPT-2's two files, ``vocab.json`` (one line, ASCII escapes) and ``merges.txt``, by file name
    (``special_tokens``: the added tokens, spelled as their content)."""
    vocab_json = _dump(_vocab_strings(vocab, special_tokens), compact_ascii=True)
    merges_txt = ("#version: 0.2\n"
                  + "".join(f"{token_to_str(a)} {token_to_str(b)}\n" for a, b in merges)).encode("utf-8")
    return {"vocab.json": vocab_json, "merges.txt": merges_txt}


def folder_files(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: dict[str, int],
    pattern: str,
    tokenizer_class: str | None = None,
    added_tokens: Sequence = (),
    pipeline: str | None = None,
) -> dict[str, bytes]:
    """The contents of every artifact (:data:`ARTIFACTS`), by file name. Special tokens that share
    an id are refused: ``tokenizers`` would give one of them a new id."""
    names = {e["content"]: e["id"] for e in _added_json(special_tokens, added_tokens)}
    by_id: dict[int, str] = {}
    for content, i in names.items():
        if by_id.setdefault(i, content) != content:
            raise ValueError(f"special tokens {by_id[i]!r} and {content!r} share the id {i}: a tokenizer.json cannot "
                             "say that (tokenizers gives one of them a new id); save_tiktoken() keeps both")
    return {
        **gpt2_files(vocab, merges, names),
        "tokenizer.json": _dump(tokenizer_json(vocab, merges, special_tokens, pattern, added_tokens, pipeline)),
        "tokenizer_config.json": _dump(tokenizer_config(special_tokens, tokenizer_class, added_tokens)),
    }
