"""OpenAI's published encodings by name, from the files shipped in the package: the same tables
and ids as tiktoken's own ``get_encoding`` (fed the same files through its cache, which checks
them against its pinned sha256), and the same names everywhere a tokenizer is named."""

from __future__ import annotations

import hashlib
import json
import pickle
import subprocess
import sys

import pytest

import hf_bpe
from hf_bpe import formats
from hf_bpe.formats import tiktoken_files

from conftest import model_files, openai_files

NAMES = ["gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony"]
_URL = "https://openaipublic.blob.core.windows.net/"
_SOURCES = {  # tiktoken's download addresses (its cache keys are their sha1) -> our rebuilt files
    "encodings/r50k_base.tiktoken": "r50k_base.tiktoken", "encodings/p50k_base.tiktoken": "p50k_base.tiktoken",
    "encodings/cl100k_base.tiktoken": "cl100k_base.tiktoken", "encodings/o200k_base.tiktoken": "o200k_base.tiktoken",
    "gpt-2/encodings/main/vocab.bpe": "gpt2/merges.txt", "gpt-2/encodings/main/encoder.json": "gpt2/vocab.json",
}
TEXTS = ["hello world", "hello <|endoftext|> there <|fim_prefix|>x<|fim_suffix|>", "  \n\n\t 00000000 x'll 'S",
         "请考试我的软件！12345", "நடிகர் சூர்யா", "<|endofprompt|><|reserved_200018|><|return|> done", " Ġ除\r\n  ",
         "x" * 3000, "def f(a):\n    return a  # é\n"]


@pytest.fixture(scope="module")
def tiktoken_encodings(tmp_path_factory):
    """tiktoken's own encodings, read offline from our rebuilt files (tiktoken hashes each)."""
    tiktoken = pytest.importorskip("tiktoken")
    import tiktoken.registry

    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for url, name in _SOURCES.items():
        (cache / hashlib.sha1((_URL + url).encode()).hexdigest()).write_bytes((openai_files() / name).read_bytes())
    mp = pytest.MonkeyPatch()
    mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    mp.setattr(tiktoken.registry, "ENCODINGS", {})  # made again from these files
    try:
        yield {n: tiktoken.get_encoding(n) for n in NAMES}
    finally:
        mp.undo()


@pytest.mark.parametrize("name", NAMES)
def test_same_as_tiktoken(name, tiktoken_encodings):
    theirs, ours = tiktoken_encodings[name], hf_bpe.get_encoding(name)
    assert (ours.name, ours.n_vocab, ours.max_token_value) == (theirs.name, theirs.n_vocab, theirs.max_token_value)
    assert ours._special_tokens == theirs._special_tokens
    assert ours._mergeable_ranks == theirs._mergeable_ranks
    assert ours.eot_token == theirs.eot_token and ours.special_tokens_set == theirs.special_tokens_set
    for i in range(0, ours.n_vocab, 7):
        try:
            want = theirs.decode_single_token_bytes(i)
        except KeyError:
            with pytest.raises(KeyError):
                ours.decode_single_token_bytes(i)
            continue
        assert ours.decode_single_token_bytes(i) == want
    with open(hf_bpe.sample_corpus(), "rb") as f:
        import gzip

        sample = gzip.decompress(f.read())[:300_000].decode("utf-8", errors="ignore")
    for text in TEXTS + [sample]:
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
        assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")
        assert ours._encode_bytes(text.encode()[:-1]) == theirs._encode_bytes(text.encode()[:-1])


def test_rebuilt_gpt2_folder_is_the_released_one():
    from conftest import shared_data

    ours, real = openai_files() / "gpt2", shared_data() / "gpt2"
    for name in ("vocab.json", "merges.txt"):
        assert (ours / name).read_bytes() == (real / name).read_bytes()
    read = lambda p: json.loads(p.read_text(encoding="utf-8"))  # noqa: E731
    assert read(ours / "tokenizer.json") == read(real / "tokenizer.json")


def test_load_by_name_everywhere(tmp_path, monkeypatch):
    gpt2 = hf_bpe.BPE.load("gpt2")
    files = hf_bpe.BPE.load(openai_files() / "gpt2")
    assert gpt2.name == "gpt2" and gpt2.vocab == files.vocab and gpt2.special_tokens == files.special_tokens
    text = "Hello world, it's 2026!\n\n  spaces"
    assert gpt2.encode(text) == files.encode(text)
    assert hf_bpe.BPE.load("cl100k_base").encode(text) == hf_bpe.get_encoding("cl100k_base").encode(text)
    monkeypatch.chdir(tmp_path)
    # A path that exists wins over a name.
    (tmp_path / "cl100k_base").mkdir()
    files.save(tmp_path / "cl100k_base")
    assert hf_bpe.BPE.load("cl100k_base").vocab_size == 50257
    with pytest.raises(ValueError, match="published encoding has its own special tokens"):
        hf_bpe.BPE.load("o200k_base", special_tokens=["<|x|>"])
    with pytest.raises(FileNotFoundError, match="no such folder"):
        hf_bpe.BPE.load("o300k_base")
    run = subprocess.run([sys.executable, "-m", "hf_bpe", "convert", "r50k_base", "r50k", "--to", "gpt2"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "r50k" / "vocab.json").read_bytes() != b""
    r50k = hf_bpe.BPE.load(tmp_path / "r50k", special_tokens=["<|endoftext|>"])
    assert r50k.encode(text + "<|endoftext|>", allowed_special="all") == gpt2.encode(text + "<|endoftext|>", "all")


def test_transformers_by_name():
    pytest.importorskip("transformers")
    tok = hf_bpe.BPETokenizer.from_pretrained("o200k_base")
    assert tok("hello world")["input_ids"] == hf_bpe.get_encoding("o200k_base").encode("hello world")
    assert tok.eos_token == "<|endoftext|>"


def test_registry_and_errors():
    assert hf_bpe.list_encoding_names() == NAMES
    assert hf_bpe.get_encoding("cl100k_base") is hf_bpe.get_encoding("cl100k_base")
    assert hf_bpe.encoding_for_model("gpt-4o-2024-05-13").name == "o200k_base"
    assert hf_bpe.encoding_name_for_model("text-davinci-edit-001") == "p50k_edit"
    with pytest.raises(KeyError, match="no known encoding"):
        hf_bpe.encoding_for_model("llama-9")
    with pytest.raises(ValueError, match="Unknown encoding"):
        hf_bpe.get_encoding("cl200k")
    enc = hf_bpe.get_encoding("cl100k_base")
    for call in (lambda: enc.decode([100_300]), lambda: enc.decode_single_token_bytes(100_261),
                 lambda: enc.encode_single_token("not one token"), lambda: enc.decode_bytes([-1])):
        with pytest.raises(hf_bpe.UnknownTokenError) as e:
            call()
        assert isinstance(e.value, KeyError) and isinstance(e.value, ValueError)
        assert not str(e.value).startswith("'")  # printed as written, not quoted as a KeyError's
    assert repr(enc) == "<Encoding 'cl100k_base'>"
    again = pickle.loads(pickle.dumps(enc))
    assert isinstance(again, hf_bpe.Encoding) and again.name == "cl100k_base"


def test_shared_ids_of_harmony(tmp_path):
    h = hf_bpe.get_encoding("o200k_harmony")
    assert h.encode("<|endofprompt|><|reserved_200018|>", allowed_special="all") == [200018, 200018]
    assert h.decode([200018]) == "<|endofprompt|>"
    # A tokenizer.json cannot give one id to two added tokens: refused, naming them.
    with pytest.raises(ValueError, match="share the id 200018"):
        h.save(tmp_path / "harmony")
    assert not (tmp_path / "harmony").exists()
    # Two tokens with flags may not share an id.
    with pytest.raises(ValueError, match="share the id"):
        hf_bpe.BPE({i: bytes([i]) for i in range(256)}, [], added_tokens=[
            formats.AddedToken("<a>", 256, lstrip=True), formats.AddedToken("<b>", 256)])


def test_encoding_constructor():
    r50k = hf_bpe.get_encoding("r50k_base")
    enc = hf_bpe.Encoding("custom", pat_str=r50k._pat_str, mergeable_ranks=r50k._mergeable_ranks,
                          special_tokens={"<|pickle|>": 100_000})
    assert enc.encode("<|pickle|> hi", allowed_special="all")[0] == 100_000
    with pytest.raises(ValueError, match="not one of the built-in patterns"):
        hf_bpe.Encoding("x", pat_str=r"\w+", mergeable_ranks=r50k._mergeable_ranks, special_tokens={})
    twice = dict(r50k._mergeable_ranks)
    twice[b"not a token"] = 5
    with pytest.raises(ValueError, match="two tokens of mergeable_ranks have the rank 5"):
        hf_bpe.Encoding("x", pat_str=r50k._pat_str, mergeable_ranks=twice, special_tokens={})
    with pytest.raises(ValueError, match="explicit_n_vocab is 9"):
        hf_bpe.Encoding("x", pat_str=r50k._pat_str, mergeable_ranks=r50k._mergeable_ranks, special_tokens={},
                        explicit_n_vocab=9)


def test_shipped_file_damaged(monkeypatch):
    monkeypatch.setitem(tiktoken_files._SHA256, "cl100k_base", "0" * 64)
    with pytest.raises(formats.FormatError, match="damaged"):
        formats.read_published("cl100k_base")


def test_tiktoken_api_methods():
    enc = hf_bpe.BPE.load("cl100k_base")
    texts = ["hello world", "goodbye world", "<|endoftext|>"]
    assert enc.encode_ordinary_batch(texts) == [enc.encode_ordinary(t) for t in texts]
    ids = enc.encode_batch(texts, allowed_special="all")
    assert enc.decode_batch(ids) == texts and enc.decode_bytes_batch(ids) == [t.encode() for t in texts]
    assert enc.encode_to_numpy("hello world").tolist() == enc.encode("hello world")
    assert enc.decode_tokens_bytes(enc.encode("hello world")) == [b"hello", b" world"]
    assert enc.encode_single_token(b" world") == enc.encode_single_token(" world") == 1917
    assert enc.encode_single_token("<|endoftext|>") == 100257 and enc.is_special_token(100257)
    values = enc.token_byte_values()
    assert len(values) == 100256 and values == sorted(values)
    assert enc.decode_with_offsets(enc.encode("hello world<|endoftext|> green cow", allowed_special="all")) == (
        "hello world<|endoftext|> green cow", [0, 5, 11, 24, 30])
    assert json.loads(json.dumps(enc.special_tokens)) == enc._special_tokens
    # Bytes that are not UTF-8 need ordinary text to be the pattern's pieces: refused where added
    # tokens match in it (Phi-2's whitespace tokens), never encoded otherwise than encode_ordinary.
    phi = hf_bpe.BPE.load(model_files() / "phi-2")
    with pytest.raises(ValueError, match="added tokens are all special"):
        phi.encode_bytes(b"a  \xff")


def test_test_fixtures_are_what_the_script_makes():
    """tests/fixtures (a user's clone's stand-ins) are exactly what scripts/make_test_fixtures.py
    makes from the shared data."""
    from conftest import REPO, shared_data

    run = subprocess.run([sys.executable, str(REPO / "scripts" / "make_test_fixtures.py"), "--check", "--shared",
                          str(shared_data())], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
