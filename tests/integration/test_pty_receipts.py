"""Typed input with delivery receipts: a program asks a question on a pseudo-terminal, the
``input`` tool answers it, and the server is SIGKILLed on either side of the delivery.

The terminal belongs to a relay process that outlives the server
(durability/adapters/pty_relay.py). Killed after the input's intent and before its handover,
recovery proves "not delivered" and the resumed run delivers the answer to the program that
still waits; killed after the delivery marker, recovery proves "delivered" and reconciles
the call from the marker. Either way the program's effect happens exactly once and no
person is asked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration._durable_system import crashable
from tests.integration._helpers import request_text, wait_until

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

QUICK = {
    "A0_SET_code_exec_first_output_timeout": "20",
    "A0_SET_code_exec_between_output_timeout": "1",
}


def _script(model_server, effects: Path) -> None:
    question = f'read -p "continue? " a; echo "got $a" >> {effects}; echo "answer was $a"'
    model_server.tool(
        "code_execution_tool", {"runtime": "terminal", "session": 0, "code": question}
    )
    model_server.tool("input", {"keyboard": "y", "session": 0})
    model_server.tool("response", {"text": "answered"})


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _relays(usr: Path) -> list[dict]:
    found = (usr / "durability" / "receipts" / "pty").glob("*/relay.json")
    return [json.loads(p.read_text()) for p in found]


def test_killed_before_the_handover_the_input_is_proven_undelivered_and_delivered_once(
    crashable, model_server, tmp_path
):
    effects = tmp_path / "effects.txt"
    _script(model_server, effects)
    crashable.crash_during(
        "answer the question",
        "pty-1",
        A0_CRASH_AT="pty.before_handover",
        A0_CRASH_MATCH="input",
        **QUICK,
    )
    assert _lines(effects) == []  # the question still waits: nothing was typed
    assert len(_relays(crashable.usr)) == 1  # its terminal outlived the server

    crashable.start(**QUICK)
    run = crashable.runs()[0]
    done = crashable.wait_status(run["run_id"], "completed", timeout=120)

    assert _lines(effects) == ["got y"]  # delivered again, once, to the waiting program
    assert model_server.calls == 3
    assert "answer was y" in request_text(model_server.requests[2])
    (typed,) = [c for c in done["calls"] if c["name"] == "input"]
    assert typed["status"] == "completed" and typed["attempt"] == 1
    assert not done["decisions"]  # evidence decided: no person was asked
    assert done["reason"] is None
    crashable.stop()


def test_killed_after_the_delivery_marker_the_call_is_reconciled_from_it(
    crashable, model_server, tmp_path
):
    effects = tmp_path / "effects.txt"
    _script(model_server, effects)
    crashable.crash_during(
        "answer the question",
        "pty-2",
        A0_CRASH_AT="pty.after_delivery",
        A0_CRASH_MATCH="input",
        **QUICK,
    )
    # the relay wrote the bytes before its marker: the program got its answer by itself
    wait_until(lambda: _lines(effects) == ["got y"], what="the program's effect")

    crashable.start(**QUICK)
    run = crashable.runs()[0]
    done = crashable.wait_status(run["run_id"], "completed", timeout=120)

    assert _lines(effects) == ["got y"]  # not typed a second time
    assert model_server.calls == 3
    assert "input delivered to session 0" in request_text(model_server.requests[2])
    (typed,) = [c for c in done["calls"] if c["name"] == "input"]
    assert typed["status"] == "completed"
    assert "delivery receipt" in json.dumps(typed["result"])
    assert not done["decisions"]
    crashable.stop()
