"""hf-bpe viz: the JSON API against bpe.encode and the reference encoder, its errors, the CLI."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

import hf_bpe
from hf_bpe.tools import viz
from hf_bpe.reference import encode_word_reference
from conftest import model_files, openai_files

SENTENCE = "the cat saw the hat 🙂"


def _gpt2() -> hf_bpe.BPE:
    return hf_bpe.BPE.load(openai_files() / "gpt2")


@pytest.fixture(scope="module")
def server():
    srv = viz.serve(open_browser=False, block=False)
    yield srv
    srv.shutdown()
    srv.server_close()


def call(srv, path: str, body: object = None, raw: bytes | None = None) -> tuple[int, object]:
    url = f"http://127.0.0.1:{srv.server_address[1]}{path}"
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        text = e.read()
        assert b"Traceback" not in text
        return e.code, json.loads(text)


def test_bytes_are_shown_as_the_post_does():
    assert viz.show(b" the") == "␣the" and viz.show("🙂".encode()[:1]) == "\\xf0" and viz.show(b"a\n") == "a\\n"


def test_binds_to_localhost_only(server):
    assert server.server_address[0] == "127.0.0.1"


def test_worked_example_encodes_as_bpe_encode_and_as_bytes_at_zero(server):
    bpe = viz.worked_example()
    assert bpe.merges == [(b"t", b"h"), (b"th", b"e"), (b" ", b"the"), (b"a", b"t"), (b"c", b"at"), (b" ", b"cat")]
    assert bpe.special_tokens == {"<|endoftext|>": 256}
    status, res = call(server, "/api/encode", {"name": "worked example", "text": SENTENCE, "merges": None})
    assert status == 200
    assert [t["id"] for t in res["tokens"]] == bpe.encode(SENTENCE)
    assert res["bytes"] == len(SENTENCE.encode()) and res["count"] == len(bpe.encode(SENTENCE))
    status, res = call(server, "/api/encode", {"name": "worked example", "text": SENTENCE, "merges": 0})
    assert [t["id"] for t in res["tokens"]] == list(SENTENCE.encode())
    assert res["count"] == 24 and res["ratio"] == 1.0
    assert [t["text"] for t in res["tokens"][-4:]] == ["\\xf0", "\\x9f", "\\x99", "\\x82"]
    hover = res["tokens"][0]
    assert hover == {"id": 116, "text": "t", "bytes": [116], "special": False, "rank": None, "parts": None,
                     "part_ids": None, "start": 0, "end": 1}


def test_token_details_and_steps(server):
    status, tok = call(server, "/api/token", {"name": "worked example", "id": 259})
    assert tok["text"] == "␣the" and tok["rank"] == 2 and tok["parts"] == ["␣", "the"] and tok["part_ids"] == [32, 258]
    assert call(server, "/api/token", {"name": "worked example", "id": 256})[1]["special"] is True
    status, steps = call(server, "/api/steps", {"name": "worked example", "word": " then"})
    assert [(s["step"], s["tokens"]) for s in steps] == [
        ("Start", ["␣", "t", "h", "e", "n"]), ("Merge 1", ["␣", "th", "e", "n"]),
        ("Merge 2", ["␣", "the", "n"]), ("Merge 3", ["␣the", "n"])]
    status, steps = call(server, "/api/steps", {"name": "worked example", "word": " then", "merges": 1})
    assert steps[-1]["tokens"] == ["␣", "th", "e", "n"]


def test_first_k_merges_equal_the_reference_encoder():
    bpe = _gpt2()
    text = ("Hello world, the cat's 12345 héllo naïve 🙂 日本語のテキスト\n\n  indented\tcode() <|endoftext|>"
            " after<|endoftext|>x")
    srv = viz.serve(bpe, open_browser=False, block=False)
    try:
        _, full = call(srv, "/api/encode", {"name": "tokenizer", "text": text, "merges": None})
        assert [t["id"] for t in full["tokens"]] == bpe.encode(text, allowed_special="all")
        ids = {b: i for i, b in bpe.vocab.items()}
        _, res0 = call(srv, "/api/encode", {"name": "tokenizer", "text": text, "merges": len(bpe.merges)})
        assert res0["tokens"] == full["tokens"]
        for k in (0, 1, 7, 100, 5000, len(bpe.merges) - 1):
            _, res = call(srv, "/api/encode", {"name": "tokenizer", "text": text, "merges": k})
            want: list[int] = []  # each piece of the full encoding, by the reference with k merges
            tok_ids, _, words, _ = bpe.encode_spans([text], allowed_special="all")
            groups: dict[int, list[int]] = {}
            for i, w in zip(tok_ids.tolist(), words.tolist()):
                groups.setdefault(w, []).append(i)
            for w in sorted(groups):
                g = groups[w]
                if len(g) == 1 and g[0] in bpe.special_tokens.values():
                    want.append(g[0])
                    continue
                piece = b"".join(bpe.vocab[i] for i in g)
                want += [ids[p] for p in encode_word_reference(piece, bpe.merges[:k])]
            got = [t["id"] for t in res["tokens"]]
            assert got == want, k
            # offsets: every token's chars hold its bytes
            assert all(t["start"] < t["end"] for t in res["tokens"])
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_normalizing_pipeline_shows_all_merges_and_says_why_not_fewer():
    path = model_files() / "gpt-neox-20b" / "tokenizer.json"
    bpe = hf_bpe.BPE.load(path)
    text = "cafe\u0301 ma\u0301s"  # decomposed: its NFC normalizer changes it
    with pytest.raises(ValueError):
        bpe.encode_spans([text])  # (its NFC normalizer changes this text)
    srv = viz.serve(bpe, open_browser=False, block=False)
    try:
        status, res = call(srv, "/api/encode", {"name": "tokenizer", "text": text, "merges": None})
        assert status == 200 and [t["id"] for t in res["tokens"]] == bpe.encode(text)
        status, res = call(srv, "/api/encode", {"name": "tokenizer", "text": text, "merges": 10})
        assert status == 422 and "only all merges" in res["error"]
    finally:
        srv.shutdown()
        srv.server_close()


def test_training_in_the_page(server):
    status, res = call(server, "/api/train", {"corpus": "\n".join(viz.WORKED_EXAMPLE), "vocab_size": 263,
                                               "tie_break": "lexicographic"})
    assert status == 200
    assert res["merge_list"] == [["t", "h"], ["th", "e"], ["␣", "the"], ["a", "t"], ["c", "at"], ["␣", "cat"]]
    status, enc = call(server, "/api/encode", {"name": res["name"], "text": " cat", "merges": None})
    assert [t["id"] for t in enc["tokens"]] == [262]
    names = [t["name"] for t in call(server, "/api/tokenizers")[1]]
    assert res["name"] in names and "worked example" in names


@pytest.mark.parametrize("path,body,raw,status,words", [
    ("/api/encode", None, b"{not json", 400, "not JSON"),
    ("/api/encode", None, b"[1, 2]", 400, "JSON object"),
    ("/api/encode", {"name": "nope", "text": "x"}, None, 404, "unknown tokenizer 'nope'"),
    ("/api/encode", {"name": "worked example", "text": "x" * (viz.MAX_TEXT + 1)}, None, 413, "at most"),
    ("/api/encode", {"name": "worked example", "text": "x", "merges": 7}, None, 400, "between 0 and 6"),
    ("/api/encode", {"name": "worked example", "text": 5}, None, 400, "text must be a string"),
    ("/api/token", {"name": "worked example", "id": 99999}, None, 404, "no token with id 99999"),
    ("/api/token", {"name": "worked example", "id": "1"}, None, 400, "id must be an integer"),
    ("/api/train", {"corpus": "a b", "vocab_size": 10}, None, 400, "vocab_size must be an integer from 257"),
    ("/api/train", {"corpus": "a b", "vocab_size": 10**9}, None, 400, "vocab_size must be"),
    ("/api/train", {"corpus": "", "vocab_size": 300}, None, 400, "corpus is empty"),
    ("/api/train", {"corpus": "a", "vocab_size": 300, "tie_break": "x"}, None, 400, "tie_break"),
    ("/api/nothing", {}, None, 404, "no API"),
    ("/api/encode", None, b'{"name": "worked example", "text": "a\\ud800"}', 400, "lone surrogate at character 1"),
    ("/api/train", None, b'{"corpus": "\\udfff", "vocab_size": 300}', 400, "corpus is not valid Unicode"),
    ("/api/encode", None, b"[" * 100_000, 400, "not JSON"),
    ("/etc/passwd", None, None, 404, "no page"),
])
def test_bad_requests_get_clear_4xx_json(server, path, body, raw, status, words):
    got, res = call(server, path, body, raw)
    assert got == status and words in res["error"]


def _raw(server, head: str, body: str = "") -> str:
    with socket.create_connection(server.server_address, timeout=10) as c:
        c.sendall((head + "\r\n\r\n" + body).encode())
        got = b""
        while chunk := c.recv(1 << 16):  # the server closes the connection after its answer
            got += chunk
        return got.decode("latin-1")


def _post_with_length(server, length: str) -> str:
    host = f"127.0.0.1:{server.server_address[1]}"
    return _raw(server, f"POST /api/encode HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {length}", "{}")


@pytest.mark.parametrize("length,status", [("abc", 400), ("-5", 400), ("+2", 400), ("\u0662", 400), (str(10**9), 413)])
def test_a_bad_content_length_is_refused(server, length, status):
    head = _post_with_length(server, length)
    assert head.startswith(f"HTTP/1.0 {status}") and "Traceback" not in head


def test_a_content_length_with_surrounding_spaces_is_read(server):
    # Spaces around a field value are not part of it (RFC 9110, 5.5).
    want = _post_with_length(server, "2").split("\r\n", 1)[0]
    assert _post_with_length(server, " 2 ").split("\r\n", 1)[0] == want


def test_trained_names_are_never_reused(server):
    names = [call(server, "/api/train", {"corpus": "ab ab ab", "vocab_size": 258})[1]["name"]
             for _ in range(viz.MAX_TRAINED + 2)]
    assert len(set(names)) == len(names)
    known = [t["name"] for t in call(server, "/api/tokenizers")[1]]
    assert names[0] not in known and names[-1] in known


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serves_the_page_on_a_free_port(tmp_path):
    out = tmp_path / "tok"
    viz.worked_example().save(out)
    port = _free_port()
    p = subprocess.Popen([sys.executable, "-m", "hf_bpe", "viz", "--tokenizer", str(out), "--compare", str(out),
                          "--port", str(port), "--no-browser"], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in line
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
        assert "<script>" in page and "http://" not in page and "https://" not in page  # offline: no CDN
        tks = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/tokenizers", timeout=10).read())
        assert [t["name"] for t in tks] == ["tok (1)", "tok (2)"]
    finally:
        p.terminate()
        p.wait(10)


@pytest.mark.parametrize("method,extra,why", [
    ("GET", "Host: evil.example:{port}", "Host 'evil.example:"),  # DNS rebinding: the page and its API
    ("GET", "Host: 127.0.0.1:1", "Host '127.0.0.1:1'"),
    ("GET", "X: no host", "Host ''"),
    ("POST", "Host: 127.0.0.1:{port}\r\nOrigin: http://evil.example", "Origin 'http://evil.example'"),
    ("POST", "Host: 127.0.0.1:{port}\r\nOrigin: null", "Origin 'null'"),
])
def test_requests_from_other_sites_are_refused(server, method, extra, why):
    port = server.server_address[1]
    for path in ("/", "/api/tokenizers") if method == "GET" else ("/api/train",):
        body = json.dumps({"corpus": "ab ab", "vocab_size": 258})
        head = f"{method} {path} HTTP/1.1\r\n{extra.format(port=port)}\r\nContent-Type: application/json"
        got = _raw(server, head + (f"\r\nContent-Length: {len(body)}" if method == "POST" else ""), body if method == "POST" else "")
        assert got.startswith("HTTP/1.0 403") and why in got, got[:300]


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}"])
def test_the_pages_own_host_and_origin_are_served(server, host):
    h = host.format(port=server.server_address[1])
    body = json.dumps({"name": "worked example", "text": " the"})
    got = _raw(server, f"POST /api/encode HTTP/1.1\r\nHost: {h}\r\nOrigin: http://{h}\r\n"
                       f"Content-Type: application/json; charset=utf-8\r\nContent-Length: {len(body)}", body)
    assert got.startswith("HTTP/1.0 200") and '"id"' in got


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_a_post_must_be_json(server, kind):
    # A foreign page may send text/plain or a form across sites without asking first: refused.
    port = server.server_address[1]
    body = json.dumps({"corpus": "ab ab", "vocab_size": 258})
    ctype = f"\r\nContent-Type: {kind}" if kind else ""
    got = _raw(server, f"POST /api/train HTTP/1.1\r\nHost: 127.0.0.1:{port}{ctype}\r\nContent-Length: {len(body)}", body)
    assert got.startswith("HTTP/1.0 415") and "application/json" in got


def test_one_training_at_a_time(server):
    import threading
    from unittest import mock

    started, release = threading.Event(), threading.Event()
    real = hf_bpe.training.train

    def slow(*a, **k):
        started.set()
        release.wait(30)
        return real(*a, **k)

    with mock.patch.object(hf_bpe.training, "train", slow):
        first: list = []
        t = threading.Thread(target=lambda: first.append(call(server, "/api/train", {"corpus": "ab ab", "vocab_size": 258})))
        t.start()
        assert started.wait(30)
        status, res = call(server, "/api/train", {"corpus": "ab ab", "vocab_size": 258})
        release.set()
        t.join(30)
    assert status == 429 and "already running" in res["error"]
    assert first[0][0] == 200
    assert call(server, "/api/train", {"corpus": "ab ab", "vocab_size": 258})[0] == 200  # free again


def test_steps_are_bounded(server):
    status, res = call(server, "/api/steps", {"name": "worked example", "word": "a" * (viz.MAX_WORD_BYTES + 1)})
    assert status == 413 and "at most 128" in res["error"]
    status, res = call(server, "/api/steps", {"name": "worked example", "word": "é" * (viz.MAX_WORD_BYTES // 2 + 1)})
    assert status == 413  # counted in bytes: the list grows with the bytes
    status, res = call(server, "/api/steps", {"name": "worked example", "word": "a" * viz.MAX_WORD_BYTES})
    assert status == 200 and len(json.dumps(res)) < 1 << 20
