"""The hypothesis harness shared by the pre-tokenizer parity tests (test_pretokenize.py,
test_model_patterns.py, test_custom_regex.py): the text strategies, the settings, the texts built
around every code point and window edge, and the comparison of our pieces with a reference's.

Each file keeps its own fragments (the tricky parts of the patterns it tests) and builds its
strategies from them here. ``PRETOK_EXAMPLES`` (e.g. 5000 for a deeper run) sets the number of
examples of every property test; without it each file keeps its own default."""

from __future__ import annotations

import os
from typing import Iterator, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# The general categories the built-in patterns tell apart, and every assigned one.
PATTERN_CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Zs", "Zl", "Zp", "Cc", "Po",
                      "Sm", "So"]
ASSIGNED_CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Zs", "Zl", "Zp", "Cc", "Cf",
                       "Co", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So"]

# What may come before and after a text: whitespace runs, a lone mark, an apostrophe.
LEADS = ["", " ", "\t", "\n", "\u0301", " \u0301", "\u3000", "'", "\r\n "]
TRAILS = [" ", "\t", "\n", "\r", "\r\n", "\xa0", "\u3000", "\x85"]


def pretok_settings(default_examples: int) -> settings:
    """The settings of a property test: ``PRETOK_EXAMPLES`` examples, else ``default_examples``."""
    return settings(max_examples=int(os.environ.get("PRETOK_EXAMPLES", str(default_examples))), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def random_texts_test(check, names: Sequence[str], config: settings, kinds: dict[str, st.SearchStrategy[str]]):
    """The property test of a pre-tokenizer file: ``check(name, text)`` on random text of each
    kind (any text, the pattern's fragments, mixed categories, long blocks), for every name.
    Assign it to a module-level ``test_random_texts``."""

    @pytest.mark.parametrize("kind", list(kinds))
    @pytest.mark.parametrize("name", names)
    @config
    @given(data=st.data())
    def test_random_texts(name: str, kind: str, data) -> None:
        check(name, data.draw(kinds[kind], label=kind))

    return test_random_texts


def fragment_text(fragments: Sequence[str], max_size: int = 40) -> st.SearchStrategy[str]:
    """Up to ``max_size`` fragments joined."""
    return st.lists(st.sampled_from(fragments), max_size=max_size).map("".join)


def category_chars(categories: Sequence[str]) -> st.SearchStrategy[str]:
    """Single characters of the given general categories."""
    return st.characters(categories=categories)


def mixed_text(fragments: Sequence[str], chars: st.SearchStrategy[str], max_size: int = 40) -> st.SearchStrategy[str]:
    """Up to ``max_size`` items joined, each a fragment or a character drawn from ``chars``."""
    return st.lists(st.one_of(st.sampled_from(fragments), chars), max_size=max_size).map("".join)


def block_text(ascii_fragments: Sequence[str], non_ascii_fragments: Sequence[str],
               ascii_weight: int) -> st.SearchStrategy[str]:
    """Long, mostly ASCII texts (20 to 400 fragments, ASCII ones ``ascii_weight`` times as likely):
    the scanners classify 64-byte windows at once (`pretok/masks.rs`), so pieces, contractions and
    whitespace runs must also be right across window edges, right before a non-ASCII char, and in
    windows full of short pieces."""
    # One sampled_from per weight: one_of keeps a strategy object once, however often it is given.
    ascii_parts = [st.sampled_from(list(ascii_fragments)) for _ in range(ascii_weight)]
    return st.lists(st.one_of(*ascii_parts, st.sampled_from(list(non_ascii_fragments))), min_size=20,
                    max_size=400).map("".join)


def leads(extra: Sequence[str] = ()) -> st.SearchStrategy[str]:
    """One of ``LEADS`` (and ``extra``), to put before a text."""
    return st.sampled_from(LEADS + list(extra))


def trails(extra: Sequence[str] = ()) -> st.SearchStrategy[str]:
    """Up to six of ``TRAILS`` (and ``extra``) joined, to put after a text."""
    return st.lists(st.sampled_from(TRAILS + list(extra)), max_size=6).map("".join)


def window_texts(case: str) -> Iterator[str]:
    """``case`` after 0, 3, ..., 69 letters, so that it sits inside a 64-byte window and at every
    offset near a window's end: once followed by more text, once at the end."""
    for pad in range(0, 70, 3):
        yield "a" * pad + " " + case + " tail" * 20
        yield "a" * pad + case


def code_points() -> list[str]:
    """Every code point but the surrogates."""
    return [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]


def code_point_texts(contexts: Sequence[str]) -> Iterator[str]:
    """For each context (a format string with one ``{}``), one text with every code point in it
    (``"a{}b"``) or every seventh (the others): catches any table entry that disagrees."""
    chars = code_points()
    for ctx in contexts:
        yield "".join(ctx.format(c) for c in (chars if ctx == "a{}b" else chars[::7]))


def isolated(compiled, text: str) -> list[str]:
    """tokenizers' Split(behavior="Isolated") with a compiled `regex` pattern: the matches, and the
    text between them, as pieces (an empty match cuts where it stands)."""
    out, last = [], 0
    for m in compiled.finditer(text):
        if m.start() > last:
            out.append(text[last:m.start()])
        if m.end() > m.start():
            out.append(m.group())
        last = m.end()
    if last < len(text):
        out.append(text[last:])
    return out


def assert_same_pieces(name: str, text: str, got: list[str], want: list[str]) -> None:
    """``got == want``, else an error showing the first differing piece in its context (instead of
    two huge lists)."""
    if got != want:
        k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        pos = sum(len(p) for p in want[:k])
        raise AssertionError(
            f"{name}: piece {k} (char {pos}) differs\n"
            f"  context: {text[max(0, pos - 40):pos + 40]!r}\n"
            f"  ours   : {got[max(0, k - 3):k + 4]!r}\n"
            f"  regex  : {want[max(0, k - 3):k + 4]!r}"
        )
