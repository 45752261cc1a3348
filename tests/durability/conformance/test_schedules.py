"""Scheduled tasks: revisions, idempotent creation, firing bookkeeping, damage (every engine)."""

from __future__ import annotations

import threading

import pytest

from durability import (
    InvalidArgument,
    Masker,
    TaskConflict,
    TaskExists,
    TaskNotFound,
)
from durability.canonical import canonical_json

pytestmark = pytest.mark.unit


def definition(prompt="Summarise the news", **extra):
    return {
        "name": "news",
        "kind": "scheduled",
        "prompt": prompt,
        "schedule": {"minute": "0", "hour": "7", "day": "*", "month": "*", "weekday": "*"},
        "timezone": "Europe/Berlin",
        **extra,
    }


def test_create_read_and_list(journal):
    task = journal.create_task("t-1", definition(), actor="user", done_until=100.0)
    assert (task.id, task.revision, task.damage) == ("t-1", 1, None)
    assert task.definition == definition()
    assert (task.created_by, task.updated_by, task.done_until) == ("user", "user", 100.0)
    assert task.last_run_id is None and task.last_slot is None and task.last_skip is None
    assert journal.get_task("t-1") == task
    journal.create_task("t-2", definition("other"), actor="agent0", done_until=100.0)
    assert [t.id for t in journal.list_tasks()] == ["t-1", "t-2"]


def test_creating_the_same_task_again_returns_it_and_another_definition_is_refused(journal):
    first = journal.create_task("t-1", definition(), actor="user", done_until=1.0)
    again = journal.create_task("t-1", definition(), actor="agent0", done_until=5.0)
    assert again == first
    with pytest.raises(TaskExists) as info:
        journal.create_task("t-1", definition("changed"), actor="user", done_until=1.0)
    assert info.value.code == "task_exists"
    assert journal.get_task("t-1").definition == definition()


def test_an_edit_on_a_stale_revision_is_refused_and_writes_nothing(journal):
    journal.create_task("t-1", definition(), actor="user", done_until=1.0)
    ui = journal.update_task("t-1", definition("from the UI"), expected_revision=1, actor="user")
    assert (ui.revision, ui.updated_by) == (2, "user")
    with pytest.raises(TaskConflict) as info:
        journal.update_task(
            "t-1", definition("from the agent"), expected_revision=1, actor="agent0"
        )
    assert info.value.code == "task_conflict"
    assert (info.value.expected_revision, info.value.current_revision) == (1, 2)
    assert journal.get_task("t-1").definition["prompt"] == "from the UI"


def test_the_same_definition_again_is_a_no_op_even_on_an_old_revision(journal):
    journal.create_task("t-1", definition(), actor="user", done_until=1.0)
    journal.update_task("t-1", definition("v2"), expected_revision=1, actor="user")
    same = journal.update_task("t-1", definition("v2"), expected_revision=1, actor="user")
    assert same.revision == 2


def test_concurrent_edits_on_one_revision_let_exactly_one_win(journal):
    journal.create_task("t-1", definition(), actor="user", done_until=1.0)
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def edit(n: int) -> None:
        barrier.wait()
        try:
            journal.update_task("t-1", definition(f"edit {n}"), expected_revision=1, actor=f"a{n}")
            outcomes.append("won")
        except TaskConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=edit, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["conflict"] * 3 + ["won"]
    assert journal.get_task("t-1").revision == 2


def test_firing_bookkeeping_keeps_the_revision_and_only_moves_forward(journal):
    journal.create_task("t-1", definition(), actor="user", done_until=100.0)
    fired = journal.record_task_firing("t-1", slot=160.0, input_id="sched:t-1:a", run_id="r1")
    assert (fired.revision, fired.done_until, fired.last_slot) == (1, 160.0, 160.0)
    assert (fired.last_input_id, fired.last_run_id) == ("sched:t-1:a", "r1")
    assert fired.last_fired_at is not None
    older = journal.record_task_firing("t-1", slot=120.0, input_id="sched:t-1:b", run_id="r0")
    assert older.done_until == 160.0  # never back
    manual = journal.record_task_firing("t-1", slot=None, input_id="sched:t-1:m", run_id="r2")
    assert (manual.done_until, manual.last_run_id) == (160.0, "r2")
    skipped = journal.record_task_skip(
        "t-1", slot=220.0, reason="run_held", detail={"run_id": "r2"}
    )
    assert skipped.done_until == 220.0 and skipped.revision == 1
    assert skipped.last_skip["reason"] == "run_held"
    assert skipped.last_skip["slot"] == 220.0 and skipped.last_skip["detail"] == {"run_id": "r2"}
    # an edit right after still names revision 1: the scheduler's writes never conflict with it
    edited = journal.update_task("t-1", definition("v2"), expected_revision=1, actor="user")
    assert edited.revision == 2 and edited.done_until == 220.0
    moved = journal.update_task(
        "t-1", definition("v3"), expected_revision=2, actor="user", done_until=300.0
    )
    assert moved.done_until == 300.0


def test_delete_with_and_without_a_revision(journal):
    journal.create_task("t-1", definition(), actor="user", done_until=1.0)
    journal.create_task("t-2", definition(), actor="user", done_until=1.0)
    journal.update_task("t-1", definition("v2"), expected_revision=1, actor="user")
    with pytest.raises(TaskConflict):
        journal.delete_task("t-1", expected_revision=1)
    journal.delete_task("t-1", expected_revision=2)
    journal.delete_task("t-2")
    assert journal.list_tasks() == []
    with pytest.raises(TaskNotFound) as info:
        journal.get_task("t-1")
    assert info.value.code == "task_not_found"
    for call in (
        lambda: journal.delete_task("t-1"),
        lambda: journal.update_task("t-1", definition(), expected_revision=1, actor="u"),
        lambda: journal.record_task_firing("t-1", slot=1.0, input_id="i", run_id=None),
        lambda: journal.record_task_skip("t-1", slot=1.0, reason="x"),
    ):
        with pytest.raises(TaskNotFound):
            call()


def test_secrets_in_a_definition_are_masked(backend):
    journal = backend.open(masker=Masker({"TOKEN": "hunter2-secret-value"}))
    try:
        task = journal.create_task(
            "t-1", definition("call the API with hunter2-secret-value"), actor="u", done_until=1
        )
        assert "hunter2" not in canonical_json(task.definition)
        assert "§§secret(TOKEN)" in task.definition["prompt"]
    finally:
        journal.close()


def test_bad_arguments_are_refused(journal):
    with pytest.raises(InvalidArgument):
        journal.create_task("", definition(), actor="u", done_until=1.0)
    with pytest.raises(InvalidArgument):
        journal.create_task("t", ["not", "an", "object"], actor="u", done_until=1.0)
    with pytest.raises(InvalidArgument):
        journal.create_task("t", definition(), actor="u", done_until=float("nan"))
    with pytest.raises(InvalidArgument):
        journal.create_task("t", definition("x" * 70_000), actor="u", done_until=1.0)
    journal.create_task("t", definition(), actor="u", done_until=1.0)
    with pytest.raises(InvalidArgument):
        journal.update_task("t", definition(), expected_revision=0, actor="u")
    with pytest.raises(InvalidArgument):
        journal.record_task_skip("t", slot=1.0, reason="")
    assert journal.list_tasks()[0].revision == 1


def test_a_damaged_task_is_listed_with_its_damage_and_can_be_replaced_or_deleted(backend):
    journal = backend.open()
    try:
        journal.create_task("good", definition(), actor="u", done_until=1.0)
        journal.create_task("bad", definition(), actor="u", done_until=1.0)
        journal.create_task("ugly", definition(), actor="u", done_until=1.0)
        backend.overwrite("scheduled_tasks", "body", '{"name": "tampered"}', "id", "bad")
        backend.overwrite("scheduled_tasks", "body", "{not json", "id", "ugly")
        listed = {t.id: t for t in journal.list_tasks()}
        assert listed["good"].damage is None
        assert listed["bad"].damage == "digest_mismatch"
        assert (listed["ugly"].damage, listed["ugly"].definition) == ("undecodable", None)
        repaired = journal.update_task("bad", definition("fixed"), expected_revision=1, actor="u")
        assert (repaired.damage, repaired.revision) == (None, 2)
        report = journal.verify_records()  # python -m durability verify lists it too
        assert report.checked["tasks"] == 3
        assert [(d.record, d.reason, d.ids["task_id"]) for d in report.damages] == [
            ("task", "undecodable", "ugly")
        ]
        assert "scheduled task ugly" in report.damages[0].describe()
        journal.delete_task("ugly")
        assert [t.id for t in journal.list_tasks()] == ["good", "bad"]
        assert journal.verify_records().ok
    finally:
        journal.close()
