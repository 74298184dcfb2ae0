"""Registers :class:`hf_bpe.BPETokenizer` with ``AutoTokenizer`` without importing transformers
eagerly: at once if transformers is already imported, else right after it gets imported (a
``sys.meta_path`` finder that wraps transformers' loader and removes itself)."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import warnings


def _register() -> None:
    mod = sys.modules.get("hf_bpe.hf.tokenizer")
    if mod is not None and not hasattr(mod, "register"):
        return  # hf_bpe.hf.tokenizer is importing transformers right now; it registers itself when done
    try:
        from hf_bpe.hf.tokenizer import register

        register()
    except Exception as e:  # a broken/old transformers must not break `import hf_bpe`
        warnings.warn(f"hf_bpe: could not register BPETokenizer with AutoTokenizer: {e}", stacklevel=2)


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:
        self.inner.exec_module(module)
        _register()

    def __getattr__(self, name):  # get_resource_reader, is_package, ...
        return getattr(self.inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    _busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "transformers" or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec("transformers")
        finally:
            self._busy = False
        uninstall()
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec


_FINDER = _Finder()


def uninstall() -> None:
    try:
        sys.meta_path.remove(_FINDER)
    except ValueError:
        pass


def install() -> None:
    if sys.modules.get("transformers") is not None:
        _register()
    elif _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
