"""Generated JSON bodies against every /api/ endpoint of a real run_ui.py.

Wrong types, missing and extra fields, huge strings, deep nesting, unicode (lone
surrogates included), numbers out of range, NaN and Infinity, non-object bodies: no answer
is a 5xx, every error is `{"error": {"code", "message"}}`, the server stays up and stops
cleanly, and `python -m durability verify` finds the journal clean afterwards (issue #7,
point 8). Endpoints are discovered the way run_ui.py finds them; each gets a fixed number
of examples so the test stays well under a minute.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from python.helpers.settings import DEFAULTS
from python.server.api import MAX_JSON_BYTES, discover_handlers
from tests.support.model_server import ScriptedModel
from tests.support.ui_server import REPO, SLOW_START, VENV_PYTHON, UiServer, ui_env_for

pytestmark = pytest.mark.integration

TOKEN = "test-token"
EXAMPLES = int(os.environ.get("A0_FUZZ_EXAMPLES", "25"))  # more: a longer hunt
LAST = ("settings_set",)  # may change the API token or models: fuzzed after the others

FIELDS = [
    "attachments",
    "attempts",
    "base64",
    "call_id",
    "chats",
    "context",
    "context_id",
    "ctxid",
    "decision",
    "expected_revision",
    "expected_version",
    "filename",
    "input_id",
    "length",
    "lifetime_hours",
    "limit",
    "log_from",
    "message",
    "message_id",
    "name",
    "new_context",
    "note",
    "paused",
    "plan",
    "run_id",
    "settings",
    "status",
    "text",
    "api_key",
    "conflict_id",
    "resolution",
    "value",
    "chat_model_name",
    "retention_runs",
    "path",
    "kind",
    "include_resolved",
    "files",
]


@dataclass
class Deep:
    """A value nested ``depth`` levels deep, written as raw JSON (no recursion needed)."""

    depth: int
    brackets: str

    def encode(self) -> str:
        if self.brackets == "[":
            return "[" * self.depth + "1" + "]" * self.depth
        return '{"a":' * self.depth + "1" + "}" * self.depth


def encode(value: Any) -> str:
    """JSON text with NaN/Infinity allowed and lone surrogates escaped, Deep values inline."""
    if isinstance(value, Deep):
        return value.encode()
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(encode(v) for v in value) + "]"
    return json.dumps(value, allow_nan=True)


ODD = [2**64, 10**400, -(2**64), 1e308, 0.5, "x" * 70_000, "", [1], {"a": 1}, True, Deep(80, "[")]


SETTING_NAMES = sorted(set(DEFAULTS) - {"mcp_servers"})


def valid_fields(ids: list[str]) -> dict[str, Any]:
    """A value each field accepts (with the seed chat and run), to vary one field at a time."""
    context, run = ids[0], ids[1]
    return {
        "context": context,
        "context_id": context,
        "ctxid": context,
        "run_id": run,
        "text": "hello",
        "message": "hello",
        "note": "checked it",
        "decision": "stop",
        "expected_version": 1,
        "expected_revision": 0,
        "attempts": 1,
        "limit": 5,
        "length": 5,
        "log_from": 0,
        "lifetime_hours": 1,
        "paused": False,
        "status": "completed",
        "plan": {"title": "t", "items": [{"id": "1", "text": "x", "done": False}]},
        "chats": [{"id": "imported", "log": {"items": []}}],
        "name": "n",
        "path": "",
        "kind": "plan",
        "conflict_id": int(ids[3]),
        "resolution": "keep_current",
        "include_resolved": True,
    }


def one_odd_field(relevant: list[str], ids: list[str]) -> list[dict[str, Any]]:
    """Bodies valid but for one field, which holds each ODD value in turn."""
    template = {k: v for k, v in valid_fields(ids).items() if k in relevant}
    return [{**template, field: odd} for field in relevant for odd in ODD]


def relevant_fields(handler: type) -> list[str]:
    """The FIELDS an endpoint reads: named in its module or in the python/api helper
    functions it imports."""
    module = sys.modules[handler.__module__]
    source = inspect.getsource(module)
    for helper, names in re.findall(
        r"from python\.api\.(_\w+) import \(?([\w,\s]+?)\)?\n(?!\s)", source
    ):
        helper_module = importlib.import_module(f"python.api.{helper}")
        for name in re.split(r"[\s,]+", names):
            obj = getattr(helper_module, name, None) if name else None
            if inspect.isfunction(obj):
                source += inspect.getsource(obj)
    return [f for f in FIELDS if f'"{f}"' in source]


def bodies(ids: list[str], relevant: list[str]) -> st.SearchStrategy[Any]:
    """Mostly objects whose fields (the endpoint's own ones nearly always) hold plausible
    values, so the body gets past the first check, or odd ones; plus stray keys, non-object
    bodies and deep nesting."""
    huge = st.sampled_from([1_000, 70_000, 400_000]).map(lambda n: "x" * n)
    surrogates = st.sampled_from(["\ud800", "a\udfffb", "\udbff\udc00\ud800"])
    big = st.sampled_from([2**31, 2**63, -(2**63) - 1, 2**64, 10**400, -(10**400)])
    numbers = st.one_of(st.integers(), big, st.floats(allow_nan=True, allow_infinity=True))
    text = st.one_of(st.text(max_size=30), huge, surrogates)
    leaf = st.one_of(st.none(), st.booleans(), numbers, text, st.sampled_from(ids))
    value = st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )
    deep = st.builds(Deep, st.integers(20, 5_000), st.sampled_from(["[", "{"]))
    small_int = st.one_of(st.integers(-3, 10), big)
    item = st.fixed_dictionaries({"id": text, "text": text, "done": st.one_of(st.booleans(), leaf)})
    plausible: dict[str, st.SearchStrategy[Any]] = {
        **dict.fromkeys(["context", "context_id", "ctxid"], st.sampled_from(ids[:1] * 4 + ids)),
        "run_id": st.sampled_from(ids[1:2] * 4 + ids),
        **dict.fromkeys(["new_context", "input_id", "message_id"], st.sampled_from(ids)),
        **dict.fromkeys(["text", "message", "note", "name", "filename", "resolution"], text),
        **dict.fromkeys(
            ["expected_version", "expected_revision", "attempts", "limit", "length", "log_from"],
            small_int,
        ),
        "lifetime_hours": numbers,
        "decision": st.sampled_from(["resume", "stop", "new_attempt", "confirmed_completed"]),
        "resolution": st.sampled_from(["keep_current", "take_proposed", "merge", "other"]),
        "conflict_id": small_int,
        "path": st.one_of(
            st.sampled_from(["", ".", "..", "../..", "/etc/passwd", "a.txt", "sub/dir", "a\x00b"]),
            text,
        ),
        "status": st.sampled_from(["active", "completed", "needs_attention", "bogus"]),
        "paused": st.one_of(st.booleans(), leaf),
        "plan": st.fixed_dictionaries({"title": text, "items": st.lists(item, max_size=3)}),
        # never mcp_servers: a generated server entry would start a generated command
        "settings": st.dictionaries(st.sampled_from(SETTING_NAMES), value, max_size=3),
        "attachments": st.lists(
            st.fixed_dictionaries({"filename": text, "base64": st.sampled_from(["aGk=", "!!"])}),
            max_size=2,
        ),
    }

    def field(name: str) -> st.SearchStrategy[Any]:
        good = plausible.get(name, value)
        return st.one_of(good, good, good, value, deep)

    template = {k: v for k, v in valid_fields(ids).items() if k in relevant}
    one_odd = (
        st.sampled_from(relevant).flatmap(
            lambda f: st.one_of(value, deep).map(lambda v: {**template, f: v})
        )
        if relevant
        else st.just(template)
    )
    own = {f: field(f) for f in relevant}
    optional = {f: field(f) for f in FIELDS if f not in own}
    structured = st.one_of(
        st.fixed_dictionaries(own), st.fixed_dictionaries(own, optional=optional)
    )
    keys = st.one_of(st.sampled_from(FIELDS), st.text(max_size=12))
    loose = st.dictionaries(keys, st.one_of(value, value, deep), max_size=7)
    return st.one_of(one_odd, one_odd, structured, structured, loose, value, deep)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory):
    with ScriptedModel() as model:
        model.respond_with(lambda body: {"tool_name": "response", "tool_args": {"text": "ok"}})
        server = UiServer(tmp_path_factory.mktemp("fuzz") / "usr", env=ui_env_for(model))
        server.start(timeout=SLOW_START)
        try:
            yield server
        finally:
            server.kill()


def client_for(server: UiServer) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=60)
    token = client.get("/api/csrf_token").json()["token"]
    client.headers.update({"X-CSRF-Token": token, "X-API-KEY": TOKEN})
    return client


def check(response: httpx.Response, what: str) -> None:
    assert response.status_code < 500, f"{what}: {response.status_code} {response.text[:500]}"
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["code"], str) and error["code"], what
        assert isinstance(error["message"], str), what


def fuzz_endpoint(client: httpx.Client, name: str, handler: type, ids: list[str]) -> None:
    methods = handler.methods
    relevant = relevant_fields(handler)

    def send(body: Any) -> None:
        if "POST" in methods:
            raw = encode(body).encode("utf-8")
            headers = {"Content-Type": "application/json"}
            response = client.post(f"/api/{name}", content=raw, headers=headers)
        else:
            flat = body if isinstance(body, dict) else {"value": body}
            params = {str(k): encode(v)[:2000] for k, v in flat.items() if not isinstance(v, Deep)}
            response = client.get(f"/api/{name}", params=params)
        check(response, f"/api/{name} {encode(body)[:300]!r}")

    for body in one_odd_field(relevant, ids):  # a sweep: every field, every odd value
        send(body)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(body=bodies(ids, relevant))
    def one(body: Any) -> None:
        send(body)

    one()


def seed_ids(server: UiServer, client: httpx.Client) -> list[str]:
    """A live chat, its run, its input id and a plan conflict of it, so generated bodies
    also reach real records."""
    body = server.api_message("seed", input_id=os.urandom(6).hex()).json()
    chat = body["context_id"]
    plan = {"context_id": chat, "expected_revision": 0, "plan": {"title": "t", "items": []}}
    client.post("/api/durable_plan_set", json=plan)
    client.post("/api/durable_plan_set", json={**plan, "plan": {"title": "u", "items": []}})
    conflicts = client.post("/api/durable_conflicts", json={"context_id": chat}).json()
    conflict = str(conflicts["conflicts"][0]["id"])
    return [chat, body["run_id"], body["input_id"], conflict, "", "nope", "0"]


def test_no_generated_body_breaks_any_endpoint(fuzzed: UiServer):
    handlers = discover_handlers()
    names = sorted(handlers, key=lambda n: (n in LAST, n))
    assert len(names) > 25  # the whole surface, as run_ui.py serves it
    client = client_for(fuzzed)
    try:
        for name in names:
            fuzz_endpoint(client, name, handlers[name], seed_ids(fuzzed, client))
        oversized = client.post(
            "/api/message",
            content=b'{"text": "' + b"x" * (MAX_JSON_BYTES + 1) + b'"}',
            headers={"Content-Type": "application/json"},
        )
        assert oversized.status_code == 413
        assert oversized.json()["error"]["code"] == "payload_too_large"
        for raw in (b"\xff\xfe not utf-8", b'{"text": "unterminated', b"[1, 2]"):
            bad = client.post("/api/message", content=raw)
            check(bad, repr(raw))
            assert bad.status_code == 400

    finally:
        client.close()

    assert fuzzed.process is not None and fuzzed.process.poll() is None, "the server died"
    assert httpx.get(f"{fuzzed.url}/api/health", timeout=10).status_code == 200
    assert fuzzed.stop() == 0, fuzzed.output()[-4000:]
    python = VENV_PYTHON if VENV_PYTHON.exists() else sys.executable
    db = fuzzed.usr_dir / "durability" / "journal.sqlite"
    verify = subprocess.run(
        [str(python), "-m", "durability", "verify", "--db", str(db)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "Traceback" not in fuzzed.output()
