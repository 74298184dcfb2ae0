"""Naive pure-Python byte-level BPE: the test oracle for the Rust trainer.

This module is deliberately slow and simple so that it can be read in one sitting and trusted.
It recomputes every pair count before every merge; the Rust trainer (``hf_bpe._core``) does the
same job incrementally with a heap and must produce exactly the same merges.

Conventions shared with the Rust trainer:

* A token is identified by its byte string. The initial tokens are the 256 single bytes.
* Each step merges the most frequent adjacent pair (counts are weighted by word counts,
  overlapping pairs all count, so ``b"aaa"`` holds ``(a, a)`` twice). Occurrences are then
  replaced left to right, without overlap (``a a a -> aa a``).
* If the merged string already is a token, the merge is still recorded but no new token is
  made. Training stops after ``max_new_tokens`` new strings, or when the best count is below
  ``max(1, min_frequency)``.
* Ties between equal counts:

  - ``"lexicographic"``: the pair whose ``(left_bytes, right_bytes)`` tuple is greatest
    (Python's ``max`` over tuples of bytes), as in the CS336 assignment.
  - ``"hf"``: the pair with the smallest ``(rank(left), rank(right))``, as HF ``tokenizers``'
    ``BpeTrainer`` with the ByteLevel alphabet does. ``rank`` of a single byte is its position
    in the GPT-2 byte-to-unicode alphabet sorted by code point (see :func:`hf_byte_rank`); a
    merged token's rank is ``256 + `` the order in which its string was first created.
* Extending (``base_merges``): each word starts as the base's tokens (its merges applied by
  rank, :func:`encode_word_reference`), the base's merged strings are tokens already (ranked
  ``256 +`` their order in the base), and only new strings count towards ``max_new_tokens``.
  A pair that is already a merge (a base merge re-formed by a rebuilt string) is merged but
  not listed again.
* Superwords (:func:`train_superword_reference`): stage 1 trains on the words of a word pattern
  up to ``transition_new_tokens`` new tokens, stage 2 extends it on the spans of a span pattern
  (each span starting as stage 1's tokens) up to ``max_new_tokens`` new tokens in all.
* Parity-aware (:func:`train_parity_reference`): one table of words per language. Each step
  merges the best pair of the language whose dev cost is highest (its dev tokens over its
  reference's tokens), and applies it to every language's words and every dev set.
"""

from __future__ import annotations

from collections import Counter

__all__ = ["hf_byte_rank", "train_reference", "train_superword_reference", "train_parity_reference",
           "encode_word_reference"]


def hf_byte_rank() -> list[int]:
    """Rank of each byte value in HF's byte-level alphabet (sorted by code point).

    GPT-2 maps the printable bytes 33..126, 161..172 and 174..255 to themselves and the other
    68 bytes to U+0100 and up, so the printable ones come first (in byte order), then the rest.
    """
    printable = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    others = [b for b in range(256) if b not in printable]
    rank = [0] * 256
    for r, b in enumerate(printable + others):
        rank[b] = r
    return rank


def _count_pairs(words: dict[tuple[bytes, ...], int]) -> Counter:
    """Count every adjacent pair of tokens, weighted by the word's count."""
    counts: Counter = Counter()
    for tokens, n in words.items():
        for pair in zip(tokens, tokens[1:]):
            counts[pair] += n
    return counts


def merge_word(tokens: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    """Replace occurrences of ``pair`` left to right, without overlap."""
    out = []
    i = 0
    while i < len(tokens):
        if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) == pair:
            out.append(tokens[i] + tokens[i + 1])
            i += 2
        else:
            out.append(tokens[i])
            i += 1
    return tuple(out)


def train_reference(
    word_counts: dict[bytes, int],
    max_new_tokens: int,
    tie_break: str = "lexicographic",
    min_frequency: int = 0,
    max_token_length: int | None = None,
    base_merges: list[tuple[bytes, bytes]] = (),
    merge_filter=None,
) -> list[tuple[bytes, bytes]]:
    """Learn BPE merges from ``{word_bytes: count}``; returns ``[(left, right), ...]`` in order
    (the new ones only, when extending ``base_merges``).

    ``max_token_length`` (lexicographic rule only) forbids pairs whose merged string would be
    longer than that many bytes. ``merge_filter(left, right) -> bool`` vetoes pairs (False): the
    best allowed pair is merged; a base merge is never asked about.
    """
    if tie_break not in ("lexicographic", "hf"):
        raise ValueError(f"tie_break must be 'lexicographic' or 'hf', not {tie_break!r}")
    if tie_break == "hf" and max_token_length is not None:
        raise ValueError("the reference implements max_token_length for 'lexicographic' only")
    words: dict[tuple[bytes, ...], int] = Counter()
    base_ranks: dict[tuple[bytes, bytes], int] = {}
    for i, pair in enumerate(base_merges):
        base_ranks.setdefault(pair, i)
    for w, n in word_counts.items():
        if n > 0:
            words[tuple(_encode_by_ranks(w, base_ranks))] += n

    byte_rank = hf_byte_rank()
    rank: dict[bytes, int] = {bytes([b]): byte_rank[b] for b in range(256)}
    for a, b in base_merges:
        rank.setdefault(a + b, len(rank))
    merges: list[tuple[bytes, bytes]] = []
    new_tokens = 0
    while new_tokens < max_new_tokens:
        counts = _count_pairs(words)
        if max_token_length is not None:
            counts = Counter({p: c for p, c in counts.items() if len(p[0]) + len(p[1]) <= max_token_length})
        if merge_filter is not None:
            counts = Counter({p: c for p, c in counts.items() if p in base_ranks or merge_filter(*p)})
        if not counts:
            break
        if tie_break == "lexicographic":
            best = max(counts, key=lambda p: (counts[p], p))
        else:
            best = min(counts, key=lambda p: (-counts[p], rank[p[0]], rank[p[1]]))
        if counts[best] < max(1, min_frequency):
            break
        if not (base_merges and best in base_ranks):  # extending: a re-formed merge is applied, not listed again
            merges.append(best)
            if base_merges:
                base_ranks[best] = len(base_ranks)
        merged = best[0] + best[1]
        if merged not in rank:
            rank[merged] = len(rank)  # (256 + its order when there is no base)
            new_tokens += 1
        next_words: dict[tuple[bytes, ...], int] = Counter()
        for tokens, n in words.items():
            next_words[merge_word(tokens, best)] += n
        words = next_words
    return merges


def train_superword_reference(
    texts: list[str],
    transition_new_tokens: int,
    max_new_tokens: int,
    word_pattern: str,
    span_pattern: str,
    tie_break: str = "lexicographic",
    min_frequency: int = 0,
    max_token_length: int | None = None,
    merge_filter=None,
) -> list[tuple[bytes, bytes]]:
    """Superword merges of ``texts`` (no special tokens): both stages' merges, in order. The
    texts are cut with the ``regex`` module, by ``word_pattern`` for stage 1 and by
    ``span_pattern`` for stage 2."""
    import regex

    def pieces(pattern: str) -> Counter:
        compiled = regex.compile(pattern)
        return Counter(m.group().encode() for t in texts for m in compiled.finditer(t))

    options = dict(tie_break=tie_break, min_frequency=min_frequency, max_token_length=max_token_length,
                   merge_filter=merge_filter)
    stage1 = train_reference(pieces(word_pattern), transition_new_tokens, **options)
    made = len({a + b for a, b in stage1})  # new strings (a merge may rebuild one)
    if max_new_tokens <= made:
        return stage1
    return stage1 + train_reference(pieces(span_pattern), max_new_tokens - made, base_merges=stage1, **options)


def train_parity_reference(
    corpora: list[dict[bytes, int]],
    dev: list[tuple[dict[bytes, int], dict[bytes, int] | None]],
    max_new_tokens: int,
    tie_break: str = "lexicographic",
    min_frequency: int = 0,
    max_token_length: int | None = None,
    variant: str = "base",
    window_size: int = 100,
    alpha: float = 2.0,
    global_merges: int = 0,
    merge_filter=None,
) -> list[tuple[bytes, bytes]]:
    """Parity-aware merges: ``corpora[l]`` is language ``l``'s ``{word_bytes: count}``, ``dev[l]``
    its dev words and its reference's words (``None``: a cost of its token count alone).

    Each step after the first ``global_merges`` (plain BPE on all corpora together) ranks the
    languages by cost, ``tokens(dev) / tokens(reference)``, highest first (ties: lower index).
    ``"window"`` skips a language chosen more than ``alpha * window_size / n`` times in the last
    ``window_size`` parity steps (it comes after all the others). The first language with a
    pair at ``min_frequency`` or above gives its best pair (``merge_filter`` and
    ``max_token_length`` as in :func:`train_reference`); a language without one is out for good;
    none left: training stops. The merge applies to every language and dev set.

    Ties between pairs: ``"lexicographic"`` as in :func:`train_reference`; ``"hf"`` is HF
    ``tokenizers``' ``ParityBpeTrainer``: the greatest ``(left, right)`` compared as strings of
    the ByteLevel alphabet (bytes by :func:`hf_byte_rank`).
    """
    if tie_break not in ("lexicographic", "hf"):
        raise ValueError(f"tie_break must be 'lexicographic' or 'hf', not {tie_break!r}")
    if tie_break == "hf" and max_token_length is not None:
        raise ValueError("the reference implements max_token_length for 'lexicographic' only")

    def split(counts: dict[bytes, int]) -> dict[tuple[bytes, ...], int]:
        return Counter({tuple(bytes([b]) for b in w): n for w, n in counts.items() if n > 0})

    langs = [split(c) for c in corpora]
    devs = [(split(num), split(den) if den is not None else None) for num, den in dev]
    byte_rank = hf_byte_rank()
    made = {bytes([b]) for b in range(256)}
    n = len(langs)
    out = [False] * n
    recent: list[int] = []
    merges: list[tuple[bytes, bytes]] = []
    new_tokens = 0

    def tokens(words: dict[tuple[bytes, ...], int]) -> int:
        return sum(len(t) * c for t, c in words.items())

    def cost(i: int) -> float:
        num, den = devs[i]
        return tokens(num) / tokens(den) if den is not None else float(tokens(num))

    def best_pair(counts: Counter):
        if max_token_length is not None:
            counts = Counter({p: c for p, c in counts.items() if len(p[0]) + len(p[1]) <= max_token_length})
        if merge_filter is not None:
            counts = Counter({p: c for p, c in counts.items() if merge_filter(*p)})
        if not counts:
            return None
        if tie_break == "lexicographic":
            best = max(counts, key=lambda p: (counts[p], p))
        else:
            best = max(counts, key=lambda p: (counts[p], [byte_rank[x] for x in p[0]], [byte_rank[x] for x in p[1]]))
        return best if counts[best] >= max(1, min_frequency) else None

    while new_tokens < max_new_tokens:
        if len(merges) < global_merges:
            total: Counter = Counter()
            for words in langs:
                total.update(_count_pairs(words))
            best = best_pair(total)
            if best is None:
                break
        else:
            costs = [cost(i) for i in range(n)]
            order = sorted(range(n), key=lambda i: (-costs[i], i))
            if variant == "window":
                window = recent[-window_size:]
                allowed = [i for i in order if window.count(i) / window_size <= alpha / n]
                order = allowed + [i for i in order if i not in allowed]
            best = None
            for i in order:
                if out[i]:
                    continue
                best = best_pair(_count_pairs(langs[i]))
                if best is None:
                    out[i] = True
                    continue
                recent.append(i)
                break
            if best is None:
                break
        merges.append(best)
        if best[0] + best[1] not in made:
            made.add(best[0] + best[1])
            new_tokens += 1
        langs = [_merge_all(words, best) for words in langs]
        devs = [(_merge_all(num, best), _merge_all(den, best) if den is not None else None) for num, den in devs]
    return merges


def _merge_all(words: dict[tuple[bytes, ...], int], pair: tuple[bytes, bytes]) -> dict[tuple[bytes, ...], int]:
    out: dict[tuple[bytes, ...], int] = Counter()
    for tokens, n in words.items():
        out[merge_word(tokens, pair)] += n
    return out


def encode_word_reference(word: bytes, merges: list[tuple[bytes, bytes]]) -> list[bytes]:
    """Split ``word`` into tokens by applying ``merges`` by rank.

    Repeatedly finds the adjacent pair with the lowest merge rank (the leftmost one if it
    occurs several times) and merges it, until no adjacent pair is a merge.
    """
    ranks: dict[tuple[bytes, bytes], int] = {}
    for i, pair in enumerate(merges):
        ranks.setdefault(pair, i)
    return _encode_by_ranks(word, ranks)


def _encode_by_ranks(word: bytes, ranks: dict[tuple[bytes, bytes], int]) -> list[bytes]:
    tokens = [bytes([b]) for b in word]
    while len(tokens) > 1:
        best_i, best_rank = -1, None
        for i in range(len(tokens) - 1):
            r = ranks.get((tokens[i], tokens[i + 1]))
            if r is not None and (best_rank is None or r < best_rank):
                best_i, best_rank = i, r
        if best_rank is None:
            break
        tokens[best_i : best_i + 2] = [tokens[best_i] + tokens[best_i + 1]]
    return tokens
