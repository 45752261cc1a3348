"""The durable_plan tool on a real SQLite journal, through the agent's tool seam."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent import AgentConfig, AgentContext, UserMessage
from durability import Journal
from durability.masking import Masker
from python.helpers import settings as settings_mod
from python.helpers.tool import Response
from tests.support.model_server import ScriptedModel
from tests.support.model_server import model_server as model_server
from tests.unit.test_agent_loop import _prompt_text as prompt_text

pytestmark = pytest.mark.unit

TIMEOUT = 30
SECRET = "sk-plan-secret-value-123"
PLAN = {
    "title": "Move the website",
    "items": [
        {"id": "backup", "text": "Back up the database", "done": True},
        {"id": "copy", "text": "Copy the files", "done": False},
    ],
}


def _settings(workdir: Path, model_url: str) -> dict:
    values = dict(settings_mod.DEFAULTS)
    for prefix in ("chat_model", "util_model"):
        values.update(
            {
                f"{prefix}_provider": "other",
                f"{prefix}_name": "scripted-model",
                f"{prefix}_api_base": model_url,
                f"{prefix}_kwargs": {},
                f"{prefix}_rl_requests": 0,
                f"{prefix}_rl_input": 0,
                f"{prefix}_rl_output": 0,
            }
        )
    values.update({"agent_profile": "agent0", "workdir": str(workdir)})
    return values


@pytest.fixture
def journal(chats) -> Journal:
    """The chats' journal, masking the test's secret."""
    chats.journal.set_masker(Masker({"K": SECRET}))
    return chats.journal


@pytest.fixture
def make_context(chats, model_server: ScriptedModel, tmp_path: Path):
    def make() -> AgentContext:
        config = AgentConfig.from_settings(_settings(tmp_path / "work", model_server.url))
        return chats.create(config=config)

    return make


@pytest.fixture
def call(model_server: ScriptedModel, journal: Journal):
    """Run durable_plan through a real journaled turn (the model asks for it, then answers);
    its Response is what the journal committed for the call."""

    async def run(ctx: AgentContext, args: dict, method: str | None = None) -> Response:
        model_server.tool(f"durable_plan:{method}" if method else "durable_plan", args)
        model_server.tool("response", {"text": "ok"})
        answer = await asyncio.wait_for(ctx.communicate(UserMessage("plan")), TIMEOUT)
        assert answer == "ok"
        newest = journal.list_runs(context_id=ctx.id)[0]
        [plan_call] = [c for c in journal.list_calls(newest.id) if c.name == "durable_plan"]
        assert plan_call.state == "completed", plan_call.result
        result = plan_call.result
        return Response(result["message"], result["break_loop"], result["additional"])

    return run


def _error_code(response: Response) -> str | None:
    first = response.message.splitlines()[0] if response.message else ""
    prefix = "durable_plan error ("
    if not first.startswith(prefix):
        return None
    return first[len(prefix) : first.index(")")]


async def test_read_of_an_empty_plan(journal, make_context, call):
    ctx = make_context()
    response = await call(ctx, {"action": "read"})
    assert response.break_loop is False
    assert json.loads(response.message) == {"revision": 0, "plan": {"title": "", "items": []}}


async def test_replace_then_read(journal, make_context, call, model_server):
    ctx = make_context()
    response = await call(ctx, {"action": "replace", "expected_revision": 0, "plan": PLAN})
    assert json.loads(response.message) == {"result": "replaced", "revision": 1, "plan": PLAN}
    stored = journal.read_document(ctx.id, "plan")
    assert (stored.revision, stored.value, stored.updated_by) == (1, PLAN, "agent0")
    read = json.loads((await call(ctx, {"action": "read"})).message)
    assert read == {"revision": 1, "plan": PLAN}
    # the result reached the model's history as a tool result
    assert '"revision": 1' in prompt_text(model_server.requests[-1])


async def test_each_chat_has_its_own_plan(journal, make_context, call):
    first, second = make_context(), make_context()
    await call(first, {"action": "replace", "expected_revision": 0, "plan": PLAN})
    assert json.loads((await call(second, {"action": "read"})).message)["revision"] == 0


async def test_replace_again_after_a_lost_answer_is_a_no_op(journal, make_context, call):
    """What a safe replay does: the same call again gives the same answer, no conflict."""
    ctx = make_context()
    args = {"action": "replace", "expected_revision": 0, "plan": PLAN}
    first = await call(ctx, args)
    again = await call(ctx, args)
    assert again.message == first.message
    assert journal.read_document(ctx.id).revision == 1
    assert journal.list_conflicts(ctx.id) == []


async def test_same_content_on_the_current_revision_is_unchanged(journal, make_context, call):
    ctx = make_context()
    await call(ctx, {"action": "replace", "expected_revision": 0, "plan": PLAN})
    response = await call(ctx, {"action": "replace", "expected_revision": 1, "plan": PLAN})
    assert json.loads(response.message)["result"] == "unchanged"
    assert journal.read_document(ctx.id).revision == 1


async def test_stale_revision_records_a_conflict_and_tells_the_agent(journal, make_context, call):
    ctx = make_context()
    person = {"title": "Edited by a person", "items": [{"id": "a", "text": "x", "done": False}]}
    journal.replace_document(ctx.id, "plan", PLAN, expected_revision=0, actor="ui")
    journal.replace_document(ctx.id, "plan", person, expected_revision=1, actor="ui")
    proposal = {"title": "Agent's idea", "items": []}
    response = await call(ctx, {"action": "replace", "expected_revision": 1, "plan": proposal})
    assert _error_code(response) == "document_conflict"
    text = response.message
    assert "revision 2" in text and "expected revision 1" in text
    assert "a person will resolve" in text
    assert "NEVER repeat an external action" in text
    assert "Edited by a person" in text  # the current value is shown
    conflicts = journal.list_conflicts(ctx.id)
    assert len(conflicts) == 1
    conflict = conflicts[0]
    assert (conflict.expected_revision, conflict.actual_revision) == (1, 2)
    assert conflict.proposed == proposal and conflict.actor == "agent0"
    assert f"conflict #{conflict.id}" in text
    assert journal.read_document(ctx.id).value == person  # nothing overwritten
    read = json.loads((await call(ctx, {"action": "read"})).message)
    assert read["unresolved_conflicts"] == 1 and read["revision"] == 2


async def test_too_many_items_is_refused(journal, make_context, call):
    ctx = make_context()
    items = [{"id": f"i{n}", "text": "step", "done": False} for n in range(101)]
    plan = {"title": "long", "items": items}
    response = await call(ctx, {"action": "replace", "expected_revision": 0, "plan": plan})
    assert _error_code(response) == "document_too_large"
    assert "at most 100 items" in response.message and "101" in response.message
    assert journal.read_document(ctx.id).revision == 0
    ok = {"title": "long", "items": items[:100]}
    response = await call(ctx, {"action": "replace", "expected_revision": 0, "plan": ok})
    assert json.loads(response.message)["revision"] == 1


async def test_too_many_bytes_is_refused(journal, make_context, call):
    ctx = make_context()
    items = [{"id": f"i{n}", "text": "x" * 15_000, "done": False} for n in range(5)]
    plan = {"title": "big", "items": items}
    response = await call(ctx, {"action": "replace", "expected_revision": 0, "plan": plan})
    assert _error_code(response) == "document_too_large"
    assert "65536 bytes" in response.message
    assert "x" * 100 not in response.message  # the refused value is not echoed
    assert journal.read_document(ctx.id).revision == 0


BAD_ARGS = [
    ({}, "invalid_action"),
    ({"action": "delete"}, "invalid_action"),
    ({"action": ["read"]}, "invalid_action"),
    ({"action": "replace", "plan": PLAN}, "invalid_argument"),
    ({"action": "replace", "expected_revision": -1, "plan": PLAN}, "invalid_argument"),
    ({"action": "replace", "expected_revision": "one", "plan": PLAN}, "invalid_argument"),
    ({"action": "replace", "expected_revision": True, "plan": PLAN}, "invalid_argument"),
    ({"action": "replace", "expected_revision": 1.5, "plan": PLAN}, "invalid_argument"),
    ({"action": "replace", "expected_revision": 0}, "invalid_argument"),
    ({"action": "replace", "expected_revision": 0, "plan": "{not json"}, "invalid_argument"),
    ({"action": "replace", "expected_revision": 0, "plan": [1, 2]}, "invalid_argument"),
    ({"action": "replace", "expected_revision": 0, "plan": {"items": "a"}}, "document_invalid"),
    ({"action": "replace", "expected_revision": 0, "plan": {"x": 1}}, "document_invalid"),
    (
        {"action": "replace", "expected_revision": 0, "plan": {"items": [{"id": "", "text": ""}]}},
        "document_invalid",
    ),
    (
        {
            "action": "replace",
            "expected_revision": 0,
            "plan": {"items": [{"id": "a", "text": ""}, {"id": "a", "text": ""}]},
        },
        "document_invalid",
    ),
    (
        {
            "action": "replace",
            "expected_revision": 0,
            "plan": {"items": [{"id": "a", "text": "t", "done": "yes"}]},
        },
        "document_invalid",
    ),
    ({"action": "replace", "expected_revision": 0, "plan": {"title": 7}}, "document_invalid"),
]


@pytest.mark.parametrize(("args", "code"), BAD_ARGS)
async def test_bad_args_get_a_clear_message(journal, make_context, call, args, code):
    ctx = make_context()
    response = await call(ctx, args)
    assert response.break_loop is False
    assert _error_code(response) == code, response.message
    assert "Traceback" not in response.message
    assert journal.read_document(ctx.id).revision == 0
    assert journal.list_conflicts() == []


async def test_invalid_item_message_names_the_path(journal, make_context, call):
    ctx = make_context()
    plan = {"items": [{"id": "a", "text": "t", "done": "yes"}]}
    response = await call(ctx, {"action": "replace", "expected_revision": 0, "plan": plan})
    assert "$.items[0].done" in response.message


async def test_lenient_forms_method_json_text_and_flat_fields(journal, make_context, call):
    ctx = make_context()
    response = await call(ctx, {}, method="read")
    assert json.loads(response.message)["revision"] == 0
    text_plan = {"action": "replace", "expected_revision": "0", "plan": json.dumps(PLAN)}
    assert json.loads((await call(ctx, text_plan)).message)["revision"] == 1
    flat = {"action": "replace", "expected_revision": 1, "title": "Flat", "items": []}
    assert json.loads((await call(ctx, flat)).message)["plan"] == {"title": "Flat", "items": []}


async def test_secrets_in_a_plan_are_masked(journal, make_context, call):
    ctx = make_context()
    plan = {"title": f"use {SECRET}", "items": []}
    response = await call(ctx, {"action": "replace", "expected_revision": 0, "plan": plan})
    assert SECRET not in response.message
    assert "§§secret(K)" in response.message
    assert SECRET not in (await call(ctx, {"action": "read"})).message


async def test_the_loop_runs_durable_plan_then_responds(
    model_server: ScriptedModel, journal, make_context
):
    model_server.tool(
        "durable_plan",
        {"action": "replace", "expected_revision": 0, "plan": PLAN},
        headline="Writing the plan",
    )
    model_server.tool("response", {"text": "Plan written."})
    ctx = make_context()
    answer = await asyncio.wait_for(ctx.communicate(UserMessage("make a plan")), TIMEOUT)
    assert answer == "Plan written."
    assert journal.read_document(ctx.id).value == PLAN
    first, second = model_server.requests[:2]
    assert "### durable_plan" in first["messages"][0]["content"]  # the prompt is offered
    assert "NEVER repeat an external action" in first["messages"][0]["content"]
    last_input = "\n".join(str(m.get("content")) for m in second["messages"][-2:])
    assert '"result": "replaced"' in last_input and '"revision": 1' in last_input
    tool_items = [i for i in ctx.log.output() if i.get("type") == "tool"]
    assert any("durable_plan" in i["heading"] for i in tool_items)
