"""The post-processor of an imported ``tokenizer.json`` as ids: what ``BPETokenizer`` adds around
one sequence or a pair when ``add_special_tokens=True`` (a BOS, ``<s> A </s></s> B </s>``, ...),
with the ``token_type_ids`` and special-token mask ``tokenizers`` gives. The core has checked
the component (its types and token ids) on load; ``ByteLevel`` only affects offsets and adds
nothing. A tokenizer without one adds nothing, as GPT-2's."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import NamedTuple

__all__ = ["Template", "template_of", "offset_trim", "bos_eos_template", "bos_eos_flag", "prefix_space"]

# A piece of a template: ("A" | "B", type_id) for a sequence, (ids, type_id) for special tokens.
_Piece = tuple[object, int]


class Template(NamedTuple):
    single: tuple[_Piece, ...]
    pair: tuple[_Piece, ...]

    def apply(self, a: list[int], b: list[int] | None) -> tuple[list[int], list[int], list[int]]:
        """``(ids, token_type_ids, special_tokens_mask)`` of ``a`` (and ``b``) wrapped."""
        ids: list[int] = []
        types: list[int] = []
        mask: list[int] = []
        for what, t in (self.single if b is None else self.pair):
            part = a if what == "A" else b if what == "B" else what
            assert isinstance(part, list)
            ids += part
            types += [t] * len(part)
            mask += [0 if what in ("A", "B") else 1] * len(part)
        return ids, types, mask

    def added(self, pair: bool) -> int:
        """How many special tokens the template adds."""
        return sum(len(w) for w, _ in (self.pair if pair else self.single) if isinstance(w, list))


def _template(spec: dict) -> Template | None:
    kind = spec.get("type")
    if kind == "TemplateProcessing":
        specials = {k: list(v["ids"]) for k, v in spec["special_tokens"].items()}

        def pieces(key: str) -> tuple[_Piece, ...]:
            out = []
            for p in spec[key]:
                if "Sequence" in p:
                    out.append((p["Sequence"]["id"], int(p["Sequence"].get("type_id", 0))))
                else:
                    out.append((specials[p["SpecialToken"]["id"]], int(p["SpecialToken"].get("type_id", 0))))
            return tuple(out)

        return Template(pieces("single"), pieces("pair"))
    if kind in ("RobertaProcessing", "BertProcessing"):
        cls, sep = [int(spec["cls"][1])], [int(spec["sep"][1])]
        second = 0 if kind == "RobertaProcessing" else 1
        head = ((cls, 0), ("A", 0), (sep, 0))
        tail = ((sep, second),) if kind == "RobertaProcessing" else ()
        return Template(head, head + tail + (("B", second), (sep, second)))
    if kind == "Sequence":
        found = [t for t in (_template(p) for p in spec.get("processors") or []) if t is not None]
        if len(found) > 1:
            raise ValueError("a Sequence post-processor with more than one template is not supported")
        return found[0] if found else None
    return None  # ByteLevel: offsets only


@lru_cache(maxsize=64)
def template_of(pipeline: str | None) -> Template | None:
    """The template of a core pipeline's post-processor (None when it adds nothing)."""
    if not pipeline:
        return None
    spec = json.loads(pipeline).get("post_processor")
    return _template(spec) if spec else None


def _trim(spec: dict) -> bool | None:
    kind = spec.get("type")
    if kind == "Sequence":
        return next((t for t in (_trim(p) for p in spec.get("processors") or []) if t is not None), None)
    if kind in ("ByteLevel", "RobertaProcessing") and spec.get("trim_offsets", True):
        return bool(spec.get("add_prefix_space", True))
    return None


@lru_cache(maxsize=64)
def offset_trim(pipeline: str | None) -> bool | None:
    """Whether the post-processor trims offsets (ByteLevel or RobertaProcessing with
    ``trim_offsets``): None if not, else its ``add_prefix_space`` (a first token keeps one space)."""
    if not pipeline:
        return None
    spec = json.loads(pipeline).get("post_processor")
    return _trim(spec) if spec else None


def _prefix_space(spec: dict | None) -> bool:
    if not spec:
        return False
    if spec.get("type") == "Sequence":
        return any(_prefix_space(p) for p in spec.get("pretokenizers") or [])
    return spec.get("type") == "ByteLevel" and bool(spec.get("add_prefix_space", True))


@lru_cache(maxsize=64)
def prefix_space(pipeline: str | None) -> bool:
    """Whether a core pipeline's pre-tokenizer adds a space before a text (ByteLevel
    ``add_prefix_space``); hf_bpe's own pipeline does not."""
    return bool(pipeline) and _prefix_space(json.loads(pipeline).get("pre_tokenizer"))


def bos_eos_template(bos: tuple, eos: tuple) -> dict:
    """The ``TemplateProcessing`` that transformers' tokenizers backend makes of ``add_bos_token`` /
    ``add_eos_token``: ``bos``/``eos`` are ``(token, id, add)``; a token that is None is not added.
    Single: ``[BOS] $A [EOS]``; pair: that, then ``[BOS] $B [EOS]`` with type id 1."""
    on = [(str(t), i) if add and t is not None else None for t, i, add in (bos, eos)]

    def seq(name: str, type_id: int) -> list[dict]:
        first, last = [[{"SpecialToken": {"id": x[0], "type_id": type_id}}] if x else [] for x in on]
        return first + [{"Sequence": {"id": name, "type_id": type_id}}] + last
    specials = {x[0]: {"id": x[0], "ids": [x[1]], "tokens": [x[0]]} for x in on if x}
    return {"type": "TemplateProcessing", "single": seq("A", 0), "pair": seq("A", 0) + seq("B", 1),
            "special_tokens": specials}


def bos_eos_flag(i: int, doc: str) -> property:
    """The add_bos_token (i=0) / add_eos_token (i=1) property of a tokenizer keeping ``_bos_eos``."""
    def get(self) -> bool:
        return bool(self._bos_eos and self._bos_eos[i])

    def set_(self, value: bool) -> None:
        flags = [self.add_bos_token, self.add_eos_token]
        flags[i] = bool(value)
        self._bos_eos = tuple(flags)
    return property(get, set_, doc=doc)
