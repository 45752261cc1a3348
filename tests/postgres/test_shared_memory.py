"""Two shared workers, one memory (issue #19): a fact saved through worker 1 (which is
SIGKILLed right after the memory_save intent, so worker 2 takes the run over and runs the
save again: stored once) is recalled through worker 2 in a new chat, from the memories in the
shared PostgreSQL journal (exact search on the worker: Debian's PostgreSQL has no pgvector)."""

from __future__ import annotations

import signal

import pytest

from tests.integration._crash_matrix_support import tool
from tests.integration._memory_support import agent_requests, memory_env, responder, save
from tests.postgres._workers import in_background, wait_status, workers
from tests.support.model_server import model_server

pytestmark = [pytest.mark.postgres, pytest.mark.integration, pytest.mark.slow]

__all__ = ["model_server", "workers"]  # the fixtures

FACT = "The deploy host for project Falcon is build-42.example"
QUESTION = "TASK[load:b1] What is the deploy host for project Falcon?"


def test_a_memory_saved_through_a_killed_worker_is_recalled_through_another(workers, model_server):
    steps = {
        "a1": [save(FACT)],
        "b1": [tool("memory_load", {"query": "deploy host project Falcon", "threshold": 0.6})],
    }
    model_server.respond_with(responder(steps))
    env = memory_env(model_server)
    crash = {"A0_CRASH_AT": "after_intent", "A0_CRASH_MATCH": "memory_save"}
    one = workers.start("worker-1", **env, **crash)
    two = workers.start("worker-2", **env)
    in_background(lambda: one.api_message("TASK[save:a1] keep this", input_id="a1"))
    assert one.process is not None
    assert one.process.wait(120) == -signal.SIGKILL, one.output()[-3000:]

    [(run_id, _context, _status)] = workers.runs()
    done = wait_status(two, run_id, "completed", timeout=120)
    assert workers.claimers(run_id) == ["worker-1", "worker-2"]
    saves = [c for c in done["calls"] if c["name"] == "memory_save"]
    assert [(c["replay_policy"], c["committed"]) for c in saves] == [("journal_atomic", True)]
    assert workers.sql("SELECT count(*) FROM memories WHERE text = %s", FACT) == [(1,)]
    assert len(agent_requests(model_server, "a1")) == 2  # the committed reply was reused

    response = two.api_message(QUESTION, input_id="b1")
    assert response.status_code == 200, response.text
    first, after_load = agent_requests(model_server, "b1")
    assert "build-42.example" in first["messages"][-1]["content"]  # recalled automatically
    assert "build-42.example" in after_load["messages"][-1]["content"]  # and by memory_load
    statuses = {status for _r, _c, status in workers.runs()}
    assert statuses == {"completed"}
