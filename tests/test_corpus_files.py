"""Corpus files: read a block at a time whatever their script (memory stays flat, work linear,
the counts those of the whole text), and opened by the bytes of their name."""
from __future__ import annotations

import os
import re

import pytest

import hf_bpe
from hf_bpe import _core
from conftest import READ_BLOCK, SCRIPT_LINES, script_file


@pytest.mark.parametrize("kind", sorted(SCRIPT_LINES))
def test_files_in_any_script_are_cut_so_memory_stays_flat_and_work_linear(tmp_path, kind):
    path = script_file(tmp_path, kind, 12)
    wc = _core.WordCounter("o200k", [], 2)
    wc.add_file(str(path))
    max_carry, rescanned = wc.read_stats
    # Held: a block and what a cut left over, never the file (before: 12 MB held and rescanned).
    assert max_carry <= READ_BLOCK + 4096, max_carry
    assert rescanned <= 8 * 64, rescanned
    # And the cuts change nothing: the counts equal those of the whole text at once.
    whole = _core.WordCounter("o200k", [], 2)
    whole.add_texts([path.read_text(encoding="utf-8")])
    assert wc.words() == whole.words()


def _peak_rss_mib(code: str) -> float:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code + "\nimport resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1]) / 1024


@pytest.mark.parametrize("kind", ["cjk", "cyrillic"])
def test_peak_memory_does_not_grow_with_the_file(tmp_path, kind):
    small, big = script_file(tmp_path, kind, 8), script_file(tmp_path, kind, 32)
    tok = tmp_path / "tok"
    hf_bpe.train(SCRIPT_LINES[kind].split() * 50, vocab_size=300, pattern="o200k", progress=False).save(tok)
    rss = {}
    for name, path in (("small", small), ("big", big)):
        rss[name] = _peak_rss_mib(
            f"import hf_bpe; b = hf_bpe.BPE.load({str(tok)!r}, cache_bytes=0)\n"
            f"b.encode_file({str(path)!r}, {str(path) + '.npy'!r}, progress=False)\n"
            f"hf_bpe.train_files([{str(path)!r}], vocab_size=300, pattern='o200k', progress=False)")
    # Files built by repeating one block: the distinct words do not grow, so neither may memory
    # (before: the whole file was held, +24 MB of text and more for its decoded copy).
    assert rss["big"] - rss["small"] < 12, rss


def test_a_file_name_that_is_not_utf8_opens_that_very_file(tmp_path, gpt2_dir):
    # Paths go to the core by their bytes: a lossy conversion opened the twin named with U+FFFD.
    import subprocess
    import sys

    import numpy as np

    d = os.fsencode(tmp_path)
    real, twin = d + b"/caf\xe9.txt", d + "/caf\ufffd.txt".encode()
    with open(real, "wb") as f:
        f.write(b"the real file, the real words\n")
    with open(twin, "wb") as f:
        f.write(b"twin\n")
    bpe = hf_bpe.BPE.load(gpt2_dir)
    for path in (real, os.fsdecode(real)):
        out = tmp_path / "ids.npy"
        bpe.encode_file(path, out, progress=False)
        assert bpe.decode(np.load(out).tolist()) == "the real file, the real words\n"
    counts = hf_bpe.count_files([os.fsdecode(real)], progress=False)
    assert dict(counts.items())[b" real"] == 2 and b"twin" not in dict(counts.items())
    trained = hf_bpe.train_files([os.fsdecode(real)], vocab_size=258, progress=False)
    assert len(trained) == 258
    # The CLI gets the name as the shell gives it.
    run = subprocess.run([sys.executable, "-m", "hf_bpe", "stats", "--tokenizer", str(gpt2_dir), os.fsdecode(real)],
                         capture_output=True)
    out = run.stdout.decode(errors="surrogateescape") + run.stderr.decode(errors="surrogateescape")
    assert run.returncode == 0 and re.search(r"caf.\.txt\s+30\s+8\s", out), out  # (the twin has 5 bytes)


def _sentences_file(tmp_path, mb: int):
    """About ``mb`` MB of sentences, every line numbered (a lost or doubled line changes the counts)."""
    import random

    rng = random.Random(7)
    words = ["the", "of", "and", "a", "to", "in", "is", "was", "he", "for", "it", "with", "as", "his", "on",
             "be", "at", "by", "I", "this", "had", "not", "are", "but", "from", "or", "have", "an", "they",
             "Tolstoy", "river", "lantern", "1847", "can't", "we'll", "naïve", "café", "Москва"]
    lines, size = [], 0
    while size < mb * 1_000_000:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(3, 14)))
        line = f"{len(lines)} {line[0].upper()}{line[1:]}{rng.choice(['.', ',', '!', '?', ';', ''])}\n"
        lines.append(line)
        size += len(line.encode())
    path = tmp_path / f"sentences-{mb}.txt"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _spans(counter):
    """A split-only counter's words and its spans as ``{word bytes...: count}``."""
    from collections import Counter

    (b, o, c), gather = counter.split_words("gpt2")
    words = [bytes(b[o[i]:o[i + 1]]) for i in range(len(c))]
    sw, se, sc = gather.take()
    spans = Counter()
    for i in range(len(sc)):
        spans[tuple(words[w] for w in sw[se[i]:se[i + 1]])] += int(sc[i])
    return dict(zip(words, c.tolist())), spans


def test_a_file_counted_in_a_pipeline_counts_as_its_text(tmp_path):
    # Several blocks: while the threads count one, the next is read (src/count/stream.rs).
    from hf_bpe.training.superword import span_pattern

    path = _sentences_file(tmp_path, 5)
    assert path.stat().st_size > 2 * READ_BLOCK
    text = path.read_text(encoding="utf-8")
    piped, whole = _core.WordCounter("gpt2", [], 2), _core.WordCounter("gpt2", [], 1)
    piped.add_file(str(path))
    whole.add_texts([text])
    assert piped.words() == whole.words() and piped.bytes == whole.bytes == len(text.encode())
    # Superword spans, counted by their words' ids in each thread's shard.
    piped = _core.WordCounter(span_pattern(), [], 2, split_only=True)
    whole = _core.WordCounter(span_pattern(), [], 1, split_only=True)
    piped.add_file(str(path))
    whole.add_texts([text])
    assert _spans(piped) == _spans(whole)


def test_a_read_stopped_by_its_progress_stops_the_counting(tmp_path):
    path = _sentences_file(tmp_path, 7)
    calls = []

    def stop(done):
        calls.append(done)
        if len(calls) == 2:
            raise KeyboardInterrupt

    wc = _core.WordCounter("gpt2", [], 2)
    with pytest.raises(KeyboardInterrupt):
        wc.add_file(str(path), progress=stop)
    # (The progress counts the bytes read, which run ahead.) Two blocks were taken, and every
    # byte taken was counted before the call returned.
    assert len(calls) == 2 and 0 < wc.bytes <= 2 * READ_BLOCK < path.stat().st_size
    assert sum(len(w) * n for w, n in wc.words()) == wc.bytes


def test_a_line_longer_than_the_pipeline_copies_is_counted_in_place(tmp_path):
    # Under a span pattern the reader cuts only at line ends: a 9 MB line is one block, counted
    # where the reader holds it (src/count/stream.rs, COPIED_AT_MOST), with the same spans.
    from hf_bpe.training.superword import span_pattern

    text = " ".join(f"w{i % 9973} and, the {i}." if i % 7 else f"x{i}" for i in range(450_000))
    assert len(text) > 4 * READ_BLOCK and "\n" not in text
    path = tmp_path / "one-line.txt"
    path.write_text(text, encoding="utf-8")
    piped = _core.WordCounter(span_pattern(), [], 2, split_only=True)
    whole = _core.WordCounter(span_pattern(), [], 1, split_only=True)
    piped.add_file(str(path))
    whole.add_texts([text])
    assert piped.bytes == whole.bytes and _spans(piped) == _spans(whole)
