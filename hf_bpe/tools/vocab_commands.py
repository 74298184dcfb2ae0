"""``hf-bpe train-parity`` and ``hf-bpe prune``: vocabularies built beyond plain training (and the
notice of a training that ended below its size)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Callable

__all__ = ["add", "short_notice"]


def add(sub, add_train_options: Callable[..., None]) -> None:
    """Adds the two commands to the ``hf-bpe`` parser's subcommands."""
    p = sub.add_parser("train-parity", help="parity-aware training: one corpus per language, a parallel dev file")
    p.add_argument("corpora", nargs="+", metavar="LANG=FILE", help="a language's corpus file (repeat a language "
                   "for several files)")
    p.add_argument("--dev", required=True, metavar="PAIRS", help="JSON lines {\"lang\", \"text\", \"eng\"} "
                   "(.gz allowed): each language's dev sentences and their English translations (languages "
                   "without a corpus are left out)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--pivot", default="eng", help="the translations' language (its cost is 1; default eng)")
    p.add_argument("--variant", choices=["base", "window"], default="base")
    p.add_argument("--window-size", type=int, default=100, help="window variant: steps looked back (default 100)")
    p.add_argument("--alpha", type=float, default=2.0, help="window variant: a language's share of the window "
                   "is at most ALPHA / languages (default 2)")
    p.add_argument("--global-merges", type=int, default=0, metavar="N", help="first N merges by total counts")
    add_train_options(p, 32000, superwords=False)
    p.set_defaults(func=_train_parity)

    p = sub.add_parser("prune", help="remove merged tokens: by use on texts down to a size, or a list; merges "
                       "re-derived, ids compacted")
    p.add_argument("--tokenizer", required=True, help="tokenizer folder or file, or a name (gpt2, cl100k_base, ...)")
    p.add_argument("--out", required=True, help="output folder (or a .tiktoken file for a rank vocabulary)")
    p.add_argument("--vocab-size", type=int, default=None, help="tokens to keep in all (bytes and special "
                   "tokens included)")
    p.add_argument("--remove", action="append", default=None, metavar="TOKEN",
                   help="a token to remove, as text (repeatable)")
    p.add_argument("--texts", nargs="+", default=None, metavar="FILE",
                   help="files (text, .gz): with --vocab-size the least emitted tokens go first (default: the "
                        "last merged); the cost in bytes/token is printed")
    p.add_argument("--keep-ids", action="store_true", help="keep every id as it was (holes where tokens went)")
    p.add_argument("--id-map", default=None, metavar="NPY", help="write old id -> new id (-1: removed) as .npy")
    p.set_defaults(func=_prune)


def _train_parity(args: argparse.Namespace) -> int:
    import hf_bpe
    from hf_bpe.tools.report import _read_pairs

    specials = args.special_tokens if args.special_tokens is not None else ["<|endoftext|>"]
    files: dict[str, list[str]] = {}
    for spec in args.corpora:
        lang, sep, path = spec.partition("=")
        if not sep or not lang or not path:
            raise ValueError(f"{spec!r}: a corpus is LANG=FILE (e.g. deu=de.txt.gz)")
        files.setdefault(lang, []).append(path)
    t0 = time.perf_counter()
    options = dict(special_tokens=specials, pattern=args.pattern, num_threads=args.threads, progress=False,
                   errors=args.errors, text_field=args.text_field)
    counts = {lang: hf_bpe.count_files(paths, **options) for lang, paths in files.items()}
    dev = {lang: list(zip(texts, engs)) for lang, (texts, engs) in _read_pairs(args.dev).items() if lang in counts}
    bpe = hf_bpe.train_parity(counts, args.vocab_size, dev, pivot=args.pivot, variant=args.variant,
                              window_size=args.window_size, alpha=args.alpha, global_merges=args.global_merges,
                              special_tokens=specials, pattern=args.pattern, tie_break=args.tie_break,
                              min_frequency=args.min_frequency, max_token_length=args.max_token_length,
                              progress=not args.quiet, merge_filter=args.merge_filter)
    out = bpe.save(args.out, tokenizer_class=args.tokenizer_class)
    print(f"trained {bpe.vocab_size} tokens ({len(bpe.merges)} merges) for {len(counts)} languages in "
          f"{time.perf_counter() - t0:.1f} s -> {out}")
    short_notice(bpe.vocab_size, args.vocab_size, args.min_frequency)
    return 0


def short_notice(got: int, wanted: int, min_frequency: int) -> None:
    """Says why training stopped below the requested size, if it did."""
    if got < wanted:
        why = (f"no pair occurs {min_frequency} times or more (--min-frequency)" if min_frequency > 1
               else "no pair is left to merge: the corpus is too small for this size")
        print(f"note: {got:,} of the {wanted:,} tokens asked for: {why}", file=sys.stderr)


def _read_texts(paths: list[str]) -> list[str]:
    import gzip

    out = []
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            out.extend(d for d in f.read().split("<|endoftext|>") if d.strip())
    return out


def _prune(args: argparse.Namespace) -> int:
    import hf_bpe

    bpe = hf_bpe.BPE.load(args.tokenizer)
    texts = _read_texts(args.texts) if args.texts else None
    pruned, id_map = hf_bpe.prune(bpe, args.vocab_size, remove=args.remove, texts=texts, keep_ids=args.keep_ids)
    if args.out.endswith(".tiktoken"):
        out = pruned.save_tiktoken(args.out)
    else:
        out = pruned.save(args.out)
    if args.id_map:
        import numpy as np

        np.save(args.id_map, np.asarray(id_map, dtype=np.int64))
    gone = sum(1 for i in id_map if i < 0) - (len(id_map) - len(bpe))
    line = f"pruned {gone} tokens: {len(bpe)} -> {len(pruned)} (vocab_size {pruned.vocab_size})"
    if texts:
        nbytes = sum(len(t.encode()) for t in texts)
        before = nbytes / max(1, sum(map(len, bpe.encode_batch(texts, dropout=0))))
        after = nbytes / max(1, sum(map(len, pruned.encode_batch(texts, dropout=0))))
        line += f"; bytes/token on the texts {before:.3f} -> {after:.3f} ({after / before:.3f}x)"
    print(f"{line} -> {out}")
    return 0
