"""Pruning a vocabulary: merged tokens removed, the merges re-derived so that every remaining token
is still built from remaining tokens, and the ids compacted (or kept, with holes).

The merge list is walked in order. A merge whose two parts and result all remain is kept as it
is. A remaining token whose every merge lost a part is rebuilt where its first merge was:
its bytes are encoded with the merges kept before that point, and if they come out as two tokens,
those two are its new merge (with ``"he"`` gone, ``" the"``, once ``" t" + "he"``, becomes what
its bytes make just before its rank). If they come out as three or more, no single merge can
make it: it is removed too. So encoding never produces a removed id, and nothing changes where
nothing was removed. A tiktoken vocabulary (ids are ranks) stays one: the ranks keep their order.

Which tokens go: an explicit ``remove`` list, everything but a ``keep`` list, or down to
``vocab_size`` the tokens least emitted when encoding ``texts`` (without texts, the last merged).
Byte tokens and special/added tokens are never removed. Costs measured:
[log](../../docs/performance.md#pruning-and-dropout-issue-35).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from hf_bpe.bpe import BPE

__all__ = ["prune", "prune_bpe"]


def prune(tokenizer, vocab_size: int | None = None, *, remove: Iterable[bytes | str | int] | None = None,
          keep: Iterable[bytes | str | int] | None = None, texts: Sequence[str] | None = None,
          keep_ids: bool = False) -> tuple[Any, list[int]]:
    """``tokenizer`` (a :class:`~hf_bpe.BPE`, or a ``BPETokenizer``, which comes back as one with
    its added tokens and settings) without some of its merged tokens, and the map of old ids to
    new ones.

    Give one of ``vocab_size`` (tokens in all, as :attr:`BPE.vocab_size` counts them when ids are
    compact; the least emitted on ``texts`` go first, or without ``texts`` the last merged),
    ``remove`` or ``keep`` (tokens as ``bytes``, ``str`` or ids). Tokens whose every merge loses a
    part and that cannot be rebuilt from two remaining tokens go too (the module doc). Returns
    ``(pruned, id_map)``: ``id_map[old_id]`` is the new id, or -1 for a removed token. New ids
    keep the old order without holes; ``keep_ids=True`` keeps every id as it was (holes where
    tokens went).
    """
    own = getattr(tokenizer, "_pruned", None)
    if not isinstance(tokenizer, BPE) and own is not None:
        return own(vocab_size, remove=remove, keep=keep, texts=texts, keep_ids=keep_ids)
    return prune_bpe(tokenizer, vocab_size, remove=remove, keep=keep, texts=texts, keep_ids=keep_ids)


def prune_bpe(bpe: BPE, vocab_size: int | None = None, *, remove: Iterable[bytes | str | int] | None = None,
              keep: Iterable[bytes | str | int] | None = None, texts: Sequence[str] | None = None,
              keep_ids: bool = False) -> tuple[BPE, list[int]]:
    """:func:`prune` of a :class:`~hf_bpe.BPE`."""
    if not isinstance(bpe, BPE):
        raise TypeError(f"prune takes an hf_bpe.BPE (BPE.load reads every format) or a BPETokenizer, "
                        f"not {type(bpe).__name__}")
    if sum(x is not None for x in (vocab_size, remove, keep)) != 1:
        raise ValueError("give exactly one of vocab_size=, remove= or keep=")
    vocab = bpe.vocab
    protected = {t.id for t in bpe.added_tokens} | {i for i, b in vocab.items() if len(b) == 1}
    merged = [i for i in sorted(vocab) if i not in protected]
    if vocab_size is not None:
        gone = _by_size(bpe, vocab, merged, protected, vocab_size, texts)
    else:
        if remove is not None:
            gone = {_id_of(bpe, t, protected) for t in remove}
        else:
            listed = {_id_of(bpe, t, set()) for t in keep}  # (bytes and specials may be listed: they stay)
            gone = {i for i in merged if i not in listed}
    merges, gone = _rederived(bpe, vocab, gone)
    return _rebuilt(bpe, vocab, merges, gone, keep_ids)


def _id_of(bpe: BPE, token: bytes | str | int, protected: set[int]) -> int:
    """The id of a merged token given as bytes, str or id (a clear error otherwise)."""
    i = token if isinstance(token, int) else bpe.token_to_id(token)
    if i is None or (isinstance(token, int) and token not in bpe.vocab):
        raise ValueError(f"{token!r} is not a token of this vocabulary")
    if i in protected:
        raise ValueError(f"{token!r} (id {i}) is a byte or special/added token: those are never removed")
    return i


def _by_size(bpe: BPE, vocab: dict[int, bytes], merged: list[int], protected: set[int], vocab_size: int,
             texts: Sequence[str] | None) -> set[int]:
    """The tokens to remove so that ``vocab_size`` remain: the least useful first, plus what they take along."""
    floor = len(protected)
    if not isinstance(vocab_size, int) or vocab_size < floor:
        raise ValueError(f"vocab_size={vocab_size!r} is below the {floor} byte and special/added tokens, which stay")
    if vocab_size >= len(vocab):
        return set()
    if texts is not None:
        import numpy as np

        lists = bpe.encode_batch(list(texts), allowed_special="all", dropout=0)  # (never a file's dropout)
        ids = np.fromiter((i for x in lists for i in x), dtype=np.int64)
        uses = np.bincount(ids, minlength=max(vocab) + 1)
        order = sorted(merged, key=lambda i: (int(uses[i]), -i))  # least emitted, then the later one
    else:
        order = merged[::-1]
    want = len(vocab) - vocab_size  # tokens to remove in all

    def taken(k: int, extra: tuple[int, ...] = ()) -> set[int]:
        return _rederived(bpe, vocab, set(order[:k]) | set(extra))[1]

    lo, hi = 0, min(want, len(order))  # the most of `order` whose removal takes at most `want` along
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if len(taken(mid)) <= want else (lo, mid - 1)
    best, extra = taken(lo), ()
    for c in order[lo + 1:lo + 1 + 64]:  # then single ones further on that fit, until the size is met
        if len(best) == want:
            break
        more = taken(lo, extra + (c,))
        if len(more) <= want:
            best, extra = more, extra + (c,)
    return best


def _rederived(bpe: BPE, vocab: dict[int, bytes], gone: set[int]) -> tuple[list[tuple[bytes, bytes]], set[int]]:
    """The merges that remain once the ``gone`` ids are removed, and every id removed (with the
    tokens that can no longer be built)."""
    ids = {b: i for i, b in vocab.items() if i not in {t.id for t in bpe.added_tokens}}
    removed = {vocab[i] for i in gone}
    alive = {b for b in ids if len(b) == 1}
    made_by_merge = {a + b for a, b in bpe.merges}
    out: list[tuple[bytes, bytes]] = []
    ranks: dict[tuple[bytes, bytes], int] = {}
    for a, b in bpe.merges:
        t = a + b
        if t in removed or t not in ids:
            continue
        if a in alive and b in alive:
            pair = (a, b)
        elif t in alive:
            continue  # (another merge made it already)
        else:
            parts = _encode(t, ranks)
            if len(parts) != 2:
                removed.add(t)
                continue
            pair = (parts[0], parts[1])
        ranks.setdefault(pair, len(out))
        out.append(pair)
        alive.add(t)
    lost = {t for t in made_by_merge if t in ids and t not in alive}  # built by no merge any more
    return out, {ids[t] for t in removed | lost}


def _encode(word: bytes, ranks: dict[tuple[bytes, bytes], int]) -> list[bytes]:
    """``word`` merged by ``ranks`` (the lowest-ranked adjacent pair first)."""
    tokens = [bytes([c]) for c in word]
    while len(tokens) > 1:
        best = min(range(len(tokens) - 1), key=lambda i: ranks.get((tokens[i], tokens[i + 1]), 1 << 62))
        if (tokens[best], tokens[best + 1]) not in ranks:
            break
        tokens[best:best + 2] = [tokens[best] + tokens[best + 1]]
    return tokens


def _rebuilt(bpe: BPE, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], gone: set[int],
             keep_ids: bool) -> tuple[BPE, list[int]]:
    """The pruned tokenizer (same pattern, pipeline and added tokens) and the id map."""
    size = max(vocab) + 1
    id_map = [-1] * size
    nxt = 0
    for i in sorted(vocab):
        if i in gone:
            continue
        id_map[i] = i if keep_ids else nxt
        nxt += 1
    added = [t._replace(id=id_map[t.id]) for t in bpe.added_tokens]
    specials = {s: id_map[i] for s, i in bpe.special_tokens.items()}
    new_vocab = {id_map[i]: b for i, b in vocab.items() if id_map[i] >= 0}
    kept_merges: Any = None if bpe.is_tiktoken else merges
    pipeline = None if bpe.pipeline is None else json.dumps(_remapped(json.loads(bpe.pipeline), id_map, vocab))
    pruned = BPE(new_vocab, kept_merges, specials, bpe.pattern, cache_bytes=bpe.cache_bytes, added_tokens=added,
                 pipeline=pipeline)
    pruned.dropout = bpe.dropout
    return pruned, id_map


def _remapped(node: Any, id_map: list[int], vocab: dict[int, bytes], key: str = "") -> Any:
    """A post-processor's ids (a template's ``ids``, Roberta/Bert's ``[token, id]``) through ``id_map``."""
    def new(i: int) -> int:
        if not 0 <= i < len(id_map) or id_map[i] < 0:
            raise ValueError(f"the post-processor uses id {i} ({vocab.get(i)!r}), which pruning removes: keep it")
        return id_map[i]

    if isinstance(node, dict):
        return {k: (_remapped(v, id_map, vocab, k) if k != "ids" else [new(i) for i in v]) for k, v in node.items()}
    if isinstance(node, list):
        if key in ("sep", "cls") and len(node) == 2 and isinstance(node[1], int):
            return [node[0], new(node[1])]
        return [_remapped(v, id_map, vocab) for v in node]
    return node
