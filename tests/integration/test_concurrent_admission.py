"""Copies of one input sent at the same moment: one run, one chat, one answer for all.

A client that times out and retries, or a load balancer that sends twice, must never get
`input_conflict` for its own request, and the copies that lose the race must leave no
chat, run or input behind (issue #7, point 1). Each copy is a real HTTP request on its own
connection, released together by a barrier; the scripted model holds the run's only model
call until every copy was written to the server, so the copies overlap the run.
"""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any

import httpx
import pytest

from tests.integration._helpers import chat_log, wait_until
from tests.support.model_server import ScriptedModel
from tests.support.ui_server import UiServer

pytestmark = pytest.mark.integration

TOKEN = "test-token"


class HeldModel:
    """A model whose replies wait for ``release``; every reply answers with ``text``."""

    def __init__(self, model: ScriptedModel, text: str) -> None:
        self.release = threading.Event()
        self.text = text
        model.respond_with(self._reply)

    def _reply(self, body: dict) -> dict:
        assert self.release.wait(60), "the test never released the model"
        return {"tool_name": "response", "tool_args": {"text": self.text}}


def send_together(
    server: UiServer,
    path: str,
    bodies: list[dict],
    headers: dict[str, str],
    before_answers: Any = None,
) -> list[tuple[int, dict]]:
    """POST every body on its own connection at the same moment; ``before_answers()`` runs
    once every request was written and before any answer is read."""
    barrier = threading.Barrier(len(bodies))
    written = threading.Semaphore(0)
    results: list[Any] = [None] * len(bodies)

    def one(i: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        try:
            payload = json.dumps(bodies[i]).encode()
            head = {"Content-Type": "application/json", **headers}
            barrier.wait(30)
            conn.request("POST", path, body=payload, headers=head)
            written.release()
            response = conn.getresponse()
            results[i] = (response.status, json.loads(response.read() or b"{}"))
        except Exception as exc:  # reported by the assertion below
            results[i] = exc
        finally:
            conn.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for _ in bodies:
        assert written.acquire(timeout=60), "a request was never written"
    if before_answers is not None:
        before_answers()
    for thread in threads:
        thread.join(120)
    assert all(isinstance(r, tuple) for r in results), results
    return results


def chats(server: UiServer) -> list[str]:
    with server.ui_client() as client:
        response = client.post("/api/poll", json={})
        assert response.status_code == 200, response.text
        return [c["id"] for c in response.json()["contexts"]]


def runs_of(server: UiServer, context_id: str | None = None) -> list[dict]:
    body = {"context_id": context_id} if context_id else {}
    response = httpx.post(
        f"{server.url}/api/durable_runs", json=body, headers={"X-API-KEY": TOKEN}, timeout=10
    )
    assert response.status_code == 200, response.text
    return response.json()["runs"]


def release_after_the_run_asked(model: ScriptedModel, held: HeldModel, server: UiServer):
    def release() -> None:
        wait_until(lambda: model.calls >= 1, what="the run's model call")
        # every copy is on the wire; one more round trip lets the server read them first
        assert httpx.get(f"{server.url}/api/health", timeout=10).status_code == 200
        held.release.set()

    return release


@pytest.mark.parametrize("copies", [2, 5])
def test_copies_without_a_chat_id_share_one_new_chat(running_ui, model_server, copies):
    held = HeldModel(model_server, "one answer for all")
    body = {"message": "do the thing once", "input_id": f"retry-{copies}"}

    results = send_together(
        running_ui,
        "/api/api_message",
        [body] * copies,
        {"X-API-KEY": TOKEN},
        release_after_the_run_asked(model_server, held, running_ui),
    )

    assert [status for status, _ in results] == [200] * copies, results
    answers = [r for _, r in results]
    assert all(a == answers[0] for a in answers), answers
    first = answers[0]
    assert first["status"] == "completed" and first["response"] == "one answer for all"
    assert first["input_id"] == body["input_id"]
    assert model_server.calls == 1  # one run asked the model once
    assert chats(running_ui) == [first["context_id"]]  # no empty chat left behind
    assert [r["run_id"] for r in runs_of(running_ui)] == [first["run_id"]]
    users = [i for i in chat_log(running_ui, first["context_id"]) if i["type"] == "user"]
    assert len(users) == 1


def test_copies_naming_their_chat_join_one_run(running_ui, model_server):
    model_server.tool("response", {"text": "hello there"})
    opened = running_ui.api_message("hello", input_id="open-chat").json()
    chat = opened["context_id"]
    held = HeldModel(model_server, "second answer")
    body = {"message": "and now?", "input_id": "second", "context_id": chat}

    results = send_together(
        running_ui,
        "/api/api_message",
        [body] * 4,
        {"X-API-KEY": TOKEN},
        release_after_the_run_asked(model_server, held, running_ui),
    )

    assert [status for status, _ in results] == [200] * 4, results
    answers = [r for _, r in results]
    assert all(a == answers[0] for a in answers), answers
    assert answers[0]["context_id"] == chat and answers[0]["response"] == "second answer"
    assert model_server.calls == 2
    assert chats(running_ui) == [chat]
    assert len(runs_of(running_ui, chat)) == 2
    users = [i for i in chat_log(running_ui, chat) if i["type"] == "user"]
    assert len(users) == 2


@pytest.mark.parametrize("endpoint", ["message", "message_async"])
def test_ui_copies_of_one_message_id_share_one_chat(running_ui, model_server, endpoint):
    held = HeldModel(model_server, "from the ui")
    with running_ui.ui_client() as client:
        headers = {
            "X-CSRF-Token": client.headers["X-CSRF-Token"],
            "Cookie": "; ".join(f"{k}={v}" for k, v in client.cookies.items()),
        }
    body = {"text": "only once please", "message_id": f"ui-{endpoint}"}
    release = release_after_the_run_asked(model_server, held, running_ui)
    if endpoint == "message_async":
        release = None  # the answers come back at once; the run finishes afterwards

    results = send_together(running_ui, f"/api/{endpoint}", [body] * 3, headers, release)
    held.release.set()

    assert [status for status, _ in results] == [200] * 3, results
    answers = [r for _, r in results]
    assert {(a["context"], a["run_id"], a["message_id"]) for a in answers} == {
        (answers[0]["context"], answers[0]["run_id"], body["message_id"])
    }
    if endpoint == "message":
        assert all(a["message"] == "from the ui" for a in answers), answers
    else:
        assert sorted(a["kind"] for a in answers) == ["duplicate", "duplicate", "started"]
    chat = answers[0]["context"]
    wait_until(lambda: runs_of(running_ui, chat)[0]["status"] == "completed", what="run end")
    assert chats(running_ui) == [chat]
    assert len(runs_of(running_ui)) == 1
    assert model_server.calls == 1


def test_a_refused_first_message_leaves_no_chat(running_ui, model_server):
    too_long = running_ui.api_message("hi", input_id="x" * 300)
    assert too_long.status_code == 400, too_long.text
    assert too_long.json()["error"]["code"] == "invalid_argument"
    with running_ui.ui_client() as client:
        bad_id = client.post("/api/message_async", json={"text": "hi", "message_id": "a\nb"})
    assert bad_id.status_code == 400, bad_id.text
    assert bad_id.json()["error"]["code"] == "invalid_argument"
    assert chats(running_ui) == []
    model_server.tool("response", {"text": "ok"})
    first = running_ui.api_message("hi", input_id="taken").json()
    conflict = running_ui.api_message("other content", input_id="taken")
    assert conflict.status_code == 409, conflict.text
    assert conflict.json()["error"]["code"] == "input_conflict"
    assert chats(running_ui) == [first["context_id"]]
    assert len(runs_of(running_ui)) == 1
