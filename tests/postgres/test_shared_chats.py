"""Any worker serves any chat (docs/shared-workers.md): real run_ui.py workers on one
PostgreSQL journal. A plan written through one worker is what the run on another reads;
a message for an idle chat starts its run on the worker it reached; a worker sweeping
expired runs resumes at most two at once."""

from __future__ import annotations

import json
import signal
import threading
from typing import Any

import pytest

from tests.integration._helpers import request_text, wait_until
from tests.postgres._workers import post, run_of, wait_status, workers
from tests.support.model_server import ScriptedFailure, model_server

pytestmark = [pytest.mark.postgres, pytest.mark.integration, pytest.mark.slow]

__all__ = ["model_server", "workers"]  # the fixtures


def reply(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool_name": tool, "tool_args": args, "thoughts": []}


def test_a_plan_written_through_another_worker_is_what_the_running_agent_reads(
    workers, model_server
):
    """The run works on A; a person replaces the chat's plan through B; A's agent reads it
    with the durable_plan tool, replaces it, and B shows the agent's revision."""
    plan_set = threading.Event()

    def respond(body: dict) -> dict:
        text = request_text(body)
        if "plan from worker b" in text and "replaced" not in text:
            step = {"id": "s1", "text": "written by the agent on a", "done": True}
            plan = {"title": "plan from the agent", "items": [step]}
            return reply("durable_plan", action="replace", expected_revision=1, plan=plan)
        if "replaced" in text:
            return reply("response", text="plan updated")
        plan_set.wait(60)
        return reply("durable_plan", action="read")

    model_server.respond_with(respond)
    a = workers.start("worker-a")
    b = workers.start("worker-b")
    answer: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: answer.update(a.api_message("plan it", input_id="p1").json()),
        daemon=True,
    )
    thread.start()
    model_server.wait_for_calls(1, timeout=60)
    [(run_id, context_id, _)] = workers.runs()
    step = {"id": "s1", "text": "set by a person", "done": False}
    plan = {"title": "plan from worker b", "items": [step]}
    with b.ui_client() as client:
        body = {"context_id": context_id, "expected_revision": 0, "plan": plan}
        written = client.post("/api/durable_plan_set", json=body)
        assert written.status_code == 200, written.text
        assert written.json()["revision"] == 1
        plan_set.set()
        wait_status(a, run_id, "completed")
        got = client.post("/api/durable_plan_get", json={"context_id": context_id})
    assert got.status_code == 200, got.text
    assert got.json()["revision"] == 2
    assert got.json()["plan"]["title"] == "plan from the agent"
    thread.join(60)
    assert answer["response"] == "plan updated"
    assert workers.claimers(run_id) == ["worker-a"]  # the run never left A
    assert any("plan from worker b" in request_text(r) for r in model_server.requests)


def test_a_message_for_an_idle_chat_starts_its_run_on_the_worker_it_reached(workers, model_server):
    """A ran the chat's first run; the next message reaches B, which loads the chat from
    the journal (A's history included), admits the new run, claims and runs it. The first
    message sent again through B gets A's recorded answer and starts nothing."""
    model_server.tool("response", {"text": "answer from a"})
    model_server.tool("response", {"text": "answer from b"})
    a = workers.start("worker-a")
    b = workers.start("worker-b")
    first = a.api_message("first question", input_id="q1")
    assert first.json()["response"] == "answer from a", first.text
    context_id, first_run = first.json()["context_id"], first.json()["run_id"]

    second = b.api_message("second question", input_id="q2", context_id=context_id)
    assert second.status_code == 200, second.text
    assert second.json()["response"] == "answer from b"
    assert second.json()["context_id"] == context_id
    second_run = second.json()["run_id"]
    assert second_run != first_run
    assert workers.claimers(second_run) == ["worker-b"]
    # B's model call carried the chat as A left it
    last = request_text(model_server.requests[-1])
    assert "first question" in last and "answer from a" in last and "second question" in last

    again = b.api_message("first question", input_id="q1", context_id=context_id)
    assert again.json()["run_id"] == first_run
    assert again.json()["response"] == "answer from a"
    assert model_server.calls == 2  # nothing started for the repeat
    released = workers.sql("SELECT worker_id FROM claims ORDER BY run_id")
    assert released == [(None,), (None,)]


def test_a_sweeping_worker_resumes_at_most_two_runs_at_once(workers, model_server):
    """Three runs held on A (the model failed) keep A's claims; A dies. Retry grants made
    through B make them active, but A's long lease still holds them; when it runs out B
    sweeps them, and while two resumed runs wait in their model calls the third stays
    unclaimed: B resumes at most two at once, and the third once one of them ended."""
    lock = threading.Lock()
    state = {"failing": True, "in_flight": 0, "most": 0, "started": 0}
    release = threading.Event()

    def respond(body: dict) -> dict | ScriptedFailure:
        if state["failing"]:
            return ScriptedFailure(500, "provider exploded")
        with lock:
            state["in_flight"] += 1
            state["started"] += 1
            state["most"] = max(state["most"], state["in_flight"])
        try:
            release.wait(120)
        finally:
            with lock:
                state["in_flight"] -= 1
        return reply("response", text="resumed")

    model_server.respond_with(respond)
    a = workers.start("worker-a", A0_DURABILITY_LEASE_SECONDS="30")
    b = workers.start("worker-b")
    run_ids = []
    for n in range(3):
        held = a.api_message(f"task {n}", input_id=f"t{n}")
        assert held.json()["status"] == "needs_attention", held.text
        run_ids.append(held.json()["run_id"])
    state["failing"] = False
    # A is frozen, not killed: its liveness lock stays held (#24), so its claims end with
    # their lease and B's sweep takes the runs over, two at a time
    a.process.send_signal(signal.SIGSTOP)

    for run_id in run_ids:  # A's claims are still live: B records the grant, A would resume
        granted = post(b, "durable_retry_grant", {"run_id": run_id, "attempts": 1})
        assert granted.status_code == 200, granted.text
    assert [run_of(b, r)["status"] for r in run_ids] == ["active"] * 3

    wait_until(lambda: state["started"] >= 2, timeout=90, what="B to resume two runs")

    def b_claims() -> list[tuple[str, float]]:
        rows = workers.sql("SELECT run_id, expires_at FROM claims WHERE worker_id = 'worker-b'")
        return [(r, e) for r, e in rows]

    # let B renew its claims three times (its loop sweeps as often): the third stays A's
    renewed = [max(e for _r, e in b_claims())]
    for _ in range(3):
        wait_until(
            lambda: max(e for _r, e in b_claims()) > renewed[-1], timeout=30, what="a renewal"
        )
        renewed.append(max(e for _r, e in b_claims()))
    assert len(b_claims()) == 2
    assert state["started"] == 2 and state["in_flight"] == 2
    waiting = [r for r in run_ids if r not in {r for r, _e in b_claims()}]
    assert len(waiting) == 1
    assert workers.claimers(waiting[0]) == ["worker-a"]

    release.set()
    for run_id in run_ids:
        wait_status(b, run_id, "completed", timeout=90)
        assert workers.claimers(run_id) == ["worker-a", "worker-b"]
    assert state["most"] == 2
    assert state["started"] == 3
    log = b.output()
    assert log.count("taken over by worker-b: resuming") == 3, json.dumps(log[-2000:])
    a.kill()


def _answers(log: dict[str, Any], text: str) -> int:
    """How many response items of a chat's log show ``text`` (one if rebuilt once)."""
    return sum(1 for i in log["log"]["items"] if i["type"] == "response" and i["content"] == text)


def test_a_worker_starting_on_idle_chats_serves_them_after_it_answers(workers, model_server):
    """B starts on a journal where A answered three chats: none is rebuilt before B serves,
    each is listed by B's poll from its summary with its name (issue #24), the first request
    for one rebuilds it; each chat shows its answer once."""
    for n in range(4):
        model_server.tool("response", {"text": f"answer number {n}"})
    a = workers.start("worker-a")
    chats = []
    for n in range(3):
        answered = a.api_message(f"question number {n}", input_id=f"q{n}")
        assert answered.json()["response"] == f"answer number {n}", answered.text
        chats.append(answered.json()["context_id"])
    with a.ui_client() as client:
        polled = client.post("/api/poll", json={"context": "", "log_from": 0}).json()
    names = {row["id"]: row["name"] for row in polled["contexts"]}
    a.stop()

    b = workers.start("worker-b")
    assert "worker-b): 0 chats" in b.output(), b.output()[-2000:]
    # a chat made elsewhere after B started: B's loop loads it, so once B shows it loaded
    # that loop has also passed over the idle chats (which it must leave alone)
    c = workers.start("worker-c")
    made = c.api_message("question number 3", input_id="q3")
    assert made.json()["response"] == "answer number 3", made.text
    new_chat = made.json()["context_id"]

    def loaded_on_b() -> bool:
        with b.ui_client() as client:
            shown = client.post("/api/poll", json={"context": "", "log_from": 0}).json()
        return any(r["id"] == new_chat and r["log_guid"] for r in shown["contexts"])

    wait_until(loaded_on_b, timeout=60, what="B's loop to load the chat made on C")
    with b.ui_client() as client:
        polled = client.post("/api/poll", json={"context": "", "log_from": 0}).json()
    rows = {row["id"]: row for row in polled["contexts"]}
    assert {c: rows[c]["name"] for c in chats} == {c: names[c] for c in chats}, rows
    assert all(rows[c]["log_guid"] == "" for c in chats), "rebuilt before a request named it"
    wait_until(lambda: "idle chats listed: 3 (" in b.output(), what="the idle chats' line")
    first = post(b, "api_log_get", {"context_id": chats[1], "length": 1000})
    assert first.status_code == 200, first.text
    assert _answers(first.json(), "answer number 1") == 1, first.text

    def listed() -> set[str] | None:
        with b.ui_client() as client:
            polled = client.post("/api/poll", json={"context": "", "log_from": 0})
        shown = {row["id"] for row in polled.json()["contexts"]}
        return shown if shown >= set(chats) else None

    wait_until(listed, timeout=60, what="B to list the idle chats")
    for n, context_id in enumerate(chats):
        log = post(b, "api_log_get", {"context_id": context_id, "length": 1000})
        assert _answers(log.json(), f"answer number {n}") == 1, log.text


def test_chats_made_on_a_worker_that_died_are_served_by_another(workers, model_server):
    """chat_create and chat_load through A journal the chats (issue #17, point 7); A is
    SIGKILLed before any message; B serves both, with their name, log and history, and the
    loaded chat goes on from its history on B."""
    history = {"current": {"messages": [{"ai": False, "content": "loaded question"}]}}
    chat = {
        "name": "imported",
        "agents": [{"number": 0, "history": json.dumps(history)}],
        "log": {"items": [{"type": "user", "content": "loaded question"}]},
    }
    a = workers.start("worker-a")
    b = workers.start("worker-b")
    with a.ui_client() as client:
        created = client.post("/api/chat_create", json={"name": "empty on a"}).json()["ctxid"]
        answer = client.post("/api/chat_load", json={"chats": [chat]})
        assert answer.status_code == 200, answer.text
        (loaded,) = answer.json()["ctxids"]
    a.kill()
    with b.ui_client() as client:
        polled = client.post("/api/poll", json={"context": created, "log_from": 0}).json()
        assert polled["context"] == created and polled["logs"] == []  # loaded from the journal
        listed = client.post("/api/poll", json={}).json()["contexts"]  # listed from now on
        assert {c["id"]: c["name"] for c in listed}[created] == "empty on a"
        polled = client.post("/api/poll", json={"context": loaded, "log_from": 0}).json()
        assert [(i["type"], i["content"]) for i in polled["logs"]] == [("user", "loaded question")]
        history_text = client.post("/api/history_get", json={"context": loaded}).json()["history"]
        assert "loaded question" in history_text
    model_server.tool("response", {"text": "answer from b"})
    went_on = b.api_message("next question", context_id=loaded)
    assert went_on.json()["response"] == "answer from b", went_on.text
    assert "loaded question" in request_text(model_server.requests[-1])
