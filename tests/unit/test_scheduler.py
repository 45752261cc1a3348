"""The scheduler's rules on a real journal, with a clock the test moves and a small stand-in
for the process's chats whose admission is the journal's own (the system tests use a real
run_ui.py)."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from durability import Journal, RunHeld, TaskConflict, TaskInvalid
from durability.canonical import digest
from durability.records import DecisionRequest
from python.durable import scheduler as scheduler_mod
from python.durable.admission import PLAIN, SubmitOptions
from python.helpers.errors import TaskBusy
from python.helpers.scheduler import TaskOrigin

pytestmark = pytest.mark.unit

T0 = dt.datetime(2030, 1, 1, 12, 0, 30, tzinfo=dt.UTC).timestamp()  # 30 s past a minute
EVERY_MINUTE = {"minute": "*", "hour": "*", "day": "*", "month": "*", "weekday": "*"}


class FakeChat:
    def __init__(self, chat_id: str, chats: FakeChats) -> None:
        self.id = chat_id
        self.chats = chats
        self.log = SimpleNamespace(items=[], log=lambda **kw: self.log.items.append(kw))

    def is_running(self) -> bool:
        return self.id in self.chats.busy


class FakeChats:
    """What the scheduler asks of the process's chats (DurableChats): the journal, the
    chats, whether one is working, and the admission, which here is the journal's own
    (no run starts: the tests decide how each run ends)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.stopping = False
        self.busy: set[str] = set()
        self.chats: dict[str, FakeChat] = {}
        self.admitted: list[str] = []

    def get(self, chat_id: str) -> FakeChat | None:
        return self.chats.get(chat_id)

    def create(self, chat_id: str) -> FakeChat:
        self.chats[chat_id] = FakeChat(chat_id, self)
        return self.chats[chat_id]

    async def submit(
        self, chat_id: str, message, options: SubmitOptions = PLAIN
    ) -> tuple[FakeChat | None, SimpleNamespace]:
        create = options.create
        content = {"message": message.message, "system_message": message.system_message}
        adm = await self.journal.aio.admit(chat_id, message.id, digest(content), message=content)
        self.admitted.append(message.id)
        if adm.created and chat_id not in self.chats:
            assert create is not None, "an unknown chat is made only when asked"
            self.create(chat_id)
        kind = "started" if adm.created else "duplicate"
        return self.chats.get(adm.run.context_id), SimpleNamespace(
            kind=kind, run_id=adm.run.id, context_id=adm.run.context_id
        )


@pytest.fixture
def journal(tmp_path):
    opened = Journal.open_sqlite(tmp_path / "journal.sqlite")
    yield opened
    opened.close()


@pytest.fixture
def clock():
    return SimpleNamespace(now=T0)


@pytest.fixture
def chats(journal):
    return FakeChats(journal)


@pytest.fixture
def scheduler(chats, clock):
    return scheduler_mod.Scheduler(chats, clock=lambda: clock.now)


def task_input(**extra):
    return {"name": "ping", "prompt": "Say ping.", "schedule": EVERY_MINUTE, **extra}


async def fired(scheduler):
    firings, _ = await scheduler.tick()
    return [(f.kind, f.slot, f.reason) for f in firings]


def minute(n: int) -> str:
    """The ISO slot n minutes after 12:00 on the test day."""
    return dt.datetime.fromtimestamp(T0 - 30 + 60 * n, dt.UTC).isoformat()


async def test_a_slot_fires_once_and_the_loop_knows_when_to_wake(scheduler, clock, chats):
    task = await scheduler.create(task_input(), TaskOrigin("user"))
    assert (task["state"], task["type"], task["revision"]) == ("idle", "scheduled", 1)
    assert task["next_run"] == minute(1) and task["context_id"] == task["uuid"]
    firings, wait = await scheduler.tick()
    assert firings == [] and 29 <= wait <= 30.1  # nothing due; wakes at 12:01
    clock.now += 31
    assert await fired(scheduler) == [("started", minute(1), None)]
    assert chats.admitted == [f"sched:{task['uuid']}:{minute(1)}"]
    assert await fired(scheduler) == []  # the same slot never fires twice
    shown = await scheduler.get(task["uuid"])
    assert (shown["state"], shown["last_slot"], shown["revision"]) == ("running", minute(1), 1)


async def test_missed_slots_fire_once_the_latest_and_wait_for_a_busy_chat(
    scheduler, clock, chats, journal
):
    task = await scheduler.create(task_input(), TaskOrigin("user"))
    clock.now += 31
    assert await fired(scheduler) == [("started", minute(1), None)]
    clock.now += 10 * 60  # ten slots pass while the first run still works
    assert await fired(scheduler) == [("deferred", minute(11), "run_pending")]
    run_id = (await scheduler.get(task["uuid"]))["last_run_id"]
    journal.set_run_status(run_id, "completed")
    chats.busy.add(task["context_id"])  # a person's message is running in the chat now
    assert await fired(scheduler) == [("deferred", minute(11), "chat_busy")]
    chats.busy.clear()
    assert await fired(scheduler) == [("started", minute(11), None)]
    assert len(chats.admitted) == 2  # minutes 2-10 never fired


async def test_a_slot_admitted_before_a_crash_is_recorded_not_fired_again(
    scheduler, clock, chats, journal
):
    task = await scheduler.create(task_input(), TaskOrigin("user"))
    clock.now += 31
    input_id = f"sched:{task['uuid']}:{minute(1)}"
    # the process died after the admission, before the bookkeeping: the run exists
    chats.create(task["context_id"])
    first = journal.admit(task["context_id"], input_id, digest({"x": 1}))
    assert await fired(scheduler) == [("recorded", minute(1), None)]
    journal.set_run_status(first.run.id, "completed")
    assert await fired(scheduler) == []
    # and when the run had ended already, the admission returns the recorded run
    clock.now += 60
    input_id = f"sched:{task['uuid']}:{minute(2)}"
    message = {"message": "Say ping.", "system_message": []}
    again = journal.admit(task["context_id"], input_id, digest(message), message=message)
    journal.set_run_status(again.run.id, "completed")
    assert await fired(scheduler) == [("duplicate", minute(2), None)]
    assert (await scheduler.get(task["uuid"]))["last_run_id"] == again.run.id
    assert len({r.id for r in journal.list_runs()}) == 2


async def test_a_failed_run_never_sticks_and_a_held_one_skips_until_decided(
    scheduler, clock, journal
):
    task = await scheduler.create(task_input(), TaskOrigin("user"))
    clock.now += 31
    await fired(scheduler)
    run_id = (await scheduler.get(task["uuid"]))["last_run_id"]
    journal.set_run_status(run_id, "failed", reason="model_error")
    shown = await scheduler.get(task["uuid"])
    assert (shown["state"], shown["last_status"]) == ("idle", "failed")
    clock.now += 60
    assert await fired(scheduler) == [("started", minute(2), None)]  # not stuck in error
    run_id = (await scheduler.get(task["uuid"]))["last_run_id"]
    held = journal.mark_needs_attention(run_id, "model_failed")
    assert (await scheduler.get(task["uuid"]))["state"] == "held"
    clock.now += 60
    assert await fired(scheduler) == [("skipped", minute(3), "run_held")]
    shown = await scheduler.get(task["uuid"])
    assert shown["last_skip"]["reason"] == "run_held" and shown["last_skip"]["slot"] == minute(3)
    journal.decide(DecisionRequest(run_id, "stop", version=held.version, actor="alice"))
    assert (await scheduler.get(task["uuid"]))["state"] == "idle"
    assert await fired(scheduler) == []  # the skipped slot stays skipped
    clock.now += 60
    assert await fired(scheduler) == [("started", minute(4), None)]


async def test_run_now_is_keyed_and_refused_while_busy_or_held(scheduler, chats, journal):
    task = await scheduler.create({"name": "adhoc", "prompt": "Go."}, TaskOrigin("user"))
    assert task["type"] == "adhoc" and task["next_run"] is None
    assert await fired(scheduler) == []  # ad hoc tasks never fire by themselves
    first = await scheduler.run_now(task["uuid"], key="k1")
    assert (first.kind, first.input_id) == ("started", f"sched:{task['uuid']}:run:k1")
    with pytest.raises(TaskBusy) as busy:
        await scheduler.run_now(task["uuid"], key="k2")  # its chat has an open run
    assert busy.value.code == "task_busy"
    journal.set_run_status(first.run_id, "completed")
    again = await scheduler.run_now(task["uuid"], key="k1")
    assert (again.kind, again.run_id) == ("duplicate", first.run_id)
    second = await scheduler.run_now(task["uuid"], key="k2")
    journal.mark_needs_attention(second.run_id, "model_failed")
    with pytest.raises(RunHeld) as held:
        await scheduler.run_now(task["uuid"], key="k3")
    assert held.value.code == "run_held"
    chats.busy.add(task["context_id"])
    with pytest.raises(TaskBusy):
        await scheduler.run_now(task["uuid"], key="k4")


async def test_edits_name_their_revision_and_a_new_schedule_starts_from_now(scheduler, clock):
    task = await scheduler.create(
        task_input(schedule={"minute": "0", "hour": "*"}), TaskOrigin("u")
    )
    updated = await scheduler.update(
        task["uuid"], {"prompt": "Say pong."}, expected_revision=1, actor="user"
    )
    assert (updated["revision"], updated["prompt"]) == (2, "Say pong.")
    with pytest.raises(TaskConflict) as info:
        await scheduler.update(task["uuid"], {"prompt": "x"}, expected_revision=1, actor="agent0")
    assert info.value.current_revision == 2
    clock.now += 3600  # 13:00 is due ...
    moved = await scheduler.update(
        task["uuid"], {"schedule": EVERY_MINUTE}, expected_revision=2, actor="user"
    )
    assert moved["due"] is False  # ... but the schedule changed: only slots from now on fire
    assert await fired(scheduler) == []
    with pytest.raises(TaskInvalid) as bad:
        await scheduler.update(
            task["uuid"], {"schedule": {"minute": "99"}}, expected_revision=3, actor="user"
        )
    assert bad.value.field == "schedule.minute"


async def test_disabled_tasks_never_fire_and_slots_passed_while_disabled_do_not_fire_late(
    scheduler, clock
):
    task = await scheduler.create(task_input(enabled=False), TaskOrigin("user"))
    assert task["state"] == "disabled" and task["next_run"] is None
    clock.now += 600
    assert await fired(scheduler) == []
    enabled = await scheduler.update(
        task["uuid"], {"state": "idle"}, expected_revision=1, actor="user"
    )
    assert enabled["state"] == "idle" and enabled["due"] is False
    clock.now += 60
    assert await fired(scheduler) == [("started", minute(11), None)]


async def test_a_planned_task_fires_each_time_and_only_the_latest_of_missed_ones(scheduler, clock):
    plan = [minute(2), minute(3), minute(5)]
    task = await scheduler.create(
        {"name": "plan", "prompt": "Go.", "plan": plan, "dedicated_context": True}, TaskOrigin("u")
    )
    assert task["type"] == "planned" and task["plan"]["todo"] == plan
    clock.now += 3 * 60  # 12:03:30: 12:02 and 12:03 passed
    assert await fired(scheduler) == [("started", minute(3), None)]
    shown = await scheduler.get(task["uuid"])
    assert shown["plan"]["done"] == plan[:2] and shown["next_run"] == minute(5)


async def test_a_damaged_task_is_listed_and_never_fired(scheduler, clock, journal, tmp_path):
    task = await scheduler.create(task_input(), TaskOrigin("user"))
    import sqlite3

    conn = sqlite3.connect(tmp_path / "journal.sqlite")
    conn.execute("UPDATE scheduled_tasks SET body = '{broken' WHERE id = ?", (task["uuid"],))
    conn.commit()
    conn.close()
    clock.now += 120
    assert await fired(scheduler) == []
    [listed] = await scheduler.list_tasks()
    assert (listed["state"], listed["damage"]) == ("damaged", "undecodable")
    await scheduler.delete(task["uuid"])
    assert await scheduler.list_tasks() == []


async def test_the_clock_offset_is_read_from_the_environment():
    assert scheduler_mod.clock_offset({"A0_SCHEDULER_CLOCK_OFFSET": "90.5"}) == 90.5
    assert scheduler_mod.clock_offset({"A0_SCHEDULER_CLOCK_OFFSET": "soon"}) == 0.0
    assert scheduler_mod.clock_offset({}) == 0.0


async def test_one_task_failing_never_stops_the_others(scheduler, clock, chats, journal):
    doomed = await scheduler.create(task_input(name="doomed"), TaskOrigin("user"))
    other = await scheduler.create(task_input(name="other"), TaskOrigin("user"))
    admit = chats.submit

    async def admit_then_delete(chat_id, message, options=PLAIN):
        answer = await admit(chat_id, message, options)
        if chat_id == doomed["context_id"]:
            journal.delete_task(doomed["uuid"])  # deleted while it was being fired
        return answer

    chats.submit = admit_then_delete
    clock.now += 31
    firings, _ = await scheduler.tick()
    kinds = {f.task_id: (f.kind, f.reason) for f in firings}
    assert kinds == {doomed["uuid"]: ("failed", "task_not_found"), other["uuid"]: ("started", None)}


async def test_a_manual_run_asked_again_gets_its_run_even_while_the_chat_works(
    scheduler, chats, journal
):
    task = await scheduler.create({"name": "adhoc", "prompt": "Go."}, TaskOrigin("user"))
    first = await scheduler.run_now(task["uuid"], key="call-1")
    chats.busy.add(task["context_id"])  # its run is working
    again = await scheduler.run_now(task["uuid"], key="call-1")  # the same call, re-run
    assert (again.kind, again.run_id) == ("recorded", first.run_id)
    journal.set_run_status(first.run_id, "completed")
    chats.busy.add(task["context_id"])  # now something else works in the chat
    later = await scheduler.run_now(task["uuid"], key="call-1")
    assert (later.kind, later.run_id) == ("duplicate", first.run_id)
    with pytest.raises(TaskBusy) as busy:
        await scheduler.run_now(task["uuid"], key="call-2")
    assert busy.value.code == "task_busy"
