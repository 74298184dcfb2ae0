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
from hf_bpe.post import offset_trim

__all__ = ["TokenTables", "token_tables", "AddedSpec", "split_added", "encode_texts", "encode_split_words",
           "decode_with_added"]


# --------------------------------------------------------------------------------------------
# Derived tables, one per BPE object, kept here (not on the object: a BPE pickles as its core's
# state, and datasets hashes it by that) and dropped when the BPE is.


class TokenTables:
    """Each id's GPT-2 spelling (an added token, special or not, as its text, as ``tokenizers``
    spells it) and back; the spaces that spelling starts and ends with (for offset trimming)."""

    __slots__ = ("str_to_id", "id_to_str", "lead", "trail")

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
        if rs and right is not None:  # the stripped spaces are the token's (its offsets cover them)
            seg = text[right[0]:right[1]]
            right[0] += len(seg) - len(seg.lstrip())
            p[1] = right[0]
        if ls and left is not None:
            seg = text[left[0]:left[1]]
            left[1] -= len(seg) - len(seg.rstrip())
            p[0] = left[1]
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
    """Encodes texts: (ids per text, offsets per text or None, words per text or None), with
    ``offsets`` the chars each token touches (trimmed as the post-processor says) and the word
    (pre-tokenizer piece or added token) of each token, numbered per text, as ``tokenizers``."""
    native = split_special or not spec.items or spec.native_ok(bpe)
    if native and not offsets:
        flat, off = encode_flat(bpe, spec, texts, split_special)
        return _rows(flat, off), None, None
    trim = offset_trim(bpe.pipeline)
    if native:
        ids, offs, words, off = bpe.encode_spans(texts, allowed_special=() if split_special else "all",
                                                 disallowed_special=())
        if trim is not None:
            t = token_tables(bpe)
            first = offs[:, 0] == 0
            first[off[:-1][np.diff(off) > 0]] = True
            offs = trim_offsets(offs, t.lead[ids], t.trail[ids], first, trim)
        return _rows(ids, off), _rows(offs, off, pairs=True), _rows(words, off)
    # Cut on the added tokens; every plain piece of every text goes to the core in one call.
    cuts = [split_added(spec, t) for t in texts]
    plain = [t[s:e] for t, cs in zip(texts, cuts) for s, e, a in cs if a is None]
    if not offsets:
        enc = iter(bpe.encode_batch(plain, allowed_special=(), disallowed_special=()) if plain else [])
        return [[i for s, e, a in cs for i in ([a] if a is not None else next(enc))] for cs in cuts], None, None
    pi, po, pw = [], [], []
    if plain:
        ids, offs, words, off = bpe.encode_spans(plain, allowed_special=(), disallowed_special=())
        pi, po, pw = _rows(ids, off), _rows(offs, off, pairs=True), _rows(words, off)
    tables = token_tables(bpe) if trim is not None else None
    ids_out, offs_out, words_out, k = [], [], [], 0
    for text, cs in zip(texts, cuts):
        ids, of, ws, base, added = [], [], [], 0, []
        for s, e, a in cs:
            if a is not None:
                added.append((len(ids), *_spaces(text[s:e])))  # as tokenizers: the text it matched
                ids.append(a), of.append((s, e)), ws.append(base)
                base += 1
                continue
            ids += pi[k]
            of += [(x + s, y + s) for x, y in po[k]]
            ws += [w + base for w in pw[k]]
            base += pw[k][-1] + 1 if pw[k] else 0
            k += 1
        if tables is not None and ids:
            arr = np.minimum(np.asarray(ids), len(tables.lead) - 1)  # (ids past the vocabulary are added tokens)
            lead, trail = tables.lead[arr], tables.trail[arr]
            for pos, ld, tr in added:
                lead[pos], trail[pos] = ld, tr
            o = np.asarray(of, dtype=np.int64).reshape(-1, 2)
            first = o[:, 0] == 0
            first[0] = True
            of = list(map(tuple, trim_offsets(o, lead, trail, first, trim).tolist()))
        ids_out.append(ids), offs_out.append(of), words_out.append(ws)
    return ids_out, offs_out, words_out


def encode_split_words(bpe: BPE, spec: AddedSpec, rows: list, split_special: bool, offsets: bool):
    """:func:`encode_texts` of pre-split rows (``is_split_into_words``): each word encoded on its
    own, its tokens all of that word, offsets within the word (as ``tokenizers``' pre-tokenized
    input)."""
    ids, offs, _ = encode_texts(bpe, spec, [w for r in rows for w in r], split_special, offsets)
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
