"""The `streams ui` web server: the standard library's threaded HTTP server, on 127.0.0.1.

Why no framework: the page is one HTML shell, one script and one style sheet shipped with the
package (`streams/ui/static`), and a handful of read-only JSON answers; `http.server` serves that
with no dependency to install or keep up. It binds to the loopback address only: the logs it
shows are a database's contents, and it has no authentication.

Routes (every answer JSON except the page and its files):
- `/` the key list; `/key/<key>` a key's page (`<key>` percent-encoded).
- `/api/info`: the region, its shards, the position shown, the regions to compare with.
- `/api/keys`: every key an op touched, with counts.
- `/api/key/<key>?offset=O&limit=N`: one page of the key's history (`api.history_page`).
- `/api/state/<key>?index=I`: the key just after the op applied I-th (`replay --at`).
- `/api/diff/<key>`: what `streams diff` says of the key against each other region.
- `?fresh=1` on any of them reads the logs again.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from streams.replay.positions import PositionError
from streams.ui.source import Source

STATIC = {
    "ui.js": "text/javascript; charset=utf-8",
    "ui.css": "text/css; charset=utf-8",
    "index.html": "text/html; charset=utf-8",
}


def static(name: str) -> bytes:
    return resources.files("streams.ui").joinpath("static", name).read_bytes()


class BadRequest(ValueError):
    """A query parameter that is not what the route takes (answered 400 with the reason)."""


def _int(query: dict[str, list[str]], name: str, default: int) -> int:
    raw = query.get(name, [str(default)])[0]
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(f"{name}={raw!r} is not a number") from None


class Handler(BaseHTTPRequestHandler):
    """One request: a file of the page, or a JSON answer from the `Source`."""

    source: Source  # set on the subclass `make_server` builds
    quiet = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        if not self.quiet:
            super().log_message(format, *args)

    def do_GET(self) -> None:  # noqa: N802 (the base class's name)
        url = urlsplit(self.path)
        path, query = url.path, parse_qs(url.query)
        if path == "/" or path.startswith("/key/"):
            self._send(200, STATIC["index.html"], static("index.html"))
            return
        if path.startswith("/static/") and path[len("/static/") :] in STATIC:
            name = path[len("/static/") :]
            self._send(200, STATIC[name], static(name))
            return
        if not path.startswith("/api/"):
            self._json(404, {"error": f"no page {path}"})
            return
        try:
            if query.get("fresh", ["0"])[0] == "1":
                self.source.forget()
            self._json(200, self._answer(path[len("/api/") :], query))
        except BadRequest as exc:
            self._json(400, {"error": str(exc)})
        except PositionError as exc:
            self._json(404, {"error": str(exc)})
        except Exception as exc:  # a corrupt record, a broker gone: said on the page, not fatal
            print(f"streams ui: {self.path}: {type(exc).__name__}: {exc}", file=sys.stderr)
            self._json(500, {"error": f"{type(exc).__name__}: {exc}"})

    def _answer(self, route: str, query: dict[str, list[str]]) -> Any:
        head, _, rest = route.partition("/")
        key = unquote(rest).encode()
        if head == "info" and not rest:
            return self.source.info()
        if head == "keys" and not rest:
            return {"keys": self.source.keys()}
        if not rest:
            raise BadRequest(f"/api/{head}/<key>: name a key")
        if head == "key":
            return self.source.page(key, _int(query, "offset", 0), _int(query, "limit", 200))
        if head == "state":
            if "index" not in query:
                raise BadRequest("/api/state/<key>?index=I: which op (its apply index)")
            return self.source.state(key, _int(query, "index", 0))
        if head == "diff":
            return self.source.diff(key)
        raise BadRequest(f"no API /api/{head}")

    def _json(self, status: int, body: Any) -> None:
        self._send(status, "application/json", json.dumps(body).encode())

    def _send(self, status: int, kind: str, body: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)
        except ConnectionError:  # the page went elsewhere before the answer: nobody to tell
            pass


def make_server(source: Source, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server over `source` on `host:port` (0: a free port; `server_address` says which)."""
    handler = type("SourceHandler", (Handler,), {"source": source})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
