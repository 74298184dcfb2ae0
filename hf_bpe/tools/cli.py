"""Command line: ``hf-bpe train | train-parity | prune | demo | encode | stats | convert | viz | report``
(``train-parity`` and ``prune``: :mod:`hf_bpe.tools.vocab_commands`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from hf_bpe.tools import vocab_commands

__all__ = ["main"]


def _add_train_options(p: argparse.ArgumentParser, vocab_size: int, superwords: bool = True) -> None:
    p.add_argument("--vocab-size", type=int, default=vocab_size, help="tokens in all: 256 bytes + specials + merges")
    p.add_argument("--special-token", action="append", dest="special_tokens", metavar="T",
                   help="a special token (repeatable); default <|endoftext|>")
    p.add_argument("--tie-break", choices=["lexicographic", "hf"], default="lexicographic",
                   help="among pairs of equal count: the greatest bytes, or exactly HF tokenizers' BpeTrainer")
    p.add_argument("--pattern", default="gpt2",
                   help="gpt2, cl100k, o200k, llama3, qwen2, qwen3.5, nemotron, deepseek-v3, kimi or a regex")
    p.add_argument("--min-frequency", type=int, default=0, help="stop when no pair occurs this often")
    p.add_argument("--max-token-length", type=int, default=None, help="longest merged token, in bytes (none)")
    if superwords:
        _add_superword_options(p)
    p.add_argument("--merge-filter", default=None, metavar="REGEX",
                   help="never form a token that holds a match of REGEX (e.g. '[.!?]\\s')")
    p.add_argument("--threads", type=int, default=None, help="threads (0 or unset: all cores)")
    p.add_argument("--errors", choices=["strict", "replace", "ignore"], default="strict",
                   help="what to do with bytes that are not UTF-8")
    p.add_argument("--text-field", default="text", metavar="NAME", help="the field of JSON-lines files to read")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--tokenizer-class", default=None, metavar="NAME",
                   help="the class tokenizer_config.json names (default BPETokenizer; PreTrainedTokenizerFast "
                        "for transformers 4 without hf_bpe)")


def _add_superword_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--superword-transition", type=int, default=None, metavar="T",
                   help="superword tokens (SuperBPE): plain BPE up to T tokens, then tokens spanning words "
                        "(gpt2 pattern only)")
    p.add_argument("--superword-max-words", type=int, default=None, metavar="N",
                   help="with --superword-transition: words a superword token spans at most (default 4)")


def _add_ray_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help=f"{what} (hf_bpe.distributed): the cluster at ADDRESS ('auto', 'ray://host:10001'), "
                        "or a local one started for the run")


def _train(args: argparse.Namespace, files: list[str]) -> "object":
    import hf_bpe

    specials = args.special_tokens if args.special_tokens is not None else ["<|endoftext|>"]
    t0 = time.perf_counter()
    options = dict(vocab_size=args.vocab_size, special_tokens=specials, pattern=args.pattern, tie_break=args.tie_break,
                   min_frequency=args.min_frequency, max_token_length=args.max_token_length, progress=not args.quiet,
                   errors=args.errors, text_field=args.text_field,
                   superword_transition=getattr(args, "superword_transition", None),
                   **({} if getattr(args, "superword_max_words", None) is None
                      else {"superword_max_words": args.superword_max_words}),
                   merge_filter=getattr(args, "merge_filter", None))
    if getattr(args, "ray", None):
        from hf_bpe import distributed

        bpe = distributed.train_files(files, address=None if args.ray == "local" else args.ray,
                                      threads_per_task=args.threads, **options)
    else:
        bpe = hf_bpe.train_files(files, num_threads=args.threads, **options)
    elapsed = time.perf_counter() - t0
    out = bpe.save(args.out, tokenizer_class=args.tokenizer_class)
    print(f"trained {bpe.vocab_size} tokens ({len(bpe.merges)} merges) in {elapsed:.1f} s -> {out}")
    vocab_commands.short_notice(bpe.vocab_size, args.vocab_size, args.min_frequency)
    return bpe


def _cmd_train(args: argparse.Namespace) -> int:
    _train(args, args.files)
    return 0


def _read_sample(path: str, limit: int) -> str:
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read(limit)


def _cmd_demo(args: argparse.Namespace) -> int:
    import hf_bpe

    corpus = hf_bpe.sample_corpus()
    if args.out is None:
        import tempfile

        args.out = tempfile.mkdtemp(prefix="hf-bpe-demo-")
    print(f"training on the bundled corpus {corpus}")
    print("  (21 public-domain Project Gutenberg books, 8.8 MB of English text)")
    args.special_tokens = None
    bpe = _train(args, [corpus])
    text = _read_sample(corpus, 2_000_000).replace("<|endoftext|>", "")
    ids = bpe.encode_ordinary(text)
    n_bytes = len(text.encode())
    print(f"vocabulary size:   {bpe.vocab_size} (256 bytes + {len(bpe.special_tokens)} special + "
          f"{bpe.vocab_size - 256 - len(bpe.special_tokens)} merged)")
    print(f"compression ratio: {n_bytes / max(1, len(ids)):.2f} bytes/token on the first {n_bytes / 1e6:.1f} MB")
    sentence = "The quick brown fox jumps over the lazy dog, and then it rests."
    sids = bpe.encode(sentence)
    print(f"sample sentence:   {sentence!r}")
    print(f"  tokens: {[bpe.vocab[i].decode('utf-8', 'replace') for i in sids]}")
    print(f"  ids:    {sids}")
    print(f"  decode: {bpe.decode(sids)!r}")
    print(f"output folder:     {Path(args.out).resolve()}  ({', '.join(sorted(os.listdir(args.out)))})")
    return 0


def _cmd_encode(args: argparse.Namespace) -> int:
    import tempfile

    import numpy as np

    import hf_bpe

    bpe = hf_bpe.BPE.load(args.tokenizer)
    t0 = time.perf_counter()
    out = Path(args.out)
    if out.is_dir():
        raise IsADirectoryError(f"{out} is a folder: --out names the .npy file to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    tokens = nbytes = 0
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".hf-bpe-encode-") as d:
        parts = []
        if getattr(args, "ray", None):  # one task per file on the cluster, in input order
            from hf_bpe import distributed

            index = distributed.encode_files(args.inputs, bpe, d, errors=args.errors, separator=args.separator,
                                             address=None if args.ray == "local" else args.ray)
            for e in json.loads(Path(index).read_text()):
                tokens, nbytes = tokens + e["tokens"], nbytes + e["bytes"]
                parts.append(os.path.join(d, e["output"]))
        for n, path in enumerate(args.inputs if not parts else []):
            part = os.path.join(d, f"{n}.npy")
            t, b = bpe.encode_file(path, part, progress=not args.quiet, errors=args.errors,
                                   separator=args.separator, num_threads=args.threads)
            tokens, nbytes = tokens + t, nbytes + b
            parts.append(part)
        if len(parts) == 1:
            os.replace(parts[0], out)
        else:  # concatenate the parts, streamed through memory maps, then move into place
            arrays = [np.load(p, mmap_mode="r") for p in parts]
            tmp = os.path.join(d, "all.npy")
            whole = np.lib.format.open_memmap(tmp, mode="w+", dtype=arrays[0].dtype, shape=(tokens,))
            at = 0
            for a in arrays:
                whole[at:at + len(a)] = a
                at += len(a)
            whole.flush()
            del whole, arrays
            os.replace(tmp, out)
    dt = time.perf_counter() - t0
    print(f"{tokens} tokens from {nbytes} bytes in {dt:.2f} s ({nbytes / 1e6 / max(dt, 1e-9):.1f} MB/s) -> {out}")
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    import tempfile

    import hf_bpe

    bpe = hf_bpe.BPE.load(args.tokenizer)
    total_b = total_t = 0
    print(f"{'file':40} {'bytes':>14} {'tokens':>14} {'bytes/token':>12}")
    for path in args.inputs:
        with tempfile.TemporaryDirectory() as d:
            t, b = bpe.encode_file(path, os.path.join(d, "ids.npy"), progress=not args.quiet, errors=args.errors,
                                   separator=args.separator, num_threads=args.threads)
        total_b += b
        total_t += t
        print(f"{path[-40:]:40} {b:>14,} {t:>14,} {b / max(t, 1):>12.3f}")
    if len(args.inputs) > 1:
        print(f"{'total':40} {total_b:>14,} {total_t:>14,} {total_b / max(total_t, 1):>12.3f}")
    return 0


def _load_input(args: argparse.Namespace) -> "object":
    import hf_bpe

    if args.pattern is None and not args.special_tokens:
        return hf_bpe.BPE.load(args.input)
    if not args.input.endswith(".tiktoken"):
        raise ValueError("--pattern and --special-token describe a .tiktoken INPUT; other formats carry their own")
    specials = {}
    for item in args.special_tokens or []:
        token, sep, i = item.rpartition("=")
        if not sep or not token or not i.isdigit():
            raise ValueError(f"--special-token {item!r}: expected TOKEN=ID, e.g. '<|endoftext|>=50256'")
        specials[token] = int(i)
    return hf_bpe.BPE.from_tiktoken(args.input, pattern=args.pattern or "cl100k", special_tokens=specials)


def _cmd_convert(args: argparse.Namespace) -> int:
    from hf_bpe import formats

    bpe = _load_input(args)
    out = Path(args.out)
    if args.to == "hf":
        print(f"wrote {', '.join(formats.ARTIFACTS)} -> {bpe.save(out)}")
    elif args.to == "gpt2":
        if formats.pattern_name(bpe.pattern) != "gpt2":
            raise ValueError(f"GPT-2's vocab.json + merges.txt have no place for the pattern {bpe.pattern!r} "
                             "(they imply GPT-2's): use --to hf, which also writes tokenizer.json")
        stale = [n for n in formats.ARTIFACTS[2:] if (out / n).exists()]
        if stale:
            raise ValueError(f"{out} holds {', '.join(stale)}, which readers would prefer to the new files: "
                             "remove it or choose another folder")
        formats.write_folder(out, formats.gpt2_files(bpe.vocab, bpe.merges, bpe.special_tokens))
        print(f"wrote vocab.json, merges.txt -> {out}")
        if bpe.special_tokens:
            print(f"special tokens are plain vocab.json entries there; declare them when loading: "
                  f"BPE.load({str(out)!r}, special_tokens={sorted(bpe.special_tokens)!r})")
    else:
        from hf_bpe.formats.tiktoken_export import pat_str

        # (refuses a pattern tiktoken cannot run as we do, before writing)
        pat = pat_str(bpe.pattern, bpe.pattern_source)
        bpe.save_tiktoken(out)
        pattern = formats.pattern_name(bpe.pattern)
        print(f"wrote {len(bpe.vocab) - len(bpe.special_tokens)} ranks -> {out}")
        print("a .tiktoken file holds neither the pattern nor the special tokens; rebuild with")
        print(f"  BPE.from_tiktoken({str(out)!r}, pattern={pattern!r}, special_tokens={bpe.special_tokens!r})")
        opts = " ".join([f"--pattern {_quote(pattern)}"] + [f"--special-token {_quote(f'{t}={i}')}"
                                                           for t, i in bpe.special_tokens.items()])
        print(f"  hf-bpe convert {_quote(str(out))} OUT --to hf {opts}")
        print(f"  tiktoken.Encoding(NAME, pat_str={pat!r}, special_tokens={bpe.special_tokens!r},\n"
              f"                    mergeable_ranks=tiktoken.load.load_tiktoken_bpe({str(out)!r}))")
    return 0


def _cmd_viz(args: argparse.Namespace) -> int:
    import hf_bpe
    from hf_bpe.tools import viz

    bpe = hf_bpe.BPE.load(args.tokenizer) if args.tokenizer else None
    other = hf_bpe.BPE.load(args.compare) if args.compare else None
    names = (Path(args.tokenizer).name if args.tokenizer else "", Path(args.compare).name if args.compare else "")
    if names[0] == names[1]:
        names = (names[0] + " (1)", names[1] + " (2)")
    viz.serve(bpe, compare=other, port=args.port, open_browser=not args.no_browser, names=names)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    import hf_bpe
    from hf_bpe.tools import report

    bpe = hf_bpe.BPE.load(args.tokenizer)
    other = hf_bpe.BPE.load(args.compare) if args.compare else None
    names = (Path(args.tokenizer).name, Path(args.compare).name if args.compare else "")
    if names[0] == names[1]:
        names = (names[0] + " (1)", names[1] + " (2)")
    figures = report.write_report(bpe, args.corpora, args.out, compare=other, names=names, progress=not args.quiet,
                                  errors=args.errors, parallel=args.parallel)
    for name, r in figures.items():
        t = r["total"]
        print(f"{name}: {t['bytes']:,} bytes, {t['tokens']:,} tokens, "
              f"{t['bytes'] / max(t['tokens'], 1):.3f} bytes/token; "
              f"{100 * r['unused_share']:.1f}% of the vocabulary unused"
              + (f"; premium over English: Gini {r['parallel']['gini']:.3f} over {len(r['parallel']['languages'])} "
                 "languages" if r["parallel"] else ""))
    print(f"wrote {args.out}")
    return 0


class _Help(argparse.HelpFormatter):
    """Help that names each option's default (when it has one worth naming)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535)")
    return int(text)


def _version() -> str:
    from hf_bpe import __version__

    return __version__


def _quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hf-bpe`` command."""
    parser = argparse.ArgumentParser(prog="hf-bpe", description="Byte-level BPE: train, encode, inspect.")
    parser.add_argument("--version", action="version", version=f"hf-bpe {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train a vocabulary on files (text, .gz, .jsonl)")
    p.add_argument("files", nargs="+", metavar="FILE", help="text, .gz or .jsonl(.gz) files")
    p.add_argument("--out", required=True, help="output folder")
    _add_train_options(p, 32000)
    _add_ray_option(p, "count on a Ray cluster")
    p.set_defaults(func=_cmd_train)

    vocab_commands.add(sub, _add_train_options)

    p = sub.add_parser("demo", help="train on the bundled sample corpus and show the result")
    p.add_argument("--out", default=None, help="output folder (default: a new folder in the system's temporary "
                   "place, named when done)")
    _add_train_options(p, 8000)
    p.set_defaults(func=_cmd_demo)

    for name, func, helptext in (("encode", _cmd_encode, "encode a file into a flat .npy of ids"),
                                 ("stats", _cmd_stats, "bytes, tokens and compression ratio of files")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--tokenizer", required=True, help="tokenizer folder or file, or a name (gpt2, cl100k_base...)")
        p.add_argument("inputs", nargs="+", metavar="INPUT")
        if name == "encode":
            p.add_argument("--out", required=True, help="output .npy file")
            _add_ray_option(p, "encode the files on a Ray cluster, one task each")
        p.add_argument("--errors", choices=["strict", "replace"], default="strict",
                       help="what to do with bytes that are not UTF-8")
        p.add_argument("--separator", default=None, metavar="T",
                       help="special token appended after each JSON-lines document (e.g. <|endoftext|>)")
        p.add_argument("--threads", type=int, default=None, help="threads (0 or unset: all cores)")
        p.add_argument("--quiet", action="store_true")
        p.set_defaults(func=func)

    p = sub.add_parser("convert", help="write a tokenizer as our folder (hf), GPT-2 files or a .tiktoken file")
    p.add_argument("input", metavar="INPUT",
                   help="anything BPE.load reads (folder, vocab.json, tokenizer.json, .tiktoken, "
                        "a published name such as cl100k_base)")
    p.add_argument("out", metavar="OUT", help="output folder (hf, gpt2) or file (tiktoken)")
    p.add_argument("--to", required=True, choices=["hf", "gpt2", "tiktoken"])
    p.add_argument("--pattern", default=None, help="pattern of a .tiktoken INPUT not named after a known encoding")
    p.add_argument("--special-token", action="append", dest="special_tokens", metavar="TOKEN=ID",
                   help="a special token of a .tiktoken INPUT (repeatable)")
    p.set_defaults(func=_cmd_convert)

    p = sub.add_parser("viz", help="the blog post's diagram as a local page: text -> tokens -> ids, merge by merge")
    p.add_argument("--tokenizer", default=None, help="tokenizer to show (default: the post's worked example)")
    p.add_argument("--compare", default=None, metavar="DIR2", help="a second tokenizer, side by side")
    p.add_argument("--port", type=_port, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.set_defaults(func=_cmd_viz)

    p = sub.add_parser("report", help="one HTML file: bytes/token per corpus and script, token lengths, unused tokens")
    p.add_argument("--tokenizer", required=True, help="tokenizer folder or file, or a name (gpt2, cl100k_base, ...)")
    p.add_argument("corpora", nargs="+", metavar="CORPUS")
    p.add_argument("--compare", default=None, metavar="DIR2", help="a second tokenizer, the same figures")
    p.add_argument("--parallel", default=None, metavar="JSONL",
                   help='sentence pairs {"lang", "text", "eng"} (.jsonl[.gz]): tokens per language against English')
    p.add_argument("--out", required=True, help="the HTML file to write")
    p.add_argument("--errors", choices=["strict", "replace"], default="strict",
                   help="what to do with bytes that are not UTF-8")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_report)

    for p in sub.choices.values():
        p.formatter_class = _Help
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError, TypeError) as e:
        spelled = "--errors replace" + (" or --errors ignore" if args.command in ("train", "train-parity", "demo")
                                        else "")
        msg = str(e).replace("errors='replace' or errors='ignore'", spelled)
        print(f"hf-bpe {args.command}: error: {msg}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
