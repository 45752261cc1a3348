"""A small web site for the browser_agent tests, served on 127.0.0.1 by the test process.

``/form`` is a form whose submissions (``POST /submit``, answered 303 to ``/thanks``) the
server counts; ``/cookie`` sets a lasting cookie and ``/whoami`` shows the one it gets.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

FORM = b"""<!doctype html><html><head><title>Order form</title></head><body>
<h1>Order</h1>
<form method="post" action="/submit">
<input name="name" placeholder="Your name">
<button type="submit">Send</button>
</form>
<p>Some text to read on the form page.</p>
</body></html>"""


class BrowserSite:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.submissions: list[dict[str, list[str]]] = []
        self.paths: list[str] = []  # every GET, in order
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, body: bytes, status: int = 200, **headers: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name.replace("_", "-"), value)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                with site.lock:
                    site.paths.append(self.path)
                if self.path.startswith("/form"):
                    self._send(FORM)
                elif self.path.startswith("/thanks"):
                    self._send(
                        b"<html><head><title>Thanks</title></head><body>Received.</body></html>"
                    )
                elif self.path.startswith("/cookie"):
                    self._send(
                        b"<html><head><title>Cookie set</title></head><body>ok</body></html>",
                        Set_Cookie="visitor=blue-42; Max-Age=86400; Path=/",
                    )
                elif self.path.startswith("/report.csv"):
                    self._send(
                        b"a,b\n1,2\n",
                        Content_Disposition='attachment; filename="../report.csv"',
                    )
                elif self.path.startswith("/files"):
                    self._send(
                        b"<html><head><title>Files</title></head><body>"
                        b'<a href="/report.csv">report</a></body></html>'
                    )
                elif self.path.startswith("/whoami"):
                    cookie = self.headers.get("Cookie") or "none"
                    body = f"<html><head><title>who: {cookie}</title></head><body>{cookie}"
                    self._send((body + "</body></html>").encode())
                else:
                    self._send(b"not here", status=404)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fields = parse_qs(self.rfile.read(length).decode())
                with site.lock:
                    site.submissions.append(fields)
                self._send(b"", status=303, Location="/thanks")

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.submissions)

    def start(self) -> BrowserSite:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def browser_site() -> Iterator[BrowserSite]:
    site = BrowserSite().start()
    try:
        yield site
    finally:
        site.stop()
