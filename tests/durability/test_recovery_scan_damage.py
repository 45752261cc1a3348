"""The start-up scan fails closed per run: a damaged record, or any exception while one run
is classified, holds that run (corrupt_record / recovery_error) and the others go on."""

from __future__ import annotations

import pytest

from durability import CheckpointData, Journal, Masker, recovery
from durability.records import DecisionRequest
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit

SECRET = "hunter2-secret-value"


@pytest.fixture
def journal(backend):
    opened = backend.open(masker=Masker({"API_KEY_X": SECRET}))
    try:
        yield opened
    finally:
        opened.close()


def start(journal: Journal, name: str, *, checkpoint: bool = True):
    run = journal.admit(f"chat-{name}", f"in-{name}", sha(name), message={"message": name}).run
    if checkpoint:
        journal.write_checkpoint(run.id, CheckpointData(state={"step": 0}))
    return run


def commit_model_call(journal: Journal, run, seq: int = 0):
    call = journal.record_intent(
        run.id, agent_no=0, seq=seq, kind="model", name="model", args={"m": 1}, policy="hold"
    )
    return journal.commit_result(call.id, {"response": "ok"})


def by_run(plans):
    return {p.run.id: p for p in plans}


def test_a_damaged_result_holds_its_run_and_the_others_resume(backend, journal):
    healthy, broken = start(journal, "a"), start(journal, "b")
    commit_model_call(journal, healthy)
    call = commit_model_call(journal, broken)
    backend.overwrite("calls", "result", '{"response":"forged"}', "id", call.id)

    plans = by_run(recovery.scan(journal))
    assert plans[healthy.id].action == "resume"
    held = plans[broken.id]
    assert (held.action, held.reason) == ("hold", "corrupt_record")
    assert held.detail["record"] == "call_result" and held.detail["call_id"] == call.id
    run = journal.get_run(broken.id)
    assert (run.status, run.reason) == ("needs_attention", "corrupt_record")
    assert run.reason_detail["seq"] == 0 and run.reason_detail["run_id"] == broken.id
    again = by_run(recovery.scan(journal))  # a later start leaves the held run alone
    assert again[broken.id].action == "skip"
    assert journal.get_run(broken.id).version == run.version


def test_damaged_arguments_of_an_open_call_never_reach_an_adapter(backend, journal):
    run = start(journal, "a")
    shell = {"kind": "tool", "name": "code_execution_tool", "policy": "adapter:shell"}
    call = journal.record_intent(run.id, agent_no=0, seq=0, args={"code": "echo hi"}, **shell)
    backend.overwrite("calls", "args", '{"code":"rm -rf /"}', "id", call.id)
    seen = []
    plans = recovery.scan(journal, adapters={"adapter:shell": lambda c: seen.append(c) or "x"})
    assert seen == []
    assert (plans[0].reason, plans[0].detail["record"]) == ("corrupt_record", "call_args")


def test_a_damaged_input_holds_a_run_that_has_no_checkpoint(backend, journal):
    run = start(journal, "a", checkpoint=False)
    (event,) = journal.list_events(run_id=run.id)
    backend.overwrite("events", "payload", '{"input_id":"in-a","message":"x"}', "id", event.id)
    (plan,) = recovery.scan(journal)
    assert (plan.action, plan.reason) == ("hold", "corrupt_record")
    assert (plan.detail["record"], plan.detail["event_id"]) == ("event", event.id)


def test_a_damaged_input_is_not_read_when_a_checkpoint_exists(backend, journal):
    run = start(journal, "a")
    (event,) = journal.list_events(run_id=run.id)
    backend.overwrite("events", "payload", "{", "id", event.id)
    (plan,) = recovery.scan(journal)
    assert plan.action == "resume"


def test_a_damaged_recovery_attempt_holds_until_a_decision(backend, journal):
    run = start(journal, "a")
    (first,) = recovery.scan(journal)
    assert first.action == "resume"
    attempt = journal.list_events(run_id=run.id)[-1]
    assert attempt.type == "recovery_attempt"
    backend.overwrite("events", "payload", '{"progress":7}', "id", attempt.id)
    (plan,) = recovery.scan(journal)
    assert (plan.reason, plan.detail["event_type"]) == ("corrupt_record", "recovery_attempt")
    held = journal.get_run(run.id)
    journal.decide(DecisionRequest(run.id, "resume", version=held.version, actor="alice"))
    (after,) = recovery.scan(journal)  # a decision starts the count afresh
    assert after.action == "resume"


@pytest.mark.parametrize("error", [ValueError, KeyError, RuntimeError, AttributeError])
def test_any_exception_holds_only_its_run(journal, error):
    healthy, broken = start(journal, "a"), start(journal, "b")
    for run, tool in ((healthy, "response"), (broken, "durable_plan")):
        journal.record_intent(
            run.id, agent_no=0, seq=0, kind="tool", name=tool, args={}, policy="safe_replay"
        )

    def is_safe(name: str) -> bool:
        if name == "durable_plan":
            raise error(f"boom with {SECRET}")
        return True

    plans = by_run(recovery.scan(journal, is_safe=is_safe))
    assert plans[healthy.id].action == "resume"
    held = journal.get_run(broken.id)
    assert (held.status, held.reason) == ("needs_attention", "recovery_error")
    detail = held.reason_detail
    assert (detail["stage"], detail["type"]) == ("scan", error.__name__)
    assert SECRET not in str(detail) and "§§secret(API_KEY_X)" in detail["message"]
    assert "Traceback" not in str(detail)
    # the held run is decidable: its open call is the one a decision acts on
    outcome = journal.decide(
        DecisionRequest(broken.id, "stop", version=held.version, actor="alice")
    )
    assert outcome.run.status == "stopped"
