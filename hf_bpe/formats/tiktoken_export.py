"""Export to tiktoken: the ranks (:func:`mergeable_ranks`), the pattern as tiktoken must read it
(:func:`pat_str`), a ``tiktoken.Encoding`` and the ``.tiktoken`` rank file. ``BPE.to_tiktoken``
and ``BPE.save_tiktoken`` call these with their parts; whether the ranks reproduce the merges is
:mod:`hf_bpe.formats.ranks`' rule."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Sequence

from hf_bpe import _core
from hf_bpe.formats.ranks import check_reproducible
from hf_bpe.formats.regex_forms import for_tiktoken, pattern_key, pattern_name
from hf_bpe.formats.types import AddedToken

if TYPE_CHECKING:
    import tiktoken

__all__ = ["mergeable_ranks", "pat_str", "to_encoding", "rank_file"]


def mergeable_ranks(vocab: dict[int, bytes], merges: Sequence[tuple[bytes, bytes]] | None,
                    special_tokens: dict[str, int], added_tokens: Sequence[AddedToken],
                    plain: bool) -> dict[bytes, int]:
    """The ranks tiktoken needs for a vocabulary: the ids of its mergeable tokens (special tokens
    aside), after checking that they reproduce its ``merges`` (``None``: it holds tiktoken ranks).
    ``plain``: its pre-tokenization is one pattern over bytes (no pipeline, one group of added
    tokens, all byte tokens)."""
    if not plain:
        raise ValueError("tiktoken cannot reproduce this tokenizer: it has a normalizer, several pre-tokenizer "
                         "steps, a second group of added tokens or missing byte tokens (see bpe.pipeline)")
    flagged = [t.content for t in added_tokens
               if not t.special or t.lstrip or t.rstrip or t.single_word]
    if flagged:
        raise ValueError(f"tiktoken cannot reproduce this tokenizer: its added token {flagged[0]!r} is not a plain "
                         "special token (tiktoken has no non-special added tokens and no lstrip/rstrip/single_word)")
    special_ids = set(special_tokens.values())
    ranks = {t: i for i, t in vocab.items() if i not in special_ids}
    if merges is not None:
        try:
            check_reproducible(ranks, merges)
        except ValueError as e:
            raise ValueError(f"tiktoken cannot reproduce this vocabulary's ids: {e}") from None
    return ranks


def pat_str(pattern: str, source: str) -> str:
    r"""The pattern tiktoken must be given to cut text into the pieces hf_bpe cuts with ``pattern``
    (``source``: its regex).

    tiktoken encodes only what its pattern matches and drops the text between matches; hf_bpe,
    like ``tokenizers``' ``Split(behavior="Isolated")``, keeps each such gap as a piece. A built-in
    pattern matches every character (tested), so it goes as it is. Any other pattern P becomes
    ``(?:P)|(?:(?!(?:P))[\s\S])+``: where P matches it is P; elsewhere a run of characters at none
    of which P matches, which is exactly the gap up to P's next match."""
    splits = pattern_key(pattern)
    if len(splits) > 1:
        raise ValueError(f"tiktoken cannot reproduce the pattern {pattern!r}: it is a sequence of {len(splits)} "
                         "splits, each cutting the pieces of the one before, and tiktoken runs one regex")
    if pattern_name(pattern) != pattern or pattern_name(source) != source:
        return source
    source = for_tiktoken(source)  # ($ is the end of text there)
    if _core.regex_may_match_empty(source):
        raise ValueError(f"tiktoken cannot reproduce the pattern {pattern!r}: it may match the empty string, "
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


def to_encoding(name: str | None, pat: str, ranks: dict[bytes, int], special_tokens: dict[str, int]
                ) -> "tiktoken.Encoding":
    """A ``tiktoken.Encoding`` of these parts (see ``BPE.to_tiktoken``)."""
    try:
        import tiktoken
    except ImportError:
        raise ImportError("BPE.to_tiktoken needs the tiktoken package: pip install 'hf_bpe[tiktoken]' "
                          "(or pip install tiktoken)") from None
    return tiktoken.Encoding(name or "hf_bpe", pat_str=pat, mergeable_ranks=ranks, special_tokens=dict(special_tokens))


def rank_file(ranks: dict[bytes, int]) -> bytes:
    """A ``.tiktoken`` file: ``base64(token) rank`` per line, by rank, as OpenAI writes them."""
    return b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in sorted(ranks.items(), key=lambda kv: kv[1]))
