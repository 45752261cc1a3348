"""code_execution_tool's allow_running types into a program that is still running; no shell
wraps that text, so it leaves a start-only receipt: a SIGKILL right after it holds the run
instead of running the text again (as a new command in a fresh shell) after the restart."""

from __future__ import annotations

import pytest

from tests.integration._durable_system import crashable

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

FAST = {
    "A0_SET_code_exec_first_output_timeout": "2",
    "A0_SET_code_exec_between_output_timeout": "1",
    "A0_SET_code_exec_max_timeout": "5",
}


def test_text_typed_into_a_running_program_is_held_after_a_crash(crashable, model_server, tmp_path):
    marker = tmp_path / "greeted.txt"
    program = f'read -p "name? " n; echo "hello $n" >> {marker}'
    model_server.tool("input", {"keyboard": program})  # nothing runs yet: the text is a command
    model_server.tool("code_execution_tool", {"code": "bob", "allow_running": True})
    model_server.tool("response", {"text": "greeted"})
    crash = {"A0_CRASH_AT": "after_effect", "A0_CRASH_MATCH": "code_execution_tool"}
    crashable.crash_during("greet bob", "greet", **crash, **FAST)
    assert marker.read_text() == "hello bob\n"

    crashable.start(**FAST)
    run = crashable.only_run()
    held = crashable.wait_status(run["run_id"], "needs_attention")
    assert held["reason"] == "uncertain_call"
    open_calls = [c for c in held["calls"] if not c["committed"]]
    assert [(c["name"], c["replay_policy"]) for c in open_calls] == [
        ("code_execution_tool", "adapter:shell")
    ]
    assert marker.read_text() == "hello bob\n"  # "bob" was not sent again
    crashable.stop()
