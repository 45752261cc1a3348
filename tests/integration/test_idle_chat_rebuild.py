"""Idle chats after a restart (issues #13, #24): start-up rebuilds only the chats recovery
needs; each idle chat is listed by poll from a summary read off its newest checkpoint (name,
date, log length) and rebuilt only by the first request that names it, never in the
background. Real run_ui.py processes on one usr dir."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.integration._durable_system import Crashable, crashable
from tests.integration._helpers import request_text, wait_until

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture


def _answer(text: str) -> dict[str, Any]:
    return {
        "thoughts": ["..."],
        "headline": "",
        "tool_name": "response",
        "tool_args": {"text": text},
    }


def _new_chat(harness: Crashable, n: int) -> str:
    harness.model.reply(_answer(f"answer number {n}"))
    response = harness.post("api_message", {"message": f"question number {n}"})
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "completed", response.text
    return response.json()["context_id"]


def _log(harness: Crashable, context_id: str) -> httpx.Response:
    body = {"context_id": context_id, "length": 1000}
    return harness.post("api_log_get", body)


def _answers(items: list[dict[str, Any]], n: int) -> int:
    """How many log items show the n-th chat's answer (once, if rebuilt once)."""
    return sum(1 for i in items if f"answer number {n}" in str(i.get("content")))


def _poll(harness: Crashable, context_id: str = "") -> dict[str, Any]:
    assert harness.server is not None
    with harness.server.ui_client() as client:
        response = client.post("/api/poll", json={"context": context_id, "log_from": 0})
    assert response.status_code == 200, response.text
    return response.json()


def _listed(harness: Crashable) -> set[str]:
    return {row["id"] for row in _poll(harness)["contexts"]}


def _rows(harness: Crashable) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in _poll(harness)["contexts"]}


def _not_rebuilt(row: dict[str, Any]) -> bool:
    """A chat listed from its summary: no log of its own in this process yet."""
    return row["log_guid"] == "" and row["no"] is None


def _parallel(calls: list[Callable[[], httpx.Response]]) -> list[httpx.Response]:
    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda call: call(), calls))


def test_idle_chats_are_listed_with_their_names_and_rebuilt_only_when_named(
    crashable: Crashable,
):
    crashable.start()
    chats = [_new_chat(crashable, n) for n in range(6)]
    removed = _new_chat(crashable, 6)
    names = {cid: row["name"] for cid, row in _rows(crashable).items()}
    assert all(names[c] for c in chats), names
    with crashable.server.ui_client() as client:  # type: ignore[union-attr]
        assert client.post("/api/chat_remove", json={"context": removed}).status_code == 200
    crashable.stop()

    crashable.start()
    server = crashable.server
    assert server is not None and "journal open: 0 chats, 0 runs recovered" in server.output()
    rows = _rows(crashable)
    # read after the journal opened, in a thread; the removed chat is one of them (found
    # removed in the journal: never listed)
    wait_until(lambda: "idle chats listed: 7 (" in server.output(), what="the idle chats' line")
    assert set(rows) == set(chats), "every idle chat is listed, the removed one is not"
    assert all(_not_rebuilt(row) for row in rows.values()), rows
    assert {cid: row["name"] for cid, row in rows.items()} == {c: names[c] for c in chats}
    assert all(row["log_length"] >= 2 for row in rows.values()), rows
    # newest first, as before the restart
    assert [row["id"] for row in _poll(crashable)["contexts"]] == list(reversed(chats))
    # a new chat's default name follows the listed ones ("Chat N" is never given twice)
    with crashable.server.ui_client() as client:  # type: ignore[union-attr]
        made = client.post("/api/chat_create", json={}).json()["ctxid"]
    assert _rows(crashable)[made]["name"] not in names.values()
    assert all(_not_rebuilt(_rows(crashable)[c]) for c in chats)

    # each way a request names a chat gets it, rebuilt from the journal
    items = _log(crashable, chats[0]).json()["log"]["items"]
    assert _answers(items, 0) == 1
    polled = _poll(crashable, chats[1])
    assert polled["context"] == chats[1] and not polled["deselect_chat"], polled
    assert _answers(polled["logs"], 1) == 1
    crashable.model.reply(_answer("second answer"))
    follow = crashable.post("api_message", {"context_id": chats[2], "message": "and then?"})
    assert follow.status_code == 200 and follow.json()["context_id"] == chats[2], follow.text
    assert "answer number 2" in request_text(crashable.model.requests[-1]), "history lost"
    # many requests at once for one chat: it is rebuilt once, each gets it
    answers = _parallel([lambda: _log(crashable, chats[3]) for _ in range(6)])
    assert [r.status_code for r in answers] == [200] * 6, [r.text for r in answers]
    assert {_answers(r.json()["log"]["items"], 3) for r in answers} == {1}
    # a chat removed before the restart stays gone
    gone = _log(crashable, removed)
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "context_not_found", (
        gone.text
    )
    # only the chats asked for were rebuilt; each is listed once, with the same name
    rows = _rows(crashable)
    assert set(rows) == {*chats, made}
    assert {c for c, row in rows.items() if not _not_rebuilt(row)} == {*chats[:4], made}
    assert all(rows[c]["name"] == names[c] for c in chats), rows
    # rebuilt late or out of order, the list keeps the chats' own order (newest first)
    for context_id in (chats[5], chats[4]):
        assert _log(crashable, context_id).status_code == 200
    order = [row["id"] for row in _poll(crashable)["contexts"]]
    assert order == [made, *reversed(chats)], order
    assert not any(_not_rebuilt(row) for row in _rows(crashable).values())
    crashable.stop()


def test_a_scheduled_firing_into_an_idle_chat_continues_it(crashable: Crashable):
    """The scheduler names its task's chat by id: an idle chat it fires into is rebuilt
    first, not replaced by an empty chat of the same id."""
    crashable.start()
    fields = {"name": "nudge", "prompt": "scheduled nudge", "schedule": "0 12 1 1 *"}
    created = crashable.post("scheduler_task_create", {**fields, "timezone": "UTC"})
    assert created.status_code == 200, created.text
    task = created.json()["task"]
    crashable.model.reply(_answer("first nudge answered"))
    assert crashable.post("scheduler_task_run", {"task_id": task["uuid"]}).status_code == 200
    wait_until(lambda: _answers_text(crashable, task["context_id"]), what="the first firing")
    crashable.stop()

    crashable.start()
    crashable.model.reply(_answer("second nudge answered"))
    assert crashable.post("scheduler_task_run", {"task_id": task["uuid"]}).status_code == 200
    wait_until(lambda: crashable.model.calls >= 2, what="the second firing's model call")
    assert "first nudge answered" in request_text(crashable.model.requests[-1]), "history lost"
    items = wait_until(
        lambda: _with_text(crashable, task["context_id"], "second nudge answered"),
        what="the second firing's answer",
    )
    assert sum("first nudge answered" in str(i.get("content")) for i in items) == 1
    crashable.kill()


def _with_text(harness: Crashable, context_id: str, text: str) -> list[dict[str, Any]] | None:
    response = _log(harness, context_id)
    if response.status_code != 200:
        return None
    items = response.json()["log"]["items"]
    return items if any(text in str(i.get("content")) for i in items) else None


def _answers_text(harness: Crashable, context_id: str) -> bool:
    return _with_text(harness, context_id, "first nudge answered") is not None
