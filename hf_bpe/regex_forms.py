"""A pattern as the engine that reads a ``tokenizer.json`` understands it.

``tokenizers`` compiles ``Split`` regexes with Oniguruma, whose Ruby syntax reads a bounded
repeat followed by ``+`` (``\\p{N}{1,3}+``, possessive in the ``regex`` module and tiktoken) as
that repeat repeated: every run of 4+ digits would split differently. So a pattern is written
with each possessive bounded repeat as an atomic group (``(?>\\p{N}{1,3})``), which means the
same in both engines; ``*+``, ``++`` and ``?+`` are possessive in Oniguruma too and stay.
"""

from __future__ import annotations

__all__ = ["for_oniguruma"]


def _class_end(src: str, i: int) -> int:
    """The index just past the character class that starts at ``src[i] == "["``."""
    j = i + 1
    if j < len(src) and src[j] == "^":
        j += 1
    if j < len(src) and src[j] == "]":
        j += 1  # a leading "]" is literal
    while j < len(src):
        c = src[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            j = _class_end(src, j)
            continue
        if c == "]":
            return j + 1
        j += 1
    raise ValueError(f"unterminated character class in {src!r}")


def _escape_end(src: str, i: int) -> int:
    """The index just past the escape that starts at ``src[i] == "\\\\"``."""
    if i + 1 >= len(src):
        raise ValueError(f"trailing backslash in {src!r}")
    j = i + 2
    if src[i + 1] in "pPxuk" and j < len(src) and src[j] == "{":
        return src.index("}", j) + 1
    if src[i + 1] == "x":
        return min(i + 4, len(src))
    return j


def for_oniguruma(src: str) -> str:
    """``src`` with every possessive bounded repeat ``X{n,m}+`` written as ``(?>X{n,m})``."""
    levels: list[list[str]] = [[]]  # the atoms of each open group
    openers: list[str] = []
    i = 0
    while i < len(src):
        c = src[i]
        atoms = levels[-1]
        if c == "\\":
            j = _escape_end(src, i)
            atoms.append(src[i:j])
        elif c == "[":
            j = _class_end(src, i)
            atoms.append(src[i:j])
        elif c == "(":
            j = i + 1
            if src.startswith("?", j):
                # (?:  (?i:  (?=  (?!  (?<=  (?<!  (?>  (?P<name>  (?<name>  (?i)
                k = j + 1
                while k < len(src) and src[k] not in ":)=!>" and not (src[k] == "<" and src[k + 1:k + 2] not in ("=", "!")):
                    k += 1
                if k < len(src) and src[k] == "<" and src[k + 1:k + 2] in ("=", "!"):
                    k += 1
                if k < len(src) and src[k] == "<":
                    k = src.index(">", k)
                j = k + 1 if k < len(src) and src[k] != ")" else k
                if k < len(src) and src[k] == ")":  # inline flags: an atom of its own
                    atoms.append(src[i:k + 1])
                    i = k + 1
                    continue
            openers.append(src[i:j])
            levels.append([])
            i = j
            continue
        elif c == ")":
            if not openers:
                raise ValueError(f"unbalanced ')' in {src!r}")
            inner = "".join(levels.pop())
            levels[-1].append(openers.pop() + inner + ")")
            j = i + 1
        elif c == "{" and atoms and atoms[-1] != "|" and "}" in src[i:] and _is_repeat(src[i:src.index("}", i) + 1]):
            j = src.index("}", i) + 1
            quant = src[i:j]
            if src.startswith("+", j):
                atoms[-1] = "(?>" + atoms[-1] + quant + ")"
                j += 1
            else:
                atoms[-1] += quant
        elif c in "*+?" and atoms and atoms[-1] != "|":
            atoms[-1] += c
            j = i + 1
        else:
            atoms.append(c)
            j = i + 1
        i = j
    if openers:
        raise ValueError(f"unbalanced '(' in {src!r}")
    return "".join(levels[0])


def _is_repeat(q: str) -> bool:
    body = q[1:-1]
    parts = body.split(",")
    return 1 <= len(parts) <= 2 and parts[0].isdigit() and all(p.isdigit() or p == "" for p in parts[1:])
