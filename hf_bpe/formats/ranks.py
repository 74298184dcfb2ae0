"""tiktoken's merge rule, against GPT-2's: merges from ranks (a tiktoken file read as GPT-2
merges) and the check that a merges-mode vocabulary's ids, given to tiktoken as ranks, reproduce
its merges.

tiktoken merges the adjacent pair whose *concatenation* has the lowest rank and emits a piece
that is a token directly; GPT-2 / ``tokenizers`` merge the listed pair with the lowest *merge*
rank. A merges-mode vocabulary is given to tiktoken with its ids as ranks only when
:func:`check_reproducible` holds: building every token the tiktoken way from the tokens of lower
id recovers exactly its merge, in merge order (``merges_from_ranks(ids) == merges``, a later
merge of an already made token aside). Then both encode every input to the same ids; why, and
why every trained vocabulary passes, is in ``docs/architecture.md`` ("tiktoken export").
"""

from __future__ import annotations

from typing import Sequence

from hf_bpe.reference import encode_word_reference

__all__ = ["rank_split", "merges_from_ranks", "check_reproducible"]


def rank_split(tok: bytes, ids: dict[bytes, int], below: int | None = None) -> list[bytes]:
    """tiktoken's merging of ``tok``'s bytes: join the adjacent pair whose concatenation has the
    lowest rank (the leftmost of equals) until none is a token, using only ranks below ``below``
    (all when ``None``). No whole-piece shortcut."""
    parts = [tok[i:i + 1] for i in range(len(tok))]
    while len(parts) > 1:
        best, best_i = None, -1
        for i in range(len(parts) - 1):
            r = ids.get(parts[i] + parts[i + 1])
            if r is not None and (below is None or r < below) and (best is None or r < best):
                best, best_i = r, i
        if best is None:
            break
        parts[best_i:best_i + 2] = [parts[best_i] + parts[best_i + 1]]
    return parts


def merges_from_ranks(ids: dict[bytes, int], special_ids: set[int]) -> list[tuple[bytes, bytes]]:
    """Recovers merges from tiktoken ranks: a token's merge is the last step of encoding its own
    bytes with the tokens of lower rank (byte pair merging by lowest rank of the concatenation)."""
    merges = []
    for tok, rank in sorted(ids.items(), key=lambda kv: kv[1]):
        if len(tok) < 2 or rank in special_ids:
            continue
        parts = rank_split(tok, ids, below=rank)
        if len(parts) != 2:
            raise ValueError(f"token {tok!r} (rank {rank}) cannot be built from two tokens of lower rank")
        merges.append((parts[0], parts[1]))
    return merges


def check_reproducible(ranks: dict[bytes, int], merges: Sequence[tuple[bytes, bytes]]) -> None:
    """Raises ``ValueError`` naming the token or merge at fault unless tiktoken, with ``ranks``
    (the ids of the mergeable tokens), encodes every input as the merges do."""
    first: dict[bytes, tuple[int, bytes, bytes]] = {}  # each token's first merge; later ones never fire
    for n, (a, b) in enumerate(merges):
        first.setdefault(a + b, (n, a, b))
    prev: tuple[int, bytes, int] | None = None
    for t, (n, a, b) in first.items():
        i = ranks[t]
        if prev is not None and i < prev[2]:
            raise ValueError(
                f"ids are not in merge order: merge #{n} {a!r} + {b!r} makes {t!r} (id {i}) after merge "
                f"#{prev[0]} made {prev[1]!r} (id {prev[2]}); tiktoken's ranks are the ids and it joins the "
                f"lowest first, so a later merge needs a higher id{_witness([prev[1], t], ranks, merges)}")
        prev = (n, t, i)
        for p in (a, b):
            if len(p) > 1 and ranks[p] > i:
                raise ValueError(
                    f"merge #{n} {a!r} + {b!r} (id {i}) uses {p!r} (id {ranks[p]}), made by a later merge: "
                    f"tiktoken builds a token only from tokens of lower id")
    for t, i in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(t) > 1 and t not in first:
            raise ValueError(
                f"vocabulary entry {t!r} (id {i}) is made by no merge: tiktoken emits it for a piece that "
                f"spells it, the merges never do (declare it a special token, or leave it out)"
                f"{_witness([t], ranks, merges)}")
    for t, (n, a, b) in first.items():
        parts = rank_split(t, ranks, below=ranks[t])
        if parts != [a, b]:
            raise ValueError(
                f"token {t!r} (id {ranks[t]}) is merge #{n} {a!r} + {b!r}, but tiktoken, joining the pairs of "
                f"lowest id first, builds it as {' + '.join(map(repr, parts))}{_witness([t], ranks, merges)}")


def _witness(tokens: list[bytes], ranks: dict[bytes, int], merges: Sequence[tuple[bytes, bytes]]) -> str:
    """``: e.g. ...`` naming a byte string the two rules encode differently, if one is near at hand:
    the named tokens and their overlaps."""
    candidates = list(tokens)
    for x in tokens:
        for y in tokens:
            candidates += [x + y[k:] for k in range(1, min(len(x), len(y))) if x.endswith(y[:k])]
    for c in candidates:
        tik = [c] if c in ranks else rank_split(c, ranks)
        ours = encode_word_reference(c, list(merges))
        if tik != ours:
            return (f" (e.g. {c!r}: the merges give {[ranks[p] for p in ours]}, "
                    f"tiktoken would give {[ranks[p] for p in tik]})")
    return ""
