"""The encoding helpers behind :class:`hf_bpe.BPETokenizer`: tables derived from the vocabulary
(GPT-2 spellings by id), added tokens (cutting text on them with transformers' lstrip / rstrip /
single_word rules), the batch encoder, transformers-style offsets, and truncation windows as the
``tokenizers`` library cuts them. Only public names of :class:`hf_bpe.BPE` are used."""

from __future__ import annotations

import json
import re
import weakref

import numpy as np
from transformers.tokenization_utils_base import TruncationStrategy
from transformers.utils.generic import PaddingStrategy

from hf_bpe import formats
from hf_bpe.bpe import BPE, gc_paused, pad_flat

__all__ = ["TokenTables", "token_tables", "AddedSpec", "split_added", "hf_offsets", "encode_texts", "windows",
           "pair_keep", "pad_rows", "decode_with_added"]


# --------------------------------------------------------------------------------------------
# Derived tables, one per BPE object, kept here (not on the object: a BPE pickles as its core's
# state, and datasets hashes it by that) and dropped when the BPE is.


class TokenTables:
    """Each id's GPT-2 spelling (an added token, special or not, as its text, as ``tokenizers``
    spells it) and back, and which ids start with a UTF-8 continuation byte."""

    __slots__ = ("str_to_id", "id_to_str", "first_cont")

    def __init__(self, bpe: BPE) -> None:
        vocab = bpe.vocab
        added = {i: s for s, i in bpe.special_tokens.items()} | {t.id: t.content for t in bpe.added_tokens}
        self.id_to_str = {i: added.get(i) or formats.token_to_str(b) for i, b in vocab.items()}
        self.str_to_id = {s: i for i, s in sorted(self.id_to_str.items())}
        self.first_cont = np.zeros(max(vocab) + 1, dtype=bool)
        for i, b in vocab.items():
            self.first_cont[i] = bool(b) and (b[0] & 0xC0) == 0x80


_TABLES: dict[int, TokenTables] = {}


def with_added(bpe: BPE, decoder: dict) -> list[formats.AddedToken]:
    """``bpe``'s added tokens, then those of a tokenizer's ``added_tokens_decoder`` (id ->
    ``transformers.AddedToken``) that it lacks (``add_tokens``/``add_special_tokens``), by id."""
    own = {t.id for t in bpe.added_tokens}
    new = [formats.AddedToken(str(t.content), i, bool(t.special), bool(t.lstrip), bool(t.rstrip), bool(t.single_word),
                              bool(t.normalized)) for i, t in sorted(decoder.items()) if i not in own]
    return [*bpe.added_tokens, *new]


def token_tables(bpe: BPE) -> TokenTables:
    """The :class:`TokenTables` of ``bpe``, built on first use."""
    t = _TABLES.get(id(bpe))
    if t is None:
        t = _TABLES[id(bpe)] = TokenTables(bpe)
        weakref.finalize(bpe, _TABLES.pop, id(bpe), None)
    return t


# --------------------------------------------------------------------------------------------
# Encoding text into per-sequence (ids, special flags, offsets) with added tokens honoured.


class AddedSpec:
    """The added tokens as the encoder needs them: a tuple of (content, id, special, lstrip,
    rstrip, single_word), hashable and picklable, with the regex that finds them (longest first)."""

    def __init__(self, items: tuple) -> None:
        self.items = items
        self.by_content = {c: (i, sp, ls, rs, sw) for c, i, sp, ls, rs, sw in items}
        self.regex = (re.compile("|".join(re.escape(c) for c in sorted(self.by_content, key=lambda c: (-len(c), c))))
                      if items else None)

    def native_ok(self, bpe: BPE) -> bool:
        """True when every added token is one of the core's own special tokens (same id, no
        stripping), so the core can match them itself in one batch call."""
        sp = bpe.special_tokens
        return all(sp.get(c) == i and not (ls or rs or sw) for c, i, _, ls, rs, sw in self.items)


def split_added(spec: AddedSpec, text: str) -> list[tuple[int, int, int | None]]:
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


def hf_offsets(tables: TokenTables, ids: list[int], core_offsets: list[tuple[int, int]], shift: int) -> list[tuple[int, int]]:
    """The core gives each character to the token holding its first byte (a token of continuation
    bytes only gets an empty span); HF gives every token the span of all the characters its bytes
    touch. The two differ only in the start of a token whose first byte is a continuation byte."""
    if not ids:
        return []
    arr = np.asarray(core_offsets, dtype=np.int64).reshape(-1, 2)
    starts = arr[:, 0] - tables.first_cont[np.asarray(ids, dtype=np.int64)]
    ends = arr[:, 1]
    return list(zip((starts + shift).tolist(), (ends + shift).tolist()))


def encode_flat(bpe: BPE, spec: AddedSpec, texts: list[str], split_special: bool) -> tuple[np.ndarray, np.ndarray]:
    """The ids of all texts as one flat ``int32`` array plus ``int64`` offsets (n + 1)."""
    if split_special or not spec.items or spec.native_ok(bpe):
        allowed = () if split_special else "all"
        flat, off = bpe.encode_batch_flat(texts, allowed_special=allowed, disallowed_special=())
        return flat.view(np.int32), off
    lists = encode_texts(bpe, spec, texts, split_special, False)[0]
    off = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, lists), dtype=np.int64, count=len(lists)), out=off[1:])
    return np.fromiter((i for x in lists for i in x), dtype=np.int32, count=int(off[-1])), off


def padded_arrays(flat: np.ndarray, off: np.ndarray, strategy: PaddingStrategy, max_length: int | None,
                  truncate: bool, multiple: int | None, side: str, truncation_side: str, pad_id: int | None,
                  attention_mask: bool) -> dict[str, np.ndarray]:
    """``input_ids`` (and ``attention_mask``) as 2-D ``int64`` arrays, rows truncated to
    ``max_length`` (on ``truncation_side``) when ``truncate`` and padded (``pad_rows``' rules),
    written by the core from the flat ids (:func:`hf_bpe.bpe.pad_flat`)."""
    lens = np.diff(off)
    if truncate:
        lens = np.minimum(lens, max_length)
    longest = int(lens.max(initial=0))
    target = longest if strategy == PaddingStrategy.LONGEST or max_length is None else max(max_length, longest)
    if strategy == PaddingStrategy.DO_NOT_PAD:
        if (lens != longest).any():
            raise ValueError("Unable to create tensor, you should probably activate truncation and/or padding with "
                             "'padding=True' 'truncation=True' to have batched tensors with the same length.")
        target = longest
    if multiple and target % multiple:
        target = (target // multiple + 1) * multiple
    if pad_id is None and (lens != target).any():
        raise ValueError("Asking to pad but the tokenizer does not have a padding token: set tokenizer.pad_token")
    ids, mask = pad_flat(flat.view(np.uint32), off, target, pad_id or 0, side == "left", truncation_side == "left",
                         attention_mask)
    return {"input_ids": ids, "attention_mask": mask} if attention_mask else {"input_ids": ids}


def numpy_batch(tok, spec: AddedSpec, texts: list[str], split_special: bool, padding: PaddingStrategy,
                truncation: TruncationStrategy, max_length: int | None, multiple: int | None, padding_side: str | None,
                attention_mask: bool | None, verbose: bool) -> dict[str, np.ndarray]:
    """``tok(texts, return_tensors="np", ...)`` for a batch of single texts with nothing added
    around them: one 2-D array per column, written by numpy from the flat ids."""
    flat, off = encode_flat(tok.bpe, spec, texts, split_special)
    tok._eventual_warn_about_too_long_sequence(range(int(np.diff(off).max(initial=0))), max_length, verbose)
    truncate = truncation != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None
    mask = "attention_mask" in tok.model_input_names if attention_mask is None else attention_mask
    return padded_arrays(flat, off, padding, max_length, truncate, multiple, padding_side or tok.padding_side,
                         tok.truncation_side, tok.pad_token_id, mask)


def encode_texts(bpe: BPE, spec: AddedSpec, texts: list[str], split_special: bool, offsets: bool):
    """Encodes texts. Returns (ids per text, offsets per text or None)."""
    n = len(texts)
    if not offsets and (split_special or not spec.items or spec.native_ok(bpe)):
        flat, off = encode_flat(bpe, spec, texts, split_special)
        with gc_paused():
            flat_l, off_l = flat.tolist(), off.tolist()
            return [flat_l[off_l[k]:off_l[k + 1]] for k in range(n)], None
    # General path: cut on added tokens, encode every plain piece of every text in one call.
    cuts = [[(0, len(t), None)] if split_special or not spec.items else split_added(spec, t) for t in texts]
    ids_out, offs_out = [], [] if offsets else None
    tables = token_tables(bpe) if offsets else None
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
                piece_ids, piece_off = bpe.encode_with_offsets(t[s:e], allowed_special=(), disallowed_special=())
                of.extend(hf_offsets(tables, piece_ids, piece_off, s))
            else:
                piece_ids = next(enc)
            ids.extend(piece_ids)
        ids_out.append(ids)
        if offsets:
            offs_out.append(of)
    return ids_out, offs_out


def decode_with_added(bpe: BPE, ids: list[int], added: dict[int, str]) -> bytes:
    """The bytes of ``ids``, where ids in ``added`` (added tokens the vocabulary lacks) are their text."""
    if not added or not added.keys() & set(ids):
        return bpe.decode_bytes(ids)
    parts, run = [], []
    for i in ids:
        if i in added:
            if run:
                parts.append(bpe.decode_bytes(run))
                run = []
            parts.append(added[i].encode("utf-8"))
        else:
            run.append(i)
    if run:
        parts.append(bpe.decode_bytes(run))
    return b"".join(parts)


# --------------------------------------------------------------------------------------------
# Truncation windows and padding, as the `tokenizers` library does them.


def windows(n: int, keep: int, stride: int, left: bool) -> list[tuple[int, int]]:
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


def pair_keep(n1: int, n2: int, max_len: int, strategy: TruncationStrategy) -> tuple[int, int]:
    """How many tokens of each sequence of a pair fit in ``max_len``, as ``tokenizers`` truncates."""
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


def pad_rows(rows: dict[str, list], strategy: PaddingStrategy, max_length: int | None, multiple: int | None,
             side: str, pad_id: int | None, pad_type_id: int) -> None:
    """Pads every per-token row in place, on ``side``, to the longest row (``LONGEST``) or to
    ``max_length`` (``MAX_LENGTH``), rounded up to a multiple of ``multiple``."""
    if strategy == PaddingStrategy.DO_NOT_PAD:
        return
    target = max(map(len, rows["input_ids"]), default=0) if strategy == PaddingStrategy.LONGEST else max_length
    if target is None:
        return
    if multiple and target % multiple:
        target = (target // multiple + 1) * multiple
    if pad_id is None:
        raise ValueError("Asking to pad but the tokenizer does not have a padding token: set tokenizer.pad_token")
    fill = {"input_ids": pad_id, "attention_mask": 0, "token_type_ids": pad_type_id,
            "special_tokens_mask": 1, "offset_mapping": (0, 0)}
    for key, vals in rows.items():
        f = fill[key]
        for r, v in enumerate(vals):
            d = target - len(v)
            if d > 0:
                vals[r] = v + [f] * d if side == "right" else [f] * d + v


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
    b = tok.bpe
    spec = formats.tokenizer_json(b.vocab, b.merges, b.special_tokens, b.pattern, with_added(b, tok.added_tokens_decoder),
                                  b.pipeline)
    return tokenizers.Tokenizer.from_str(json.dumps(spec))
