"""A server stop (SIGTERM) never ends a journaled run: the next start recovers it."""

from __future__ import annotations

import signal
import sqlite3
import threading
from pathlib import Path

import httpx
import pytest

from tests.integration._durable_system import Crashable
from tests.integration._durable_system import crashable as crashable
from tests.integration._helpers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_sigterm_mid_model_call_leaves_the_run_for_recovery(crashable: Crashable):
    model = crashable.model
    answer = {
        "thoughts": ["done"],
        "headline": "",
        "tool_name": "response",
        "tool_args": {"text": "after-restart"},
    }
    model.reply(answer, delay=60)  # the call in flight when the server stops
    model.reply(answer)
    server = crashable.start()

    def send() -> None:
        try:
            server.api_message("slow job", input_id="job-1")
        except httpx.HTTPError:
            pass

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    model.wait_for_calls(1, timeout=60)
    crashable.stop()  # SIGTERM; exit code 0 is asserted
    sender.join(30)

    crashable.start()
    run = crashable.only_run()
    # An open model call is uncertain: held for a person, never silently stopped.
    assert run["status"] == "needs_attention", run
    assert any(c["kind"] == "model" and not c["committed"] for c in run["calls"]), run
    decided = crashable.decide(run, "new_attempt")
    assert decided.status_code == 200, decided.text
    done = crashable.wait_status(run["run_id"], "completed")
    assert done["status"] == "completed"
    repeat = crashable.server.api_message("slow job", input_id="job-1")
    assert repeat.status_code == 200, repeat.text
    assert repeat.json()["response"] == "after-restart"


def journal_path(usr: Path) -> Path:
    return usr / "durability" / "journal.sqlite"


def _journaled_events(usr: Path, event_type: str) -> set[str]:
    """The chats that have a ``event_type`` event in the journal (read after the stop)."""
    from durability import Journal

    journal = Journal.open_sqlite(journal_path(usr))
    try:
        events = journal.list_events(limit=1_000_000)
        return {e.context_id for e in events if e.type == event_type}
    finally:
        journal.close()


def test_sigterm_loses_no_acknowledged_reset_or_removal(crashable: Crashable):
    """Resets and removals are journaled in the background after their answer. Here those
    writes are kept waiting (the test holds the journal's write lock) until the server is
    already shutting down: a clean stop must flush them before the journal closes.

    The chats have no runs, so answering needs no journal read (a read would queue behind
    the stalled writes in the same worker threads)."""
    server = crashable.start()
    with server.ui_client() as client:
        chats = [client.post("/api/chat_create", json={}).json()["ctxid"] for _ in range(24)]
        reset, removed = chats[:12], chats[12:]
        work = [("chat_reset", c) for c in reset] + [("chat_remove", c) for c in removed]
        lock = sqlite3.connect(journal_path(crashable.usr), timeout=30, isolation_level=None)
        try:
            lock.execute("BEGIN IMMEDIATE")  # the server's journal writes wait behind this
            for endpoint, chat in work:
                answer = client.post(f"/api/{endpoint}", json={"context": chat})
                assert answer.status_code == 200, answer.text  # acknowledged ...
            assert server.process is not None
            server.process.send_signal(signal.SIGTERM)  # ... then a clean stop at once
            wait_until(lambda: "Waiting for application shutdown" in server.output(), what="stop")
        finally:
            lock.execute("ROLLBACK")
            lock.close()
    assert server.process.wait(30) == 0, server.output()[-3000:]
    crashable.kill()
    assert "not journaled" not in server.output()
    assert _journaled_events(crashable.usr, "context_reset") == set(reset)
    assert _journaled_events(crashable.usr, "context_removed") == set(removed)
