"""A stand-in for the Hugging Face Hub HTTP API, just enough for ``push_to_hub`` and
``from_pretrained`` (huggingface_hub 2.x / transformers 5.x), on 127.0.0.1 only.

Run it in-process (``serve()``) or as a script (``python fakehub.py`` prints the port). Set
``HF_ENDPOINT=http://127.0.0.1:<port>`` *before* importing huggingface_hub/transformers.
Files are kept in memory; every push makes a new commit sha. Small files only (regular uploads,
no LFS/Xet), no auth checks.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


class Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.repos: dict[str, dict] = {}  # repo -> {"sha": str, "files": {path: bytes}}
        self.log: list[str] = []


def _handler(store: Store):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet
            pass

        def _send(self, code, body=b"", ctype="application/json", headers=None, head=False):
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _missing(self, kind="EntryNotFound", head=False):
            self._send(404, {"error": kind}, headers={"X-Error-Code": kind, "X-Error-Message": kind}, head=head)

        def _body(self) -> bytes:
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def _repo(self, parts):
            return "/".join(parts[:2]) if len(parts) >= 2 else None

        def do_POST(self):
            path = unquote(urlparse(self.path).path)
            store.log.append(f"POST {path}")
            body = self._body()
            if path == "/api/repos/create":
                req = json.loads(body or b"{}")
                org, name = req.get("organization"), req["name"]
                repo = f"{org}/{name}" if org else (name if "/" in name else f"user/{name}")
                with store.lock:
                    exists = repo in store.repos
                    store.repos.setdefault(repo, {"sha": "0" * 40, "files": {}})
                base = f"http://{self.headers['Host']}"
                return self._send(409 if exists else 200, {"url": f"{base}/{repo}", "name": repo, "id": repo})
            if path == "/api/validate-yaml":
                return self._send(200, {"errors": [], "warnings": []})
            parts = path.split("/")[3:]  # /api/models/<user>/<repo>/...
            repo = self._repo(parts)
            if path.startswith("/api/models/") and len(parts) >= 4 and parts[2] == "preupload":
                files = json.loads(body or b"{}").get("files", [])
                return self._send(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                                                   "oid": None} for f in files]})
            if path.startswith("/api/models/") and len(parts) >= 4 and parts[2] == "commit":
                with store.lock:
                    if repo not in store.repos:
                        return self._missing("RepoNotFound")
                    files = dict(store.repos[repo]["files"])
                    for line in body.decode().splitlines():
                        if not line.strip():
                            continue
                        op = json.loads(line)
                        if op.get("key") == "file":
                            v = op["value"]
                            files[v["path"]] = base64.b64decode(v["content"])
                        elif op.get("key") == "deletedFile":
                            files.pop(op["value"]["path"], None)
                    sha = hashlib.sha1(json.dumps(sorted((k, hashlib.sha1(v).hexdigest()) for k, v in files.items()))
                                       .encode() + store.repos[repo]["sha"].encode()).hexdigest()
                    store.repos[repo] = {"sha": sha, "files": files}
                base = f"http://{self.headers['Host']}"
                return self._send(200, {"commitUrl": f"{base}/{repo}/commit/{sha}", "commitOid": sha,
                                        "pullRequestUrl": None})
            return self._missing("RepoNotFound")

        def _get(self, head):
            path = unquote(urlparse(self.path).path)
            store.log.append(f"{'HEAD' if head else 'GET'} {path}")
            if path.startswith("/api/models/"):
                parts = path.split("/")[3:]
                repo = self._repo(parts)
                with store.lock:
                    r = store.repos.get(repo)
                    if r is None:
                        return self._missing("RepoNotFound", head)
                    files = dict(r["files"])
                    sha = r["sha"]
                rest = parts[2:]
                if not rest or rest[0] == "revision":
                    return self._send(200, {"id": repo, "modelId": repo, "sha": sha, "private": False,
                                            "siblings": [{"rfilename": f} for f in sorted(files)]}, head=head)
                if rest[0] == "tree":
                    sub = "/".join(rest[2:]).strip("/")
                    entries = [{"type": "file", "path": f, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                               for f, b in sorted(files.items()) if not sub or f.startswith(sub + "/")]
                    if sub and not entries:
                        return self._missing("EntryNotFound", head)
                    return self._send(200, entries, head=head)
                return self._missing("EntryNotFound", head)
            parts = path.strip("/").split("/")
            if len(parts) >= 5 and parts[2] == "resolve":
                repo = "/".join(parts[:2])
                fname = "/".join(parts[4:])
                with store.lock:
                    r = store.repos.get(repo)
                    if r is None:
                        return self._missing("RepoNotFound", head)
                    data = r["files"].get(fname)
                    sha = r["sha"]
                if data is None:
                    return self._missing("EntryNotFound", head)
                etag = '"' + hashlib.sha1(data).hexdigest() + '"'
                return self._send(200, data, "application/octet-stream",
                                  {"X-Repo-Commit": sha, "ETag": etag, "X-Linked-Etag": etag}, head=head)
            return self._missing("EntryNotFound", head)

        def do_GET(self):
            self._get(False)

        def do_HEAD(self):
            self._get(True)

    return H


def serve(port: int = 0) -> tuple[ThreadingHTTPServer, Store]:
    """Starts the server on 127.0.0.1 (a free port by default) in a daemon thread."""
    store = Store()
    srv = ThreadingHTTPServer(("127.0.0.1", port), _handler(store))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, store


if __name__ == "__main__":
    srv, _ = serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(srv.server_address[1], flush=True)
    threading.Event().wait()
