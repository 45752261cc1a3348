"""Request bodies limited while they stream, malformed forms, the key never from a URL, the
security headers and what reaches the log, through the real Starlette app (in process).
Issue #17, points 1, 5 and 9."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from python.server import log_safety
from python.server.api import ApiHandler
from python.server.auth import AuthConfig
from python.server.http_headers import SecurityHeadersMiddleware
from python.server.http_limits import BodyLimitMiddleware, BodyLimits
from python.server.runtime import Runtime
from run_ui import build_app

pytestmark = pytest.mark.unit

SMALL = BodyLimits(json_bytes=1000, form_bytes=5000, part_bytes=2000, urlencoded_bytes=800)


class Echo(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        return {k: v if isinstance(v, str) else len(v) for k, v in input.items()}


class External(ApiHandler):
    requires_auth = False
    requires_csrf = False
    requires_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        return {"ok": True}


def _client(tmp_path: Path, limits: BodyLimits | None = None) -> TestClient:
    from python.api.csrf_token import CsrfToken

    runtime = Runtime(tmp_path, {"mcp_server_token": "tok"}, AuthConfig())
    handlers = {"echo": Echo, "external": External, "csrf_token": CsrfToken}
    app = build_app(runtime, handlers, secret_key="k", limits=limits or BodyLimits())
    client = TestClient(app, base_url="http://localhost")
    return client


def _with_csrf(client: TestClient) -> TestClient:
    client.headers["X-CSRF-Token"] = client.get("/api/csrf_token").json()["token"]
    return client


def _refused(response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and isinstance(error["message"], str)


def _multipart(parts: list[tuple[str, str | None, bytes]], boundary: str = "b0undary") -> bytes:
    out = b""
    for name, filename, data in parts:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
        out += data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


MULTIPART = "multipart/form-data; boundary=b0undary"


@pytest.fixture
def no_tracebacks(caplog):
    caplog.set_level(logging.INFO)
    yield
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "Traceback" not in logged and "internal error" not in logged, logged


def test_malformed_forms_are_4xx_with_the_error_shape(tmp_path, no_tracebacks):
    """The probe's bodies (no boundary, 1,001 fields, a 2 MB text field, 2,000 urlencoded
    fields) and other broken forms: a 4xx with a code, never a 500."""
    fields = [(f"f{i}", None, b"x") for i in range(1001)]
    urlencoded = "application/x-www-form-urlencoded"
    nameless = b"--b0undary\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b0undary--\r\n"
    cases = [
        (b"--x\r\n", "multipart/form-data", 400, "bad_request"),
        (_multipart(fields), MULTIPART, 413, "payload_too_large"),
        (_multipart([("text", None, b"x" * 2_000_000)]), MULTIPART, 413, "payload_too_large"),
        (b"&".join(b"f%d=1" % i for i in range(2000)), urlencoded, 413, "payload_too_large"),
        (b"garbage without any boundary", MULTIPART, 400, "bad_request"),
        (_multipart([("f", "x.txt", b"data")])[:-8], MULTIPART, 400, "bad_request"),
        (nameless, MULTIPART, 400, "bad_request"),
        (_multipart([("a", None, b"\xff\xfe")]), MULTIPART + "; charset=no-such", 200, ""),
        (b"a=%ff%fe&b=%zz", urlencoded + "; charset=bogus", 200, ""),
    ]
    with _client(tmp_path) as client:
        _with_csrf(client)
        for body, content_type, status, code in cases:
            headers = {"content-type": content_type}
            response = client.post("/api/echo", content=body, headers=headers)
            if status == 200:
                assert response.status_code == 200, response.text
            else:
                _refused(response, status, code)


def test_bodies_over_their_limit_are_413_for_each_kind(tmp_path, no_tracebacks):
    with _client(tmp_path, SMALL) as client:
        _with_csrf(client)
        json_body = b'{"a": "' + b"x" * 2000 + b'"}'
        _refused(client.post("/api/echo", content=json_body), 413, "payload_too_large")
        streamed = client.post("/api/echo", content=iter([b'{"a": "', b"x" * 600, b"x" * 600]))
        _refused(streamed, 413, "payload_too_large")
        assert streamed.headers["connection"] == "close"  # the rest is never read
        file_part = _multipart([("files", "big.bin", b"y" * 2500)])
        _refused(
            client.post("/api/echo", content=file_part, headers={"content-type": MULTIPART}),
            413,
            "payload_too_large",
        )
        small = _multipart([("files", "ok.bin", b"y" * 1500), ("more", "ok2.bin", b"z" * 1500)])
        ok = client.post("/api/echo", content=small, headers={"content-type": MULTIPART})
        assert ok.status_code == 200 and ok.json() == {"files": 1, "more": 1}
        total = _multipart([(f"f{i}", f"{i}.bin", b"y" * 1500) for i in range(4)])
        _refused(
            client.post("/api/echo", content=total, headers={"content-type": MULTIPART}),
            413,
            "payload_too_large",
        )
        urlencoded = {"content-type": "application/x-www-form-urlencoded"}
        _refused(
            client.post("/api/echo", content=b"a=" + b"x" * 900, headers=urlencoded),
            413,
            "payload_too_large",
        )
        assert client.post("/api/echo", content=b"a=1", headers=urlencoded).json() == {"a": "1"}
        login = client.post("/login", content=b"username=" + b"x" * 900, headers=urlencoded)
        _refused(login, 413, "payload_too_large")
        texts = _multipart([(f"t{i}", None, b"t" * 700) for i in range(5)])  # 3,500 > 1,000
        _refused(
            client.post("/api/echo", content=texts, headers={"content-type": MULTIPART}),
            413,
            "payload_too_large",
        )
        fields = _multipart([(f"t{i}", None, b"t" * 300) for i in range(4)])  # 1,200 > 800
        _refused(
            client.post("/login", content=fields, headers={"content-type": MULTIPART}),
            413,
            "payload_too_large",
        )
        a_file = _multipart([("username", "u.txt", b"ann")])
        _refused(
            client.post("/login", content=a_file, headers={"content-type": MULTIPART}),
            400,
            "bad_request",
        )


def test_a_declared_length_over_the_limit_is_refused_before_the_app_reads(tmp_path):
    reached = []

    async def app(scope, receive, send):
        reached.append(scope["path"])

    middleware = BodyLimitMiddleware(app, SMALL)
    client = TestClient(middleware)
    response = client.post("/x", content=b"x" * 1001, headers={"content-type": "application/json"})
    _refused(response, 413, "payload_too_large")
    assert response.json()["error"]["setting"] == "A0_HTTP_MAX_JSON_BYTES"
    assert response.headers["connection"] == "close"
    assert reached == []


def test_streams_beyond_the_bound_get_503_with_retry_after():
    """One body streams (its next chunk never comes): a second body finds no free slot."""
    release = asyncio.Event()
    started = asyncio.Event()
    sent: list[dict[str, Any]] = []

    async def app(scope, receive, send):
        from starlette.requests import Request

        from python.server import api

        try:
            await api.read_input(Request(scope, receive))
            response = api.ApiJSONResponse({"ok": True})
        except Exception as exc:
            response = api.exception_to_response(exc)
        await response(scope, receive, send)

    middleware = BodyLimitMiddleware(app, BodyLimits(streams=1), wait_seconds=0)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/x",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")],
    }

    async def slow_receive():
        if not started.is_set():
            started.set()
            return {"type": "http.request", "body": b"{", "more_body": True}
        await release.wait()
        return {"type": "http.request", "body": b"}", "more_body": False}

    async def fast_receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def collect(message):
        sent.append(message)

    async def run() -> None:
        first = asyncio.create_task(middleware(dict(scope), slow_receive, collect))
        await started.wait()
        await middleware(dict(scope), fast_receive, collect)
        release.set()
        await first
        await middleware(dict(scope), fast_receive, collect)  # the slot is free again

    asyncio.run(run())
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert [m["status"] for m in starts] == [503, 200, 200]
    assert (b"retry-after", b"2") in starts[0]["headers"]


@pytest.mark.parametrize(
    ("url", "headers", "status", "code"),
    [
        ("/api/external?api_key=tok", {}, 400, "api_key_in_url"),
        ("/api/external?api_key=tok", {"X-API-KEY": "tok"}, 400, "api_key_in_url"),
        ("/api/echo?api_key=tok", {}, 400, "api_key_in_url"),
        ("/api/external", {"X-API-KEY": "tok"}, 200, ""),
    ],
)
def test_the_api_key_is_never_taken_from_the_url(tmp_path, url, headers, status, code):
    with _client(tmp_path) as client:
        response = client.post(url, json={}, headers=headers)
        if status == 200:
            assert response.status_code == 200
        else:
            _refused(response, status, code)
        assert client.post("/api/external", json={"api_key": "tok"}).status_code == 200


def test_a_form_without_the_key_header_is_refused_before_it_is_read(tmp_path):
    """An upload to an API-key endpoint never carries the key in its body: 401 at once."""
    consumed: list[int] = []

    def chunks():
        for _ in range(50):
            consumed.append(1)
            yield b"x" * 1000

    with _client(tmp_path) as client:
        form = {"content-type": MULTIPART}
        response = client.post("/api/external", content=chunks(), headers=form)
        _refused(response, 401, "unauthorized")
        assert response.headers["connection"] == "close"
        with_key = _multipart([("message", None, b"hi")])
        ok = client.post("/api/external", content=with_key, headers={**form, "X-API-KEY": "tok"})
        assert ok.status_code == 200


def test_ui_responses_carry_the_security_headers(tmp_path):
    with _client(tmp_path) as client:
        for path in ("/", "/login", "/css/style.css", "/js/app.js", "/api/csrf_token"):
            response = client.get(path)
            assert response.status_code == 200, path
            policy = response.headers["content-security-policy"]
            assert "script-src 'self'" in policy and "img-src 'self' data: blob:" in policy
            assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["x-frame-options"] == "DENY"
            assert response.headers["referrer-policy"] == "same-origin"


def test_the_ui_pages_have_no_inline_script_or_style():
    """The policy allows scripts and styles from files only: the pages must not need more."""
    import re

    webui = Path(__file__).resolve().parents[2] / "webui"
    for page in ("index.html", "login.html"):
        html = (webui / page).read_text(encoding="utf-8")
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), page
        assert "<style" not in html and " style=" not in html, page
        assert not re.search(r"\son[a-z]+=", html), page


def test_a_handler_header_is_kept():
    async def app(scope, receive, send):
        headers = [(b"x-frame-options", b"SAMEORIGIN")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    response = TestClient(SecurityHeadersMiddleware(app)).get("/")
    assert response.headers["x-frame-options"] == "SAMEORIGIN"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_log_arguments_are_escaped_and_truncated():
    record = logging.LogRecord(
        "a0.durable", logging.INFO, __file__, 1, "chat %s task ended with %s", None, None
    )
    record.args = ("evil\n2026-01-01 INFO a0: forged line\x1b[31m", "x" * 500)
    log_safety.SafeArgsFilter().filter(record)
    text = record.getMessage()
    assert "\n" not in text and "\x1b" not in text
    assert "evil\\n2026-01-01" in text and "\\x1b[31m" in text
    assert len(text) < 300 and "(+300 chars)" in text
    kept = logging.LogRecord("a0.api", logging.ERROR, __file__, 1, "x %s %d", None, None)
    kept.args = (log_safety.Verbatim("Traceback\n  line"), 7)
    log_safety.SafeArgsFilter().filter(kept)
    assert kept.getMessage() == "x Traceback\n  line 7"


def test_access_log_drops_query_values():
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', None, None
    )
    record.args = ("127.0.0.1:5", "GET", "/api/x?api_key=s3cr3t&path=a%0Ab", "1.1", 400)
    log_safety.AccessLogFilter().filter(record)
    assert record.getMessage() == '127.0.0.1:5 - "GET /api/x?api_key=...&path=... HTTP/1.1" 400'


def test_limits_are_read_from_the_environment_and_usr_env(tmp_path, caplog):
    (tmp_path / ".env").write_text("A0_HTTP_MAX_PART_BYTES=1234\nA0_HTTP_BODY_STREAMS=0\n")
    env = {"A0_HTTP_MAX_JSON_BYTES": "2048", "A0_HTTP_MAX_FORM_BYTES": "lots"}
    limits = BodyLimits.load(tmp_path, env)
    assert limits.json_bytes == 2048 and limits.part_bytes == 1234
    assert limits.form_bytes == BodyLimits().form_bytes  # not a number: the default
    assert limits.streams == BodyLimits().streams  # not positive: the default
    assert "A0_HTTP_MAX_FORM_BYTES" in caplog.text and "A0_HTTP_BODY_STREAMS" in caplog.text
