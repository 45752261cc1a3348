"""The scheduler over the real chats of a process (DurableChats, a real SQLite journal, the
scripted model): a firing enters through the one entry point and its chat exists only once
the journal took it. The restarts around a slot are tests/integration/test_scheduler_firing.py.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from agent import AgentConfig
from durability.canonical import digest
from python.durable.scheduler import Scheduler, firing_input_id
from python.helpers.scheduler import TaskOrigin
from tests.support.model_server import model_server as model_server
from tests.unit.test_agent_loop import _settings
from tests.unit.test_scheduler import EVERY_MINUTE, T0

pytestmark = pytest.mark.unit

TIMEOUT = 30


@pytest.fixture
def clock():
    return SimpleNamespace(now=T0)


@pytest.fixture
def scheduler(chats, model_server, tmp_path, clock):
    settings = _settings(model_server, tmp_path / "work")
    chats.config = lambda: AgentConfig.from_settings(settings)
    return Scheduler(chats, clock=lambda: clock.now)


TASK = {"name": "pinger", "prompt": "Say ping.", "schedule": EVERY_MINUTE}


async def test_a_firing_opens_the_tasks_chat_and_runs_it_to_its_answer(
    scheduler, chats, clock, model_server
):
    model_server.tool("response", {"text": "ping"})
    task = await scheduler.create({**TASK, "dedicated_context": True}, TaskOrigin("user"))
    assert chats.get(task["context_id"]) is None  # no chat before a firing was admitted
    clock.now += 31
    [firing] = (await scheduler.tick())[0]
    assert (firing.kind, firing.context_id) == ("started", task["context_id"])
    ctx = chats.get(task["context_id"])
    assert ctx is not None and ctx.name == "pinger"
    assert ctx.session.task is not None
    assert await asyncio.wait_for(ctx.session.task, TIMEOUT) == "ping"
    [shown] = [item for item in ctx.log.output(0) if item.get("heading") == "Scheduled task"]
    assert shown["content"] == "Say ping."
    done = await scheduler.get(task["uuid"], with_result=True)
    assert (done["state"], done["last_status"], done["last_result"]) == (
        "idle",
        "completed",
        "ping",
    )
    [run] = chats.journal.list_runs(context_id=task["context_id"])
    assert run.input_id == firing_input_id(task["uuid"], T0 + 30)


async def test_a_refused_firing_leaves_no_chat_behind(scheduler, chats, clock):
    task = await scheduler.create({**TASK, "dedicated_context": True}, TaskOrigin("user"))
    clock.now += 31
    slot = firing_input_id(task["uuid"], T0 + 30)
    # the slot's input id was admitted elsewhere with other content (e.g. an older version
    # of the task, in a process that then died): the journal refuses the copy
    other = chats.journal.admit("elsewhere", slot, digest({"other": True}))
    [firing] = (await scheduler.tick())[0]
    assert (firing.kind, firing.run_id) == ("duplicate", other.run.id)
    assert chats.get(task["context_id"]) is None
    assert chats.journal.list_runs(context_id=task["context_id"]) == []
    assert (await scheduler.tick())[0] == []  # the slot is handled
