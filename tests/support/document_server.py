"""A small local HTTP server that serves documents, for document_query tests.

    with DocumentServer() as docs:
        docs.pages["/page.html"] = ("text/html", b"<html>...</html>")
        docs.redirects["/moved"] = "http://127.0.0.2:1/elsewhere"
        docs.delays["/slow"] = 5.0     # seconds before the answer (a time-out test)
        docs.url + "/page.html"
        docs.requests                 # every (path, headers) it was asked, in order

Anything else answers 404. ``Set-Cookie`` is sent with every page so tests can check that
a cookie is never sent back.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class DocumentServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.pages: dict[str, tuple[str, bytes]] = {}
        self.redirects: dict[str, str] = {}
        self.delays: dict[str, float] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.requests.append((self.path, headers))
                    delay = server.delays.get(self.path, 0.0)
                    target = server.redirects.get(self.path)
                    page = server.pages.get(self.path)
                if delay and server._stop.wait(delay):
                    return
                if target is not None:
                    self.send_response(302)
                    self.send_header("Location", target)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if page is None:
                    self._send(404, "text/plain", b"not found")
                    return
                self._send(200, *page)

            def _send(self, status: int, kind: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Set-Cookie", "session=tracked; Path=/")
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def paths(self) -> list[str]:
        with self._lock:
            return [path for path, _ in self.requests]

    def __enter__(self) -> DocumentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()


def make_pdf(path: Any, pages: list[str], *, user_password: str | None = None) -> None:
    """A PDF with one page of text per item (fpdf2, a test requirement)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    if user_password is not None:
        pdf.set_encryption(owner_password="owner", user_password=user_password)
    pdf.output(str(path))
