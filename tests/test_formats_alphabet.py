"""The byte alphabet (`formats.alphabet`): GPT-2's printable spelling of each byte, reversible,
taken from the core and equal to the readable oracle's own computation."""

from __future__ import annotations

from hf_bpe import formats


def test_bytes_to_unicode_is_gpt2s_alphabet():
    m = formats.bytes_to_unicode()
    assert len(set(m.values())) == 256
    assert m[ord(" ")] == "Ġ" and m[ord("\n")] == "Ċ" and m[ord("a")] == "a"
    for b in range(256):
        assert formats.str_to_token(formats.token_to_str(bytes([b]))) == bytes([b])


def test_byte_alphabet_comes_from_the_core():
    from hf_bpe import _core
    from hf_bpe.reference import hf_byte_rank

    alphabet = _core.byte_alphabet()
    assert formats.bytes_to_unicode() == dict(enumerate(alphabet))
    by_code_point = sorted(range(256), key=lambda b: ord(alphabet[b]))
    assert [by_code_point.index(b) for b in range(256)] == hf_byte_rank()  # the oracle's own computation
