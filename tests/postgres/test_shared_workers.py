"""Shared workers as real processes: two run_ui.py workers on 127.0.0.1 (own ports, own usr
folders) against one PostgreSQL journal and the scripted model (docs/shared-workers.md).
The side-effect log is a file outside both workers."""

from __future__ import annotations

import base64
import signal
import threading
from collections import Counter
from typing import Any

import pytest

from durability import Journal
from durability.cluster import Claim
from tests.integration._helpers import chat_log, log_text, request_text, wait_until
from tests.postgres._workers import (
    HOLD_HEARTBEAT,
    in_background,
    post,
    run_of,
    wait_status,
    workers,
)
from tests.support.model_server import ScriptedFailure, model_server
from tests.support.pg_proxy import pg_proxy
from tests.support.ui_server import SLOW_START, UiServer

pytestmark = [pytest.mark.postgres, pytest.mark.integration, pytest.mark.slow]

__all__ = ["model_server", "workers"]  # the fixtures


def test_a_run_of_a_killed_worker_is_taken_over_and_each_effect_happens_once(workers, model_server):
    """Worker A is SIGKILLed right after its second tool's effect committed; when A's lease
    runs out worker B claims the run, reuses the committed calls and completes it, in the
    chat's work folder restored from the journal into a new private directory."""
    model_server.tool("side_effect", {"label": "pay-1"})
    model_server.tool("side_effect", {"label": "pay-2"})
    model_server.tool("response", {"text": "paid twice"})
    crash = {"A0_CRASH_AT": "after_result@2", "A0_CRASH_MATCH": "side_effect"}
    a_workdir = workers.tmp / "worker-a" / "workdir"
    a_workdir.mkdir(parents=True)
    (a_workdir / "notes.txt").write_text("kept across workers\n", encoding="utf-8")
    a = workers.start("worker-a", **crash)
    b = workers.start("worker-b")
    invoice = base64.b64encode(b"invoice 4711: planted plaintext\n").decode()
    attachment = [{"filename": "invoice.txt", "base64": invoice}]
    in_background(lambda: a.api_message("pay the bills", input_id="pay", attachments=attachment))
    assert a.process is not None
    assert a.process.wait(120) == -signal.SIGKILL, a.output()[-3000:]
    assert workers.side_effects() == ["pay-1", "pay-2"]

    [(run_id, context_id, _status)] = workers.runs()
    done = wait_status(b, run_id, "completed")
    assert workers.side_effects() == ["pay-1", "pay-2"]  # reused, never run again
    assert model_server.calls == 3  # two replies reused; one call after the takeover
    assert workers.claimers(run_id) == ["worker-a", "worker-b"]
    assert "taken over by worker-b" in b.output()
    names = [c["name"] for c in done["calls"]]
    assert names == ["model", "side_effect", "model", "side_effect", "model", "response"]
    owner = workers.sql("SELECT worker_id FROM claims WHERE run_id = %s", run_id)
    assert owner == [(None,)]  # released when the run completed
    # B tells the whole story once: the calls A committed after its last checkpoint are
    # rebuilt from the journal (marked), the reused ones are not shown twice
    with b.ui_client() as client:
        polled = client.post("/api/poll", json={"context": context_id, "log_from": 0})
    assert polled.status_code == 200, polled.text
    items = polled.json()["logs"]
    shown = Counter(i["call_id"] for i in items if i.get("call_id"))
    assert sorted(shown.values()) == [1] * len(done["calls"]), shown
    second = [i for i in items if i["type"] == "tool" and i["kvps"].get("label") == "pay-2"]
    assert [i.get("restored") for i in second] == ["journal"], second

    restored = list((workers.tmp / "worker-b" / "shared").glob("workdir-*/workdir"))
    assert len(restored) == 1, restored
    assert (restored[0] / "notes.txt").read_text(encoding="utf-8") == "kept across workers\n"
    assert restored[0].stat().st_mode & 0o777 == 0o700
    [attached] = list((workers.tmp / "worker-b" / "shared").glob("attachments-*/attachments"))
    [invoice_file] = attached.glob("*_invoice.txt")  # the upload's name on worker A
    assert invoice_file.read_bytes() == b"invoice 4711: planted plaintext\n"
    assert attached.stat().st_mode & 0o777 == 0o700
    assert "resources restored into workdir, attachments" in b.output()
    stored = workers.sql(
        "SELECT count(*), count(*) FILTER (WHERE position('kept across'::bytea in data) > 0"
        " OR position('planted plaintext'::bytea in data) > 0) FROM resource_files"
    )
    assert stored[0][0] >= 2 and stored[0][1] == 0  # both stored, and encrypted
    for server in (a, b):
        assert workers.postgres.password not in server.output()


def test_a_run_held_after_a_takeover_shows_what_the_old_worker_did(workers, model_server):
    """A dies between the intent and the effect of its second side effect; B takes the run
    over and holds it (the outcome is unknown). B's chat already tells the story past A's
    last checkpoint: the second reply from the journal, the open call marked uncertain."""
    model_server.tool("side_effect", {"label": "pay-1"}, headline="First payment")
    model_server.tool("side_effect", {"label": "pay-2"}, headline="Second payment")
    crash = {"A0_CRASH_AT": "after_intent@2", "A0_CRASH_MATCH": "side_effect"}
    a = workers.start("worker-a", **crash)
    b = workers.start("worker-b")
    in_background(lambda: a.api_message("pay the bills", input_id="pay"))
    assert a.process is not None
    assert a.process.wait(120) == -signal.SIGKILL, a.output()[-3000:]

    [(run_id, context_id, _status)] = workers.runs()
    held = wait_status(b, run_id, "needs_attention")
    assert held["reason"] == "uncertain_call", held
    _assert_shows_the_old_workers_last_steps(b, context_id)
    assert workers.side_effects() == ["pay-1"]


def _assert_shows_the_old_workers_last_steps(b: UiServer, context_id: str) -> None:
    """B's chat shows A's second reply from the journal and the open call as uncertain.
    B rebuilds the chat of a run it took over just after holding the run: wait for it."""

    def second_reply_shown() -> list[dict] | None:
        with b.ui_client() as client:
            polled = client.post("/api/poll", json={"context": context_id, "log_from": 0})
        assert polled.status_code == 200, polled.text
        items = polled.json()["logs"]
        return items if any("Second payment" in i["heading"] for i in items) else None

    items = wait_until(second_reply_shown, timeout=30, what="B's chat to show the second reply")
    [second] = [i for i in items if "Second payment" in i["heading"]]
    assert second["restored"] == "journal", second
    [two] = [i for i in items if i["type"] == "tool" and i["kvps"].get("label") == "pay-2"]
    assert two["restored"] == "uncertain", two


def test_a_chat_loaded_mid_run_shows_the_old_workers_last_steps_after_a_takeover(
    workers, model_server
):
    """B loads A's chat while A works (a poll here; the chat list's sync does the same on
    its own time); A dies between the intent and the effect of its second side effect. The
    chat B holds the run in is brought up to the journal: the second reply from the journal
    and the open call marked uncertain, not the chat as B first loaded it."""
    release = threading.Event()

    def second_reply(body: dict) -> dict:
        release.wait(60)
        args = {"label": "pay-2"}
        return {
            "thoughts": [],
            "headline": "Second payment",
            "tool_name": "side_effect",
            "tool_args": args,
        }

    model_server.tool("side_effect", {"label": "pay-1"}, headline="First payment")
    model_server.respond_with(second_reply)
    crash = {"A0_CRASH_AT": "after_intent@2", "A0_CRASH_MATCH": "side_effect"}
    a = workers.start("worker-a", **crash)
    b = workers.start("worker-b")
    in_background(lambda: a.api_message("pay the bills", input_id="pay"))
    model_server.wait_for_calls(2, timeout=60)  # pay-1 is done; A waits for its next reply
    [(run_id, context_id, _status)] = workers.runs()

    def loaded_on_b() -> bool:
        with b.ui_client() as client:
            polled = client.post("/api/poll", json={"context": context_id, "log_from": 0})
        return any("First payment" in i["heading"] for i in polled.json()["logs"])

    wait_until(loaded_on_b, timeout=30, what="B to show the chat's first step")
    release.set()
    assert a.process is not None
    assert a.process.wait(120) == -signal.SIGKILL, a.output()[-3000:]
    held = wait_status(b, run_id, "needs_attention")
    assert held["reason"] == "uncertain_call", held
    _assert_shows_the_old_workers_last_steps(b, context_id)
    assert workers.side_effects() == ["pay-1"]


def test_a_run_whose_end_is_seen_before_its_task_finishes_still_answers(
    workers, model_server, postgres_server
):
    """The worker's own look at its runs (each tick) finds the run completed in the journal
    while the run's task still waits for the acknowledgement of that very commit: the task
    is not stopped as if a Stop had come through another worker, and the request gets its
    answer (it got ``chat_stopped`` now and then under load)."""
    model_server.tool("response", {"text": "done here"})
    answer: dict[str, Any] = {}
    with pg_proxy(postgres_server.dsn) as proxy:
        dsn = proxy.dsn(postgres_server.dsn)
        worker = workers.start("worker-a", A0_DURABILITY_POSTGRES_DSN=dsn)
        proxy.arm(b"run_result", hold=True)  # the run's end: committed, its answer held
        sent = in_background(lambda: answer.update(r=worker.api_message("hi", input_id="h1")))
        assert proxy.held.wait(60), worker.output()[-3000:]
        wait_until(
            lambda: "which is finishing" in worker.output() or not sent.is_alive(),
            timeout=60,
            what="the worker to look at its finished run",
        )
        proxy.release()
        sent.join(60)
        worker.stop()
    response = answer["r"]
    assert response.status_code == 200, (response.text, worker.output()[-3000:])
    assert response.json()["response"] == "done here"


def test_a_message_sent_through_another_worker_reaches_the_running_agent(workers, model_server):
    """The run works on A; a message for its chat through B is admitted into the journal
    and reaches A's agent as an intervention (its next model call sees it)."""
    release = threading.Event()

    def respond(body: dict) -> str | dict | ScriptedFailure:
        text = request_text(body)
        if "from worker b" in text:
            return {"tool_name": "response", "tool_args": {"text": "heard b"}, "thoughts": []}
        release.wait(30)
        return {"tool_name": "side_effect", "tool_args": {"label": "step"}, "thoughts": []}

    model_server.respond_with(respond)
    a = workers.start("worker-a")
    b = workers.start("worker-b")
    answer: dict[str, Any] = {}
    in_background(lambda: answer.update(a.api_message("work on", input_id="w1").json()))
    model_server.wait_for_calls(1, timeout=60)
    [(run_id, context_id, _)] = workers.runs()
    sent = b.api_message("from worker b", input_id="b1", context_id=context_id)
    assert sent.status_code == 200, sent.text
    assert sent.json()["run_id"] == run_id  # joined the run on A, no second run
    assert workers.sql("SELECT kind, run_id FROM inputs WHERE input_id = 'b1'") == [
        ("intervention", run_id)
    ]
    wait_until(lambda: "reached the agent" in a.output(), timeout=30, what="A picks it up")
    release.set()
    done = wait_status(a, run_id, "completed")
    assert any("from worker b" in request_text(r) for r in model_server.requests)
    assert workers.claimers(run_id) == ["worker-a"]
    assert done["status"] == "completed"
    # B shows the chat as the journal has it: in its chat list, with A's answer
    with b.ui_client() as client:
        polled = client.post("/api/poll", json={"context": context_id})
    assert polled.status_code == 200, polled.text
    assert context_id in [c["id"] for c in polled.json()["contexts"]]
    assert "heard b" in log_text(chat_log(b, context_id))
    # the DSN's password shows nowhere: not in the UI's answers, not in the logs
    password = workers.postgres.password
    assert password
    with b.ui_client() as client:
        shown = [client.post(f"/api/{name}", json={}).text for name in ("settings_get", "health")]
        shown.append(client.post("/api/poll", json={"context": context_id}).text)
        shown.append(client.post("/api/durable_runs", json={}).text)
    for text in [*shown, a.output(), b.output()]:
        assert password not in text


def test_a_decision_made_through_another_worker_is_carried_out_by_the_owner(workers, model_server):
    """A's run is held (the model failed); a retry grant through B makes it active again
    and A, which keeps the held run's claim, resumes it."""
    model_server.fail(500, "provider exploded", times=3)  # the first try and two retries
    model_server.tool("response", {"text": "after the grant"})
    a = workers.start("worker-a")
    b = workers.start("worker-b")
    first = a.api_message("hello", input_id="h1")
    assert first.json()["status"] == "needs_attention", first.text
    run_id = first.json()["run_id"]
    granted = post(b, "durable_retry_grant", {"run_id": run_id, "attempts": 1})
    assert granted.status_code == 200, granted.text
    wait_status(b, run_id, "completed")
    assert workers.claimers(run_id) == ["worker-a"]  # never moved: A carried it out
    assert "active again (a decision): resuming it here" in a.output()


def test_shared_mode_refuses_to_start_without_the_resource_key(tmp_path, postgres_server):
    env = {
        "A0_DURABILITY_POSTGRES_DSN": postgres_server.dsn,
        "A0_DURABILITY_POSTGRES_NAMESPACE": "t_refused",
    }
    server = UiServer(tmp_path / "usr", env=env)
    with pytest.raises(RuntimeError, match="exited with 2"):
        server.start(timeout=SLOW_START)
    output = server.output()
    assert "A0_DURABILITY_RESOURCE_KEY" in output
    assert "invalid_configuration" in output
    assert postgres_server.password and postgres_server.password not in output


def test_a_frozen_worker_that_lost_its_claim_commits_nothing_and_starts_nothing(
    workers, model_server
):
    """A is frozen (SIGSTOP) in the middle of a model call until its lease runs out; B
    claims the run and holds it (the model call's outcome is unknown). Thawed, A learns
    that its claim is gone: its late result does not commit, the tool the reply asks for
    never starts, and A says so in its log."""
    release = threading.Event()
    asked: list[int] = []

    def respond(body: dict) -> dict:
        asked.append(1)
        if len(asked) > 1:  # asked again after the decision, on worker B
            return {"tool_name": "response", "tool_args": {"text": "decided"}, "thoughts": []}
        release.wait(60)
        return {"tool_name": "side_effect", "tool_args": {"label": "late"}, "thoughts": []}

    model_server.respond_with(respond)
    a = workers.start("worker-a")
    b = workers.start("worker-b")
    in_background(lambda: a.api_message("do it", input_id="d1"))
    model_server.wait_for_calls(1, timeout=60)
    [(run_id, _context_id, _)] = workers.runs()
    assert a.process is not None
    a.process.send_signal(signal.SIGSTOP)
    try:
        wait_until(
            lambda: workers.claimers(run_id) == ["worker-a", "worker-b"],
            timeout=60,
            what="worker B to take the run over",
        )
        held = wait_status(b, run_id, "needs_attention")
        assert held["reason"] == "uncertain_call"
    finally:
        a.process.send_signal(signal.SIGCONT)
    release.set()
    wait_until(lambda: "claim lost" in a.output(), timeout=30, what="A to notice")
    wait_until(
        lambda: "stopped on this worker" in a.output() or "stopped run" in a.output(),
        timeout=30,
        what="A to stop the run locally",
    )
    calls = workers.sql("SELECT kind, state FROM calls WHERE run_id = %s", run_id)
    assert calls == [("model", "open")]  # A's late reply was never committed
    assert workers.side_effects() == []  # and the tool it asked for never started
    held = run_of(a, run_id)  # A still serves the run's reads
    assert held["status"] == "needs_attention"
    assert workers.claimers(run_id) == ["worker-a", "worker-b"]
    assert model_server.calls == 1

    # a decision made through A (which lost the run) is carried out by B, which holds it
    body = {"run_id": run_id, "decision": "new_attempt", "expected_version": held["version"]}
    decided = post(a, "durable_decide", body)
    assert decided.status_code == 200, decided.text
    wait_status(b, run_id, "completed")
    assert "active again (a decision): resuming it here" in b.output()
    assert workers.claimers(run_id) == ["worker-a", "worker-b"]  # A did not claim it back
    assert workers.side_effects() == []
    assert model_server.calls == 2


def test_a_result_written_under_a_superseded_token_is_refused_and_logged(workers, model_server):
    """A's claim is superseded while its shell command runs (the test ends the lease early
    and claims the run itself). A's heartbeat is held where it would learn of it, so the
    command's result write is what finds out: the fence refuses it, A logs the run, the
    call and both tokens (never the DSN), commits nothing and starts nothing more."""
    gate = workers.tmp / "gate"
    code = f"echo shell >> {workers.effects}; while [ ! -e {gate} ]; do sleep 0.05; done"
    model_server.tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    model_server.tool("response", {"text": "never reached"})
    a = workers.start("worker-a", **HOLD_HEARTBEAT)
    in_background(lambda: a.api_message("run it", input_id="s1"))
    wait_until(lambda: workers.side_effects() == ["shell"], timeout=60, what="the command")
    [(run_id, _context_id, _)] = workers.runs()
    [(held,)] = workers.sql("SELECT token FROM claims WHERE run_id = %s", run_id)
    thief = Journal.open_postgres(
        workers.postgres.dsn, namespace=workers.namespace, worker_id="thief", pool_size=1
    )
    try:

        def supersede() -> Claim | None:  # A's heartbeat may renew in between: again
            workers.sql("UPDATE claims SET expires_at = 0 WHERE run_id = %s RETURNING 1", run_id)
            return thief.cluster.claim(run_id)

        taken = wait_until(supersede, timeout=30, what="the test to claim the run")
        [call] = [c for c in thief.list_calls(run_id) if c.name == "code_execution_tool"]
        before = (thief.get_run(run_id), thief.list_calls(run_id))
        gate.touch()  # the command ends: A has a result to commit under its old token
        refused = (
            f"fenced write refused (superseded): worker worker-a's commit_result for run"
            f" {run_id} (call {call.id}) under token {held}; the run's token is {taken.token}:"
            " nothing of it committed"
        )
        wait_until(lambda: refused in a.output(), timeout=30, what="A's write to be refused")
        stopped = f"run {run_id} stopped on this worker: claim lost (write refused: superseded)"
        wait_until(lambda: stopped in a.output(), timeout=30, what="A to stop the run")
        assert (thief.get_run(run_id), thief.list_calls(run_id)) == before  # nothing committed
        assert thief.get_call(call.id).state == "open"
    finally:
        thief.close()
    assert "heartbeat's renewal found" not in a.output()  # the write found out, not the beat
    assert model_server.calls == 1  # nothing further started for the run
    assert workers.side_effects() == ["shell"]
    assert workers.postgres.password not in a.output()
    a.kill()  # its heartbeat thread is frozen: no graceful stop
