"""A vocabulary report: one self-contained HTML file (inline SVG, no scripts) of how a tokenizer
cuts corpora, ``hf-bpe report`` / :func:`write_report`.

Per corpus, from the whole file (``encode_file``, the same figures as ``hf-bpe stats``): bytes,
tokens, bytes per token, the tokens' lengths, the share of the vocabulary never used and which
tokens, the most frequent tokens. Per Unicode script, from the first ``sample_bytes`` of each
corpus: each word (a run of non-space characters with the spaces before it) is encoded on its
own and counts for the script of its first letter (from the character's Unicode name); words
without letters are "Common". Words, not the pre-tokenizer's pieces, so that two tokenizers are
measured on the same cut.

With a parallel file (``parallel=``, ``--parallel``: JSON lines ``{"lang", "text", "eng"}``, e.g.
Tatoeba's pairs of 112 languages with English), per language: the tokens of its sentences, of
their English translations, and the premium (their ratio: what a reader of that language pays
per English token), with the Gini coefficient of the premiums (0: every language pays alike).
"""

from __future__ import annotations

import gzip
import html
import json
import os
import re
import tempfile
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from hf_bpe.formats.files import write_file
from hf_bpe.bpe import BPE
from hf_bpe.tools.viz import show

__all__ = ["compute", "parallel_costs", "gini", "write_report"]

SAMPLE_BYTES = 1 << 20
TOP = 30
LONG = 24  # token lengths from here on share one bar
COLOURS = ("#4477aa", "#ee6677")
_SCRIPTS = {"CJK": "Han", "HIRAGANA": "Hiragana", "KATAKANA": "Katakana", "HANGUL": "Hangul"}


def script_of(text: str) -> str:
    """The script of the first letter of ``text`` (the first word of its Unicode name, e.g.
    LATIN, CYRILLIC, ARABIC; CJK ideographs as Han), "Common" without a letter."""
    for ch in text:
        if unicodedata.category(ch).startswith("L"):
            word = unicodedata.name(ch, "UNKNOWN").split()[0]
            return _SCRIPTS.get(word, word.title())
    return "Common"


def _sample(path: str, limit: int, errors: str) -> str:
    """About the first ``limit`` bytes of a corpus's text (of its documents' ``text`` fields for
    JSON lines), as the reader reads it."""
    name = path.lower()
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rb") as f:
        if not name.removesuffix(".gz").endswith(".jsonl"):
            return f.read(limit).decode("utf-8", errors="ignore")
        docs, size = [], 0
        for line in f:
            if size >= limit:
                break
            if line.strip():
                doc = json.loads(line.decode("utf-8", errors="replace" if errors != "strict" else "strict"))
                text = doc.get("text", "") if isinstance(doc, dict) else ""
                docs.append(text if isinstance(text, str) else "")
                size += len(docs[-1].encode("utf-8", errors="ignore"))
        return "\n".join(docs)


def compute(bpe: BPE, corpora: Sequence[str], *, progress: bool = True, errors: str = "strict",
            sample_bytes: int = SAMPLE_BYTES, parallel: str | None = None) -> dict[str, Any]:
    """The report's figures for ``bpe`` on ``corpora`` (paths of text, .gz or .jsonl files);
    ``errors`` as ``BPE.encode_file``'s; ``parallel``: a parallel file (:func:`parallel_costs`)."""
    import numpy as np

    vocab = bpe.vocab
    specials = set(bpe.special_tokens.values())
    size = bpe.vocab_size
    uses = np.zeros(size, dtype=np.int64)
    per_corpus = []
    for path in corpora:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "ids.npy")
            tokens, nbytes = bpe.encode_file(path, out, progress=progress, errors=errors)
            ids = np.load(out, mmap_mode="r")  # counted in slices: memory stays bounded
            for at in range(0, len(ids), 1 << 24):
                uses += np.bincount(ids[at:at + (1 << 24)].astype(np.int64), minlength=size)
            del ids
        per_corpus.append({"path": str(path), "name": Path(path).name, "bytes": nbytes, "tokens": tokens,
                           "bytes_per_token": nbytes / max(tokens, 1)})
    scripts: dict[str, list[int]] = {}
    for path in corpora:
        groups: dict[str, list[str]] = {}
        for w in re.findall(r"\s*\S+", _sample(str(path), sample_bytes, errors)):
            groups.setdefault(script_of(w), []).append(w)
        for name, ws in groups.items():
            acc = scripts.setdefault(name, [0, 0])
            acc[0] += sum(len(w.encode("utf-8")) for w in ws)
            acc[1] += sum(len(t) for t in bpe.encode_batch(ws, allowed_special="all"))
    lengths_vocab: Counter = Counter(len(b) for i, b in vocab.items() if i not in specials)
    lengths_used: Counter = Counter()
    for i in np.nonzero(uses)[0].tolist():
        if i in vocab and i not in specials:
            lengths_used[len(vocab[i])] += int(uses[i])
    ordinary = [i for i in vocab if i not in specials]
    unused = [i for i in ordinary if uses[i] == 0]
    top = [(int(i), int(uses[i])) for i in np.argsort(-uses, kind="stable")[:TOP].tolist() if uses[i] > 0]
    return {
        "corpora": per_corpus,
        "sample_bytes": sample_bytes,
        "total": {"bytes": sum(c["bytes"] for c in per_corpus), "tokens": sum(c["tokens"] for c in per_corpus)},
        "scripts": {k: {"bytes": v[0], "tokens": v[1], "bytes_per_token": v[0] / max(v[1], 1)}
                    for k, v in sorted(scripts.items(), key=lambda kv: -kv[1][0])},
        "lengths_vocab": dict(sorted(lengths_vocab.items())),
        "lengths_used": dict(sorted(lengths_used.items())),
        "vocab_tokens": len(ordinary),
        "unused": len(unused),
        "unused_share": len(unused) / max(len(ordinary), 1),
        "unused_examples": [show(vocab[i]) for i in sorted(unused, key=lambda i: (len(vocab[i]), i))[-TOP:]],
        "top": [(show(vocab[i]), i, n) for i, n in top],
        "parallel": parallel_costs(bpe, parallel) if parallel else None,
    }


def _read_pairs(path: str) -> dict[str, tuple[list[str], list[str]]]:
    """A parallel file's sentences and their English translations, by language."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                lang, text, eng = row["lang"], row["text"], row["eng"]
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}, line {n}: a parallel pair is a JSON object with \"lang\", \"text\" "
                                 f"and \"eng\" ({e.__class__.__name__}: {e})") from None
            if not all(isinstance(x, str) for x in (lang, text, eng)):
                raise ValueError(f"{path}, line {n}: \"lang\", \"text\" and \"eng\" must be strings")
            texts, engs = out.setdefault(lang, ([], []))
            texts.append(text)
            engs.append(eng)
    if not out:
        raise ValueError(f"{path}: no parallel pairs")
    return out


def gini(values: Sequence[float]) -> float:
    """The Gini coefficient of ``values`` (0: all equal; towards 1: one holds everything)."""
    xs = sorted(values)
    n, total = len(xs), sum(xs)
    if n == 0 or total == 0:
        return 0.0
    return sum((2 * i - n + 1) * x for i, x in enumerate(xs)) / (n * total)


def parallel_costs(bpe: BPE, path: str) -> dict[str, Any]:
    """Per language of a parallel file: pairs, tokens of the sentences and of their English
    translations, the premium (their ratio); and the premiums' Gini coefficient."""
    pairs = _read_pairs(path)
    langs = sorted(pairs)
    texts = [t for lang in langs for t in pairs[lang][0]]
    engs = [t for lang in langs for t in pairs[lang][1]]
    lens = [len(x) for x in bpe.encode_batch(texts + engs, allowed_special="all")]
    per, at = {}, 0
    for lang in langs:
        n = len(pairs[lang][0])
        tokens, english = sum(lens[at:at + n]), sum(lens[len(texts) + at:len(texts) + at + n])
        per[lang] = {"pairs": n, "tokens": tokens, "english_tokens": english, "premium": tokens / max(english, 1)}
        at += n
    return {"path": str(path), "languages": per, "gini": gini([v["premium"] for v in per.values()])}


def _bars(title: str, labels: list[str], series: list[tuple[str, list[float]]], fmt: str = "{:.2f}") -> str:
    """A horizontal bar chart as inline SVG: one row per label, one bar per series."""
    row, bar, left, width = 12 * len(series) + 8, 12, 150, 420
    top = max((v for _, vals in series for v in vals), default=1) or 1
    h = 30 + row * len(labels) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 90}" height="{h}" role="img">',
           f'<title>{html.escape(title)}</title>']
    for j, (name, _) in enumerate(series):
        out.append(f'<rect x="{left + j * 160}" y="4" width="10" height="10" fill="{COLOURS[j % 2]}"/>'
                   f'<text x="{left + j * 160 + 14}" y="13" font-size="11">{html.escape(name)}</text>')
    for i, lab in enumerate(labels):
        y = 24 + i * row
        out.append(f'<text x="{left - 6}" y="{y + row / 2 + 3}" font-size="11" text-anchor="end">'
                   f'{html.escape(lab)}</text>')
        for j, (_, vals) in enumerate(series):
            v = vals[i]
            w = width * v / top
            out.append(f'<rect x="{left}" y="{y + j * bar}" width="{w:.1f}" '
                       f'height="{bar - 2}" fill="{COLOURS[j % 2]}"/>'
                       f'<text x="{left + w + 4:.1f}" y="{y + j * bar + 9}" font-size="10">{fmt.format(v)}</text>')
    out.append("</svg>")
    return "".join(out)


def _bucket(hist: dict[int, int], k: int) -> int:
    """Tokens of length ``k`` (of ``LONG`` bytes or more for ``k == LONG``)."""
    return sum(v for n, v in hist.items() if n >= k) if k == LONG else hist.get(k, 0)


def _table(head: list[str], rows: list[list[Any]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def render(reports: list[tuple[str, dict[str, Any]]]) -> str:
    """The HTML of one or two tokenizers' figures (``[(name, compute(...)), ...]``)."""
    names = [n for n, _ in reports]
    first = reports[0][1]
    parts = [f"<h1>Vocabulary report: {' vs '.join(html.escape(n) for n in names)}</h1>"]
    corpora = [c["name"] for c in first["corpora"]]
    parts.append("<h2>Bytes per token, per corpus</h2>")
    parts.append(_bars("bytes per token per corpus", corpora + ["all"],
                       [(n, [c["bytes_per_token"] for c in r["corpora"]]
                         + [r["total"]["bytes"] / max(r["total"]["tokens"], 1)])
                        for n, r in reports]))
    parts.append(_table(["tokenizer", "corpus", "bytes", "tokens", "bytes/token"],
                        [[n, c["name"], f"{c['bytes']:,}", f"{c['tokens']:,}", f"{c['bytes_per_token']:.3f}"]
                         for n, r in reports for c in r["corpora"]]))
    scripts = list(first["scripts"])
    parts.append("<h2>Bytes per token, per Unicode script</h2><p>From the first "
                 f"{first['sample_bytes']:,} bytes of each corpus, each word encoded on its own.</p>")
    parts.append(_bars("bytes per token per script", scripts,
                       [(n, [r["scripts"].get(s, {}).get("bytes_per_token", 0.0) for s in scripts])
                        for n, r in reports]))
    parts.append(_table(["tokenizer", "script", "bytes", "tokens", "bytes/token"],
                        [[n, s, f"{v['bytes']:,}", f"{v['tokens']:,}", f"{v['bytes_per_token']:.3f}"]
                         for n, r in reports for s, v in r["scripts"].items()]))
    lens = sorted({min(k, LONG) for _, r in reports for k in r["lengths_vocab"]})
    parts.append("<h2>Token lengths (bytes)</h2>")
    labels = [f"{k}+" if k == LONG else str(k) for k in lens]
    parts.append(_bars("tokens of each length in the vocabulary", labels,
                       [(f"{n}: vocabulary", [float(_bucket(r["lengths_vocab"], k)) for k in lens])
                        for n, r in reports], "{:,.0f}"))
    parts.append(_bars("share of the corpus tokens (special tokens aside) of each length (%)", labels,
                       [(f"{n}: corpus tokens, %",
                         [100 * _bucket(r["lengths_used"], k) / max(sum(r["lengths_used"].values()), 1)
                          for k in lens])
                        for n, r in reports], "{:.1f}"))
    if first.get("parallel"):
        parts.extend(_parallel_section(reports))
    for n, r in reports:
        parts.append(f"<h2>{html.escape(n)}: vocabulary never used</h2>"
                     f"<p>{r['unused']:,} of {r['vocab_tokens']:,} tokens "
                     f"({100 * r['unused_share']:.1f}%) never occur in these corpora; the longest: "
                     f"<code>{html.escape(' '.join(r['unused_examples']))}</code></p>")
        parts.append(f"<h2>{html.escape(n)}: most frequent tokens</h2>")
        parts.append(_table(["token", "id", "count"], [[t, i, f"{c:,}"] for t, i, c in r["top"]]))
    style = ("body{font:14px/1.45 system-ui,sans-serif;max-width:1000px;margin:1.5em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:.5em 0 1em}"
             "td,th{border-bottom:1px solid #ddd;padding:.15em .8em .15em 0;"
             "text-align:left;font-family:ui-monospace,monospace}h2{font-size:1.05em;margin-top:1.6em}")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>hf-bpe report</title>'
            f'<link rel="icon" href="data:,"><style>{style}</style></head><body>{"".join(parts)}</body></html>')


def _parallel_section(reports: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Per language of the parallel file: the premium over English, as bars and a table."""
    par = reports[0][1]["parallel"]
    langs = sorted(par["languages"], key=lambda lang: -par["languages"][lang]["premium"])
    ginis = ", ".join(f"{html.escape(n)} {r['parallel']['gini']:.3f}" for n, r in reports)
    out = [f"<h2>Per language: tokens against English</h2><p>{html.escape(Path(par['path']).name)}: each "
           "language's sentences against their English translations; the premium is their ratio of "
           f"tokens (1: as many as English). Gini of the premiums (0: every language pays alike): {ginis}.</p>"]
    out.append(_bars("premium over English, per language", langs,
                     [(n, [r["parallel"]["languages"][lang]["premium"] for lang in langs]) for n, r in reports]))
    out.append(_table(["tokenizer", "language", "pairs", "tokens", "English tokens", "premium"],
                      [[n, lang, v["pairs"], f"{v['tokens']:,}", f"{v['english_tokens']:,}", f"{v['premium']:.3f}"]
                       for n, r in reports for lang in langs for v in [r["parallel"]["languages"][lang]]]))
    return out


def write_report(bpe: BPE, corpora: Sequence[str], out: str | os.PathLike, *, compare: BPE | None = None,
                 names: tuple[str, str] = ("tokenizer", "compare"), progress: bool = True,
                 errors: str = "strict", parallel: str | None = None) -> dict[str, Any]:
    """Writes the report of ``bpe`` (and ``compare``) on ``corpora`` (and a ``parallel`` file) to
    ``out`` atomically; returns the figures."""
    options = dict(progress=progress, errors=errors, parallel=parallel)
    reports = [(names[0], compute(bpe, corpora, **options))]
    if compare is not None:
        reports.append((names[1], compute(compare, corpora, **options)))
    write_file(out, render(reports).encode("utf-8"))
    return dict(reports)
