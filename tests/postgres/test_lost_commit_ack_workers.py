"""A lost commit acknowledgement under a real run_ui.py worker (issue #17, point 12): the
worker reaches PostgreSQL through a proxy that drops the connection right after the server
committed a write, before its acknowledgement reaches the worker. The run goes on as if
nothing happened; the worker's log says what was settled and how."""

from __future__ import annotations

import pytest

from tests.postgres._workers import wait_status, workers
from tests.support.model_server import model_server
from tests.support.pg_proxy import pg_proxy

pytestmark = [pytest.mark.postgres, pytest.mark.integration, pytest.mark.slow]

__all__ = ["model_server", "workers"]  # the fixtures


def _run_through_proxy(workers, model_server, postgres_server, marker: bytes):
    """One run (a side effect, then the answer) by a worker whose journal connections
    pass the proxy, armed to lose the acknowledgement of the first commit holding
    ``marker``. (the worker, the answer, the run's detail, the proxy's loss count)"""
    model_server.tool("side_effect", {"label": "pay-1"})
    model_server.tool("response", {"text": "paid once"})
    with pg_proxy(postgres_server.dsn) as proxy:
        worker = workers.start(
            "worker-a", A0_DURABILITY_POSTGRES_DSN=proxy.dsn(postgres_server.dsn)
        )
        proxy.arm(marker)
        answer = worker.api_message("pay the bills", input_id="pay")
        assert answer.status_code == 200, (answer.text, worker.output()[-6000:])
        run_id = answer.json()["run_id"]
        done = wait_status(worker, run_id, "completed")
        lost = proxy.lost
        worker.stop()
    return worker, answer.json(), done, lost


def test_a_tool_result_whose_commit_ack_is_lost_is_committed_once_and_the_run_finishes(
    workers, model_server, postgres_server
):
    worker, answer, done, lost = _run_through_proxy(
        workers, model_server, postgres_server, b"side effect pay-1 done"
    )
    assert lost == 1
    assert answer["response"] == "paid once"
    assert [c["name"] for c in done["calls"]] == ["model", "side_effect", "model", "response"]
    assert all(c["status"] == "completed" for c in done["calls"]), done["calls"]
    assert workers.side_effects() == ["pay-1"]  # the effect ran once
    assert model_server.calls == 2
    results = workers.sql("SELECT count(*) FROM calls WHERE name = 'side_effect'")
    assert results == [(1,)]
    output = worker.output()
    assert "journal write commit_result: the connection was lost while committing" in output
    assert "try 1 of 5" in output and "had committed" in output, output[-3000:]
    assert workers.postgres.password not in output


def test_a_model_intent_whose_commit_ack_is_lost_is_not_held_and_the_model_is_asked_once(
    workers, model_server, postgres_server
):
    worker, answer, done, lost = _run_through_proxy(
        workers, model_server, postgres_server, b'"messages_digest"'
    )
    assert lost == 1
    assert answer["response"] == "paid once"
    assert [c["name"] for c in done["calls"]] == ["model", "side_effect", "model", "response"]
    assert [c["attempt"] for c in done["calls"]] == [1, 1, 1, 1]
    assert model_server.calls == 2  # the first position was asked once, never held
    assert workers.side_effects() == ["pay-1"]
    output = worker.output()
    assert "journal write record_intent: the connection was lost while committing" in output
    assert "had committed" in output and "uncertain_call" not in output


def test_with_the_database_gone_the_worker_answers_with_a_clear_failure_and_no_hang(
    workers, model_server, postgres_server
):
    """After the bounded tries the write fails as before (outcome unknown), and the
    request gets an answer instead of waiting for the database."""
    model_server.tool("side_effect", {"label": "pay-1"})
    model_server.tool("response", {"text": "paid once"})
    with pg_proxy(postgres_server.dsn) as proxy:
        worker = workers.start(
            "worker-a", A0_DURABILITY_POSTGRES_DSN=proxy.dsn(postgres_server.dsn)
        )
        proxy.arm(b"side effect pay-1 done", then_down=True)
        answer = worker.api_message("pay the bills", input_id="pay")
        output = worker.output()
        proxy.restore()
        worker.stop()
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "storage_error"
    # the result's own tries (other writes of the worker, e.g. its sweep, may retry too)
    tries = [
        line
        for line in output.splitlines()
        if "journal write commit_result:" in line and "asking PostgreSQL on a fresh" in line
    ]
    assert [t.split("; try ")[1][:6] for t in tries] == [f"{n} of 5" for n in range(1, 6)]
    assert "journal write commit_result: no answer about transaction" in output
    assert workers.postgres.password not in output
    assert workers.side_effects() == ["pay-1"]
    # the commit had landed: the result is in the journal, once
    found = workers.sql("SELECT state FROM calls WHERE name = 'side_effect'")
    assert found == [("completed",)]
