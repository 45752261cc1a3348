"""A result that rides on the run's next write, against real run_ui.py processes: SIGKILL
after a safe-replay tool's deferred result and before the run's next intent loses that
result only, and the restart replays the tool without asking a person (docs/durability.md,
"Results ride on the next write")."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from durability.paths import journal_path
from tests.integration._crash_matrix_support import (
    dump,
    plan_of,
    plan_value,
    prepare,
    requests_for,
    run_by_input,
    task_message,
)
from tests.integration._durable_system import crashable

pytestmark = [pytest.mark.integration, pytest.mark.slow]

__all__ = ["crashable"]  # the fixture


def _states_on_disk(usr, name: str) -> list[str]:
    with closing(sqlite3.connect(journal_path(usr))) as db:
        rows = db.execute("SELECT state FROM calls WHERE name = ? ORDER BY created_at", (name,))
        return [row[0] for row in rows]


def test_sigkill_after_a_deferred_result_replays_the_safe_tool_without_a_hold(
    crashable, model_server
):
    prepare(crashable)
    label = "deferred-plan"
    # the plan tool's result (and the iteration's checkpoint) wait for the second model
    # call's intent to ride on; the process dies right before that intent. A long bound
    # keeps the writer from committing them on its own first.
    crashable.crash_during(
        task_message("durable_plan", label),
        label,
        A0_CRASH_AT="before_intent@2",
        A0_CRASH_MATCH="model",
        A0_JOURNAL_DEFER_MS="60000",
    )
    # the deferred result died with the process: on disk the tool's intent is still open,
    # and the model's reply (never deferred) is committed
    assert _states_on_disk(crashable.usr, "durable_plan") == ["open"]
    assert _states_on_disk(crashable.usr, "model") == ["completed"]
    assert requests_for(model_server, label) == 1

    crashable.start()
    run = run_by_input(crashable, label)
    done = crashable.wait_status(run["run_id"], "completed")
    detail = dump(done)
    assert done["reason"] is None, detail  # never held
    tools = [c for c in done["calls"] if c["name"] == "durable_plan"]
    assert [(c["status"], c["attempt"]) for c in tools] == [("completed", 1)], detail
    # the committed reply was reused (asked once), then the second position asked once
    assert requests_for(model_server, label) == 2, detail
    # the replayed plan write is the same write: one revision, no conflict
    plan = plan_of(crashable, done["context_id"])
    assert (plan["plan"], plan["revision"], plan["conflicts"]) == (plan_value(label), 1, []), detail
    crashable.stop()
