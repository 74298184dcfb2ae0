"""Parity-aware training (Foroutan et al., arXiv 2508.04796): merges that keep every language's
tokens per sentence close to its translation's, chosen with a parallel dev set.

Each language's texts are counted apart (one :class:`~hf_bpe.WordCounts` per language). At each
step the language whose dev cost is highest gives its best pair, and the merge applies to all:

* ``dev`` as pairs ``{lang: [(text, english), ...]}``: a language's cost is the tokens of its
  texts over the tokens of their translations (the pivot language's own cost is 1);
* ``dev`` as parallel texts ``{lang: [text, ...]}`` (line ``i`` of every language the same
  sentence): its cost is its tokens (HF ``tokenizers``' ``ParityBpeTrainer``).

``variant="window"`` keeps one language from taking more than ``alpha * window_size / n`` of
the last ``window_size`` steps; ``global_merges`` first makes that many merges by counts over
all languages together. The result is a standard :class:`~hf_bpe.BPE`: its merges load
anywhere. The merge loop is the core's (``src/train/parity.rs``);
:func:`hf_bpe.reference.train_parity_reference` is its oracle. Fairness and speed measured:
[log](../../docs/performance.md#parity-aware-training).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from hf_bpe import _core
from hf_bpe.bpe import BPE
from hf_bpe.progress import count_progress
from hf_bpe.training.counting import count_words, counts_of
from hf_bpe.training.merging import MergeFilter, assemble
from hf_bpe.training.options import EMPTY, TieBreak, check_options

if TYPE_CHECKING:
    from hf_bpe.training.counts import WordCounts

__all__ = ["train_parity"]


def train_parity(
    corpora: Mapping[str, Any],
    vocab_size: int = 32000,
    dev: Mapping[str, Sequence[tuple[str, str]]] | Mapping[str, Sequence[str]] | None = None,
    *,
    pivot: str = "eng",
    variant: Literal["base", "window"] = "base",
    window_size: int = 100,
    alpha: float = 2.0,
    global_merges: int = 0,
    special_tokens: Sequence[str] = ("<|endoftext|>",),
    pattern: str = "gpt2",
    tie_break: TieBreak = "lexicographic",
    min_frequency: int = 0,
    max_token_length: int | None = None,
    num_threads: int | None = None,
    progress: bool = True,
    merge_filter: MergeFilter | None = None,
) -> BPE:
    """Trains a byte-level BPE vocabulary fair across languages (the module doc has the rule).

    ``corpora`` maps a language to its documents (as :func:`~hf_bpe.train` takes them) or to its
    :class:`~hf_bpe.WordCounts` (counted with ``pattern`` and ``special_tokens``). ``dev`` maps
    each language to ``(text, english_translation)`` pairs, or every language to texts parallel
    across all of them; with pairs, ``pivot`` (a language of the translations, which may also
    be in ``corpora``) needs no dev entry of its own. Ties between languages go to the first in
    ``corpora``; ``tie_break="hf"`` picks pairs as HF ``tokenizers``' ``ParityBpeTrainer``.
    ``vocab_size``, the special tokens, ``pattern``, ``min_frequency``, ``max_token_length`` and
    ``merge_filter`` are those of :func:`~hf_bpe.train`. A language with no pair left to merge is
    out; training stops when none is left.
    """
    specials = check_options(vocab_size, special_tokens, tie_break, min_frequency, max_token_length)
    _core.pattern_source(pattern)
    if not isinstance(corpora, Mapping) or not corpora:
        raise TypeError("corpora must map each language to its documents or WordCounts, "
                        "e.g. {'deu': [...], 'eng': [...]}")
    if dev is None:
        raise ValueError("parity training needs dev=: {lang: [(text, english), ...]} or {lang: [parallel texts]}")
    if not isinstance(dev, Mapping):
        raise TypeError(f"dev must map languages to sentences, not {type(dev).__name__}")
    langs = list(corpora)
    counts = [_counts(lang, corpora[lang], specials, pattern, num_threads) for lang in langs]
    dev_tables = _dev_tables(langs, dev, pivot, specials, pattern, num_threads)
    max_new = vocab_size - 256 - len(specials)
    with count_progress(max_new, "merging", "tok", enabled=progress and max_new > 0) as cb:
        merges = _core.train_parity_merges(
            [(c.bytes, c.offsets, c.counts) for c in counts], dev_tables, max_new, tie_break, min_frequency,
            max_token_length, variant, window_size, alpha, global_merges, cb, merge_filter, num_threads)
        bpe = assemble(merges, specials, pattern, tie_break)
        if cb is not None:
            cb(bpe.vocab_size - 256 - len(specials))
    return bpe


def _counts(lang: str, texts: Any, specials: list[str], pattern: str, num_threads: int | None) -> WordCounts:
    """Language ``lang``'s word counts (counted here, or given and checked)."""
    from hf_bpe.training.counts import WordCounts

    if isinstance(texts, WordCounts):
        if texts.pattern != pattern or list(texts.special_tokens) != specials:
            raise ValueError(f"the WordCounts of {lang!r} were counted with pattern {texts.pattern!r} and special "
                             f"tokens {list(texts.special_tokens)}, not {pattern!r} and {specials}")
        counted = texts
    else:
        counted = counts_of(count_words(texts, specials, pattern, num_threads), specials, pattern)
    if len(counted) == 0:
        raise ValueError(f"corpus {lang!r}: {EMPTY}")
    return counted


def _dev_tables(langs: list[str], dev: Mapping[str, Any], pivot: str, specials: list[str], pattern: str,
                num_threads: int | None) -> list[tuple[Any, Any]]:
    """Per language of ``langs``: its dev text's word arrays and its reference's (or None)."""
    unknown = [lang for lang in dev if lang not in langs]
    if unknown:
        raise ValueError(f"dev has languages without a corpus: {unknown} (corpora: {langs})")
    rows = {lang: list(dev[lang]) for lang in dev}
    kinds = {_kind(lang, r) for lang, r in rows.items()}
    if len(kinds) != 1:
        raise ValueError("dev mixes (text, translation) pairs and plain texts: give one form for every language")
    (kind,) = kinds

    def arrays(texts: list[str]) -> tuple[Any, Any, Any]:
        c = counts_of(count_words(texts, specials, pattern, num_threads), specials, pattern)
        return c.bytes, c.offsets, c.counts

    if kind == "parallel":
        missing = [lang for lang in langs if lang not in rows]
        if missing:
            raise ValueError(f"dev has no texts for {missing}: parallel dev texts are needed for every language")
        sizes = {len(r) for r in rows.values()}
        if len(sizes) != 1:
            raise ValueError("parallel dev texts must have the same number of lines in every language, not "
                             + ", ".join(f"{lang}: {len(r)}" for lang, r in rows.items()))
        return [(arrays(rows[lang]), None) for lang in langs]
    missing = [lang for lang in langs if lang not in rows and lang != pivot]
    if missing:
        raise ValueError(f"dev has no (text, translation) pairs for {missing} (only the pivot {pivot!r} may lack them)")
    tables = []
    for lang in langs:
        if lang in rows:
            tables.append((arrays([t for t, _ in rows[lang]]), arrays([e for _, e in rows[lang]])))
        else:  # the pivot: its translations over themselves, a cost of 1
            own = arrays([e for r in rows.values() for _, e in r])
            tables.append((own, own))
    return tables


def _kind(lang: str, rows: list[Any]) -> str:
    """``"pairs"`` or ``"parallel"``: the form of one language's dev rows (checked)."""
    if not rows:
        raise ValueError(f"dev[{lang!r}] is empty")
    pairs = [isinstance(r, (tuple, list)) and len(r) == 2 and all(isinstance(x, str) for x in r) for r in rows]
    if all(pairs):
        return "pairs"
    if all(isinstance(r, str) for r in rows):
        return "parallel"
    bad = next(i for i, r in enumerate(rows) if not (isinstance(r, str) or pairs[i]))
    raise TypeError(f"dev[{lang!r}][{bad}] must be a text or a (text, translation) pair of str, not {rows[bad]!r}")
