"""A small local HTTP server that speaks SearXNG's JSON search API, for search_engine tests.

    with SearxngServer() as searx:
        searx.results["durable agents"] = [{"title": ..., "url": ..., "content": ...}]
        settings["searxng_url"] = searx.url
        ...
        searx.queries  # every q= it was asked, in order

``mode`` switches the answer: ``"json"`` (default), ``"forbidden"`` (HTTP 403, as a
SearXNG without the json format answers) or ``"garbage"`` (HTML instead of JSON).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


class SearxngServer:
    def __init__(self) -> None:
        self.results: dict[str, list[dict[str, Any]]] = {}
        self.queries: list[str] = []
        self.mode = "json"
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parsed = urlparse(self.path)
                params = parse_qs(parsed.query)
                if parsed.path != "/search":
                    self._send(404, "text/plain", b"not found")
                    return
                query = params.get("q", [""])[0]
                with server._lock:
                    server.queries.append(query)
                    mode = server.mode
                    results = server.results.get(query, [])
                if mode == "forbidden" or params.get("format") != ["json"]:
                    self._send(403, "text/html", b"<h1>403 Forbidden</h1>")
                elif mode == "garbage":
                    self._send(200, "text/html", b"<html>not json at all</html>")
                else:
                    body = {"query": query, "number_of_results": len(results), "results": results}
                    self._send(200, "application/json", json.dumps(body).encode())

            def _send(self, status: int, kind: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> SearxngServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def asked(self, query: str) -> int:
        with self._lock:
            return self.queries.count(query)
