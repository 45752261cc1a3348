"""Tools called with upstream Agent Zero's argument shapes, through real turns."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from agent import UserMessage
from python.tools.text_editor import EditError, apply_edits
from python.tools.wait import MAX_WAIT, wait_seconds
from tests.support.model_server import model_server as model_server
from tests.unit.test_agent_loop import TIMEOUT, _prompt_text, make_context, workdir

pytestmark = pytest.mark.unit

__all__ = ["make_context", "model_server", "workdir"]  # fixtures used by name below

TEXT = "one\ntwo\nthree\nfour\n"
FAST = {
    "code_exec_first_output_timeout": 1,
    "code_exec_between_output_timeout": 1,
    "code_exec_max_timeout": 3,
}


async def _run(ctx, text: str) -> str:
    return await asyncio.wait_for(ctx.communicate(UserMessage(text)), TIMEOUT)


# text_editor ---------------------------------------------------------------------------
def test_upstream_patch_shapes_replace_delete_and_insert():
    edits = [
        {"from": 1, "to": 1, "content": "ONE"},  # replace
        {"from": 2, "to": 3},  # no content: delete
        {"from": 4, "content": "before four"},  # no "to": insert before line 4
        {"from": 5, "content": "at the end"},  # insert after the last line
    ]
    assert apply_edits(TEXT, edits) == "ONE\nbefore four\nfour\nat the end\n"


def test_upstream_inserts_at_one_line_keep_their_order():
    edits = [{"from": 2, "content": "a"}, {"from": 2, "content": "b"}, {"from": 2, "to": 2}]
    assert apply_edits(TEXT, edits) == "one\na\nb\nthree\nfour\n"


def test_insert_after_a_last_line_without_newline():
    assert apply_edits("one\ntwo", [{"from": 3, "content": "three"}]) == "one\ntwo\nthree\n"


@pytest.mark.parametrize(
    "edits",
    [
        [{"from": 0, "content": "x"}],
        [{"from": 6, "content": "x"}],  # the file has 4 lines: at most insert at 5
        [{"from": 2, "to": 9}],
        [{"from": 1, "to": 2, "content": "a"}, {"from": 2, "to": 2}],
        [{"from": "two"}],
    ],
)
def test_bad_upstream_patches_are_refused(edits):
    with pytest.raises(EditError):
        apply_edits(TEXT, edits)


async def test_text_editor_turn_with_upstream_shapes(model_server, make_context, workdir):
    model_server.tool("text_editor:write", {"path": "notes/a.txt", "content": TEXT})
    model_server.tool("text_editor:read", {"path": "notes/a.txt", "line_from": 2, "line_to": 3})
    model_server.tool(
        "text_editor:patch",
        {"path": "notes/a.txt", "edits": [{"from": 2, "to": 2}, {"from": 4, "content": "3.5"}]},
    )
    model_server.tool("response", {"text": "edited"})
    ctx = make_context()
    assert await _run(ctx, "edit the notes") == "edited"
    assert (workdir / "notes" / "a.txt").read_text() == "one\nthree\n3.5\nfour\n"
    read_result = _prompt_text(model_server.requests[2])
    assert "    2| two" in read_result and "    3| three" in read_result
    assert "Patched" in _prompt_text(model_server.requests[3])


# wait ------------------------------------------------------------------------------------
def test_wait_accepts_days_and_refuses_more_than_a_year():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert wait_seconds({"days": 2, "hours": 1}, now) == 2 * 86400 + 3600
    assert wait_seconds({"days": "0.5"}, now) == 43200
    assert wait_seconds({"days": 400}, now) > MAX_WAIT


async def test_wait_turn_with_days(model_server, make_context):
    model_server.tool("wait", {"days": 400})
    model_server.tool("wait", {"days": 0.00001})  # 0.864 s
    model_server.tool("response", {"text": "waited"})
    ctx = make_context()
    assert await _run(ctx, "wait") == "waited"
    assert "longer than a year" in _prompt_text(model_server.requests[1])
    assert "Waited 0.864 seconds" in _prompt_text(model_server.requests[2])


# code_execution_tool: reset and allow_running ----------------------------------------------
async def test_reset_true_kills_the_running_command_first(model_server, make_context):
    model_server.tool("code_execution_tool", {"runtime": "terminal", "code": "sleep 60"})
    model_server.tool("code_execution_tool", {"runtime": "terminal", "code": "echo busy"})
    model_server.tool(
        "code_execution_tool", {"runtime": "terminal", "code": "echo after-reset", "reset": True}
    )
    model_server.tool("code_execution_tool", {"reset": "true"})
    model_server.tool("response", {"text": "done"})
    ctx = make_context(**FAST)
    assert await _run(ctx, "go") == "done"
    assert "still running" in _prompt_text(model_server.requests[1])
    assert "a command is still running" in _prompt_text(model_server.requests[2])
    third = _prompt_text(model_server.requests[3])
    assert "after-reset" in third and "[exit code 0]" in third
    assert "Session 0 was reset" in _prompt_text(model_server.requests[4])


async def test_allow_running_types_into_the_running_program(model_server, make_context):
    prompt = 'read -p "name? " n; echo "hello $n"'
    model_server.tool("code_execution_tool", {"runtime": "terminal", "code": prompt})
    model_server.tool(
        "code_execution_tool", {"runtime": "terminal", "code": "bob", "allow_running": True}
    )
    model_server.tool("response", {"text": "greeted"})
    ctx = make_context(**FAST)
    assert await _run(ctx, "go") == "greeted"
    assert "name?" in _prompt_text(model_server.requests[1])
    second = _prompt_text(model_server.requests[2])
    assert "hello bob" in second and "[exit code 0]" in second


# input -------------------------------------------------------------------------------------
async def test_input_without_a_running_command_runs_the_text(model_server, make_context, workdir):
    model_server.tool("input", {"keyboard": "echo typed > typed.txt; echo done", "session": 1})
    model_server.tool("input", {"keyboard": "", "session": 1})
    model_server.tool("response", {"text": "ok"})
    ctx = make_context(**FAST)
    assert await _run(ctx, "type") == "ok"
    assert (workdir / "typed.txt").read_text() == "typed\n"
    assert "[exit code 0]" in _prompt_text(model_server.requests[1])
    assert "nothing to do" in _prompt_text(model_server.requests[2])
