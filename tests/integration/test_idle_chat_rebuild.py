"""Idle chats after a restart (issue #13): start-up rebuilds only the chats recovery needs;
an idle chat is rebuilt on the first request that names it, or by the background rebuild
once the server answers. Real run_ui.py processes on one usr dir; the background rebuild is
held at its failpoint (``A0_CRASH_MODE=freeze``) so every first access below happens before
it, then a plain restart shows every chat in poll once it is done."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from python.durable.chats import REBUILD_FAILPOINT
from tests.integration._durable_system import Crashable, crashable
from tests.integration._helpers import request_text, wait_until

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

HELD_REBUILD = {"A0_CRASH_AT": REBUILD_FAILPOINT, "A0_CRASH_MODE": "freeze"}


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


def _parallel(calls: list[Callable[[], httpx.Response]]) -> list[httpx.Response]:
    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda call: call(), calls))


def test_idle_chats_are_served_on_first_access_and_all_listed_after_the_background_rebuild(
    crashable: Crashable,
):
    crashable.start()
    chats = [_new_chat(crashable, n) for n in range(6)]
    removed = _new_chat(crashable, 6)
    with crashable.server.ui_client() as client:  # type: ignore[union-attr]
        assert client.post("/api/chat_remove", json={"context": removed}).status_code == 200
    crashable.stop()

    # 1. the background rebuild held before its first chat: nothing idle is rebuilt yet
    crashable.start(**HELD_REBUILD)
    opened = crashable.server.output()  # type: ignore[union-attr]
    # the removed chat is one of them until it is read (its removal is found then)
    assert "journal open: 0 chats, 7 idle ones later" in opened
    assert _listed(crashable) == set(), "an idle chat was rebuilt before serving"

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
    assert _listed(crashable) == set(chats[:4]), "only the chats asked for are loaded yet"
    # rebuilt late or out of order, the list keeps the chats' own order (newest first)
    for context_id in (chats[5], chats[4]):
        assert _log(crashable, context_id).status_code == 200
    order = [row["id"] for row in _poll(crashable)["contexts"]]
    assert order == list(reversed(chats)), order
    crashable.kill()  # the frozen rebuild thread would hold up a clean stop

    # 2. a plain restart: the background rebuild brings every chat into poll, each once
    crashable.start()
    wait_until(lambda: _listed(crashable) == set(chats), timeout=60, what="every chat in poll")
    for n, context_id in enumerate(chats):
        assert _answers(_poll(crashable, context_id)["logs"], n) == 1, n
    assert removed not in _listed(crashable)
    for context_id in chats:  # first accesses after the rebuild: the same chats
        assert _log(crashable, context_id).status_code == 200
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

    crashable.start(**HELD_REBUILD)
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
