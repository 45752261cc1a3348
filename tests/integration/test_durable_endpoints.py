"""durable_runs / durable_run / durable_decide / durable_retry_grant over real HTTP."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.integration._helpers import wait_until
from tests.support.model_server import ScriptedFailure

pytestmark = pytest.mark.integration

KEY = {"X-API-KEY": "test-token"}


def post(server, name: str, body: dict, headers: dict | None = None) -> httpx.Response:
    return httpx.post(
        f"{server.url}/api/{name}",
        json=body,
        headers=KEY if headers is None else headers,
        timeout=60,
    )


def code(response: httpx.Response) -> str:
    return response.json()["error"]["code"]


def test_runs_and_calls_are_listed_with_an_api_key_or_a_ui_session(running_ui, model_server):
    model_server.tool("response", {"text": "listed"})
    body = running_ui.api_message("hello", input_id="list-1").json()

    runs = post(running_ui, "durable_runs", {"context_id": body["context_id"]})
    assert runs.status_code == 200, runs.text
    (row,) = runs.json()["runs"]
    assert row["run_id"] == body["run_id"] and row["input_id"] == "list-1"
    assert row["status"] == "completed" and row["phase"] == "ended"
    assert [(c["kind"], c["name"], c["committed"]) for c in row["calls"]] == [
        ("model", "model", True),
        ("tool", "response", True),
    ]
    assert row["calls"][1]["replay_policy"] == "safe_replay"

    detail = post(running_ui, "durable_run", {"run_id": body["run_id"]})
    assert detail.status_code == 200, detail.text
    assert detail.json()["run"]["version"] >= 1
    assert detail.json()["run"]["decisions"] == []

    with running_ui.ui_client() as client:
        by_ui = client.post("/api/durable_runs", json={"status": "completed"})
        assert by_ui.status_code == 200, by_ui.text
        assert [r["run_id"] for r in by_ui.json()["runs"]] == [body["run_id"]]
        assert client.post("/api/durable_runs", json={"status": "held"}).status_code == 400

    assert code(post(running_ui, "durable_runs", {}, headers={})) == "csrf_failed"
    wrong = post(running_ui, "durable_runs", {}, headers={"X-API-KEY": "nope"})
    assert wrong.status_code == 401 and code(wrong) == "unauthorized"


def test_decision_errors_have_stable_codes(running_ui, model_server):
    model_server.tool("response", {"text": "done"})
    body = running_ui.api_message("hello").json()
    run_id = body["run_id"]
    version = post(running_ui, "durable_run", {"run_id": run_id}).json()["run"]["version"]

    unknown = post(running_ui, "durable_run", {"run_id": "nope"})
    assert unknown.status_code == 404 and code(unknown) == "run_not_found"
    cases = [
        ({"run_id": run_id, "decision": "maybe", "expected_version": version}, 400, "bad_request"),
        ({"run_id": run_id, "decision": "stop"}, 400, "bad_request"),
        (
            {"run_id": run_id, "decision": "confirmed_completed", "expected_version": version},
            422,
            "note_required",
        ),
        (
            {"run_id": run_id, "decision": "stop", "expected_version": version},
            409,
            "invalid_transition",
        ),
        ({"run_id": "nope", "decision": "stop", "expected_version": 1}, 404, "run_not_found"),
    ]
    for request, status, expected in cases:
        response = post(running_ui, "durable_decide", request)
        assert (response.status_code, code(response)) == (status, expected), request
        assert "Traceback" not in response.text
    ended = post(running_ui, "durable_retry_grant", {"run_id": run_id, "attempts": 1})
    assert ended.status_code == 409 and code(ended) == "run_not_active"
    assert code(post(running_ui, "durable_retry_grant", {"run_id": run_id})) == "bad_request"


def test_failed_model_call_holds_until_a_retry_grant(running_ui, model_server):
    provider_up = threading.Event()

    def provider(body: dict):
        if not provider_up.is_set():
            return ScriptedFailure(500, "provider down")
        return {"tool_name": "response", "tool_args": {"text": "back again"}}

    model_server.respond_with(provider)
    held = running_ui.api_message("hello", input_id="fail-1")
    assert held.status_code == 200, held.text
    body = held.json()
    assert body["status"] == "needs_attention" and body["response"] is None
    run = post(running_ui, "durable_run", {"run_id": body["run_id"]}).json()["run"]
    assert run["status"] == "needs_attention" and run["reason"] == "model_failed"

    refused = running_ui.api_message("next", context_id=body["context_id"])
    assert refused.status_code == 409 and code(refused) == "run_held"

    provider_up.set()
    grant = post(running_ui, "durable_retry_grant", {"run_id": body["run_id"], "attempts": 2})
    assert grant.status_code == 200, grant.text
    assert grant.json()["grant"]["attempts"] == 2

    def finished():
        row = post(running_ui, "durable_run", {"run_id": body["run_id"]}).json()["run"]
        return row if row["status"] == "completed" else None

    wait_until(finished, what="the granted run to complete")
    again = running_ui.api_message("hello", input_id="fail-1", context_id=body["context_id"])
    assert again.json()["response"] == "back again"
    assert again.json()["status"] == "completed"
