"""The scheduler tool's methods and refusals, on a real journal (a real turn: tests/integration)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from agent import AgentConfig
from python.durable import scheduler as scheduler_mod
from python.tools.scheduler import Scheduler as SchedulerTool
from tests.unit.test_scheduler import T0, FakeChats

pytestmark = pytest.mark.unit


@pytest.fixture
def scheduler(tmp_path, monkeypatch):
    from durability import Journal

    journal = Journal.open_sqlite(tmp_path / "journal.sqlite")
    instance = scheduler_mod.Scheduler(FakeChats(journal), clock=lambda: T0)
    monkeypatch.setitem(CURRENT, "scheduler", instance)
    yield instance
    journal.close()


CURRENT: dict[str, scheduler_mod.Scheduler] = {}  # the test's scheduler


def agent(chat_id: str = "chat-A") -> SimpleNamespace:
    """The tool's agent: its chat's session exposes the scheduler, as DurableSession does."""

    async def handle_intervention(progress: str = "") -> None:
        return None

    return SimpleNamespace(
        number=0,
        context=SimpleNamespace(
            id=chat_id, session=SimpleNamespace(scheduler=CURRENT["scheduler"])
        ),
        mask=lambda text: text,
        handle_intervention=handle_intervention,
    )


async def call(method: str, args: dict, *, call_id: str | None = None, chat: str = "chat-A"):
    tool = SchedulerTool(agent(chat), "scheduler", method, args, "")
    if call_id is not None:
        tool.call_identity = (call_id, "digest")
    text = (await tool.execute(**args)).message
    try:
        return json.loads(text)
    except ValueError:
        return text


DAILY = {"name": "daily report", "prompt": "Report.", "schedule": {"minute": "0", "hour": "9"}}


async def test_create_runs_in_the_agents_chat_unless_dedicated(scheduler):
    shared = await call("create_scheduled_task", DAILY, call_id="c1")
    assert (shared["context_id"], shared["dedicated_context"]) == ("chat-A", False)
    assert (shared["created_by"], shared["timezone"], shared["type"]) == (
        "agent0",
        "UTC",
        "scheduled",
    )
    planned = {
        "name": "once",
        "prompt": "Go.",
        "dedicated_context": True,
        "plan": ["2030-06-01T09:00:00"],
        "timezone": "Europe/Berlin",
    }
    own = await call("create_planned_task", planned, call_id="c2")
    assert own["context_id"] == own["uuid"] and own["plan"]["todo"] == ["2030-06-01T07:00:00+00:00"]
    adhoc = await call("create_adhoc_task", {"name": "by hand", "prompt": "Now."}, call_id="c3")
    assert adhoc["type"] == "adhoc" and adhoc["next_run"] is None


async def test_the_same_call_run_again_finds_its_task(scheduler):
    first = await call("create_scheduled_task", DAILY, call_id="same-call")
    again = await call("create_scheduled_task", DAILY, call_id="same-call")
    assert first["uuid"] == again["uuid"]
    assert len(await scheduler.list_tasks()) == 1
    other = await call("create_scheduled_task", DAILY, call_id="other-call")
    assert other["uuid"] != first["uuid"]


async def test_list_find_show_and_delete(scheduler):
    daily = await call("create_scheduled_task", DAILY, call_id="c1")
    await call("create_adhoc_task", {"name": "cleanup", "prompt": "Clean."}, call_id="c2")
    listed = await call("list_tasks", {})
    assert [t["name"] for t in listed] == ["daily report", "cleanup"]
    assert set(listed[0]) == {
        "uuid",
        "name",
        "type",
        "state",
        "last_run",
        "last_status",
        "next_run",
        "context_id",
    }
    assert [t["name"] for t in await call("list_tasks", {"type": ["adhoc"]})] == ["cleanup"]
    soon = await call("list_tasks", {"next_run_within": 24 * 60})
    assert [t["name"] for t in soon] == ["daily report"]
    assert [t["uuid"] for t in await call("find_task_by_name", {"name": "DAILY"})] == [
        daily["uuid"]
    ]
    shown = await call("show_task", {"uuid": daily["uuid"]})
    assert shown["prompt"] == "Report." and shown["last_result"] is None
    assert await call("delete_task", {"uuid": daily["uuid"]}) == {"deleted": daily["uuid"]}
    assert [t["name"] for t in await call("list_tasks", {})] == ["cleanup"]


@pytest.mark.parametrize(
    ("method", "args", "starts"),
    [
        ("fly", {}, "scheduler error (invalid_method)"),
        ("show_task", {}, "scheduler error (invalid_argument)"),
        ("show_task", {"uuid": "nope"}, "scheduler error (task_not_found)"),
        ("delete_task", {"uuid": "nope"}, "scheduler error (task_not_found)"),
        ("find_task_by_name", {"name": "nothing"}, "scheduler error (task_not_found)"),
        (
            "create_scheduled_task",
            {**DAILY, "schedule": {"hour": "24"}},
            "scheduler error (task_invalid): schedule.hour",
        ),
        (
            "create_planned_task",
            {"name": "p", "prompt": "x", "plan": []},
            "scheduler error (task_invalid)",
        ),
        (
            "create_scheduled_task",
            {**DAILY, "timezone": "Nowhere/Land"},
            "scheduler error (task_invalid): unknown timezone",
        ),
        ("list_tasks", {"state": "idle"}, "scheduler error (bad_request)"),
        ("wait_for_task", {"uuid": "x", "timeout": 0}, "scheduler error (invalid_argument)"),
    ],
)
async def test_refusals_are_messages_with_a_code(scheduler, method, args, starts):
    text = await call(method, args, call_id="c")
    assert isinstance(text, str) and text.startswith(starts), text


async def test_waiting_for_a_task_of_this_chat_is_refused_and_an_idle_one_returns(scheduler):
    mine = await call("create_adhoc_task", {"name": "mine", "prompt": "x"}, call_id="c1")
    refused = await call("wait_for_task", {"uuid": mine["uuid"]})
    assert refused.startswith("scheduler error (task_in_this_chat)")
    theirs = await call(
        "create_adhoc_task",
        {"name": "theirs", "prompt": "x", "dedicated_context": True},
        call_id="c2",
    )
    waited = await call("wait_for_task", {"uuid": theirs["uuid"]})
    assert (waited["state"], waited["last_result"]) == ("idle", None)


async def test_the_tool_reaches_the_scheduler_of_its_chats_session(chats):
    """A real chat (DurableChats over a real journal): the tool needs no import of the
    scheduler, the chat's session hands it over."""
    ctx = chats.create(config=AgentConfig.from_settings({}))
    assert ctx.session.scheduler is chats.scheduler
    args = {"name": "by hand", "prompt": "Now."}
    tool = SchedulerTool(ctx.agent0, "scheduler", "create_adhoc_task", args, "")
    tool.call_identity = ("call-1", "digest")
    created = json.loads((await tool.execute(**args)).message)
    assert (created["context_id"], created["type"]) == (ctx.id, "adhoc")
    [stored] = chats.journal.list_tasks()
    assert stored.id == created["uuid"] and stored.definition["name"] == "by hand"
