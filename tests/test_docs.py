"""The documented entry points work as documented: the package doctest, `hf-bpe demo` (the main
job of the README's first set-up command), and the stubs `_core.pyi` (the extension as it is)."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys

import hf_bpe


def test_package_doctest():
    res = doctest.testmod(hf_bpe)
    assert res.attempted >= 2 and res.failed == 0


def test_demo_trains_on_the_bundled_corpus_and_reports(tmp_path):
    out = tmp_path / "demo"
    res = subprocess.run([sys.executable, "-m", "hf_bpe", "demo", "--out", str(out), "--vocab-size", "2000", "--quiet"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    text = res.stdout
    assert "vocabulary size:   2000" in text
    ratio = float(text.split("compression ratio:")[1].split()[0])
    assert 2.5 < ratio < 5.0  # English at 2k tokens: ~2.9 bytes/token (3.6 at 8k)
    assert "decode: 'The quick brown fox jumps over the lazy dog, and then it rests.'" in text
    assert json.loads((out / "vocab.json").read_text())["Ġthe"] > 256
    assert hf_bpe.BPE.load(out).vocab_size == 2000
    here = subprocess.run([sys.executable, "-m", "hf_bpe", "demo", "--vocab-size", "300", "--quiet"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert here.returncode == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["demo"], here.stderr
    folder = here.stdout.split("output folder:")[1].split()[0]
    assert hf_bpe.BPE.load(folder).vocab_size == 300


def test_core_stubs_match_the_extension():
    """Every function, class and method in ``_core.pyi`` exists in the compiled module, and every
    public name of the module is in the stubs."""
    import ast
    from pathlib import Path

    from hf_bpe import _core

    tree = ast.parse((Path(hf_bpe.__file__).parent / "_core.pyi").read_text())
    stubbed = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            stubbed.add(node.name)
            assert hasattr(_core, node.name), node.name
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                    assert hasattr(getattr(_core, node.name), item.name), f"{node.name}.{item.name}"
    public = {n for n in dir(_core) if not n.startswith("_")}
    assert public <= stubbed, public - stubbed


def test_core_stub_getters_are_properties():
    """A getter of the compiled classes (a getset descriptor) is a ``@property`` in ``_core.pyi``
    and a ``@property`` there is a getter in the extension; every public member is stubbed."""
    import ast
    import inspect
    from pathlib import Path

    from hf_bpe import _core

    tree = ast.parse((Path(hf_bpe.__file__).parent / "_core.pyi").read_text())
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    assert {c.name for c in classes} >= {"Encoder", "WordCounter"}
    for node in classes:
        compiled = getattr(_core, node.name)
        declared = {}
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                declared[item.name] = any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list)
        for name, is_property in declared.items():
            attr = inspect.getattr_static(compiled, name)
            is_getter = inspect.isgetsetdescriptor(attr)
            assert is_property == is_getter, (
                f"{node.name}.{name} is {'a getter' if is_getter else 'a method'} in the extension but "
                f"{'a @property' if is_property else 'a plain method'} in _core.pyi")
        public = {n for n in vars(compiled) if not n.startswith("_")}
        assert public <= set(declared), f"{node.name}: not in _core.pyi: {sorted(public - set(declared))}"
