r"""Patterns: which one a pattern is (:func:`pattern_name`, :func:`pattern_key`), and a pattern of
ours as Oniguruma must read it, for a ``tokenizer.json`` (``tokenizers`` compiles
``Split`` regexes with Oniguruma's Ruby syntax). The reverse, a ``tokenizer.json`` regex read by
us, is the core's (``_core.from_oniguruma``, ``src/pretok/onig.rs``, which lists what differs).

Our patterns run on regex-syntax classes with ``$`` meaning end of text or before a final
``"\\n"``. Written for Oniguruma, exactly (each rewrite is tested against ``tokenizers``):

* ``\\w`` is Unicode's word class with ZWNJ and ZWJ (Oniguruma's lacks them); ``\\b``/``\\B``
  follow it, written as look-arounds; POSIX brackets (``[[:alpha:]]``) are ASCII here;
* ``$`` is ``(?=\\n?\\z)``, ``^`` is ``\\A`` (a line start under ``(?m)``), ``(?s)`` is
  Oniguruma's ``(?m)``; class differences ``[a--b]`` become ``[a&&[^b]]``;
* a possessive bounded repeat ``X{n,m}+`` (Oniguruma repeats ``X{n,m}`` there) is the atomic group
  ``(?>X{n,m})``; ``*+``, ``++`` and ``?+`` are possessive in both; ``X{n}?`` is ``X{n}``;
* an inline flag ``(?i)`` stops at the next ``|`` of its group (Oniguruma's takes it in), so each
  branch gets its own ``(?i:...)``; ``\p{..}`` is bracketed (Oniguruma folds no bare one under
  ``(?i)``); letters that fold to several (``ß``/``ss``, ...) are refused under ``(?i)``.

What has no exact spelling (``~~``, ``(?x)``, ``(?U)``, ``(?R)``, ``(?-u)``, ...) raises
``ValueError`` naming it.
"""

from __future__ import annotations

import re

from hf_bpe import _core

__all__ = ["for_oniguruma", "for_tiktoken", "from_tiktoken_pattern", "pattern_name", "pattern_key"]

_WORD = r"\w\x{200C}\x{200D}"  # ours, inside Oniguruma brackets (whose \w lacks ZWNJ/ZWJ and ²³¹¼½¾)
_POSIX = {  # regex-syntax's ASCII classes, as bracket contents
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": r"\x00-\x7F", "blank": r"\t ", "cntrl": r"\x00-\x1F\x7F",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": r"!-/:-@\[-`{-~",
    "space": r"\t\n\x0B\f\r ",
    "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}


def pattern_name(pattern: str) -> str:
    """The built-in pattern's canonical name (``"gpt2"``, ``"cl100k"``, ``"llama3"``, ...) if
    ``pattern`` is a canonical name or a regex the core has a scanner for (in any spelling it
    knows, e.g. the Oniguruma form of cl100k's), else ``pattern``."""
    if pattern in ("gpt2", "cl100k", "o200k"):
        return pattern
    return _core.pattern_from_splits([pattern]) or pattern


def pattern_key(pattern: str) -> tuple[str, ...]:
    """What a pattern splits by, for comparing two: the regexes of its sequence of splits
    (DeepSeek-V3 has three; ``pattern_source`` is only the first), or an imported pipeline."""
    return (pattern,) if pattern.startswith("{") else tuple(_core.pattern_splits(pattern))


def _refuse(what: str, src: str) -> ValueError:
    return ValueError(f"the pattern {src!r} uses {what}, which Oniguruma (tokenizers) cannot read as we do; "
                      "spell it without it to save it in a tokenizer.json")


def _escape_end(src: str, i: int) -> int:
    """The index just past the escape that starts at ``src[i] == "\\\\"``."""
    if i + 1 >= len(src):
        raise ValueError(f"trailing backslash in {src!r}")
    j = i + 2
    if src[i + 1] in "pPxuk" and j < len(src) and src[j] == "{":
        return src.index("}", j) + 1
    if src[i + 1] in "pP":
        return min(i + 3, len(src))
    if src[i + 1] == "b" and src.startswith("{", j):
        return src.index("}", j) + 1
    if src[i + 1] == "x":
        return min(i + 4, len(src))
    if src[i + 1] == "u":
        return min(i + 6, len(src))
    if src[i + 1] == "U":
        return min(i + 10, len(src))
    return j


def _escape(esc: str, src: str, in_class: bool) -> str:
    """One escape of ours, for Oniguruma (inside brackets when ``in_class``)."""
    c = esc[1]
    if c == "w":
        return _WORD if in_class else f"[{_WORD}]"
    if c == "W":
        return f"[^{_WORD}]"
    if c in "pP":  # bracketed: Oniguruma folds no bare \p{..} under (?i), ours does
        prop = f"\\{c}{{{esc[2]}}}" if len(esc) == 3 else esc
        return prop if in_class else f"[{prop}]"
    if c == "U":
        return f"\\x{{{esc[2:]}}}"
    if c == "u" and esc.startswith("\\u{"):
        return "\\x" + esc[2:]
    if c == "x" and len(esc) == 4 and _hex(esc[2:]) >= 0x80:  # Oniguruma: \xHH above 7F is a byte
        return f"\\x{{{esc[2:]}}}"
    if c in "<>" or (c == "b" and esc.startswith("\\b{")):
        raise _refuse(f"the word boundary {esc}", src)
    if c in "bB" and not in_class:
        w = f"[{_WORD}]"
        return f"(?:(?<={w})(?!{w})|(?<!{w})(?={w}))" if c == "b" else f"(?:(?<={w})(?={w})|(?<!{w})(?!{w}))"
    return esc


def _hex(digits: str) -> int:
    """``digits`` read as hexadecimal, or -1."""
    try:
        return int(digits, 16)
    except ValueError:
        return -1


def _class(src: str, i: int) -> tuple[str, int]:
    """The bracketed class at ``src[i] == "["``, for Oniguruma; and the index past it."""
    j = i + 1
    neg = src.startswith("^", j)
    body, j = _body(src, j + neg)
    return "[" + "^" * neg + body + "]", j


def _body(src: str, j: int) -> tuple[str, int]:
    """A class's contents from ``src[j]`` to its ``]`` (translated), and the index past the ``]``.
    Set operations (``&&``, ``--``) bind looser than union and go left to right, as ours; each side
    is bracketed for Oniguruma, and ``A--B`` becomes ``[A]&&[^B]``."""
    left: str | None = None
    op = ""
    cur: list[str] = []
    first = True
    while j < len(src):
        c = src[j]
        if c == "]" and not first:
            operand = "".join(cur)
            return (operand if left is None else _combine(left, op, operand)), j + 1
        posix = re.match(r"\[:(\^?[a-z]+):\]", src[j:])
        if posix:
            end = j + posix.end()
            name = posix.group(1)
            body = _POSIX.get(name.lstrip("^"))
            if body is None:
                raise _refuse(f"the POSIX class [:{name}:]", src)
            cur.append(f"[^{body}]" if name.startswith("^") else body)
            j = end
        elif c == "[":
            inner, j = _class(src, j)
            cur.append(inner)
        elif c == "\\":
            k = _escape_end(src, j)
            cur.append(_escape(src[j:k], src, True))
            j = k
        elif src.startswith("~~", j):
            raise _refuse("'~~' (symmetric difference) in a class", src)
        elif src.startswith("--", j) or src.startswith("&&", j):
            operand = "".join(cur)
            left = operand if left is None else _combine(left, op, operand)
            op, cur = src[j:j + 2], []
            j += 2
        else:
            cur.append(c)
            j += 1
        first = False
    raise ValueError(f"unterminated character class in {src!r}")


def _combine(left: str, op: str, right: str) -> str:
    return f"[{left}]&&[{'^' if op == '--' else ''}{right}]"


def _flags(spec: str, src: str, state: dict[str, bool]) -> str:
    """Inline flags of ours (``is-m``) for Oniguruma, updating ``state`` (``s``, ``m``)."""
    on, _, off = spec.partition("-")
    out_on, out_off = "", ""
    for flags, value in ((on, True), (off, False)):
        for f in flags:
            if f == "i":
                state["i"] = value
                if value:
                    out_on += "i"
                else:
                    out_off += "i"
            elif f in "sm":
                state[f] = value
                if f == "s":
                    if value:
                        out_on += "m"
                    else:
                        out_off += "m"
            else:
                raise _refuse(f"the flag {f!r}", src)
    return out_on + ("-" + out_off if out_off else "")


def for_oniguruma(src: str, *, builtin: bool = False) -> str:
    """``src`` (a pattern of ours) spelled so that Oniguruma reads it as we do (see the module doc).
    A ``builtin`` pattern's regex only has its possessive bounded repeats rewritten: its other
    constructs are proven alike (parity suites), and its spelling is the one readers recognize."""
    return _rewrite(src, "builtin" if builtin else "onig")


def for_tiktoken(src: str) -> str:
    """``src`` (a pattern of ours) for tiktoken's engine (fancy-regex, regex-syntax's classes, as
    ours), where ``$`` is the end of text only: ``$`` is written ``(?=\\n?\\z)``."""
    return _rewrite(src, "tiktoken")


def from_tiktoken_pattern(pat_str: str) -> str:
    """A ``pat_str`` written for tiktoken's engine as a pattern of ours: a built-in pattern's regex
    (tiktoken's own, Llama 3's, ...) by its name. Another regex raises ``ValueError``: tiktoken drops
    the text between its matches, hf_bpe encodes it, and which regexes leave such text is not known
    here; ``BPE(vocab, None, specials, pattern=regex)`` takes it with hf_bpe's meaning."""
    name = pattern_name(pat_str)
    if name == pat_str:
        raise ValueError(f"the tiktoken pattern {pat_str!r} is not one of the built-in patterns: tiktoken drops the "
                         "text between its matches and hf_bpe encodes it, so it is refused here; give it to "
                         "BPE(vocab, None, special_tokens, pattern=...) to encode that text too")
    return name


def _rewrite(src: str, mode: str) -> str:
    builtin = mode != "onig"
    levels: list[list[str]] = [[]]  # the atoms of each open group
    openers: list[str] = []
    implicit: list[bool] = [False]  # a level opened by inline flags: ours run to the end of the
    # group but stop at its "|"; Oniguruma's would take the later alternatives in (x(?i)b|c)
    states: list[dict[str, bool]] = [{"s": False, "m": False, "i": False}]
    fixed = False  # the last quantifier was {n}: a "?" after it is lazy to us, "optional" to Oniguruma

    def close() -> None:
        inner = "".join(levels.pop())
        states.pop()
        implicit.pop()
        levels[-1].append(openers.pop() + inner + ")")

    i = 0
    while i < len(src):
        c = src[i]
        atoms = levels[-1]
        was_fixed, fixed = fixed, False
        if c == "\\":
            j = _escape_end(src, i)
            atoms.append(src[i:j] if builtin else _escape(src[i:j], src, False))
        elif c == "[":
            cls, j = _class(src, i)
            if not builtin and states[-1]["i"] and any(ch.isalpha() and not ch.isascii() for ch in cls):
                raise _refuse(f"the class {cls} case-insensitively (Oniguruma folds letters such as ß with ss)", src)
            atoms.append(src[i:j] if builtin else cls)
        elif c == "(":
            j = i + 1
            state = dict(states[-1])
            opener = "("
            if src.startswith("?", j):
                # (?:  (?i:  (?=  (?!  (?<=  (?<!  (?>  (?P<name>  (?<name>  (?i)
                k = j + 1
                while k < len(src) and src[k] not in ":)=!>" and not (src[k] == "<"
                                                                     and src[k + 1:k + 2] not in ("=", "!")):
                    k += 1
                if k < len(src) and src[k] == "<" and src[k + 1:k + 2] in ("=", "!"):
                    k += 1
                if k < len(src) and src[k] == "<":
                    k = src.index(">", k)
                flag_spec = src[j + 1:k]
                is_flags = bool(flag_spec) and all(f in "imsxURu-" for f in flag_spec)
                if not builtin and k < len(src) and src[k] in ":)" and is_flags:
                    spelled = _flags(flag_spec, src, state)
                    opener = f"(?{spelled}:" if spelled else "(?:"
                    if src[k] == ")":  # inline flags: to the end of the group, up to each "|"
                        openers.append(opener)
                        levels.append([])
                        states.append(state)
                        implicit.append(True)
                        i = k + 1
                        continue
                else:
                    opener = src[i:k + 1] if k < len(src) and src[k] != ")" else src[i:k]
                    opener = opener.replace("(?P<", "(?<", 1)
                j = k + 1 if k < len(src) and src[k] != ")" else k
            openers.append(opener)
            levels.append([])
            states.append(state)
            implicit.append(False)
            i = j
            continue
        elif c == ")":
            while implicit[-1]:
                close()
            if not openers:
                raise ValueError(f"unbalanced ')' in {src!r}")
            close()
            j = i + 1
        elif c == "|" and implicit[-1]:
            # close the inline-flag levels, "|" in their group, and open them again after it
            reopen = []
            while implicit[-1]:
                reopen.append((openers[-1], states[-1]))
                close()
            levels[-1].append("|")
            for opener, state in reversed(reopen):
                openers.append(opener)
                levels.append([])
                states.append(state)
                implicit.append(True)
            j = i + 1
        elif (c == "{" and mode != "tiktoken" and atoms and atoms[-1] != "|" and "}" in src[i:]
              and _is_repeat(src[i:src.index("}", i) + 1])):
            j = src.index("}", i) + 1
            quant = src[i:j]
            if src.startswith("+", j):
                atoms[-1] = "(?>" + atoms[-1] + quant + ")"
                j += 1
            else:
                atoms[-1] += quant
                fixed = "," not in quant
        elif c in "*+?" and atoms and atoms[-1] != "|":
            if not (c == "?" and was_fixed and not builtin):  # (X{n}? is X{n} to us)
                atoms[-1] += c
            j = i + 1
        elif c == "$" and mode != "builtin":
            atoms.append(r"(?=\n?\z)")
            j = i + 1
        elif c == "^" and not builtin:
            # ours: the start, or under (?m) after any "\n"; Oniguruma's ^ is never after a final one
            atoms.append(r"(?:\A|(?<=\n))" if states[-1]["m"] else r"\A")
            j = i + 1
        else:
            if not builtin and states[-1]["i"] and c.isalpha():
                pair = (atoms[-1][-1:] if atoms and len(atoms[-1]) == 1 else "") + c
                if not c.isascii() or pair.lower() in ("ss", "st", "ff", "fi", "fl"):
                    raise _refuse(f"{pair!r} case-insensitively (Oniguruma folds letters such as ß with ss)", src)
            atoms.append(c)
            j = i + 1
        i = j
    while implicit[-1]:
        close()
    if openers:
        raise ValueError(f"unbalanced '(' in {src!r}")
    return "".join(levels[0])


def _is_repeat(q: str) -> bool:
    parts = q[1:-1].split(",")
    if len(parts) == 2 and parts[0] == "":  # {,n}
        return parts[1].isdigit()
    return 1 <= len(parts) <= 2 and parts[0].isdigit() and all(p.isdigit() or p == "" for p in parts[1:])
