"""The encoding helpers behind :class:`hf_bpe.BPETokenizer`: tables derived from the vocabulary
(GPT-2 spellings by id), the batch encoders (flat ids; ids with ``tokenizers``' offsets and
words; pre-split words; padded numpy), training a new tokenizer of the same kind, and the
``tokenizers`` backend. Added tokens are the core's to match (``BPE.derive``): one
matcher, with ``tokenizers``' rules. Only public names of :class:`hf_bpe.BPE` are used."""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
from transformers.tokenization_utils_base import TruncationStrategy
from transformers.utils import logging
from transformers.utils.generic import PaddingStrategy

from hf_bpe import _core, formats
from hf_bpe.bpe import BPE, gc_paused
from hf_bpe.post import offset_trim

__all__ = ["TokenTables", "token_tables", "new_added", "encode_flat", "encode_texts", "encode_split_words",
           "numpy_batch", "train_new", "backend_of", "from_hf_files", "cleans_up",
           "with_file_defaults"]


# --------------------------------------------------------------------------------------------
# Derived tables, one per BPE object, kept here (not on the object: a BPE pickles as its core's
# state, and datasets hashes it by that) and dropped when the BPE is.


class TokenTables:
    """Each id's GPT-2 spelling (an added token, special or not, as its text, as ``tokenizers``
    spells it) and back; the spaces that spelling starts and ends with (for offset trimming)."""

    __slots__ = ("str_to_id", "id_to_str", "lead", "trail", "stripping")

    def __init__(self, bpe: BPE) -> None:
        vocab = bpe.vocab
        added = {i: s for s, i in bpe.special_tokens.items()} | {t.id: t.content for t in bpe.added_tokens}
        self.id_to_str = {i: added.get(i) or formats.token_to_str(b) for i, b in vocab.items()}
        self.str_to_id = {s: i for i, s in sorted(self.id_to_str.items())}
        self.lead = np.zeros(max(vocab, default=0) + 1, dtype=np.int64)
        self.trail = self.lead.copy()
        for i, b in vocab.items():
            if i in added:
                self.lead[i], self.trail[i] = _spaces(added[i])
            elif b[:1] == b" " or b[-1:] == b" ":
                self.lead[i], self.trail[i] = len(b) - len(b.lstrip(b" ")), len(b) - len(b.rstrip(b" "))
        self.stripping = np.array([t.id for t in bpe.added_tokens if t.lstrip or t.rstrip], dtype=np.int64)


def _spaces(text: str) -> tuple[int, int]:
    """Whitespace chars at the start and end of ``text`` (Rust's ``char::is_whitespace``)."""
    def ws(c: str) -> bool:
        return c.isspace() and not "\x1c" <= c <= "\x1f"
    lead = next((k for k, c in enumerate(text) if not ws(c)), len(text))
    trail = next((k for k, c in enumerate(reversed(text)) if not ws(c)), len(text))
    return lead, trail


def trim_offsets(offs: np.ndarray, lead: np.ndarray, trail: np.ndarray, first: np.ndarray, keep_one: bool) -> np.ndarray:
    """``tokenizers``' ByteLevel offset trimming (``trim_offsets=True``): each token's range loses
    the spaces its spelling starts and ends with (``lead``/``trail``), except one leading space
    of a first token when the post-processor adds a prefix space (``keep_one``)."""
    if keep_one:
        lead = np.where(first & (lead == 1), 0, lead)
    start = np.minimum(offs[:, 0] + lead, offs[:, 1])
    end = np.where((trail > 0) & (offs[:, 1] >= trail), np.maximum(offs[:, 1] - trail, start), offs[:, 1])
    return np.stack([start, end], axis=1)


_TABLES: dict[int, TokenTables] = {}


def new_added(bpe: BPE, decoder: dict) -> list[formats.AddedToken]:
    """The tokens of a tokenizer's ``added_tokens_decoder`` (id -> ``transformers.AddedToken``) that
    ``bpe`` lacks (``add_tokens``/``add_special_tokens``), by id."""
    own = {t.id for t in bpe.added_tokens}
    return [formats.AddedToken(str(t.content), i, bool(t.special), bool(t.lstrip), bool(t.rstrip), bool(t.single_word),
                               bool(t.normalized)) for i, t in sorted(decoder.items()) if i not in own]


def token_tables(bpe: BPE) -> TokenTables:
    """The :class:`TokenTables` of ``bpe``, built on first use."""
    t = _TABLES.get(id(bpe))
    if t is None:
        t = _TABLES[id(bpe)] = TokenTables(bpe)
        weakref.finalize(bpe, _TABLES.pop, id(bpe), None)
    return t


# --------------------------------------------------------------------------------------------
# Encoding text into per-sequence ids, offsets and words. `bpe` is the tokenizer's engine
# (`BPETokenizer.engine()`): its added tokens are the tokenizer's, matched by the core.


def encode_flat(bpe: BPE, texts: list[str], split_special: bool) -> tuple[np.ndarray, np.ndarray]:
    """The ids of all texts as one flat ``int32`` array plus ``int64`` offsets (n + 1). Added
    tokens match (special ones only unless ``split_special``), as ``tokenizers``."""
    flat, off = bpe.encode_batch_flat(texts, allowed_special=() if split_special else "all", disallowed_special=())
    return flat.view(np.int32), off


def padded_arrays(flat: np.ndarray, off: np.ndarray, strategy: PaddingStrategy, max_length: int | None,
                  truncate: bool, multiple: int | None, side: str, truncation_side: str, pad_id: int | None,
                  attention_mask: bool) -> dict[str, np.ndarray]:
    """``input_ids`` (and ``attention_mask``) as 2-D ``int64`` arrays, rows truncated to
    ``max_length`` (on ``truncation_side``) when ``truncate`` and padded (``pad_rows``' rules),
    written by the core from the flat ids (:func:`pad_flat`)."""
    lens = np.diff(off)
    if truncate:
        lens = np.minimum(lens, max_length)
    longest = int(lens.max(initial=0))
    if strategy == PaddingStrategy.DO_NOT_PAD:
        target = 0
    else:
        target = longest if strategy == PaddingStrategy.LONGEST or max_length is None else max_length
        if multiple and target % multiple:
            target = (target // multiple + 1) * multiple
    if pad_id is None and (lens < target).any():
        raise ValueError("Asking to pad but the tokenizer does not have a padding token: set tokenizer.pad_token")
    final = np.maximum(lens, target)
    if final.size and (final != final[0]).any():  # rows longer than max_length, not truncated: as transformers,
        return _ragged(flat, off, final, pad_id, side, attention_mask)  # an object array of rows
    ids, mask = pad_flat(flat.view(np.uint32), off, int(final[0]) if final.size else target, pad_id or 0,
                         side == "left", truncation_side == "left", attention_mask)
    return {"input_ids": ids, "attention_mask": mask} if attention_mask else {"input_ids": ids}


def _ragged(flat: np.ndarray, off: np.ndarray, final: np.ndarray, pad_id: int | None, side: str,
            attention_mask: bool) -> dict[str, np.ndarray]:
    """Rows of different lengths (none truncated), each padded to ``final``, as 1-D object arrays
    of ``int64`` rows (what transformers' numpy conversion gives for ragged rows)."""
    out = {"input_ids": np.empty(len(final), dtype=object)}
    if attention_mask:
        out["attention_mask"] = np.empty(len(final), dtype=object)
    for k, width in enumerate(final.tolist()):
        row = flat[off[k]:off[k + 1]].astype(np.int64)
        pad = width - len(row)
        fill, ones = np.full(pad, pad_id or 0, dtype=np.int64), np.ones(len(row), dtype=np.int64)
        parts = (fill, row) if side == "left" else (row, fill)
        out["input_ids"][k] = np.concatenate(parts)
        if attention_mask:
            zeros = np.zeros(pad, dtype=np.int64)
            out["attention_mask"][k] = np.concatenate((zeros, ones) if side == "left" else (ones, zeros))
    return out


def numpy_batch(tok, texts: list[str], split_special: bool, padding: PaddingStrategy,
                truncation: TruncationStrategy, max_length: int | None, multiple: int | None, padding_side: str | None,
                attention_mask: bool | None, verbose: bool) -> dict[str, np.ndarray]:
    """``tok(texts, return_tensors="np", ...)`` for a batch of single texts with nothing added
    around them: one 2-D array per column, written by numpy from the flat ids."""
    flat, off = encode_flat(tok.engine(), texts, split_special)
    tok._eventual_warn_about_too_long_sequence(range(int(np.diff(off).max(initial=0))), max_length, verbose)
    truncate = truncation != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None
    mask = "attention_mask" in tok.model_input_names if attention_mask is None else attention_mask
    return padded_arrays(flat, off, padding, max_length, truncate, multiple, padding_side or tok.padding_side,
                         tok.truncation_side, tok.pad_token_id, mask)


def encode_texts(bpe: BPE, texts: list[str], split_special: bool, offsets: bool):
    """Encodes texts: (ids per text, offsets per text or None, words per text or None), with
    ``offsets`` the chars each token touches (trimmed as the post-processor says) and the word
    (pre-tokenizer piece or added token) of each token, numbered per text, as ``tokenizers``."""
    if not offsets:  # the core builds the lists
        return bpe.encode_batch(texts, allowed_special=() if split_special else "all", disallowed_special=()), None, None
    ids, offs, words, off = bpe.encode_spans(texts, allowed_special=() if split_special else "all", disallowed_special=())
    trim = offset_trim(bpe.pipeline)
    if trim is not None:
        t = token_tables(bpe)
        first = offs[:, 0] == 0
        first[off[:-1][np.diff(off) > 0]] = True
        lead, trail = t.lead[ids], t.trail[ids]
        if t.stripping.size and (where := np.flatnonzero(np.isin(ids, t.stripping))).size:
            rows = np.searchsorted(off, where, side="right") - 1  # an added token that took spaces: its text
            for k, r in zip(where.tolist(), rows.tolist()):
                lead[k], trail[k] = _spaces(texts[r][offs[k, 0]:offs[k, 1]])
        offs = trim_offsets(offs, lead, trail, first, trim)
    return _rows(ids, off), _rows(offs, off, pairs=True), _rows(words, off)


def encode_split_words(bpe: BPE, rows: list, split_special: bool, offsets: bool):
    """:func:`encode_texts` of pre-split rows (``is_split_into_words``): each word encoded on its
    own, its tokens all of that word, offsets within the word (as ``tokenizers``' pre-tokenized
    input)."""
    ids, offs, _ = encode_texts(bpe, [w for r in rows for w in r], split_special, offsets)
    ids_out, offs_out, words_out, k = [], [] if offsets else None, [] if offsets else None, 0
    for r in rows:
        i, o, w = [], [], []
        for j in range(len(r)):
            i += ids[k]
            if offsets:
                o += offs[k]
                w += [j] * len(ids[k])
            k += 1
        ids_out.append(i)
        if offsets:
            offs_out.append(o), words_out.append(w)
    return ids_out, offs_out, words_out


def _rows(flat: np.ndarray, off: np.ndarray, pairs: bool = False) -> list[list]:
    """Rows ``flat[off[k]:off[k+1]]`` as lists (of tuples when ``pairs``)."""
    with gc_paused():
        v, o = flat.tolist(), off.tolist()
        if pairs:
            v = list(map(tuple, v))
        return [v[o[k]:o[k + 1]] for k in range(len(o) - 1)]


def train_new(tok, text_iterator, vocab_size: int, new_special_tokens=None, special_tokens_map=None, **options):
    """``PreTrainedTokenizerFast.train_new_from_iterator`` for :class:`hf_bpe.BPETokenizer`: trains
    with :func:`hf_bpe.train` on the texts (or batches of texts) of ``text_iterator``, with the
    tokenizer's pattern and special tokens (renamed by ``special_tokens_map``, plus
    ``new_special_tokens``), and ``tie_break="hf"`` unless told (so the merges equal those of
    transformers' own method). Returns a tokenizer of the same class and settings."""
    from hf_bpe.training import train

    known = {"tie_break", "min_frequency", "max_token_length", "num_threads", "progress", "pattern", "length"}
    if unknown := sorted(set(options) - known):
        raise TypeError(f"train_new_from_iterator: unsupported option(s) {unknown} (hf_bpe trains with {sorted(known)})")
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
    names = {k: rename.get(str(v), str(v)) for k, v in tok.special_tokens_map.items() if isinstance(v, str)}
    keep = {k: getattr(tok, k) for k in ("model_max_length", "padding_side", "truncation_side", "text_column",
                                         "chat_template", "split_special_tokens")}
    return type(tok)(bpe=bpe, **{k: names.get(k) for k in ("bos_token", "eos_token", "unk_token", "pad_token")}, **keep)


def backend_of(tok):
    """``tok`` as a ``tokenizers.Tokenizer`` built from the ``tokenizer.json`` it saves (added
    tokens included): the same ids."""
    try:
        import tokenizers
    except ImportError as e:
        raise ImportError("BPETokenizer.backend_tokenizer needs the `tokenizers` package (pip install 'hf_bpe[hf]')") from e
    e = tok.engine()
    spec = formats.tokenizer_json(e.vocab, e.merges, e.special_tokens, e.pattern, e.added_tokens, e.pipeline)
    return tokenizers.Tokenizer.from_str(json.dumps(spec))


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


def pad_flat(ids: np.ndarray, offsets: np.ndarray, width: int, pad_id: int, pad_left: bool = False,
             truncate_left: bool = False, attention_mask: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Flat ids (``uint32``, rows cut by ``int64`` ``offsets``) as a 2-D ``int64`` array ``width``
    wide: rows cut to ``width`` (keeping their end with ``truncate_left``), at the left or right,
    the rest ``pad_id``; and the 0/1 attention mask (or ``None``). Written by the core in one pass."""
    return _core.pad_rows(ids, offsets, width, pad_id, pad_left, truncate_left, attention_mask)


_FORCE_BPE_CLEANUP = "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"


def cleans_up(tok: Any, flag: bool | None) -> bool:
    """Whether ``decode`` cleans up tokenization spaces, as the installed ``transformers`` decides
    for a BPE tokenizer: from 5.25 it skips the cleanup, which corrupts BPE text (``"tela . Mutu"``
    -> ``"tela. Mutu"``), unless the tokenizer forces it, and warns once; before, it applies it."""
    cleanup = tok.clean_up_tokenization_spaces if flag is None else flag
    if cleanup and hasattr(tok, _FORCE_BPE_CLEANUP) and not getattr(tok, _FORCE_BPE_CLEANUP):
        logging.get_logger(__name__).warning_once(
            f"Ignoring clean_up_tokenization_spaces=True for BPE tokenizer {type(tok).__name__}, as transformers does: "
            f"it strips spaces before punctuation. Set it False to silence this, or {_FORCE_BPE_CLEANUP}=True to force it.")
        return False
    return bool(cleanup)
