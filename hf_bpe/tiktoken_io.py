"""tiktoken's side of a vocabulary: merges from ranks (a tiktoken file read as GPT-2 merges) and
ranks from merges (:func:`mergeable_ranks`, behind ``BPE.to_tiktoken`` and ``BPE.save_tiktoken``).

tiktoken merges the adjacent pair whose *concatenation* has the lowest rank and emits a piece
that is a token directly; GPT-2 / ``tokenizers`` merge the listed pair with the lowest *merge*
rank. A merges-mode vocabulary is given to tiktoken with its ids as ranks only when
:func:`check_reproducible` holds: building every token the tiktoken way from the tokens of lower
id recovers exactly its merge, in merge order (``merges_from_ranks(ids) == merges``, a later
merge of an already made token aside). Then both encode every input to the same ids; why, and
why every trained vocabulary passes, is in ``docs/architecture.md`` ("tiktoken export").
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from hf_bpe import _core
from hf_bpe.artifacts import write_file


def _format_error(msg: str) -> Exception:
    from hf_bpe.formats import FormatError  # (formats imports this module)

    return FormatError(msg)

if TYPE_CHECKING:
    import tiktoken

    from hf_bpe.bpe import BPE

__all__ = ["rank_split", "merges_from_ranks", "check_reproducible", "mergeable_ranks", "pat_str", "to_encoding",
           "rank_file", "save"]


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
    from hf_bpe.reference import encode_word_reference

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


def mergeable_ranks(bpe: "BPE") -> dict[bytes, int]:
    """The ranks tiktoken needs for ``bpe``: the ids of its mergeable tokens (special tokens aside),
    after checking that they reproduce the merges of a merges-mode vocabulary."""
    if bpe._core.is_generic or bpe.pattern_source.startswith("{"):
        raise ValueError("tiktoken cannot reproduce this tokenizer: it has a normalizer, several pre-tokenizer "
                         "steps, a second group of added tokens or missing byte tokens (see bpe.pipeline)")
    flagged = [t.content for t in bpe.added_tokens
               if not t.special or t.lstrip or t.rstrip or t.single_word]
    if flagged:
        raise ValueError(f"tiktoken cannot reproduce this tokenizer: its added token {flagged[0]!r} is not a plain "
                         "special token (tiktoken has no non-special added tokens and no lstrip/rstrip/single_word)")
    special_ids = set(bpe.special_tokens.values())
    ranks = {t: i for i, t in bpe.vocab.items() if i not in special_ids}
    if not bpe.is_tiktoken:
        try:
            check_reproducible(ranks, bpe.merges)
        except ValueError as e:
            raise ValueError(f"tiktoken cannot reproduce this vocabulary's ids: {e}") from None
    return ranks


def pat_str(bpe: "BPE") -> str:
    r"""The pattern tiktoken must be given to cut text into the pieces ``bpe`` cuts.

    tiktoken encodes only what its pattern matches and drops the text between matches; hf_bpe,
    like ``tokenizers``' ``Split(behavior="Isolated")``, keeps each such gap as a piece. A built-in
    pattern matches every character (tested), so it goes as it is. Any other pattern P becomes
    ``(?:P)|(?:(?!(?:P))[\s\S])+``: where P matches it is P; elsewhere a run of characters at none
    of which P matches, which is exactly the gap up to P's next match."""
    from hf_bpe.regex_forms import for_tiktoken, pattern_key, pattern_name

    splits = pattern_key(bpe.pattern)
    if len(splits) > 1:
        raise ValueError(f"tiktoken cannot reproduce the pattern {bpe.pattern!r}: it is a sequence of {len(splits)} "
                         "splits, each cutting the pieces of the one before, and tiktoken runs one regex")
    source = bpe.pattern_source
    if pattern_name(bpe.pattern) != bpe.pattern or pattern_name(source) != source:
        return source
    source = for_tiktoken(source)  # ($ is the end of text there)
    if _core.regex_may_match_empty(source):
        raise ValueError(f"tiktoken cannot reproduce the pattern {bpe.pattern!r}: it may match the empty string, "
                         "and the alternative that keeps the text between its matches needs every match non-empty")
    ref = _reference(source)
    if ref:
        raise ValueError(f"tiktoken cannot reproduce this pattern: {ref!r} (a named group or back-reference) "
                         "cannot be repeated in the alternative that keeps the text between its matches")
    return f"(?:{source})|(?:(?!(?:{source}))[\\s\\S])+"


def _reference(src: str) -> str | None:
    """The first named group or back-reference of ``src`` (escapes and classes skipped), or None."""
    i, depth = 0, 0
    while i < len(src):
        c = src[i]
        if c == "\\":
            nxt = src[i + 1:i + 3]
            if depth == 0 and (nxt[:1] in "123456789" and nxt[:1] or nxt in ("k<", "k{") or nxt[:1] == "g"):
                return src[i:i + 2]
            i += 2
            continue
        if c == "[":
            depth += 1
        elif c == "]" and depth:
            depth -= 1
        elif depth == 0 and src.startswith(("(?P<", "(?<"), i) and src[i + 3:i + 4] not in ("=", "!"):
            return src[i:i + 4]
        i += 1
    return None


def to_encoding(bpe: "BPE", name: str | None = None) -> "tiktoken.Encoding":
    """A ``tiktoken.Encoding`` giving ``bpe``'s ids (see ``BPE.to_tiktoken``)."""
    try:
        import tiktoken
    except ImportError:
        raise ImportError("BPE.to_tiktoken needs the tiktoken package: pip install 'hf_bpe[tiktoken]' "
                          "(or pip install tiktoken)") from None
    return tiktoken.Encoding(name or "hf_bpe", pat_str=pat_str(bpe), mergeable_ranks=mergeable_ranks(bpe),
                             special_tokens=dict(bpe.special_tokens))


def rank_file(ranks: dict[bytes, int]) -> bytes:
    """A ``.tiktoken`` file: ``base64(token) rank`` per line, by rank, as OpenAI writes them."""
    return b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in sorted(ranks.items(), key=lambda kv: kv[1]))


def save(bpe: "BPE", path: str | os.PathLike) -> Path:
    """Writes ``bpe``'s rank file to ``path`` atomically (see ``BPE.save_tiktoken``)."""
    return write_file(path, rank_file(mergeable_ranks(bpe)))


def read_tiktoken(path: str | os.PathLike) -> dict[bytes, int]:
    """Reads a tiktoken rank file (``base64(token) rank`` per line)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such file") from None
    ranks: dict[bytes, int] = {}
    seen: dict[int, int] = {}
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise _format_error(f"{p}: line {lineno}: expected 'base64-token rank', got {line[:80]!r}")
        try:
            tok = base64.b64decode(parts[0], validate=True)
            rank = int(parts[1])
        except ValueError:
            raise _format_error(f"{p}: line {lineno}: bad token or rank {line[:80]!r}") from None
        if rank < 0:
            raise _format_error(f"{p}: line {lineno}: negative rank {rank}")
        if tok in ranks:
            raise _format_error(f"{p}: line {lineno}: token {tok!r} already has rank {ranks[tok]}")
        if rank in seen:
            raise _format_error(f"{p}: line {lineno}: rank {rank} already used on line {seen[rank]}")
        ranks[tok] = rank
        seen[rank] = lineno
    if not ranks:
        raise _format_error(f"{p}: no tokens")
    return ranks
