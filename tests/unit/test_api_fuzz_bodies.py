"""Generated bodies of every kind against every endpoint, with login on and off (issue #17).

JSON of random shapes, urlencoded forms, multipart forms (well formed or not: no boundary,
a wrong one, cut short, a part without a name, an unknown charset) and raw bytes under
odd content types, each sent with full credentials, with none, or with a wrong key. No
answer is a 5xx, every 4xx has the error shape, and without credentials a login-protected
endpoint answers 401/403 whatever the body. The app runs in process on a real Runtime (its
journal in a temporary folder) against the scripted model; tests/integration/test_api_fuzz.py
sends deep JSON to a real server process, and test_http_edge.py measures memory.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from python.server.api import ApiHandler, discover_handlers
from python.server.auth import AuthConfig
from python.server.http_limits import BodyLimits
from python.server.runtime import Runtime
from run_ui import build_app
from tests.support.model_server import ScriptedModel
from tests.support.model_server import model_server as model_server
from tests.unit.test_agent_loop import _settings

pytestmark = pytest.mark.unit

EXAMPLES = int(os.environ.get("A0_FUZZ_EXAMPLES", "10"))  # per endpoint and login mode
TOKEN = "tok"
LAST = ("settings_set",)  # may change models or the token: fuzzed after the others
LIMITS = BodyLimits(json_bytes=64_000, form_bytes=64_000, part_bytes=16_000, urlencoded_bytes=8_000)
FIELDS = [
    "text",
    "message",
    "context",
    "context_id",
    "ctxid",
    "attachments",
    "files",
    "path",
    "name",
    "input_id",
    "message_id",
    "api_key",
    "run_id",
    "log_from",
    "paused",
    "chats",
    "new_context",
    "task_id",
    "decision",
    "expected_version",
    "lifetime_hours",
]

# ---- bodies -----------------------------------------------------------------------------

text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", "0", "-1", "true", "null", "..", "../etc/passwd", "a\x00b", "\r\n"]),
    st.integers(0, 3).map(lambda n: "x" * (10**n * 3)),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(FIELDS), inner, max_size=4)
    ),
    max_leaves=10,
)
names = st.one_of(st.sampled_from(FIELDS), st.text(max_size=8))


def _multipart(parts: list[tuple[str, str | None, bytes]], flaw: str) -> tuple[str, bytes]:
    boundary = "fuzzB0undary"
    body = b""
    for name, filename, data in parts:
        disposition = "form-data" if flaw == "no_name" else f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        body += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + data
        body += b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    content_type = {
        "no_boundary": "multipart/form-data",
        "wrong_boundary": "multipart/form-data; boundary=other",
        "bad_charset": f"multipart/form-data; boundary={boundary}; charset=x-nope",
    }.get(flaw, f"multipart/form-data; boundary={boundary}")
    if flaw == "truncated":
        body = body[: len(body) // 2]
    return content_type, body


parts = st.lists(
    st.tuples(
        names.map(lambda n: n.replace('"', "")),
        st.one_of(st.none(), st.text(max_size=12).map(lambda n: n.replace('"', ""))),
        st.binary(max_size=3000),
    ),
    max_size=4,
)
flaws = st.sampled_from(
    ["none", "none", "none", "no_boundary", "wrong_boundary", "truncated", "no_name", "bad_charset"]
)
multipart_bodies = st.builds(_multipart, parts, flaws)
urlencoded_bodies = st.one_of(
    st.lists(st.tuples(names, text), max_size=6).map(
        lambda pairs: ("application/x-www-form-urlencoded", urllib.parse.urlencode(pairs).encode())
    ),
    st.binary(max_size=200).map(lambda raw: ("application/x-www-form-urlencoded", raw)),
)
json_bodies = st.one_of(
    json_values.map(lambda v: ("application/json", json.dumps(v).encode())),
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=5).map(
        lambda v: ("application/json", json.dumps(v).encode())
    ),
)
raw_bodies = st.tuples(
    st.sampled_from(["", "text/plain", "application/octet-stream", "application/json; charset=x"]),
    st.binary(max_size=300),
)
bodies = st.one_of(json_bodies, json_bodies, urlencoded_bodies, multipart_bodies, raw_bodies)
credentials = st.sampled_from(["all", "all", "none", "wrong_key"])

# the probe's bodies and every flaw, sent to every endpoint before the generated ones
SWEEP = [
    ("multipart/form-data", b"--x\r\n\r\n--x--\r\n"),
    _multipart([(f"f{i}", None, b"x") for i in range(1001)], "none"),
    _multipart([("text", None, b"x" * 2_000_000)], "none"),
    ("application/x-www-form-urlencoded", b"&".join(b"f%d=1" % i for i in range(2000))),
    _multipart([("files", "a.txt", b"hello")], "truncated"),
    _multipart([("files", "a.txt", b"hello")], "no_name"),
    _multipart([("files", "big.bin", b"y" * 20_000)], "none"),
    ("application/json", b"{" * 100_000),
    ("application/json", b'"x' + b"x" * 70_000 + b'"'),
]


# ---- the app ----------------------------------------------------------------------------


@pytest.fixture(params=["login_off", "login_on"])
def app_client(request, model_server: ScriptedModel, tmp_path: Path) -> Iterator[TestClient]:
    model_server.respond_with(lambda body: {"tool_name": "response", "tool_args": {"text": "ok"}})
    login = request.param == "login_on"
    env = {"AUTH_LOGIN": "ann", "AUTH_PASSWORD": "pw"} if login else {}
    auth = AuthConfig.load(tmp_path / "usr", environ=env)
    settings_ = _settings(model_server, tmp_path / "work", mcp_server_token=TOKEN)
    runtime = Runtime(tmp_path / "usr", settings_, auth)
    app = build_app(runtime, discover_handlers(), secret_key="k", limits=LIMITS)
    with TestClient(app, follow_redirects=False, base_url="http://localhost") as client:
        if login:
            client.post("/login", data={"username": "ann", "password": "pw"})
        token = client.get("/api/csrf_token")
        assert token.status_code == 200, token.text
        client.csrf = token.json()["token"]  # type: ignore[attr-defined]
        client.login = login  # type: ignore[attr-defined]
        yield client


def _send(
    client: TestClient, name: str, handler: type[ApiHandler], body: tuple[str, bytes], creds: str
) -> None:
    content_type, raw = body
    headers = {"X-CSRF-Token": client.csrf, "X-API-KEY": TOKEN}  # type: ignore[attr-defined]
    if creds == "wrong_key":
        headers["X-API-KEY"] = "wrong"
    saved = dict(client.cookies)
    if creds == "none":
        headers = {}
        client.cookies.clear()
    if content_type:
        headers["Content-Type"] = content_type
    try:
        if "POST" in handler.methods:
            response = client.post(f"/api/{name}", content=raw, headers=headers)
        else:
            query = {"q": raw[:100].decode("latin-1")}
            response = client.get(f"/api/{name}", params=query, headers=headers)
    finally:
        client.cookies.clear()
        client.cookies.update(saved)
    what = f"/api/{name} [{creds}] {content_type!r} {raw[:200]!r}"
    assert response.status_code < 500, f"{what}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["code"], str) and error["code"], what
        assert isinstance(error["message"], str), what
    protected = handler.requires_auth and not (handler.accepts_api_key or handler.requires_api_key)
    if creds == "none" and protected and client.login:  # type: ignore[attr-defined]
        assert response.status_code in (401, 403), what


def fuzz_endpoint(client: TestClient, name: str, handler: type[ApiHandler]) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(body=bodies, creds=credentials)
    def one(body: tuple[str, bytes], creds: str) -> None:
        _send(client, name, handler, body, creds)

    one()


def test_no_generated_body_breaks_any_endpoint(app_client: TestClient):
    handlers = discover_handlers()
    ordered = sorted(handlers, key=lambda n: (n in LAST, n))
    assert len(ordered) > 25  # the whole surface, as run_ui.py serves it
    seeded = app_client.post(
        "/api/api_message", json={"message": "seed"}, headers={"X-API-KEY": TOKEN}
    )
    assert seeded.status_code == 200, seeded.text
    for name in ordered:
        for body in SWEEP:
            _send(app_client, name, handlers[name], body, "all")
        fuzz_endpoint(app_client, name, handlers[name])
    assert app_client.get("/api/health").status_code == 200
