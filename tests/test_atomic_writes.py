"""Atomic writes (`hf_bpe/formats/files.py`, `src/files.rs`): a save that fails or is killed after any
step leaves the old folder or the new one, never a mix, with the mode of any new folder and no stale
tokenizer file; a killed `encode_file` leaves nothing behind, and dead processes' temporary files go."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import hf_bpe
from hf_bpe import BPE
from conftest import script_file


def small_bpe(tmp_path: Path, tie_break: str = "lexicographic") -> BPE:
    docs = ["the cat sat on the mat. The hat is on the cat!", "héllo wörld 🙂 日本語 tests 123"] * 20
    return hf_bpe.train(docs, vocab_size=300, tie_break=tie_break, progress=False)


def test_save_is_atomic_in_a_new_folder(tmp_path, monkeypatch):
    bpe = small_bpe(tmp_path)
    target = tmp_path / "new"
    real_replace = os.replace

    def crash(*a, **k):
        raise OSError("simulated crash")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        bpe.save(target)
    monkeypatch.setattr(os, "replace", real_replace)
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".new")] == []


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_saved_folders_get_the_mode_of_any_new_folder(tmp_path, umask):
    bpe = small_bpe(tmp_path)
    old = os.umask(umask)
    try:
        bpe.save(tmp_path / "new")       # renamed into place
        bpe.save(tmp_path / "new")       # exchanged with the old one
        os.mkdir(tmp_path / "plain")
    finally:
        os.umask(old)
    want = (tmp_path / "plain").stat().st_mode & 0o777
    assert want == 0o777 & ~umask
    assert (tmp_path / "new").stat().st_mode & 0o777 == want
    assert all(f.stat().st_mode & 0o777 == 0o666 & ~umask for f in (tmp_path / "new").iterdir())


def test_save_is_atomic_over_an_existing_folder(tmp_path, monkeypatch):
    old = small_bpe(tmp_path)
    target = old.save(tmp_path / "tok")
    (target / "README.md").write_text("kept")
    new = hf_bpe.train(["completely different text here"] * 30, vocab_size=280, progress=False)
    from hf_bpe.formats import files as artifacts

    def crash(what):
        if what == "exchange":
            raise OSError("simulated crash")

    monkeypatch.setattr(artifacts, "_step", crash)
    with pytest.raises(OSError, match="simulated"):
        new.save(target)
    monkeypatch.setattr(artifacts, "_step", lambda what: None)
    # A save that failed half-way left the old folder whole, and nothing else.
    assert BPE.load(target) == old
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    # A completed save over it works and keeps the folder's other files.
    new.save(target)
    assert BPE.load(target) == new
    assert (target / "README.md").read_text() == "kept"


@pytest.mark.parametrize("exchange", [True, False])
def test_retraining_into_a_folder_leaves_no_stale_tokenizer_file(tmp_path, monkeypatch, exchange):
    from transformers import AutoTokenizer

    from hf_bpe.formats import files as artifacts

    if not exchange:  # the one-by-one path of systems without an atomic exchange
        monkeypatch.setattr(artifacts, "_exchange", lambda a, b: False)
    target = tmp_path / "tok"
    tok = hf_bpe.BPETokenizer.from_bpe(small_bpe(tmp_path))
    tok.add_tokens(["<|im_start|>"], special_tokens=True)
    tok.chat_template = "{% for m in messages %}<|im_start|>{{ m['content'] }}{% endfor %}"
    tok.save_pretrained(target)
    (target / "added_tokens.json").write_text('{"<|im_start|>": 300}')  # as transformers 4 wrote it
    (target / "README.md").write_text("kept")
    assert (target / "chat_template.jinja").exists()
    new = hf_bpe.train(["completely different text here"] * 30, vocab_size=280, progress=False)
    new.save(target)
    assert not (target / "chat_template.jinja").exists() and not (target / "added_tokens.json").exists()
    assert (target / "README.md").read_text() == "kept"
    again = AutoTokenizer.from_pretrained(target)
    text = "<|im_start|>completely different"
    assert again(text)["input_ids"] == new.encode(text) and again.chat_template is None


@pytest.mark.parametrize("exchange", [True, False])
def test_named_chat_templates_are_saved_in_their_subfolder(tmp_path, monkeypatch, exchange):
    from hf_bpe.formats import files as artifacts

    if not exchange:
        monkeypatch.setattr(artifacts, "_exchange", lambda a, b: False)
    target = tmp_path / "tok"
    tok = hf_bpe.BPETokenizer.from_bpe(small_bpe(tmp_path))
    tok.chat_template = {"default": "{{'a'}}", "tools": "{{'b'}}"}
    for _ in range(2):  # the second save replaces a folder that has the subfolder
        tok.save_pretrained(target)
        assert (target / "additional_chat_templates" / "tools.jinja").read_text() == "{{'b'}}"
        assert (target / "chat_template.jinja").read_text() == "{{'a'}}"
        assert hf_bpe.BPETokenizer.from_pretrained(target).chat_template == tok.chat_template
    tok.chat_template = "{{'c'}}"
    tok.save_pretrained(target)  # no named templates now: the subfolder is stale and goes
    assert not (target / "additional_chat_templates").exists()
    assert hf_bpe.BPETokenizer.from_pretrained(target).chat_template == "{{'c'}}"


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

    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer

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


def test_a_killed_encode_file_leaves_nothing_behind(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    src = script_file(tmp_path, "cyrillic", 6)
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


def test_encode_file_os_errors_are_oserror_subclasses_naming_the_users_path(tmp_path):
    bpe = hf_bpe.train(["the cat sat on the mat"] * 5, vocab_size=260, progress=False)
    src = tmp_path / "in.txt"
    src.write_text("the cat sat\n")
    with pytest.raises(FileNotFoundError) as e:  # a folder that does not exist
        bpe.encode_file(src, tmp_path / "no" / "such" / "ids.npy", progress=False)
    assert str(tmp_path / "no" / "such" / "ids.npy") in str(e.value) and ".tmp" not in str(e.value)
    (tmp_path / "adir").mkdir()
    with pytest.raises(IsADirectoryError) as e:  # the target is a folder
        bpe.encode_file(src, tmp_path / "adir", progress=False)
    assert str(tmp_path / "adir") in str(e.value) and ".tmp" not in str(e.value)
    assert isinstance(e.value, OSError) and not isinstance(e.value, ValueError)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "in.txt"] and not any((tmp_path / "adir").iterdir())
