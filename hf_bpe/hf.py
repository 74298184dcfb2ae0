"""Hugging Face integration: :class:`BPETokenizer`, a ``transformers.PreTrainedTokenizer`` whose
encoding goes straight to the native core, and :func:`map_fn`, an Arrow fast path for
``datasets.Dataset.map``.

Importing this module imports ``transformers`` (about a second); ``import hf_bpe`` does not, it
registers :class:`BPETokenizer` with ``AutoTokenizer`` lazily (see ``hf_bpe/__init__.py``).

Output follows transformers' own ``GPT2Tokenizer`` (the ``tokenizers``-backed class) built from
the same files: ids, attention masks, padding, truncation with ``stride`` and overflowing rows
(``overflow_to_sample_mapping``), special-token masks, lengths and character offsets.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from transformers import PreTrainedConfig, PreTrainedTokenizer
from transformers.tokenization_utils_base import AddedToken, BatchEncoding, TruncationStrategy
from transformers.utils.generic import PaddingStrategy

from hf_bpe import formats
from hf_bpe.bpe import BPE, _pattern_name

__all__ = ["BPETokenizer", "BPETokenizerConfig", "map_fn", "register"]

EOT = "<|endoftext|>"
_DEFAULT = object()  # "argument not given" (None means "no such token")


class BPETokenizerConfig(PreTrainedConfig):
    """A registry key for ``AutoTokenizer.register``; no model uses it."""

    model_type = "hf_bpe"


def register() -> None:
    """Registers :class:`BPETokenizer` with ``AutoTokenizer`` (idempotent; no ``auto_map`` and no
    ``trust_remote_code`` involved: folders naming ``tokenizer_class: BPETokenizer`` resolve to it)."""
    from transformers import AutoTokenizer

    AutoTokenizer.register(BPETokenizerConfig, tokenizer_class=BPETokenizer, exist_ok=True)


# --------------------------------------------------------------------------------------------
# Derived tables, cached on the BPE object (which pickles as its compact blob, so the cache is
# never hashed by datasets nor shipped to worker processes).


class _Tables:
    __slots__ = ("str_to_id", "id_to_str", "n", "byte_len", "first_cont")

    def __init__(self, bpe: BPE) -> None:
        vocab = bpe._vocab
        special_ids = {i: s for s, i in bpe.special_tokens.items()}
        self.id_to_str = {i: special_ids.get(i) or formats.token_to_str(b) for i, b in vocab.items()}
        self.str_to_id = {s: i for i, s in sorted(self.id_to_str.items())}
        self.n = max(vocab) + 1
        self.byte_len = np.zeros(self.n, dtype=np.int64)
        self.first_cont = np.zeros(self.n, dtype=bool)
        for i, b in vocab.items():
            self.byte_len[i] = len(b)
            self.first_cont[i] = bool(b) and (b[0] & 0xC0) == 0x80


def _tables(bpe: BPE) -> _Tables:
    t = bpe.__dict__.get("_hf_tables")
    if t is None:
        t = bpe.__dict__["_hf_tables"] = _Tables(bpe)
    return t


# --------------------------------------------------------------------------------------------
# Encoding text into per-sequence (ids, special flags, offsets) with added tokens honoured.


class _AddedSpec:
    """The added tokens as the encoder needs them: a tuple of (content, id, special, lstrip,
    rstrip, single_word), hashable and picklable; the split regex is built on demand."""

    def __init__(self, items: tuple) -> None:
        self.items = items
        self.by_content = {c: (i, sp, ls, rs, sw) for c, i, sp, ls, rs, sw in items}
        self.special_ids = frozenset(i for _, i, sp, *_ in items if sp)
        self.regex = (re.compile("|".join(re.escape(c) for c in sorted(self.by_content, key=lambda c: (-len(c), c))))
                      if items else None)

    def native_ok(self, bpe: BPE) -> bool:
        """True when every added token is one of the core's own special tokens (same id, no
        stripping), so the core can match them itself in one batch call."""
        sp = bpe.special_tokens
        return all(sp.get(c) == i and not (ls or rs or sw) for c, i, _, ls, rs, sw in self.items)


def _split_added(spec: _AddedSpec, text: str) -> list[tuple[int, int, int | None]]:
    """``text`` cut into (start, end, added_id or None) pieces, with the lstrip/rstrip/single_word
    handling of transformers' ``tokenize``."""
    pieces: list[list] = []
    pos = 0
    for m in spec.regex.finditer(text):
        if m.start() > pos:
            pieces.append([pos, m.start(), None])
        pieces.append([m.start(), m.end(), spec.by_content[m.group()][0], m.group()])
        pos = m.end()
    if pos < len(text) or not pieces:
        pieces.append([pos, len(text), None])
    for k, p in enumerate(pieces):
        if p[2] is None:
            continue
        _, sp, ls, rs, sw = spec.by_content[p[3]]
        left = pieces[k - 1] if k > 0 and pieces[k - 1][2] is None else None
        right = pieces[k + 1] if k + 1 < len(pieces) and pieces[k + 1][2] is None else None
        if rs and right is not None:
            seg = text[right[0]:right[1]]
            right[0] += len(seg) - len(seg.lstrip())
        if ls and left is not None:
            seg = text[left[0]:left[1]]
            left[1] -= len(seg) - len(seg.rstrip())
        if sw and ((left is not None and left[1] > left[0] and text[left[1] - 1] != " ")
                   or (right is not None and right[1] > right[0] and text[right[0]] != " ")):
            p[2] = None  # not a whole word: plain text
    out = []
    for p in pieces:
        if p[1] > p[0]:
            if out and p[2] is None and out[-1][2] is None and out[-1][1] == p[0]:
                out[-1] = (out[-1][0], p[1], None)
            else:
                out.append((p[0], p[1], p[2]))
    return out


def _hf_offsets(tables: _Tables, ids: list[int], core_offsets: list[tuple[int, int]], shift: int) -> list[tuple[int, int]]:
    """The core gives each character to the token holding its first byte (a token of continuation
    bytes only gets an empty span); HF gives every token the span of all the characters its bytes
    touch. The two differ only in the start of a token whose first byte is a continuation byte."""
    if not ids:
        return []
    arr = np.asarray(core_offsets, dtype=np.int64).reshape(-1, 2)
    starts = arr[:, 0] - tables.first_cont[np.asarray(ids, dtype=np.int64)]
    ends = arr[:, 1]
    return list(zip((starts + shift).tolist(), (ends + shift).tolist()))


def _encode_texts(bpe: BPE, spec: _AddedSpec, texts: list[str], split_special: bool, offsets: bool):
    """Encodes texts. Returns (ids per text, offsets per text or None)."""
    n = len(texts)
    if not offsets and (split_special or not spec.items or spec.native_ok(bpe)):
        allowed = () if split_special else "all"
        flat, off = bpe.encode_batch_flat(texts, allowed_special=allowed, disallowed_special=())
        flat_l, off_l = flat.tolist(), off.tolist()
        return [flat_l[off_l[k]:off_l[k + 1]] for k in range(n)], None
    # General path: cut on added tokens, encode every plain piece of every text in one call.
    cuts = [[(0, len(t), None)] if split_special or not spec.items else _split_added(spec, t) for t in texts]
    ids_out, offs_out = [], [] if offsets else None
    tables = _tables(bpe) if offsets else None
    core = bpe._encoder()
    if not offsets:
        plain = [t[s:e] for t, cs in zip(texts, cuts) for s, e, a in cs if a is None]
        enc = iter(bpe.encode_batch(plain, allowed_special=(), disallowed_special=()) if plain else [])
    for t, cs in zip(texts, cuts):
        ids: list[int] = []
        of: list[tuple[int, int]] = []
        for s, e, a in cs:
            if a is not None:
                ids.append(a)
                if offsets:
                    of.append((s, e))
                continue
            if offsets:
                piece_ids, piece_off = core.encode_with_offsets(t[s:e], (), ())
                of.extend(_hf_offsets(tables, piece_ids, piece_off, s))
            else:
                piece_ids = next(enc)
            ids.extend(piece_ids)
        ids_out.append(ids)
        if offsets:
            offs_out.append(of)
    return ids_out, offs_out


# --------------------------------------------------------------------------------------------
# Truncation windows, as the `tokenizers` library cuts them.


def _windows(n: int, keep: int, stride: int, left: bool) -> list[tuple[int, int]]:
    """Ranges of a sequence of length n cut to ``keep`` tokens: the kept part first, then the
    overflowing windows, each overlapping the previous one by ``stride`` tokens."""
    if n <= keep:
        return [(0, n)]
    if keep == 0:
        return [(0, 0)]
    if stride >= keep:
        raise ValueError(f"stride ({stride}) must be smaller than the number of tokens kept per sequence ({keep})")
    step = keep - stride
    out = []
    if not left:
        for start in range(0, n, step):
            stop = min(start + keep, n)
            out.append((start, stop))
            if stop == n:
                break
    else:
        for stop in range(n, 0, -step):
            start = max(stop - keep, 0)
            out.append((start, stop))
            if start == 0:
                break
    return out


def _pair_keep(n1: int, n2: int, max_len: int, strategy: TruncationStrategy) -> tuple[int, int]:
    if n1 + n2 <= max_len:
        return n1, n2
    if strategy == TruncationStrategy.ONLY_FIRST:
        if max_len < n2:
            raise ValueError("Truncation error: Sequence to truncate too short to respect the provided max_length")
        return max_len - n2, n2
    if strategy == TruncationStrategy.ONLY_SECOND:
        if max_len < n1:
            raise ValueError("Truncation error: Sequence to truncate too short to respect the provided max_length")
        return n1, max_len - n1
    swap = n1 > n2
    a, b = (n2, n1) if swap else (n1, n2)
    b = a if a > max_len else max(a, max_len - a)
    if a + b > max_len:
        a = max_len // 2
        b = a + max_len % 2
    return (b, a) if swap else (a, b)


# --------------------------------------------------------------------------------------------


class BPETokenizer(PreTrainedTokenizer):
    """A GPT-2 style byte-level BPE tokenizer for ``transformers`` backed by :class:`hf_bpe.BPE`.

    >>> tok = BPETokenizer.from_pretrained("out/")           # doctest: +SKIP
    >>> tok = hf_bpe.BPE.load("out/").to_transformers()      # doctest: +SKIP
    >>> ds = ds.map(tok, batched=True)                       # doctest: +SKIP

    Calling it on a ``datasets`` batch (any ``Mapping``) encodes the ``text_column`` column; on a
    ``pyarrow.Table`` it appends ``input_ids``/``attention_mask`` columns.
    """

    vocab_files_names = {"vocab_file": "vocab.json", "merges_file": "merges.txt", "tokenizer_file": "tokenizer.json"}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(
        self,
        vocab_file: str | None = None,
        merges_file: str | None = None,
        tokenizer_file: str | None = None,
        *,
        bpe: BPE | None = None,
        errors: str = "replace",
        unk_token: Any = _DEFAULT,
        bos_token: Any = _DEFAULT,
        eos_token: Any = _DEFAULT,
        pad_token: Any = None,
        add_prefix_space: bool = False,
        text_column: str = "text",
        **kwargs: Any,
    ) -> None:
        if add_prefix_space:
            raise ValueError("add_prefix_space=True is not supported by hf_bpe's BPETokenizer")
        if bpe is None:
            bpe = _load_bpe(vocab_file, merges_file, tokenizer_file)
        elif not isinstance(bpe, BPE):
            raise TypeError(f"bpe must be an hf_bpe.BPE, got {type(bpe).__name__}")
        self.bpe = bpe  # before super().__init__: it calls get_vocab()
        self.errors = errors
        self.text_column = text_column
        default = EOT if EOT in bpe.special_tokens else None
        unk_token = default if unk_token is _DEFAULT else unk_token
        bos_token = default if bos_token is _DEFAULT else bos_token
        eos_token = default if eos_token is _DEFAULT else eos_token
        self._added_tokens_decoder = {
            i: AddedToken(s, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False)
            for s, i in sorted(bpe.special_tokens.items(), key=lambda kv: kv[1])
        }
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        super().__init__(errors=errors, unk_token=unk_token, bos_token=bos_token, eos_token=eos_token,
                         pad_token=pad_token, add_prefix_space=False, text_column=text_column, **kwargs)

    # ---- conversions -----------------------------------------------------------------------

    @classmethod
    def from_bpe(cls, bpe: BPE, **kwargs: Any) -> "BPETokenizer":
        return cls(bpe=bpe, **kwargs)

    @property
    def vocab_size(self) -> int:
        return self.bpe.vocab_size

    def get_vocab(self) -> dict[str, int]:
        v = dict(_tables(self.bpe).str_to_id)
        v.update(self._added_tokens_encoder)
        return v

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        t = _tables(self.bpe).id_to_str
        return [t[i] for i in self.bpe.encode_ordinary(text)]

    def _convert_token_to_id(self, token: str) -> int | None:
        i = _tables(self.bpe).str_to_id.get(token)
        if i is None and self.unk_token is not None:
            i = _tables(self.bpe).str_to_id.get(str(self.unk_token))
        return i

    def _convert_id_to_token(self, index: int) -> str | None:
        return _tables(self.bpe).id_to_str.get(int(index))

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        out = bytearray()
        for t in tokens:
            b = None if t in self._added_tokens_encoder else formats.str_to_token(t)
            out += t.encode("utf-8") if b is None else b
        return out.decode("utf-8", errors=self.errors)

    def _decode(self, token_ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool | None = None,
                **kwargs: Any) -> str:
        if isinstance(token_ids, (int, np.integer)):
            token_ids = [token_ids]
        ids = token_ids.tolist() if isinstance(token_ids, np.ndarray) else [int(i) for i in token_ids]
        if skip_special_tokens:
            skip = set(self.all_special_ids)
            ids = [i for i in ids if i not in skip]
        vocab = self.bpe._vocab
        foreign = {i for i in self._added_tokens_decoder if i not in vocab}
        if not foreign.intersection(ids):
            data = self.bpe.decode_bytes(ids)
        else:
            parts, run = [], []
            for i in ids:
                if i in foreign:
                    if run:
                        parts.append(self.bpe.decode_bytes(run))
                        run = []
                    parts.append(self._added_tokens_decoder[i].content.encode("utf-8"))
                else:
                    run.append(i)
            if run:
                parts.append(self.bpe.decode_bytes(run))
            data = b"".join(parts)
        text = data.decode("utf-8", errors=self.errors)
        cleanup = self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None else clean_up_tokenization_spaces
        return self.clean_up_tokenization(text) if cleanup else text

    # ---- files -----------------------------------------------------------------------------

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        if not os.path.isdir(save_directory):
            raise NotADirectoryError(f"{save_directory} is not a folder")
        b = self.bpe
        name = "gpt2" if _pattern_name(b.pattern) == "gpt2" else "custom"
        files = formats.folder_files(b._vocab, b.merges, b.special_tokens, name, b.pattern_source, type(self).__name__)
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        written = []
        for fname in ("vocab.json", "merges.txt", "tokenizer.json"):
            path = os.path.join(save_directory, prefix + fname)
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(files[fname])
            os.replace(tmp, path)
            written.append(path)
        return tuple(written)

    def save_pretrained(self, save_directory, *args: Any, **kwargs: Any):
        """``PreTrainedTokenizer.save_pretrained`` without the load-time keys transformers leaks
        into ``tokenizer_config.json`` (``is_local``, ``local_files_only``)."""
        leaked = {k: self.init_kwargs.pop(k) for k in ("is_local", "local_files_only") if k in self.init_kwargs}
        try:
            return super().save_pretrained(save_directory, *args, **kwargs)
        finally:
            self.init_kwargs.update(leaked)

    # ---- encoding --------------------------------------------------------------------------

    def _added_spec(self) -> _AddedSpec:
        items = tuple(sorted((t.content, i, bool(t.special), bool(t.lstrip), bool(t.rstrip), bool(t.single_word))
                             for i, t in self._added_tokens_decoder.items()))
        cache = self.__dict__.setdefault("cache", {})  # datasets' hasher ignores a dict named `cache`
        spec = cache.get("added_spec")
        if spec is None or spec.items != items:
            spec = cache["added_spec"] = _AddedSpec(items)
        return spec

    def encode_texts(self, texts: list[str], split_special_tokens: bool | None = None) -> list[list[int]]:
        """Ids of each text (added tokens matched), without special tokens added, truncation or padding."""
        sst = self.split_special_tokens if split_special_tokens is None else split_special_tokens
        return _encode_texts(self.bpe, self._added_spec(), list(texts), sst, False)[0]

    def _encode_plus(self, text, text_pair=None, add_special_tokens: bool = True,
                     padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
                     truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
                     max_length: int | None = None, stride: int = 0, is_split_into_words: bool = False,
                     pad_to_multiple_of: int | None = None, padding_side: str | None = None, return_tensors=None,
                     return_token_type_ids: bool | None = None, return_attention_mask: bool | None = None,
                     return_overflowing_tokens: bool = False, return_special_tokens_mask: bool = False,
                     return_offsets_mapping: bool = False, return_length: bool = False, verbose: bool = True,
                     split_special_tokens: bool | None = None, **kwargs: Any) -> BatchEncoding:
        batched = isinstance(text, (list, tuple))
        texts = list(text) if batched else [text]
        pairs = None
        if text_pair is not None:
            if batched and (not isinstance(text_pair, (list, tuple)) or len(text_pair) != len(texts)):
                raise ValueError("If `text` is a batch, `text_pair` must also be a batch of the same length.")
            pairs = list(text_pair) if batched else [text_pair]
        elif batched and texts and all(isinstance(t, tuple) and len(t) == 2 for t in texts):
            texts, pairs = [t[0] for t in texts], [t[1] for t in texts]
        simple = (not is_split_into_words and not kwargs.get("sanitize_control_tokens")
                  and all(isinstance(t, str) for t in texts)
                  and (pairs is None or all(isinstance(t, str) for t in pairs)))
        if not simple:
            if return_offsets_mapping:
                raise NotImplementedError(
                    "return_offsets_mapping=True is supported for str / list[str] inputs (and pairs) only")
            return super()._encode_plus(
                text, text_pair=text_pair, add_special_tokens=add_special_tokens, padding_strategy=padding_strategy,
                truncation_strategy=truncation_strategy, max_length=max_length, stride=stride,
                is_split_into_words=is_split_into_words, pad_to_multiple_of=pad_to_multiple_of,
                padding_side=padding_side, return_tensors=return_tensors, return_token_type_ids=return_token_type_ids,
                return_attention_mask=return_attention_mask, return_overflowing_tokens=return_overflowing_tokens,
                return_special_tokens_mask=return_special_tokens_mask, return_length=return_length, verbose=verbose,
                split_special_tokens=split_special_tokens, **kwargs)
        sst = self.split_special_tokens if split_special_tokens is None else split_special_tokens
        spec = self._added_spec()
        a_ids, a_offs = _encode_texts(self.bpe, spec, texts, sst, return_offsets_mapping)
        if pairs is not None:
            b_ids, b_offs = _encode_texts(self.bpe, spec, pairs, sst, return_offsets_mapping)
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        n_special = (self.num_special_tokens_to_add(pair=pairs is not None) if add_special_tokens else 0)

        # Fast exit: nothing but ids (and a mask of ones).
        if (pairs is None and n_special == 0 and padding_strategy == PaddingStrategy.DO_NOT_PAD
                and truncation_strategy == TruncationStrategy.DO_NOT_TRUNCATE and not return_overflowing_tokens
                and not (return_token_type_ids or return_special_tokens_mask or return_offsets_mapping or return_length)):
            data: dict[str, Any] = {"input_ids": a_ids}
            if return_attention_mask:
                data["attention_mask"] = [[1] * len(x) for x in a_ids]
            for x in a_ids:
                self._eventual_warn_about_too_long_sequence(x, max_length, verbose)
            if not batched and return_tensors is None:
                data = {k: v[0] for k, v in data.items()}
            return BatchEncoding(data, tensor_type=return_tensors)

        truncate = truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None
        left = self.truncation_side == "left"
        rows: dict[str, list] = {}
        mapping: list[int] = []

        def seq(ids, offs, k, rng):
            s, e = rng
            return ids[k][s:e], (offs[k][s:e] if offs is not None else None)

        for k in range(len(texts)):
            na = len(a_ids[k])
            if pairs is None:
                if truncate:
                    keep = max_length - n_special
                    if keep < 0:
                        raise ValueError(f"max_length={max_length} is smaller than the {n_special} special tokens added")
                    if truncation_strategy == TruncationStrategy.ONLY_SECOND and na > keep:
                        raise ValueError("Truncation error: truncation='only_second' needs a second sequence (text_pair)")
                    wins = _windows(na, keep, stride, left)
                else:
                    wins = [(0, na)]
                combos = [(w, None) for w in wins]
            else:
                nb = len(b_ids[k])
                if truncate:
                    ka, kb = _pair_keep(na, nb, max(max_length - n_special, 0), truncation_strategy)
                    wa, wb = _windows(na, ka, stride, left), _windows(nb, kb, stride, left)
                else:
                    wa, wb = [(0, na)], [(0, nb)]
                combos = [(wa[0], wb[0])] + [(x, y) for x in wa[1:] for y in wb] + [(wa[0], y) for y in wb[1:]]
            if not return_overflowing_tokens:
                combos = combos[:1]
            for ra, rb in combos:
                ia, oa = seq(a_ids, a_offs, k, ra)
                ib = ob = None
                if rb is not None:
                    ib, ob = seq(b_ids, b_offs, k, rb)
                self._emit(rows, ia, oa, ib, ob, add_special_tokens, return_token_type_ids,
                           return_special_tokens_mask, return_offsets_mapping)
                mapping.append(k)

        for x in rows["input_ids"]:
            self._eventual_warn_about_too_long_sequence(x, max_length, verbose)
        self._pad_rows(rows, padding_strategy, max_length, pad_to_multiple_of, padding_side)
        if return_attention_mask:
            pass  # made by _pad_rows
        else:
            rows.pop("attention_mask")
        if return_length:
            rows["length"] = [len(x) for x in rows["input_ids"]]
        if return_overflowing_tokens:
            rows["overflow_to_sample_mapping"] = mapping
        if not batched and return_tensors is None and not return_overflowing_tokens:
            # as transformers' tokenizers backend: per-token lists lose the batch axis, scalars don't
            rows = {k: (v[0] if v and isinstance(v[0], list) else v) for k, v in rows.items()}
        return BatchEncoding(rows, tensor_type=return_tensors)

    def _emit(self, rows, ia, oa, ib, ob, add_special, want_tt, want_mask, want_offs) -> None:
        if add_special:
            ids = self.build_inputs_with_special_tokens(ia, ib)
        else:
            ids = ia + (ib if ib is not None else [])
        pair_len = len(ia) + (len(ib) if ib is not None else 0)
        rows.setdefault("input_ids", []).append(ids)
        rows.setdefault("attention_mask", []).append([1] * len(ids))
        if want_tt:
            if add_special:
                tt = self.create_token_type_ids_from_sequences(ia, ib)
            else:
                tt = [0] * len(ia) + ([1] * len(ib) if ib is not None else [])
            rows.setdefault("token_type_ids", []).append(tt)
        if want_mask or want_offs:
            # 1 for the special tokens the template adds around the sequences (as transformers'
            # GPT2Tokenizer: special tokens written in the text itself count as content).
            if add_special and len(ids) != pair_len:
                sm = self.get_special_tokens_mask(ia, ib)
            else:
                sm = [0] * len(ids)
            if want_mask:
                rows.setdefault("special_tokens_mask", []).append(sm)
            if want_offs:
                offs = iter((oa or []) + (ob or []))
                rows.setdefault("offset_mapping", []).append([(0, 0) if bit else next(offs) for bit in sm])

    def _pad_rows(self, rows, strategy, max_length, multiple, side) -> None:
        if strategy == PaddingStrategy.DO_NOT_PAD:
            return
        ids = rows["input_ids"]
        target = max(map(len, ids), default=0) if strategy == PaddingStrategy.LONGEST else max_length
        if target is None:
            return
        if multiple and target % multiple:
            target = (target // multiple + 1) * multiple
        side = side or self.padding_side
        if self.pad_token_id is None:
            raise ValueError("Asking to pad but the tokenizer does not have a padding token: set tokenizer.pad_token")
        fill = {"input_ids": self.pad_token_id, "attention_mask": 0, "token_type_ids": self.pad_token_type_id,
                "special_tokens_mask": 1, "offset_mapping": (0, 0)}
        for key, vals in rows.items():
            f = fill[key]
            for r, v in enumerate(vals):
                d = target - len(v)
                if d > 0:
                    vals[r] = v + [f] * d if side == "right" else [f] * d + v

    # ---- datasets ----------------------------------------------------------------------------

    def __call__(self, text=None, *args: Any, **kwargs: Any):
        """As ``PreTrainedTokenizer.__call__``, plus: a ``Mapping`` (a ``datasets`` batch or row)
        encodes its ``text_column``; a ``pyarrow.Table`` gets the encoding appended as columns."""
        if isinstance(text, Mapping):
            if self.text_column not in text:
                raise KeyError(f"column {self.text_column!r} not in the batch (columns: {list(text.keys())}); "
                               f"set tokenizer.text_column")
            col = text[self.text_column]
            return dict(super().__call__(col if isinstance(col, str) else list(col), *args, **kwargs))
        if _is_arrow_table(text):
            return self._call_arrow(text, *args, **kwargs)
        return super().__call__(text, *args, **kwargs)

    def _call_arrow(self, table, *args: Any, **kwargs: Any):
        import pyarrow as pa

        if self.text_column not in table.column_names:
            raise KeyError(f"column {self.text_column!r} not in the table (columns: {table.column_names})")
        texts = table.column(self.text_column).to_pylist()
        if not args and not kwargs:
            cols = _arrow_columns(self.bpe, self._added_spec(), texts, self.split_special_tokens,
                                  "attention_mask" in self.model_input_names)
        else:
            enc = super().__call__(texts, *args, **kwargs)
            cols = {k: pa.array(v, type=pa.list_(pa.int32()) if k != "offset_mapping" else None)
                    if isinstance(v, list) and v and isinstance(v[0], list) else pa.array(v)
                    for k, v in enc.items()}
        for k, v in cols.items():
            if k in table.column_names:
                table = table.drop_columns([k])
            table = table.append_column(k, v)
        return table


def _is_arrow_table(x: object) -> bool:
    t = type(x)
    return t.__name__ == "Table" and t.__module__.startswith("pyarrow")


def _arrow_columns(bpe: BPE, spec: _AddedSpec, texts: list, split_special: bool, attention_mask: bool) -> dict:
    import pyarrow as pa

    texts = ["" if t is None else t for t in texts]
    if split_special or not spec.items or spec.native_ok(bpe):
        flat, off = bpe.encode_batch_flat(texts, allowed_special=() if split_special else "all", disallowed_special=())
        flat = flat.astype(np.int32, copy=False)
    else:
        lists = _encode_texts(bpe, spec, texts, split_special, False)[0]
        lens = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        off = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        flat = np.fromiter((i for x in lists for i in x), dtype=np.int32, count=int(off[-1]))
    offsets = pa.array(off.astype(np.int32))
    cols = {"input_ids": pa.ListArray.from_arrays(offsets, pa.array(flat, type=pa.int32()))}
    if attention_mask:
        cols["attention_mask"] = pa.ListArray.from_arrays(offsets, pa.array(np.ones(len(flat), dtype=np.int8)))
    return cols


class ArrowMapFn:
    """``ds.with_format("arrow").map(fn, batched=True)``: appends ``input_ids`` (``list<int32>``)
    and ``attention_mask`` (``list<int8>``) to each Arrow batch. Picklable and hashed by datasets
    from its compact, deterministic state (the BPE blob and the options)."""

    def __init__(self, bpe: BPE, column: str = "text", attention_mask: bool = True,
                 added_tokens: tuple = (), split_special_tokens: bool = False) -> None:
        self.bpe = bpe
        self.column = column
        self.attention_mask = attention_mask
        self.added_tokens = tuple(added_tokens)
        self.split_special_tokens = split_special_tokens

    def __reduce__(self):
        return (type(self), (self.bpe, self.column, self.attention_mask, self.added_tokens, self.split_special_tokens))

    def __call__(self, batch):
        import pyarrow as pa

        if isinstance(batch, pa.Table):
            if self.column not in batch.column_names:
                raise KeyError(f"column {self.column!r} not in the table (columns: {batch.column_names})")
            texts = batch.column(self.column).to_pylist()
        elif isinstance(batch, Mapping):
            texts = list(batch[self.column])
            batch = pa.table({self.column: pa.array(texts, type=pa.string())})
        else:
            raise TypeError(f"expected a pyarrow.Table batch (use ds.with_format('arrow').map(fn, batched=True)), "
                            f"got {type(batch).__name__}")
        spec = _AddedSpec(self.added_tokens) if self.added_tokens else _AddedSpec(())
        cols = _arrow_columns(self.bpe, spec, texts, self.split_special_tokens, self.attention_mask)
        for k, v in cols.items():
            if k in batch.column_names:
                batch = batch.drop_columns([k])
            batch = batch.append_column(k, v)
        return batch


def map_fn(tok_or_bpe: "BPETokenizer | BPE", column: str = "text", attention_mask: bool = True,
           split_special_tokens: bool = False) -> ArrowMapFn:
    """A small picklable callable for ``ds.with_format("arrow").map(fn, batched=True)`` that
    returns the batch as a ``pyarrow.Table`` with ``input_ids`` (``list<int32>``) and
    ``attention_mask`` columns: the fastest way to tokenize a dataset. Special tokens of the
    vocabulary (and a tokenizer's added tokens) in the text become their ids."""
    if isinstance(tok_or_bpe, BPETokenizer):
        spec = tok_or_bpe._added_spec()
        return ArrowMapFn(tok_or_bpe.bpe, column, attention_mask, () if spec.native_ok(tok_or_bpe.bpe) else spec.items,
                          split_special_tokens)
    if isinstance(tok_or_bpe, BPE):
        return ArrowMapFn(tok_or_bpe, column, attention_mask, (), split_special_tokens)
    raise TypeError(f"expected an hf_bpe.BPETokenizer or hf_bpe.BPE, got {type(tok_or_bpe).__name__}")


def _load_bpe(vocab_file, merges_file, tokenizer_file) -> BPE:
    if vocab_file and merges_file:
        declared: list[str] = []
        pattern = "gpt2"
        if tokenizer_file and Path(tokenizer_file).is_file():
            raw = formats._load_json(Path(tokenizer_file))
            if isinstance(raw, dict):
                declared = [t["content"] for t in raw.get("added_tokens") or [] if isinstance(t, dict) and t.get("special")]
                pattern = formats._pattern_from_pre_tokenizer(raw.get("pre_tokenizer"), Path(tokenizer_file))
        vocab, merges, specials = formats.read_gpt2_files(vocab_file, merges_file, declared)
        return BPE(vocab, merges, specials, _pattern_name(pattern))
    if tokenizer_file:
        return BPE.load(tokenizer_file)
    raise ValueError("BPETokenizer needs vocab_file + merges_file, tokenizer_file, or bpe=hf_bpe.BPE(...)")


register()  # also when this module is imported directly (the import hook may have run too early)
