"""The blog post's diagram as a live local page: ``hf-bpe viz`` / :func:`serve`.

One static page (``data/viz.html``, no CDN, no build) and a small JSON API served by the standard
library on 127.0.0.1 only. The API takes no file paths: it serves the tokenizers the server was
started with and those trained in the page, by name. Encoding with only the first *k* merges
runs in the core (``_core.segment_words(..., max_rank=)``); with all merges it is ``encode``
itself, so the page shows exactly the ids ``BPE.encode`` gives.

It answers its own page only: a request whose ``Host`` or ``Origin`` names another site is
refused (DNS rebinding, cross-site posts), a POST must be ``application/json``, one training
runs at a time, and every answer is bounded by the size limits below.
"""

from __future__ import annotations

import json
import threading
import webbrowser
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from hf_bpe.bpe import BPE
from hf_bpe.reference import merge_word

__all__ = ["Viz", "serve", "worked_example"]

MAX_TEXT = 100_000  # characters of text per request
MAX_CORPUS = 1_000_000  # characters of corpus to train on in the page
MAX_VOCAB = 50_000
MAX_TRAINED = 8  # tokenizers trained in the page that are kept (the oldest goes)
MAX_WORD_BYTES = 128  # bytes of the word whose merge steps are listed (the answer grows as its square)
WORKED_EXAMPLE = [" the"] * 5 + [" then"] * 2 + [" cat"] * 3 + [" hat"]


class ApiError(Exception):
    """A request the API refuses: an HTTP status and a message for the page."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def worked_example() -> BPE:
    """The post's worked example: ``" the"``×5, ``" then"``×2, ``" cat"``×3, ``" hat"``×1, trained
    with lexicographic ties; ``<|endoftext|>`` is id 256 and the six merges take 257-262."""
    from hf_bpe.training import train

    return train(WORKED_EXAMPLE, vocab_size=263, special_tokens=("<|endoftext|>",),
                 tie_break="lexicographic", progress=False)


def show(b: bytes) -> str:
    """Bytes as the page (and the report) shows them: UTF-8 text, a space as ``␣``, a newline as
    ``\\n``, a byte that is not valid UTF-8 on its own as ``\\xf0``."""
    return b.decode("utf-8", errors="backslashreplace").replace(" ", "␣").replace("\n", "\\n")


class _Tables:
    """What the page asks of one tokenizer: each id's bytes, merge rank and parts."""

    def __init__(self, bpe: BPE) -> None:
        self.bpe = bpe
        self.vocab = bpe.vocab
        self.merges = bpe.merges
        ids = {b: i for i, b in self.vocab.items()}
        self.specials = set(bpe.special_tokens.values())
        self.rank: dict[int, int] = {}
        self.parts: dict[int, tuple[int, int]] = {}
        for r, (a, b) in enumerate(self.merges):
            t = ids.get(a + b)
            if t is not None and t not in self.rank:
                self.rank[t] = r
                self.parts[t] = (ids[a], ids[b])
        # The core's rank limit for "the first k merges": k in merges mode; tiktoken ranks are
        # ids, so below the k-th merge's token.
        self.limits = ([ids[a + b] + 1 for a, b in self.merges] if bpe.is_tiktoken else None)

    def summary(self, name: str) -> dict[str, Any]:
        return {"name": name, "vocab_size": self.bpe.vocab_size, "merges": len(self.merges),
                "specials": {show(self.vocab[i]): i for i in sorted(self.specials)}}

    def token(self, i: int) -> dict[str, Any]:
        b = self.vocab.get(i)
        if b is None:
            raise ApiError(HTTPStatus.NOT_FOUND, f"no token with id {i}")
        parts = self.parts.get(i)
        return {"id": i, "text": show(b), "bytes": list(b), "special": i in self.specials,
                "rank": self.rank.get(i), "parts": [show(self.vocab[p]) for p in parts] if parts else None,
                "part_ids": list(parts) if parts else None}

    def encode(self, text: str, k: int | None) -> dict[str, Any]:
        """Tokens of ``text`` with the first ``k`` merges (all when ``None``)."""
        import numpy as np

        from hf_bpe import _core

        n = len(self.merges)
        try:
            ids, offsets, words, _ = self.bpe.encode_spans([text], allowed_special="all")
        except ValueError as e:  # a normalizer that changes the text: no pieces of it to show
            if k is not None and k < n:
                raise ApiError(HTTPStatus.UNPROCESSABLE_ENTITY, f"only all merges can be shown here: {e}") from None
            ids = np.asarray(self.bpe.encode(text, allowed_special="all"))
            offsets = np.zeros((len(ids), 2), dtype=np.int64)
            words = np.arange(len(ids))
        ids, offsets, words = ids.tolist(), offsets.tolist(), words.tolist()
        if k is not None and k < n:
            ids, offsets = self._first_merges(text, ids, offsets, words, k, np, _core)
        tokens = [dict(self.token(i), start=s, end=e) for i, (s, e) in zip(ids, offsets)]
        nbytes = len(text.encode("utf-8"))
        return {"tokens": tokens, "count": len(tokens), "bytes": nbytes,
                "ratio": round(nbytes / len(tokens), 3) if tokens else None, "merges": n if k is None else k}

    def _first_merges(self, text: str, ids: list[int], offsets: list[list[int]], words: list[int], k: int,
                      np: Any, _core: Any) -> tuple[list[int], list[list[int]]]:
        # Pieces are the pre-tokenizer's (the `words` of encode_spans); a special token stays.
        pieces: list[tuple[int, int, int | None]] = []
        last = -1
        for i, (s, e), w in zip(ids, offsets, words):
            if pieces and pieces[-1][2] is None and w == last:
                pieces[-1] = (pieces[-1][0], e, None)
            else:
                pieces.append((s, e, i if i in self.specials else None))
            last = w
        plain = [(s, e) for s, e, sp in pieces if sp is None]
        raw = [text[s:e].encode("utf-8") for s, e in plain]
        bounds = np.cumsum([0] + [len(r) for r in raw], dtype=np.int64)
        limit = self.limits[k - 1] if self.limits is not None and k > 0 else k
        got, offs = _core.segment_words(self.bpe._encoder(), np.frombuffer(b"".join(raw), np.uint8), bounds,
                                        max_rank=limit)
        got, offs = got.tolist(), offs.tolist()
        out_ids: list[int] = []
        out_offsets: list[list[int]] = []
        j = 0
        for s, e, sp in pieces:
            if sp is not None:
                out_ids.append(sp)
                out_offsets.append([s, e])
                continue
            # char offsets: the chars each token's bytes touch
            char_at = [c for c, ch in enumerate(text[s:e]) for _ in ch.encode("utf-8")]
            pos = 0
            for t in got[offs[j]:offs[j + 1]]:
                nb = len(self.vocab[t])
                out_ids.append(t)
                out_offsets.append([s + char_at[pos], s + char_at[pos + nb - 1] + 1])
                pos += nb
            j += 1
        return out_ids, out_offsets

    def steps(self, word: str, k: int | None) -> list[dict[str, Any]]:
        """The merges that apply to ``word`` (one piece), in rank order, as the post's table."""
        n = len(self.merges) if k is None else k
        toks = tuple(bytes([b]) for b in word.encode("utf-8"))
        ranks: dict[tuple[bytes, bytes], int] = {}
        for r, m in enumerate(self.merges[:n]):
            ranks.setdefault(m, r)  # (a repeated merge applies at its first rank, as the encoder's)
        out = [{"step": "Start", "tokens": [show(t) for t in toks]}]
        while len(toks) > 1:
            r = min((ranks.get((a, b), n) for a, b in zip(toks, toks[1:])), default=n)
            if r >= n:
                break
            a, b = self.merges[r]
            toks = merge_word(toks, (a, b))
            out.append({"step": f"Merge {r + 1}", "left": show(a), "right": show(b), "tokens": [show(t) for t in toks]})
        return out


class Viz:
    """The tokenizers a page serves, by name, and the API on them (no I/O here)."""

    def __init__(self, tokenizers: dict[str, BPE]) -> None:
        self.tables = {name: _Tables(b) for name, b in tokenizers.items()}
        self.trained: list[str] = []
        self.n_trained = 0  # names are never reused: an open page never switches tokenizer
        self.lock = threading.Lock()
        self.training = threading.Lock()  # one training at a time: each takes both cores

    def _get(self, body: dict[str, Any], key: str = "name") -> _Tables:
        name = body.get(key)
        with self.lock:
            t = self.tables.get(name) if isinstance(name, str) else None
            known = sorted(self.tables)
        if t is None:
            raise ApiError(HTTPStatus.NOT_FOUND, f"unknown tokenizer {name!r}; known: {known}")
        return t

    def handle(self, path: str, body: dict[str, Any]) -> Any:
        if path == "/api/tokenizers":
            with self.lock:
                return [t.summary(n) for n, t in self.tables.items()]
        if path == "/api/encode":
            t = self._get(body)
            return t.encode(_text(body, "text", MAX_TEXT), _merges(body, len(t.merges)))
        if path == "/api/token":
            i = body.get("id")
            if not isinstance(i, int) or isinstance(i, bool):
                raise ApiError(HTTPStatus.BAD_REQUEST, "id must be an integer")
            return self._get(body).token(i)
        if path == "/api/steps":
            t = self._get(body)
            word = _text(body, "word", MAX_WORD_BYTES)
            if len(word.encode("utf-8")) > MAX_WORD_BYTES:
                raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                               f"word has {len(word.encode('utf-8')):,} bytes; at most {MAX_WORD_BYTES}")
            return t.steps(word, _merges(body, len(t.merges)))
        if path == "/api/train":
            return self.train(body)
        raise ApiError(HTTPStatus.NOT_FOUND, f"no API {path!r}")

    def train(self, body: dict[str, Any]) -> dict[str, Any]:
        from hf_bpe.training import train

        corpus = _text(body, "corpus", MAX_CORPUS)
        size = body.get("vocab_size")
        if not isinstance(size, int) or isinstance(size, bool) or not 257 <= size <= MAX_VOCAB:
            raise ApiError(HTTPStatus.BAD_REQUEST,
                           f"vocab_size must be an integer from 257 to {MAX_VOCAB}, not {size!r}")
        tie = body.get("tie_break", "lexicographic")
        if tie not in ("lexicographic", "hf"):
            raise ApiError(HTTPStatus.BAD_REQUEST, f"tie_break must be 'lexicographic' or 'hf', not {tie!r}")
        docs = [line for line in corpus.split("\n") if line]
        if not docs:
            raise ApiError(HTTPStatus.BAD_REQUEST, "the corpus is empty")
        if not self.training.acquire(blocking=False):
            raise ApiError(HTTPStatus.TOO_MANY_REQUESTS,
                           "a training is already running; try again when it has finished")
        try:
            bpe = train(docs, vocab_size=size, special_tokens=("<|endoftext|>",), tie_break=tie, progress=False)
        finally:
            self.training.release()
        t = _Tables(bpe)
        with self.lock:
            self.n_trained += 1
            name = f"trained {self.n_trained}"
            while name in self.tables:
                name += "'"
            self.tables[name] = t
            self.trained.append(name)
            if len(self.trained) > MAX_TRAINED:
                del self.tables[self.trained.pop(0)]
        return dict(t.summary(name), merge_list=[[show(a), show(b)] for a, b in t.merges])


def _text(body: dict[str, Any], key: str, limit: int) -> str:
    v = body.get(key, "")
    if not isinstance(v, str):
        raise ApiError(HTTPStatus.BAD_REQUEST, f"{key} must be a string")
    if len(v) > limit:
        raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"{key} has {len(v):,} characters; at most {limit:,}")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ApiError(HTTPStatus.BAD_REQUEST,
                       f"{key} is not valid Unicode: a lone surrogate at character {e.start}") from None
    return v


def _merges(body: dict[str, Any], n: int) -> int | None:
    """The number of merges asked for: 0..n, or None for all."""
    k = body.get("merges")
    if k is not None and (not isinstance(k, int) or isinstance(k, bool)):
        raise ApiError(HTTPStatus.BAD_REQUEST, "merges must be an integer or null")
    if k is not None and not 0 <= k <= n:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"merges must be between 0 and {n}, not {k}")
    return k


def _handler(viz: Viz) -> type[BaseHTTPRequestHandler]:
    page = resources.files("hf_bpe").joinpath("data/viz.html").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        server_version = "hf-bpe-viz"
        timeout = 30  # seconds a client may take to send its request (a short body never hangs a thread)

        def log_message(self, *args: Any) -> None:  # quiet: the CLI prints the address
            pass

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, obj: Any) -> None:
            self._send(status, json.dumps(obj, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8")

        def _foreign(self) -> str | None:
            """Why a request is refused because it does not come from this server's own page, or
            None. A page elsewhere may rebind its name to 127.0.0.1 (DNS rebinding: its requests
            then carry its own Host) or post across sites (its Origin): both are refused."""
            port = self.server.server_address[1]
            hosts = {f"127.0.0.1:{port}", f"localhost:{port}"} | ({"127.0.0.1", "localhost"} if port == 80 else set())
            host = (self.headers.get("Host") or "").strip().lower()
            if host not in hosts:
                return f"Host {host[:100]!r} is not this server (127.0.0.1:{port})"
            origin = self.headers.get("Origin")
            if origin is not None and origin.strip().lower() not in {f"http://{h}" for h in hosts}:
                return f"Origin {origin[:100]!r} is not this server's page"
            return None

        def do_GET(self) -> None:
            why = self._foreign()
            if why is not None:
                self._json(403, {"error": why})
            elif self.path in ("/", "/index.html"):
                self._send(200, page, "text/html; charset=utf-8")
            elif self.path == "/api/tokenizers":
                self._json(200, viz.handle(self.path, {}))
            else:
                self._json(404, {"error": f"no page {self.path!r}"})

        def do_POST(self) -> None:
            try:
                why = self._foreign()
                if why is not None:
                    raise ApiError(HTTPStatus.FORBIDDEN, why)
                kind = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
                if kind != "application/json":
                    # (a form or text/plain post is one a foreign page may send without asking)
                    raise ApiError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                                   f"Content-Type must be application/json, not {kind[:60]!r}")
                length = (self.headers.get("Content-Length") or "0").strip(" \t")
                if not (length.isascii() and length.isdigit()):
                    raise ApiError(HTTPStatus.BAD_REQUEST,
                                   f"Content-Length must be a number of bytes, not {length[:40]!r}")
                n = int(length)
                if n > 4 * MAX_CORPUS:
                    raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                                   f"a request of {n:,} bytes; at most {4 * MAX_CORPUS:,}")
                try:
                    body = json.loads(self.rfile.read(n) or b"{}")
                except (ValueError, RecursionError) as e:
                    raise ApiError(HTTPStatus.BAD_REQUEST, f"the request is not JSON: {str(e)[:200]}") from None
                if not isinstance(body, dict):
                    raise ApiError(HTTPStatus.BAD_REQUEST, "the request must be a JSON object")
                self._json(200, viz.handle(self.path, body))
            except ApiError as e:
                self._json(e.status, {"error": str(e)})
            except TimeoutError:
                self.close_connection = True  # the client stopped sending: nothing to answer
            except Exception as e:  # a bug: still JSON, never a traceback page
                self._json(500, {"error": f"{type(e).__name__}: {e}"})

    return Handler


def serve(bpe: BPE | None = None, *, compare: BPE | None = None, port: int = 0, open_browser: bool = True,
          block: bool = True, names: tuple[str, str] = ("tokenizer", "compare")) -> ThreadingHTTPServer:
    """Serves the page for ``bpe`` (the post's worked example when ``None``) and, side by side,
    ``compare``, on 127.0.0.1:``port`` (0: a free one). ``block=False`` returns the running server
    (``server.shutdown()`` stops it); its address is ``server.server_address``."""
    toks = {"worked example" if bpe is None else names[0]: bpe if bpe is not None else worked_example()}
    if compare is not None:
        toks[names[1]] = compare
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(Viz(toks)))
    server.daemon_threads = True
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    if open_browser:
        webbrowser.open(url)
    if not block:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server
    print(f"hf-bpe viz: {url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return server
