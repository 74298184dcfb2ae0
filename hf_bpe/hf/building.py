"""Building the engine of a :class:`~hf_bpe.BPETokenizer` from what ``transformers`` hands it
(files, in-memory vocabularies, a ``tokenizer.json``'s defaults), rebuilding a tokenizer around a
new one (extending, ``train_new_from_iterator``), and the files its saves write."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hf_bpe import formats
from hf_bpe.bpe import BPE
from hf_bpe.formats.files import write_file
from hf_bpe.hf.encoding import new_added
from hf_bpe.training.extending import extend_bpe
from hf_bpe.training.trainer import train


def bpe_of(vocab_file, merges_file, tokenizer_file, vocab, merges, added_tokens_decoder, named: list[str]) -> BPE:
    """The BPE of ``BPETokenizer``'s arguments: files, or transformers 5's in-memory ``vocab``/``merges``
    (also positional: ``BPETokenizer(vocab_dict, merges)``)."""
    if isinstance(vocab_file, Mapping):
        vocab, merges, vocab_file, merges_file = vocab_file, merges_file, None, None
    if vocab is not None:
        return from_memory(vocab, merges, added_tokens_decoder, named)
    return from_hf_files(vocab_file, merges_file, tokenizer_file)


def from_memory(vocab: dict[str, int] | str, merges: list | str | None, added_tokens_decoder: dict | None,
                named: list[str]) -> BPE:
    """The BPE of transformers 5's in-memory constructor: ``vocab`` (spelling -> id) and ``merges``
    (pairs or ``"a b"`` strings), or the paths of ``vocab.json`` and ``merges.txt``. The contents
    of ``added_tokens_decoder`` and the ``named`` special tokens (unk, bos, eos, pad) found in
    ``vocab`` are its added tokens, special but where ``added_tokens_decoder`` says otherwise."""
    if isinstance(vocab, (str, os.PathLike)) and isinstance(merges, (str, os.PathLike)):
        return from_hf_files(os.fspath(vocab), os.fspath(merges), None)
    if not isinstance(vocab, Mapping) or merges is None or isinstance(merges, (str, os.PathLike)):
        raise TypeError("BPETokenizer(vocab=..., merges=...) takes a dict and a list of pairs (or two file paths)")
    added = dict.fromkeys((t for t in named if t in vocab), True)
    added.update((str(t), bool(getattr(t, "special", True))) for t in (added_tokens_decoder or {}).values())
    added = list(added.items())
    return BPE.from_tables(formats.from_strings(dict(vocab), merges, added))


def from_hf_files(vocab_file: str | None, merges_file: str | None, tokenizer_file: str | None) -> BPE:
    """The BPE of the files transformers resolved: ``vocab.json`` + ``merges.txt`` (with
    ``tokenizer.json`` for the pattern and which added tokens are special), or ``tokenizer.json``."""
    if vocab_file and merges_file:
        tables = formats.read(vocab_file, merges_file=merges_file, tokenizer_file=tokenizer_file or None)
        return BPE.from_tables(tables, vocab_file, truncation_and_padding="ignore")
    if tokenizer_file:
        return BPE.load(tokenizer_file, truncation_and_padding="ignore")
    raise ValueError("BPETokenizer needs vocab_file + merges_file, tokenizer_file, or bpe=hf_bpe.BPE(...)")


def with_file_defaults(sections: dict | None, kwargs: dict, pad_token: Any) -> tuple[dict, Any]:
    """``kwargs`` (and ``pad_token``) with the defaults that ``transformers`` takes from a
    ``tokenizer.json``'s ``truncation`` and ``padding`` sections (it then truncates and pads per
    call only, as asked); what the caller gives wins."""
    d: dict[str, Any] = {}
    t, p = (sections or {}).get("truncation"), (sections or {}).get("padding")
    if t:
        strategy = "".join("_" + c.lower() if c.isupper() else c for c in t.get("strategy", "LongestFirst")).lstrip("_")
        d.update(max_length=t.get("max_length"), truncation_side=t.get("direction", "Right").lower(),
                 stride=t.get("stride", 0), truncation_strategy=strategy)
    if p:
        fixed = p.get("strategy") if isinstance(p.get("strategy"), dict) else {}
        d.update(pad_token_type_id=p.get("pad_type_id", 0), padding_side=p.get("direction", "Right").lower(),
                 pad_to_multiple_of=p.get("pad_to_multiple_of"))
        d.setdefault("max_length", fixed.get("Fixed"))
        pad_token = p.get("pad_token", "[PAD]") if pad_token is None else pad_token
    return d | kwargs, pad_token


def train_new(tok, text_iterator, vocab_size: int, new_special_tokens=None, special_tokens_map=None, **options):
    """``PreTrainedTokenizerFast.train_new_from_iterator`` for :class:`hf_bpe.BPETokenizer`: trains
    with :func:`hf_bpe.train` on the texts (or batches of texts) of ``text_iterator``, with the
    tokenizer's pattern and special tokens (renamed by ``special_tokens_map``, plus
    ``new_special_tokens``), and ``tie_break="hf"`` unless told (so the merges equal those of
    transformers' own method). Returns a tokenizer of the same class and settings."""
    known = {"tie_break", "min_frequency", "max_token_length", "num_threads", "progress", "pattern", "length"}
    if unknown := sorted(set(options) - known):
        raise TypeError(f"train_new_from_iterator: unsupported option(s) {unknown} "
                        f"(hf_bpe trains with {sorted(known)})")
    options.pop("length", None)  # the size of the iterator, for a progress bar: hf_bpe counts as it goes
    rename = dict(special_tokens_map or {})

    def texts():
        for item in text_iterator:
            yield from ([item] if isinstance(item, str) else item)

    old = [str(t) for t in tok.all_special_tokens] + [t.content for t in tok.added_tokens_decoder.values() if t.special]
    specials = list(dict.fromkeys([rename.get(t, t) for t in old] + [str(t) for t in new_special_tokens or ()]))
    options.setdefault("tie_break", "hf")
    options.setdefault("pattern", tok.bpe.pattern)
    bpe = train(texts(), vocab_size=vocab_size, special_tokens=specials, **options)
    return rebuilt(tok, bpe, rename)


# The settings a rebuilt tokenizer keeps (`rebuilt`: extend, train_new_from_iterator).
KEPT_SETTINGS = ("model_max_length", "padding_side", "truncation_side", "text_column", "chat_template",
                 "split_special_tokens", "add_bos_token", "add_eos_token")


def rebuilt(tok, bpe: BPE, rename: dict[str, str] | None = None):
    """A tokenizer of ``tok``'s class and settings (:data:`KEPT_SETTINGS`) around ``bpe``, its
    bos/eos/unk/pad tokens named as before (renamed by ``rename``)."""
    rename = rename or {}
    names = {k: None if getattr(tok, k) is None else rename.get(str(getattr(tok, k)), str(getattr(tok, k)))
             for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
    return type(tok)(bpe=bpe, **names, **{k: getattr(tok, k) for k in KEPT_SETTINGS})


def extended(tok, texts, vocab_size: int, **options):
    """:func:`hf_bpe.extend` of a ``BPETokenizer``: its ``add_tokens`` ones keep their ids too."""
    return rebuilt(tok, extend_bpe(tok.bpe, texts, vocab_size, extra=new_added(tok.bpe, tok.added_tokens_decoder),
                                   **options))


def pruned(tok, *args: Any, **kwargs: Any):
    """:func:`hf_bpe.prune` of a ``BPETokenizer``: its engine (added tokens included) pruned, the
    tokenizer rebuilt around it; with the id map."""
    from hf_bpe.training.pruning import prune_bpe

    bpe, id_map = prune_bpe(tok.engine(), *args, **kwargs)
    return rebuilt(tok, bpe), id_map


def backend_of(tok):
    """``tok`` as a ``tokenizers.Tokenizer`` built from the ``tokenizer.json`` it saves (added
    tokens included): the same ids."""
    try:
        import tokenizers
    except ImportError as e:
        raise ImportError("BPETokenizer.backend_tokenizer needs the `tokenizers` package "
                          "(pip install 'hf_bpe[hf]')") from e
    e = tok.engine()
    spec = formats.tokenizer_json(e.vocab, e.merges, e.special_tokens, e.pattern, e.added_tokens, e.pipeline)
    return tokenizers.Tokenizer.from_str(json.dumps(spec))


def write_vocabulary(folder: str, files: dict[str, bytes], prefix: str | None = None) -> tuple[str, ...]:
    """``save_vocabulary``'s files (vocab.json, merges.txt, tokenizer.json) into ``folder``, each
    atomically; returns their paths."""
    if not os.path.isdir(folder):
        raise NotADirectoryError(f"{folder} is not a folder")
    return tuple(str(write_file(os.path.join(folder, f"{prefix}-{n}" if prefix else n), files[n]))
                 for n in ("vocab.json", "merges.txt", "tokenizer.json"))


def portable_config(written: tuple[str, ...], tokenizer_class: str | None) -> tuple[str, ...]:
    """The files a ``save_pretrained`` wrote, with a ``tokenizer_config.json`` that transformers 4
    reads too: the extra special tokens under their 4.x name ``additional_special_tokens`` (5.x
    reads both; 4.x takes ``extra_special_tokens`` for a dict and fails on a list), and
    ``tokenizer_class`` when given."""
    cfg = next(Path(w) for w in written if os.path.basename(w) == "tokenizer_config.json")
    spec = json.loads(cfg.read_text(encoding="utf-8"))
    if isinstance(spec.get("extra_special_tokens"), list):
        spec["additional_special_tokens"] = spec.pop("extra_special_tokens")
    if tokenizer_class is not None:
        spec["tokenizer_class"] = tokenizer_class
    cfg.write_text(json.dumps(spec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return written
