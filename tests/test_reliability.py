"""Regression tests of the defects found by the adversarial run (issue 12), each against the real
peers where there is one."""
from __future__ import annotations

import os
import re
import shutil
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hf_bpe
from hf_bpe import _core

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex, Tokenizer, pre_tokenizers  # noqa: E402

CUSTOM = [r"\p{L}+", "a*", r"\d+|[a-z]+", r"(?<=a)b", r" ?\w+", r"\b", "x?", r"[A-Z][a-z]*|\d{2}"]
text_st = st.lists(st.sampled_from(list("ab xyzAB12,!\n\té") + ["ab", "  ", "日本"]), max_size=40).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=st.sampled_from(CUSTOM), text=text_st)
def test_a_custom_regex_splits_like_tokenizers_isolated_split_and_keeps_all_text(pattern, text):
    # Text between matches is a piece of its own and an empty match cuts where it stands, as the
    # Split(behavior="isolated") we write into tokenizer.json.
    theirs = [s for s, _ in pre_tokenizers.Split(Regex(pattern), "isolated").pre_tokenize_str(text)]
    assert _core.pretokenize(pattern, text) == theirs
    assert "".join(_core.pretokenize(pattern, text)) == text


def test_a_custom_regex_vocabulary_gives_back_its_text_and_matches_tokenizers(tmp_path):
    bpe = hf_bpe.train(["the cat sat"] * 5, vocab_size=300, pattern=r"\p{L}+", progress=False)
    for text in ["a b, c!", "the cat sat on the mat.", "  x\n"]:
        assert bpe.decode(bpe.encode(text)) == text
    bpe.save(tmp_path / "t")
    tok = Tokenizer.from_file(str(tmp_path / "t" / "tokenizer.json"))
    for text in ["a b, c!", "the cat sat on the mat.", "cats and hats"]:
        assert bpe.encode(text) == tok.encode(text).ids
    star = hf_bpe.train(["the cat"] * 5, vocab_size=260, pattern="a*", progress=False)
    assert star.decode(star.encode("the cat")) == "the cat"


@pytest.fixture(scope="module")
def cl100k():
    from conftest import shared_data

    path = shared_data() / "tiktoken" / "cl100k_base.tiktoken"
    if not path.exists():
        pytest.skip(f"{path} is missing")
    return hf_bpe.BPE.from_tiktoken(path, pattern="cl100k", special_tokens={"<|endoftext|>": 100257})


def test_a_saved_cl100k_tokenizer_splits_numbers_alike_in_tokenizers(cl100k, tmp_path):
    cl100k.save(tmp_path / "cl")
    tok = Tokenizer.from_file(str(tmp_path / "cl" / "tokenizer.json"))
    texts = ["1948", "12345678 x 1234567", "a 99999 b", "3.14159265358979", "tel. 0049 30 123456789"]
    for t in texts:
        assert cl100k.encode(t) == tok.encode(t).ids, t
    # And it loads back as the built-in pattern (the fast scanner), not as a custom regex.
    assert hf_bpe.BPE.load(tmp_path / "cl").pattern == "cl100k"


def test_a_trained_cl100k_vocabulary_agrees_with_tokenizers_on_digit_runs(tmp_path):
    texts = [f"in {y} there were {n} people, {n * 7} cats" for y, n in zip(range(1900, 2000), range(1000, 100000, 997))]
    bpe = hf_bpe.train(texts * 3, vocab_size=400, pattern="cl100k", progress=False)
    bpe.save(tmp_path / "t")
    tok = Tokenizer.from_file(str(tmp_path / "t" / "tokenizer.json"))
    for t in texts[::7] + ["123456789012", "x1234y"]:
        assert bpe.encode(t) == tok.encode(t).ids, t


@pytest.mark.parametrize("src, want", [
    (r"\p{N}{1,3}+", r"(?>[\p{N}]{1,3})"),
    (r"a{2}+b", r"(?>a{2})b"),
    (r"(?:x{1,}+)+", r"(?:(?>x{1,}))+"),
    (r"[a{]{1,2}+|\d++", r"(?>[a{]{1,2})|\d++"),
    (r"a{1,3}|b+", r"a{1,3}|b+"),
    (r"\{1,3}+", r"\{1,3}+"),
])
def test_possessive_bounded_repeats_are_written_as_atomic_groups(src, want):
    from hf_bpe.formats.regex_forms import for_oniguruma

    assert for_oniguruma(src) == want


def test_vocabulary_entries_no_merge_builds_are_ordinary_tokens(gpt2_dir, tmp_path):
    # A merges.txt cut in half: the entries it no longer builds stay ordinary tokens, which
    # encoding never produces (as in tokenizers), and loading warns with their count.
    d = tmp_path / "half"
    d.mkdir()
    shutil.copy(gpt2_dir / "vocab.json", d / "vocab.json")
    lines = (gpt2_dir / "merges.txt").read_text(encoding="utf-8").split("\n")
    (d / "merges.txt").write_text("\n".join(lines[: len(lines) // 2]) + "\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"merges\.txt: \d+ vocabulary entries are made by no merge"):
        bpe = hf_bpe.BPE.load(d)
    assert bpe.special_tokens == {}
    from tokenizers import models

    tok = Tokenizer(models.BPE.from_file(str(d / "vocab.json"), str(d / "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    for t in ["School design", "the quick brown fox", "Zebra stripes 2024"]:
        assert bpe.encode(t) == tok.encode(t).ids
    # The full folder (with its tokenizer.json) has no such entries and warns about nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hf_bpe.BPE.load(gpt2_dir).special_tokens == {"<|endoftext|>": 50256}


def test_one_sparse_id_is_refused_with_a_clear_error_instead_of_gigabytes():
    vocab = {i: bytes([i]) for i in range(256)}
    with pytest.raises(ValueError, match=r"token ids go up to 268435454, far beyond the 257 tokens given; ids must be dense"):
        _core.Encoder(vocab, [], {"<|x|>": (1 << 28) - 2}, "gpt2")
    # cl100k's holes (a few ids between specials) stay fine.
    assert _core.Encoder(vocab, [], {"<|x|>": 4000}, "gpt2").n_vocab == 4001


@pytest.mark.parametrize("call, exc, match", [
    (lambda b: b.encode_batch("hello"), TypeError, "single str"),
    (lambda b: b.encode_batch_flat("hello"), TypeError, "single str"),
    (lambda b: b.decode(b"hi"), TypeError, "sequence of token ids, got bytes"),
    (lambda b: b.decode("hi"), TypeError, "sequence of token ids, got str"),
    (lambda b: b.decode([104.0]), ValueError, "not a valid id"),
    (lambda b: b.encode_batch(["a"], num_threads=-1), ValueError, "num_threads=-1 must be 0 or more"),
    (lambda b: b.encode_batch(["a"], num_threads=10**6), ValueError, "is more than 1024 threads"),
])
def test_bad_arguments_are_refused_naming_the_argument(call, exc, match):
    bpe = hf_bpe.train(["the cat sat on the mat"] * 5, vocab_size=270, progress=False)
    with pytest.raises(exc, match=match):
        call(bpe)


@pytest.mark.parametrize("kw, exc, match", [
    ({"vocab_size": 1000.0}, TypeError, "vocab_size must be an int, not float"),
    ({"vocab_size": True}, TypeError, "vocab_size must be an int, not bool"),
    ({"vocab_size": 2**64}, ValueError, "above the largest vocabulary"),
    ({"num_threads": -1}, ValueError, "num_threads=-1 must be 0 or more"),
])
def test_bad_training_options_are_refused(kw, exc, match):
    with pytest.raises(exc, match=match):
        hf_bpe.train(["the cat"] * 3, **{"vocab_size": 300, "progress": False, **kw})


def test_a_lone_surrogate_is_repaired_in_training_as_in_encoding():
    text = "ab\ud800cd ab"
    bpe = hf_bpe.train([text] * 5, vocab_size=270, progress=False)
    assert bpe.decode(bpe.encode(text)) == "ab\ufffdcd ab"


def test_the_cache_budget_is_a_public_knob(tmp_path, gpt2_dir):
    bpe = hf_bpe.BPE.load(gpt2_dir, cache_bytes=0)
    assert bpe.cache_bytes == 0
    ids = bpe.encode("the cat sat on the mat " * 20)
    info = bpe.cache_info()
    assert info["budget"] == 0 and info["bytes"] == 0 and info["hits"] == 0
    bpe.cache_bytes = 1 << 20
    assert bpe.cache_bytes == 1 << 20 and bpe.encode("the cat sat on the mat " * 20) == ids
    assert bpe.cache_info()["hits"] > 0
    with pytest.raises(ValueError, match="cache_bytes must be"):
        bpe.cache_bytes = -1
    small = hf_bpe.BPE(bpe.vocab, bpe.merges, bpe.special_tokens, cache_bytes=4096)
    assert small.cache_bytes == 4096 and small.encode("the cat") == bpe.encode("the cat")
    cl = hf_bpe.BPE.from_tiktoken(gpt2_dir.parent / "tiktoken" / "r50k_base.tiktoken", pattern="gpt2", cache_bytes=0)
    assert cl.cache_bytes == 0
    pytest.importorskip("transformers")
    bpe.save(tmp_path / "t")
    tok = hf_bpe.BPETokenizer.from_pretrained(str(tmp_path / "t"), cache_bytes=12345)
    assert tok.bpe.cache_bytes == 12345


BLOCK = 2 << 20  # the reader's block (src/corpus/read.rs BLOCK_BYTES)
LINES = {
    "cjk": "日本語の文章はスペースを使わずに書かれ、句読点で区切られる。東京都は人口が多い都市です\n",
    "cyrillic": "Съешь же ещё этих мягких французских булок, да выпей чаю. Пример текста номер 42\n",
    "indented": "                if value is not None and count > limit:\n                    return compute(value, 1)\n",
}


def _file(tmp_path, kind: str, mb: int):
    path = tmp_path / f"{kind}-{mb}.txt"
    line = LINES[kind]
    block = (line * (BLOCK // len(line.encode()) + 1))
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(mb // 2):
            f.write(block)
    return path


@pytest.mark.parametrize("kind", sorted(LINES))
def test_files_in_any_script_are_cut_so_memory_stays_flat_and_work_linear(tmp_path, kind):
    path = _file(tmp_path, kind, 12)
    wc = _core.WordCounter("o200k", [], 2)
    wc.add_file(str(path))
    max_carry, rescanned = wc.read_stats
    # Held: a block and what a cut left over, never the file (before: 12 MB held and rescanned).
    assert max_carry <= BLOCK + 4096, max_carry
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
    small, big = _file(tmp_path, kind, 8), _file(tmp_path, kind, 32)
    tok = tmp_path / "tok"
    hf_bpe.train(LINES[kind].split() * 50, vocab_size=300, pattern="o200k", progress=False).save(tok)
    rss = {}
    for name, path in (("small", small), ("big", big)):
        rss[name] = _peak_rss_mib(
            f"import hf_bpe; b = hf_bpe.BPE.load({str(tok)!r}, cache_bytes=0)\n"
            f"b.encode_file({str(path)!r}, {str(path) + '.npy'!r}, progress=False)\n"
            f"hf_bpe.train_files([{str(path)!r}], vocab_size=300, pattern='o200k', progress=False)")
    # Files built by repeating one block: the distinct words do not grow, so neither may memory
    # (before: the whole file was held, +24 MB of text and more for its decoded copy).
    assert rss["big"] - rss["small"] < 12, rss


def test_a_killed_encode_file_leaves_nothing_behind(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    src = _file(tmp_path, "cyrillic", 6)
    out = tmp_path / "out.npy"
    code = ("import os, signal, hf_bpe\n"
            "b = hf_bpe.train(['a b c'] * 5, vocab_size=260, progress=False)\n"
            "def kill(done):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
            f"b._encoder().encode_file({str(src)!r}, {str(out)!r}, progress=kill)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert sorted(os.listdir(tmp_path)) == [src.name], os.listdir(tmp_path)


def test_the_temporary_files_of_dead_processes_are_removed(tmp_path):
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        out = tmp_path / "ids.npy"
        stale = tmp_path / f".ids.npy.tmp-{int(dead.stdout)}"
        busy = tmp_path / f".ids.npy.tmp-{alive.pid}"
        other = tmp_path / f".other.npy.tmp-{int(dead.stdout)}"
        for f in (stale, busy, other):
            f.write_bytes(b"x" * 1000)
        src = tmp_path / "in.txt"
        src.write_text("the cat sat on the mat\n" * 100)
        bpe = hf_bpe.train(["the cat sat"] * 5, vocab_size=260, progress=False)
        bpe.encode_file(src, out, progress=False)
        assert out.exists() and not stale.exists()
        assert busy.exists() and other.exists()  # a live process's, and another output's
    finally:
        alive.kill()


KILLER = r"""
import os, signal, sys
import hf_bpe
from hf_bpe.formats import files as artifacts
k, mode, target, new = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
n = [0]
def step(what):
    n[0] += 1
    if n[0] == k:
        os.kill(os.getpid(), signal.SIGKILL)
artifacts._step = step
if mode == "save":
    hf_bpe.BPE.load(new).save(target)
elif mode == "save_pretrained":
    hf_bpe.BPETokenizer.from_bpe(hf_bpe.BPE.load(new)).save_pretrained(target)
elif mode == "cli":
    from hf_bpe.tools import cli
    cli.main(["train", sys.argv[5], "--out", target, "--vocab-size", "300", "--quiet"])
"""


@pytest.mark.parametrize("mode", ["save", "save_pretrained", "cli"])
def test_a_save_killed_after_any_step_leaves_the_old_or_the_new_folder(tmp_path, mode):
    import os
    import signal
    import subprocess
    import sys

    if mode == "save_pretrained":
        pytest.importorskip("transformers")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("completely different words in this corpus here\n" * 50)
    old = hf_bpe.train(["the cat sat on the mat"] * 30, vocab_size=280, progress=False)
    new = hf_bpe.train_files([corpus], vocab_size=300, progress=False)
    new.save(tmp_path / "new")
    target = tmp_path / "tok"
    outcomes = set()
    for k in range(1, 40):
        shutil.rmtree(target, ignore_errors=True)
        old.save(target)
        (target / "notes.txt").write_text("a file of the user's")
        proc = subprocess.run([sys.executable, "-c", KILLER, str(k), mode, str(target), str(tmp_path / "new"), str(corpus)],
                              capture_output=True, text=True, timeout=120)
        killed = proc.returncode == -signal.SIGKILL
        assert killed or proc.returncode == 0, proc.stderr[-2000:]
        got = hf_bpe.BPE.load(target)
        assert got in (old, new), f"step {k}: a mix"
        # Every file of the folder is of the same version as vocab.json.
        tok = Tokenizer.from_file(str(target / "tokenizer.json"))
        assert tok.encode("the cat and different words").ids == got.encode("the cat and different words")
        assert (target / "notes.txt").read_text() == "a file of the user's"
        outcomes.add("new" if got == new else "old")
        if not killed:
            break
        # Nothing the kill left is visible as a tokenizer, and the next save cleans it up.
        hidden = [p.name for p in tmp_path.iterdir() if p.name.startswith(".tok.tmp-")]
        new.save(target)
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".tok.tmp-")], hidden
    assert not killed, "never finished"
    assert outcomes == {"old", "new"}


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
