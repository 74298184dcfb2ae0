"""The encoding helpers behind :class:`hf_bpe.BPETokenizer`: tables derived from the vocabulary
(GPT-2 spellings by id), the batch encoders (flat ids; ids with ``tokenizers``' offsets and
words; pre-split words; padded numpy) and ``decode``'s cleanup rule. Added tokens are the core's
to match (``BPE.derive``): one matcher, with ``tokenizers``' rules. Only public names of
:class:`hf_bpe.BPE` are used."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from transformers.tokenization_utils_base import TruncationStrategy
from transformers.utils import logging
from transformers.utils.generic import PaddingStrategy

from hf_bpe import _core, formats
from hf_bpe.bpe import BPE
from hf_bpe.progress import gc_paused
from hf_bpe.hf.post import offset_trim

__all__ = ["decode_ids", "TokenTables", "token_tables", "new_added", "encode_flat", "encode_texts",
           "encode_split_words", "numpy_batch", "pad_flat", "cleans_up"]


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


def trim_offsets(offs: np.ndarray, lead: np.ndarray, trail: np.ndarray, first: np.ndarray,
                 keep_one: bool) -> np.ndarray:
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
        return (bpe.encode_batch(texts, allowed_special=() if split_special else "all", disallowed_special=()),
                None, None)
    if bpe.dropout:
        raise ValueError(f"this tokenizer drops merges at random (dropout {bpe.dropout}): offsets, word ids and "
                         "encodings are not available with it; set tokenizer.bpe.dropout = None for them")
    ids, offs, words, off = bpe.encode_spans(texts, allowed_special=() if split_special else "all",
                                             disallowed_special=())
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
            "it strips spaces before punctuation. Set it False to silence this, "
            f"or {_FORCE_BPE_CLEANUP}=True to force it.")
        return False
    return bool(cleanup)


def decode_ids(token_ids) -> list:
    """``_decode``'s argument (an id, a list or an array of ids) as a list; a non-integer id is a ValueError."""
    if isinstance(token_ids, (int, np.integer)):
        token_ids = [token_ids]
    ids = token_ids.tolist() if isinstance(token_ids, np.ndarray) else list(token_ids)
    if (bad := next((i for i in ids if not isinstance(i, (int, np.integer)) or isinstance(i, bool)), None)) is not None:
        raise ValueError(f"token id {bad!r} is not a valid id (ids are integers)")
    return ids
