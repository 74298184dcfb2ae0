"""Id parity and behaviour of the native `hf_bpe._core.Encoder`.

References: the real `tiktoken` (Encodings built from the shared rank files, no download) and
the real `tokenizers` (GPT-2 tokenizer.json). Every comparison is against an independent
implementation, never against stored ids.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hf_bpe._core import Encoder
from conftest import CL100K_PAT, O200K_PAT, R50K_PAT, corpus_path, openai_files, peer_stable_chars

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

tiktoken = pytest.importorskip("tiktoken")
tokenizers = pytest.importorskip("tokenizers")

OPENAI = openai_files()  # the GPT-2 and tiktoken files, rebuilt from the package (no ../shared needed)

EOT = "<|endoftext|>"
SPECIALS = {
    "r50k": {EOT: 50256},
    "cl100k": {EOT: 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
    "o200k": {EOT: 199999, "<|endofprompt|>": 200018},
}


# --------------------------------------------------------------------------------------------
# Loading the real files
# --------------------------------------------------------------------------------------------


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def load_gpt2():
    byte_dec = {c: b for b, c in bytes_to_unicode().items()}
    v = json.loads((OPENAI / "gpt2" / "vocab.json").read_text(encoding="utf-8"))
    vocab = {i: bytes(byte_dec[c] for c in tok) for tok, i in v.items()}
    lines = (OPENAI / "gpt2" / "merges.txt").read_text(encoding="utf-8").split("\n")
    if lines[0].startswith("#version"):
        lines = lines[1:]
    merges = [(vocab[v[a]], vocab[v[b]]) for a, b in (line.split(" ") for line in lines if line)]
    return vocab, merges


def load_ranks(name: str) -> dict[bytes, int]:
    ranks = {}
    with open(OPENAI / f"{name}.tiktoken", "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return ranks


@pytest.fixture(scope="module")
def gpt2_tables():
    return load_gpt2()


@pytest.fixture(scope="module")
def gpt2_enc(gpt2_tables):
    vocab, merges = gpt2_tables
    return Encoder(vocab, merges, {EOT: 50256}, "gpt2")


@pytest.fixture(scope="module")
def hf_tok():
    return tokenizers.Tokenizer.from_file(str(OPENAI / "gpt2" / "tokenizer.json"))


_RANKS: dict[str, dict[bytes, int]] = {}


def ranks(name):
    if name not in _RANKS:
        _RANKS[name] = load_ranks(f"{name}_base")
    return _RANKS[name]


_TT: dict[str, object] = {}
_ENC: dict[str, Encoder] = {}
PATS = {"r50k": R50K_PAT, "cl100k": CL100K_PAT, "o200k": O200K_PAT}
OUR_PATS = {"r50k": "gpt2", "cl100k": "cl100k", "o200k": "o200k"}


def tt(name):
    if name not in _TT:
        _TT[name] = tiktoken.Encoding(f"{name}_local", pat_str=PATS[name], mergeable_ranks=ranks(name), special_tokens=SPECIALS[name])
    return _TT[name]


def ours(name):
    if name not in _ENC:
        _ENC[name] = Encoder({i: b for b, i in ranks(name).items()}, None, SPECIALS[name], OUR_PATS[name])
    return _ENC[name]


def pair(kind, gpt2_enc):
    """(our encoder, tiktoken reference) for a parity kind."""
    if kind == "gpt2-merges":
        return gpt2_enc, tt("r50k")
    return ours(kind), tt(kind)


KINDS = ["gpt2-merges", "r50k", "cl100k", "o200k"]


def corpus_docs(name: str, max_bytes: int) -> list[str]:
    """Whole documents from the start of a shared corpus, about `max_bytes` in total."""
    path = corpus_path(name)  # (the big corpora; a fresh clone has English only, the shipped sample)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        text = f.read(max_bytes + 2_000_000)
    docs = text.split(f"\n{EOT}\n")[:-1]  # drop the last, possibly cut, document
    out, total = [], 0
    for d in docs:
        if total > max_bytes:
            break
        out.append(d)
        total += len(d)
    if not out:  # one enormous first document: take a prefix cut at a line end
        out = [text[: text.rfind("\n", 0, max_bytes)]]
    return out


# --------------------------------------------------------------------------------------------
# Parity on real text
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("corpus,size", [("english", 1_500_000), ("code", 800_000), ("multilingual", 800_000)])
@pytest.mark.parametrize("kind", KINDS)
def test_corpus_parity_with_tiktoken(kind, corpus, size, gpt2_enc):
    enc, ref = pair(kind, gpt2_enc)
    docs = corpus_docs(corpus, size)
    ids, offsets = enc.encode_batch_flat(docs, num_threads=2)
    assert ids.dtype == np.uint32 and offsets.dtype == np.int64 and len(offsets) == len(docs) + 1
    expected = ref.encode_ordinary_batch(docs)
    for i, exp in enumerate(expected):
        got = ids[offsets[i] : offsets[i + 1]].tolist()
        assert got == exp, f"{kind} {corpus} doc {i} differs"
    # The documents joined with the separator, as one text with allowed specials.
    joined = f"\n{EOT}\n".join(docs[:5])
    assert enc.encode(joined, allowed_special="all") == ref.encode(joined, allowed_special="all")
    assert enc.encode_ordinary(joined) == ref.encode_ordinary(joined)


@pytest.mark.parametrize("corpus,size", [("english", 1_000_000), ("code", 500_000), ("multilingual", 500_000)])
def test_corpus_parity_with_hf_tokenizers(corpus, size, gpt2_enc, hf_tok):
    docs = corpus_docs(corpus, size)
    expected = [e.ids for e in hf_tok.encode_batch(docs, add_special_tokens=False)]
    got = gpt2_enc.encode_batch(docs, num_threads=2)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g == e, f"{corpus} doc {i} differs from tokenizers"


def test_single_thread_equals_multi_thread(gpt2_enc):
    docs = corpus_docs("english", 1_200_000)
    a = gpt2_enc.encode_batch_flat(docs, num_threads=1)
    b = gpt2_enc.encode_batch_flat(docs, num_threads=2)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    lists = gpt2_enc.encode_batch(docs[:3])
    assert lists == [a[0][a[1][i] : a[1][i + 1]].tolist() for i in range(3)]


# --------------------------------------------------------------------------------------------
# Parity on generated text
# --------------------------------------------------------------------------------------------

FRAGMENTS = [
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2003", "\u200b",
    "'s", "'S", "'ll", "'LL", "'d", "'re", "'ve", "'m", "'t", "n't", "I'm", "it's",
    "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "é", "e\u0301", "ñ", "ß", "İ", "Ω",
    "中文", "日本語", "한국어", "東京都", "Привет", "مرحبا", "שלום", "ภาษาไทย",
    "123", "4567", "3.14", "1,000,000", "x=y+1;", "()", "{}", "...", "—", "<|", "|>",
    "hello", " world", "The", " the", "HTTP", "camelCase", "snake_case", "  def f():\n",
]

text_strategy = st.lists(
    st.one_of(
        st.text(alphabet=peer_stable_chars(), max_size=12),
        st.sampled_from(FRAGMENTS),
    ),
    max_size=25,
).map("".join)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=text_strategy)
def test_hypothesis_parity_with_tiktoken(kind, text, gpt2_enc):
    enc, ref = pair(kind, gpt2_enc)
    assert enc.encode_ordinary(text) == ref.encode_ordinary(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=text_strategy)
def test_hypothesis_parity_with_hf_tokenizers(text, gpt2_enc, hf_tok):
    assert gpt2_enc.encode_ordinary(text) == hf_tok.encode(text, add_special_tokens=False).ids


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=text_strategy, k=st.integers(0, 3))
def test_hypothesis_specials_allowed(text, k, gpt2_enc):
    doc = (EOT + text) * k + text
    assert gpt2_enc.encode(doc, allowed_special="all") == tt("r50k").encode(doc, allowed_special="all")
    assert ours("cl100k").encode(doc, allowed_special="all") == tt("cl100k").encode(doc, allowed_special="all")


def test_empty_and_surrogates():
    cl, ref = ours("cl100k"), tt("cl100k")
    assert cl.encode("") == [] and cl.decode([]) == "" and cl.encode_batch([]) == []
    ids, offs = cl.encode_batch_flat([])
    assert len(ids) == 0 and offs.tolist() == [0]
    assert cl.encode_with_offsets("") == ([], [])
    # Lone surrogates cannot be UTF-8: like tiktoken, each becomes U+FFFD.
    for s in ["\ud800", "a\udc00b", "x\ud83d"]:
        assert cl.encode(s) == ref.encode(s)
        assert cl.encode_batch([s, "ok"]) == ref.encode_batch([s, "ok"])


# --------------------------------------------------------------------------------------------
# Special tokens
# --------------------------------------------------------------------------------------------


def test_special_tokens_semantics(gpt2_enc):
    text = f"Hello{EOT}world <|fim_prefix|> x{EOT}"
    cl, ref = ours("cl100k"), tt("cl100k")
    # Default: every special is disallowed, and the error names it.
    with pytest.raises(ValueError, match=r"<\|endoftext\|>"):
        cl.encode(text)
    with pytest.raises(ValueError, match="fim_prefix"):
        cl.encode(text, allowed_special={EOT})
    assert cl.encode(text, allowed_special="all") == ref.encode(text, allowed_special="all")
    assert cl.encode(text, allowed_special={EOT}, disallowed_special=()) == ref.encode(text, allowed_special={EOT}, disallowed_special=())
    assert cl.encode(text, disallowed_special=()) == ref.encode(text, disallowed_special=())
    assert cl.encode_ordinary(text) == ref.encode_ordinary(text)
    ids = cl.encode(text, allowed_special="all")
    assert ids.count(100257) == 2 and ids.count(100258) == 1
    # A special token is never split: it decodes back exactly.
    assert cl.decode(ids) == text
    assert gpt2_enc.encode(EOT, allowed_special="all") == [50256]
    with pytest.raises(ValueError, match="allowed_special"):
        gpt2_enc.encode("x", allowed_special="everything")
    batch = [text, "no specials here"]
    with pytest.raises(ValueError, match="endoftext"):
        cl.encode_batch(batch)
    assert cl.encode_batch(batch, allowed_special="all") == ref.encode_batch(batch, allowed_special="all")


@pytest.mark.parametrize("name", ["o200k", "cl100k"])
def test_disallowed_specials_found_anywhere_in_a_big_batch(name):
    # Batches look for specials while they scan (not in a separate pass): a special deep in a
    # long document, right after non-ASCII text, or at the very end of the last one must still
    # raise, on one thread and on several, and `<` / `<|` alone must not.
    bpe, ref = ours(name), tt(name)
    filler = "Some text, with <tags> and a<b; caf\u00e9 \u65e5\u672c <| not special |> " * 3000
    docs = [filler[: 10_000 + 977 * k] for k in range(40)]
    for threads in (1, 2):
        assert bpe.encode_batch_flat(docs, num_threads=threads)[0].tolist() == [i for d in ref.encode_ordinary_batch(docs) for i in d]
        for where in (7, len(docs) - 1):
            for text in (f"\u00e9{EOT}", f"x{EOT}", EOT, f"<|endofprompt|>" if name == "o200k" else f"<|fim_middle|>"):
                for at in (0, 5_123, None):
                    bad = list(docs)
                    d = bad[where]
                    bad[where] = d + text if at is None else d[:at] + text + d[at:]
                    with pytest.raises(ValueError, match="disallowed special token"):
                        bpe.encode_batch_flat(bad, num_threads=threads)
                    assert bpe.encode_batch_flat(bad, num_threads=threads, disallowed_special=())[0].tolist() == [
                        i for d in ref.encode_ordinary_batch(bad) for i in d
                    ]


def test_special_tokens_with_hf(gpt2_enc, hf_tok):
    text = f"a{EOT}b {EOT}\n{EOT}{EOT} c"
    assert gpt2_enc.encode(text, allowed_special="all") == hf_tok.encode(text).ids


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=text_strategy)
def test_decode_roundtrip(text, gpt2_enc):
    for enc in (gpt2_enc, ours("o200k")):
        ids = enc.encode_ordinary(text)
        assert enc.decode_bytes(ids) == text.encode("utf-8")
        assert enc.decode(ids) == text
        assert enc.decode_bytes(np.array(ids, dtype=np.uint32)) == text.encode("utf-8")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(st.integers(0, 50256), max_size=50))
def test_decode_random_ids_never_raises(ids, gpt2_enc):
    s = gpt2_enc.decode(ids)
    assert isinstance(s, str)
    b = gpt2_enc.decode_bytes(ids)
    assert b == b"".join(gpt2_enc.token_bytes(i) for i in ids)
    assert b.decode("utf-8", "replace") == s


def test_numpy_and_batch_helpers(gpt2_enc):
    text = f"Hello world{EOT} again"
    arr = gpt2_enc.encode_to_numpy(text, allowed_special="all")
    assert arr.dtype == np.uint32 and arr.tolist() == tt("r50k").encode(text, allowed_special="all")
    lists = [gpt2_enc.encode_ordinary(t) for t in ["a b", "", "😀 x"]]
    assert gpt2_enc.decode_batch(lists) == ["a b", "", "😀 x"]
    with pytest.raises(ValueError, match="endoftext"):
        gpt2_enc.encode_to_numpy(text)


def test_decode_unknown_id(gpt2_enc):
    with pytest.raises(ValueError, match="50257"):
        gpt2_enc.decode_bytes([1, 2, 50257])
    with pytest.raises(ValueError, match="-1"):
        gpt2_enc.decode([-1])
    with pytest.raises(ValueError, match="999999"):
        gpt2_enc.token_bytes(999999)
    cl = ours("cl100k")
    with pytest.raises(ValueError, match="100261"):  # a hole between special ids
        cl.decode([100261])
    assert cl.n_vocab == 100277 and gpt2_enc.n_vocab == 50257
    assert gpt2_enc.token_bytes(50256) == EOT.encode()


def test_decode_invalid_utf8(gpt2_enc):
    ids = gpt2_enc.encode_ordinary("😀")
    assert len(ids) > 1  # the emoji is split into byte tokens in GPT-2
    assert gpt2_enc.decode_bytes(ids[:1]) == "😀".encode()[: len(gpt2_enc.token_bytes(ids[0]))]
    assert "\ufffd" in gpt2_enc.decode(ids[:1])
    with pytest.raises(UnicodeDecodeError):
        gpt2_enc.decode(ids[:1], errors="strict")


# --------------------------------------------------------------------------------------------
# Offsets
# --------------------------------------------------------------------------------------------


def check_offsets(enc, text, **kw):
    ids, offs = enc.encode_with_offsets(text, **kw)
    assert ids == enc.encode(text, **kw)
    assert len(offs) == len(ids)
    raw = text.encode("utf-8")
    pos = 0  # byte position of the current token
    prev_end = 0
    for tid, (s, e) in zip(ids, offs):
        tb = enc.token_bytes(tid)
        assert 0 <= s <= e <= len(text) and s >= prev_end
        prev_end = e
        whole = (pos == 0 or (raw[pos] & 0xC0) != 0x80) and (pos + len(tb) == len(raw) or (raw[pos + len(tb)] & 0xC0) != 0x80)
        if whole:
            assert text[s:e] == tb.decode("utf-8"), (tid, tb, s, e)
        if all((b & 0xC0) == 0x80 for b in tb):
            assert s == e
        pos += len(tb)
    assert pos == len(raw)
    return ids, offs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=text_strategy)
def test_offsets_slice_back(text, gpt2_enc):
    check_offsets(gpt2_enc, text)
    check_offsets(ours("cl100k"), text)


def test_offsets_policy_multibyte(gpt2_enc):
    # GPT-2 splits the emoji into byte tokens: its first token owns the character (1, 2),
    # tokens of continuation bytes only get the empty range (2, 2).
    ids, offs = check_offsets(gpt2_enc, "a😀b")
    assert len(ids) >= 3
    assert offs[0] == (0, 1)
    assert offs[1] == (1, 2)
    assert all(o == (2, 2) for o in offs[2:-1])
    assert offs[-1] == (2, 3)
    # Specials get their full span.
    ids, offs = check_offsets(gpt2_enc, f"x{EOT}y", allowed_special="all")
    assert ids[1] == 50256 and offs[1] == (1, 1 + len(EOT))


# --------------------------------------------------------------------------------------------
# Long and pathological input
# --------------------------------------------------------------------------------------------


def test_long_repeated_piece():
    s = "a" * 1_000_000
    for name in ("cl100k",):
        t = time.time()
        assert ours(name).encode(s) == tt(name).encode(s)
        assert time.time() - t < 30
    vocab, merges = load_gpt2()
    # tiktoken's own r50k pattern string, run as a custom regex.
    enc = Encoder(vocab, merges, {EOT: 50256}, R50K_PAT)
    assert enc.encode(s) == tt("r50k").encode(s)
    enc = Encoder({i: b for b, i in ranks("r50k").items()}, None, SPECIALS["r50k"], R50K_PAT)
    for s in ["a" * 1_000_000, "ab" * 300_000, "x" * 100_001 + "y", base64.b64encode(bytes(range(256)) * 2000).decode()]:
        assert enc.encode(s) == tt("r50k").encode(s)


def test_long_repeated_piece_builtin_gpt2(gpt2_enc):
    s = "a" * 1_000_000
    assert gpt2_enc.encode(s) == tt("r50k").encode(s)
    o200k = ours("o200k")
    assert o200k.encode(s) == tt("o200k").encode(s)


@pytest.mark.parametrize("n", [129, 130, 200, 1000, 5000])
def test_heap_path_matches_small_path(n, gpt2_enc):
    # Pieces just above the heap threshold, with varied structure, must equal the reference.
    rng = np.random.default_rng(n)
    letters = "".join(rng.choice(list("abcdeetnrs"), size=n))
    for enc, ref in [(gpt2_enc, tt("r50k")), (ours("cl100k"), tt("cl100k"))]:
        assert enc.encode(letters) == ref.encode(letters)
        digits = " " + "".join(rng.choice(list("!?.,;:"), size=n))
        assert enc.encode(digits) == ref.encode(digits)


def test_100mb_single_line(gpt2_enc):
    base = " ".join(corpus_docs("english", 3_000_000)).replace("\n", " ").replace("\r", " ")
    big = (base * (100_000_000 // len(base) + 1))[:100_000_000]
    assert "\n" not in big
    t = time.time()
    ids = gpt2_enc.encode(big)
    elapsed = time.time() - t
    assert elapsed < 300, f"100 MB single line took {elapsed:.0f} s"
    assert gpt2_enc.decode_bytes(ids[:200_000]) == big.encode()[: len(gpt2_enc.decode_bytes(ids[:200_000]))]
    ref = tt("r50k").encode_ordinary(big[:1_000_000])
    assert ids[: len(ref) - 1] == ref[:-1]
    # And a smaller variant end to end.
    small = big[:3_000_000]
    assert gpt2_enc.encode(small) == tt("r50k").encode_ordinary(small)


# --------------------------------------------------------------------------------------------
# Cache, pickling, fork
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cache_bytes", [0, 1, 4096, 1 << 20])
def test_small_caches_stay_correct(cache_bytes, gpt2_tables):
    vocab, merges = gpt2_tables
    enc = Encoder(vocab, merges, {EOT: 50256}, "gpt2", cache_bytes=cache_bytes)
    docs = corpus_docs("code", 300_000)
    assert enc.encode_batch(docs) == tt("r50k").encode_ordinary_batch(docs)
    info = enc.cache_info()
    assert info["budget"] == cache_bytes
    assert info["bytes"] <= cache_bytes


def test_pickle_deterministic(gpt2_enc, gpt2_tables):
    p1 = pickle.dumps(gpt2_enc)
    gpt2_enc.encode_ordinary("warm the cache with some words " * 100)
    p2 = pickle.dumps(gpt2_enc)
    assert p1 == p2
    vocab, merges = gpt2_tables
    # Dict order must not matter.
    other = Encoder(dict(reversed(list(vocab.items()))), merges, {EOT: 50256}, "gpt2")
    assert pickle.dumps(other) == p1
    assert len(p1) < 1_500_000
    clone = pickle.loads(p1)
    text = "Hello world, it's a test 😀 123"
    assert clone.encode_ordinary(text) == gpt2_enc.encode_ordinary(text)
    code = (
        "import pickle,sys,hashlib;sys.path.insert(0,sys.argv[1]);sys.path.insert(0,sys.argv[1]+'/tests');"
        "from tests.test_encoder_core import load_gpt2;from hf_bpe._core import Encoder;"
        "v,m=load_gpt2();print(hashlib.sha256(pickle.dumps(Encoder(v,m,{'<|endoftext|>':50256},'gpt2'))).hexdigest())"
    )
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", code, root], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": root, "PYTHONHASHSEED": "123"})
    assert out.returncode == 0, out.stderr
    import hashlib

    assert out.stdout.strip() == hashlib.sha256(p1).hexdigest()
    cl = ours("o200k")
    assert pickle.loads(pickle.dumps(cl)).encode(f"x{EOT}", allowed_special="all") == cl.encode(f"x{EOT}", allowed_special="all")


def test_concurrent_python_threads(gpt2_enc):
    from concurrent.futures import ThreadPoolExecutor

    docs = corpus_docs("code", 400_000)
    expected = tt("r50k").encode_ordinary_batch(docs)
    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(gpt2_enc.encode_ordinary, docs))
        flat = list(ex.map(lambda d: gpt2_enc.encode_batch([d, d], num_threads=2), docs[:40]))
    assert got == expected
    assert flat == [[e, e] for e in expected[:40]]


def _encode_in_worker(args):
    enc, docs = args
    ids, offs = enc.encode_batch_flat(docs, num_threads=2)
    return ids.tolist(), offs.tolist()


def test_fork_after_threads(gpt2_enc):
    docs = corpus_docs("english", 1_000_000)
    expected = gpt2_enc.encode_batch_flat(docs, num_threads=2)  # the parent pool now exists
    pid = os.fork()
    if pid == 0:  # child: must not hang on the parent's pool
        code = 1
        try:
            ids, offs = gpt2_enc.encode_batch_flat(docs, num_threads=2)
            code = 0 if (np.array_equal(ids, expected[0]) and np.array_equal(offs, expected[1])) else 3
        finally:
            os._exit(code)
    deadline = time.time() + 120
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("forked child hung encoding")
        time.sleep(0.05)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_multiprocessing_fork_pool(gpt2_enc):
    import multiprocessing as mp

    docs = corpus_docs("code", 600_000)
    gpt2_enc.encode_batch_flat(docs, num_threads=2)
    ctx = mp.get_context("fork")
    chunks = [docs[i::2] for i in range(2)]
    with ctx.Pool(2) as pool:
        res = pool.map_async(_encode_in_worker, [(gpt2_enc, c) for c in chunks]).get(timeout=120)
    for c, (ids, offs) in zip(chunks, res):
        ref = tt("r50k").encode_ordinary_batch(c)
        assert [ids[offs[i] : offs[i + 1]] for i in range(len(c))] == ref


def test_datasets_map_num_proc(gpt2_enc):
    datasets = pytest.importorskip("datasets")
    docs = corpus_docs("code", 300_000)[:40]
    gpt2_enc.encode_batch_flat(docs, num_threads=2)  # parent pool exists before the fork
    ds = datasets.Dataset.from_dict({"text": docs})
    enc = gpt2_enc

    def tok(batch):
        ids, offs = enc.encode_batch_flat(batch["text"], num_threads=2)
        return {"input_ids": [ids[offs[i] : offs[i + 1]].tolist() for i in range(len(offs) - 1)]}

    out = ds.map(tok, batched=True, batch_size=8, num_proc=2)
    assert out["input_ids"] == tt("r50k").encode_ordinary_batch(docs)


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def test_encode_file_text_gz_jsonl(tmp_path, gpt2_enc):
    docs = corpus_docs("english", 1_000_000)[:3] + corpus_docs("code", 200_000)[:20]
    text = f"\n{EOT}\n".join(docs)
    expected = gpt2_enc.encode(text, allowed_special="all")
    src = tmp_path / "in.txt"
    src.write_text(text, encoding="utf-8")
    seen = []
    out = tmp_path / "out.npy"
    n_tok, n_bytes = gpt2_enc.encode_file(src, out, progress=seen.append)
    arr = np.load(out)
    assert arr.dtype == np.uint16 and arr.tolist() == expected
    assert n_tok == len(expected) and n_bytes == len(text.encode())
    assert seen and seen == sorted(seen) and seen[-1] == src.stat().st_size
    gz = tmp_path / "in.txt.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    gpt2_enc.encode_file(gz, tmp_path / "gz.npy")
    assert np.load(tmp_path / "gz.npy").tolist() == expected
    # JSON lines: one document per line, separator appended after each.
    jl = tmp_path / "in.jsonl"
    jl.write_text("".join(json.dumps({"text": d, "id": i}) + "\n" for i, d in enumerate(docs)), encoding="utf-8")
    gpt2_enc.encode_file(jl, tmp_path / "jl.npy", separator=EOT)
    exp = []
    for d in docs:
        exp += gpt2_enc.encode(d) + [50256]
    assert np.load(tmp_path / "jl.npy").tolist() == exp
    jlgz = tmp_path / "in.jsonl.gz"
    jlgz.write_bytes(gzip.compress(jl.read_bytes()))
    gpt2_enc.encode_file(jlgz, tmp_path / "jlgz.npy", separator=EOT)
    assert np.load(tmp_path / "jlgz.npy").tolist() == exp

    # An exception in the progress callback stops the job and leaves no output behind.
    def boom(n):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        gpt2_enc.encode_file(src, tmp_path / "stopped.npy", progress=boom)
    assert not list(tmp_path.glob("stopped.npy*"))
    # Wide vocab -> uint32.
    o2 = ours("o200k")
    o2.encode_file(src, tmp_path / "o2.npy")
    a2 = np.load(tmp_path / "o2.npy")
    assert a2.dtype == np.uint32 and a2.tolist() == tt("o200k").encode(text, allowed_special="all")


def test_encode_file_errors_leave_no_output(tmp_path, gpt2_enc):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello \xff world")
    out = tmp_path / "o.npy"
    with pytest.raises(ValueError, match="UTF-8"):
        gpt2_enc.encode_file(bad, out)
    assert not out.exists() and not list(tmp_path.glob("o.npy*"))
    gpt2_enc.encode_file(bad, out, errors="replace")
    assert gpt2_enc.decode(np.load(out)) == "hello \ufffd world"
    gpt2_enc.encode_file(bad, out, errors="ignore")
    assert gpt2_enc.decode(np.load(out)) == "hello  world"
    with pytest.raises(ValueError, match="errors must be"):
        gpt2_enc.encode_file(bad, out, errors="surrogateescape")
    txt = tmp_path / "t.txt"
    txt.write_text(f"a{EOT}b")
    with pytest.raises(ValueError, match="endoftext"):
        gpt2_enc.encode_file(txt, tmp_path / "x.npy", allowed_special=())
    assert not (tmp_path / "x.npy").exists()
    with pytest.raises(ValueError, match="not a special token"):
        gpt2_enc.encode_file(txt, tmp_path / "x.npy", separator="<|nope|>")
    with pytest.raises(FileNotFoundError, match="missing.txt: cannot open"):  # an OSError, with its errno
        gpt2_enc.encode_file(tmp_path / "missing.txt", tmp_path / "x.npy")


# --------------------------------------------------------------------------------------------
# Construction errors
# --------------------------------------------------------------------------------------------


def test_bad_tables(gpt2_tables):
    vocab, merges = gpt2_tables
    v = dict(vocab)
    del v[next(i for i, b in vocab.items() if b == b"\x00")]
    with pytest.raises(ValueError, match="0x00"):  # tiktoken ranks need every byte (merges mode does not: tokenizers drops such bytes)
        Encoder(v, None, {}, "gpt2")
    with pytest.raises(ValueError, match="not in the vocab"):
        Encoder(vocab, merges + [(b"\xff\xfe", b"\xfd")], {}, "gpt2")
    with pytest.raises(ValueError, match="different bytes"):
        Encoder(vocab, None, {"<|x|>": 262}, "gpt2")  # (tiktoken ranks; in merges mode an added token may take a spelled id)
    with pytest.raises(ValueError, match="dense"):
        Encoder({**vocab, 4_000_000_000: b"zzzz"}, None, {}, "gpt2")
    with pytest.raises(ValueError, match="compile"):
        Encoder(vocab, merges, {}, "(unclosed")
    with pytest.raises(TypeError):
        Encoder(vocab, merges, {}, "gpt2").encode_batch("not a list")
