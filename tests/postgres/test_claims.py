"""Claims, leases and fencing against a real PostgreSQL (durability/cluster.py)."""

from __future__ import annotations

import logging
import threading

import pytest
from psycopg import sql

from durability import CheckpointData, FencingLost, digest
from durability.decision_fit import RETRY_MODEL_CALL
from durability.journal._plan import run_write
from durability.records import DecisionRequest
from durability.store.postgres_tx import PostgresTx
from tests.postgres.conftest import sha, wait_for

pytestmark = pytest.mark.postgres


def intent(journal, run_id, seq=0, name="t"):
    return journal.record_intent(
        run_id, agent_no=0, seq=seq, kind="tool", name=name, args={"n": seq}, policy="hold"
    )


def claim_events(journal, run_id):
    return [e.payload for e in journal.list_events(run_id=run_id) if e.type == "claim"]


def test_the_admitting_worker_holds_the_new_run(open_journal):
    w1 = open_journal("w1")
    run = w1.admit("chat", "in-1", sha("x")).run
    claim = w1.cluster.get(run.id)
    assert claim is not None and claim.worker_id == "w1" and claim.token > 0
    assert w1.cluster.is_live(run.id)
    owner = w1.cluster.owner(run.id)
    assert (owner.worker_id, owner.token, owner.live) == ("w1", claim.token, True)
    assert claim_events(w1, run.id) == [{"worker_id": "w1", "token": claim.token, "previous": None}]
    again = w1.admit("chat", "in-1", sha("x"))  # a duplicate admission claims nothing new
    assert again.created is False and w1.cluster.get(run.id).token == claim.token


def test_a_worker_without_the_claim_writes_nothing(open_journal):
    w1, w2 = open_journal("w1"), open_journal("w2")
    run = w1.admit("chat", "in-1", sha("x")).run
    call = intent(w1, run.id)
    version = w1.get_run(run.id).version
    attempts = [
        lambda: intent(w2, run.id, seq=1),
        lambda: w2.commit_result(call.id, "not mine"),
        lambda: w2.write_checkpoint(run.id, CheckpointData({}, {})),
        lambda: w2.set_run_status(run.id, "failed"),
        lambda: w2.mark_needs_attention(run.id, "x"),
        lambda: w2.note_recovery_attempt(run.id),
        lambda: w2.append_event("chat", "log", {"x": 1}, run_id=run.id),
    ]
    for attempt in attempts:
        with pytest.raises(FencingLost) as info:
            attempt()
        assert info.value.code == "fencing_lost"
        assert (info.value.reason, info.value.worker_id) == ("not_claimed", "w2")
    assert w1.get_run(run.id).version == version
    assert w1.get_call(call.id).state == "open" and len(w1.list_calls(run.id)) == 1
    # people's actions are not fenced: any worker serves them
    w2.grant_retries(run.id, 1, actor="alice")
    w2.append_event("chat", "note", {"from": "w2"})
    assert w1.commit_result(call.id, "done").state == "completed"


def test_a_retry_model_call_through_another_worker_is_not_fenced(open_journal):
    """Retry model call is a person's decision (#23): any worker records it, the run is
    active again and its claim stays with the worker that holds it."""
    w1, w2 = open_journal("w1"), open_journal("w2")
    run = w1.admit("chat", "in-1", sha("x")).run
    call = w1.record_intent(
        run.id, agent_no=0, seq=0, kind="model", name="model", args={"m": 1}, policy="hold"
    )
    w1.commit_result(call.id, {"error": "model_error", "status": 500}, failed=True)
    held = w1.mark_needs_attention(run.id, "model_failed", {"call_id": call.id})
    token = w1.cluster.get(run.id).token
    outcome = w2.decide(
        DecisionRequest(run.id, RETRY_MODEL_CALL, attempts=1, version=held.version, actor="alice")
    )
    assert outcome.applied and outcome.run.status == "active"
    assert w1.get_call(call.id).state == "superseded"
    assert w2.cluster.get(run.id) is None and w1.cluster.owner(run.id).worker_id == "w1"
    assert w1.cluster.get(run.id).token == token
    retried = w1.record_intent(  # the holder carries it out
        run.id, agent_no=0, seq=0, kind="model", name="model", args={"m": 2}, policy="hold"
    )
    assert retried.attempt == 2


def test_a_live_claim_is_not_taken_renewal_extends_it_and_release_frees_it(open_journal):
    w1, w2 = open_journal("w1"), open_journal("w2")
    run = w1.admit("chat", "in-1", sha("x")).run
    first = w1.cluster.get(run.id)
    assert w2.cluster.claim(run.id) is None
    assert w2.cluster.sweep() == []
    renewal = w1.cluster.renew()
    assert [c.run_id for c in renewal.renewed] == [run.id] and renewal.lost == []
    assert renewal.renewed[0].expires_at > first.expires_at
    assert renewal.renewed[0].token == first.token
    assert w1.cluster.release(run.id) is True
    assert w1.cluster.get(run.id) is None and w1.cluster.owner(run.id).worker_id is None
    with pytest.raises(FencingLost):
        intent(w1, run.id)  # released: not this worker's any more
    taken = w2.cluster.claim(run.id)
    assert taken is not None and taken.token > first.token and taken.previous_worker is None
    intent(w2, run.id)


def test_an_expired_lease_is_taken_over_and_the_late_write_commits_nothing(open_journal, caplog):
    caplog.set_level(logging.INFO, logger="a0.durability.cluster")
    w1, w2 = open_journal("w1", lease_seconds=0.4), open_journal("w2")
    run = w1.admit("chat", "in-1", sha("x")).run
    call = intent(w1, run.id)
    old = w1.cluster.get(run.id)
    assert w2.cluster.claim(run.id) is None  # still live
    taken = wait_for(lambda: w2.cluster.claim(run.id), what="the lease to expire")
    assert taken.token > old.token and taken.previous_worker == "w1"
    assert not w1.cluster.is_live(run.id)  # w1's own clock also says its lease ran out
    version = w2.get_run(run.id).version
    calls = w2.list_calls(run.id)
    with pytest.raises(FencingLost) as info:
        w1.commit_result(call.id, "late result")
    assert info.value.to_dict() == {
        "code": "fencing_lost",
        "message": "the run was claimed by another worker",
        "run_id": run.id,
        "worker_id": "w1",
        "reason": "superseded",
        "held_token": old.token,
        "current_token": taken.token,
    }
    with pytest.raises(FencingLost):
        w1.write_checkpoint(run.id, CheckpointData({"late": True}, {}))
    assert w2.get_run(run.id).version == version
    assert w2.list_calls(run.id) == calls and w2.latest_checkpoint(run.id) is None
    assert w1.cluster.get(run.id) is None  # forgotten, and said so in the log, once a write
    refusals = [r.getMessage() for r in caplog.records if "fenced write refused" in r.message]
    assert refusals == [
        f"fenced write refused (superseded): worker w1's commit_result for run {run.id}"
        f" (call {call.id}) under token {old.token}; the run's token is {taken.token}:"
        " nothing of it committed, and the worker starts no new effect for that run",
        f"fenced write refused (not_claimed): worker w1's write_checkpoint for run {run.id}"
        f" (call none) under token {old.token}; the run's token is {taken.token}:"
        " nothing of it committed, and the worker starts no new effect for that run",
    ]
    assert "claim lost" not in caplog.text  # the refusal is the line that says it
    assert w1.cluster.renew().renewed == []
    assert w2.commit_result(call.id, "recovered").state == "completed"
    assert claim_events(w2, run.id) == [
        {"worker_id": "w1", "token": old.token, "previous": None},
        {
            "worker_id": "w2",
            "token": taken.token,
            "previous": {"worker_id": "w1", "token": old.token},
        },
    ]


def test_renewal_reports_a_claim_taken_over_meanwhile(open_journal, caplog):
    caplog.set_level(logging.INFO, logger="a0.durability.cluster")
    w1, w2 = open_journal("w1", lease_seconds=0.3), open_journal("w2")
    lost: list[list[str]] = []
    run = w1.admit("chat", "in-1", sha("x")).run
    token = w1.cluster.token(run.id)
    wait_for(lambda: w2.cluster.claim(run.id), what="the lease to expire")
    renewal = w1.cluster.renew()
    assert renewal.lost == [run.id] and renewal.renewed == []
    assert (  # the heartbeat's line, distinct from a refused write's
        f"claim lost: worker w1 no longer holds run {run.id} (token {token}): its heartbeat's"
        " renewal found the run taken over or released" in caplog.text
    )
    heartbeat = w2.cluster.start_heartbeat(0.05, on_lost=lost.append)
    try:
        wait_for(lambda: heartbeat.beats >= 3, what="three heartbeats")
    finally:
        heartbeat.stop()
    assert lost == [] and w2.cluster.is_live(run.id)


def test_a_heartbeat_keeps_a_short_lease_and_stopping_it_lets_the_run_go(open_journal):
    w1, w2 = open_journal("w1", lease_seconds=0.5), open_journal("w2")
    run = w1.admit("chat", "in-1", sha("x")).run
    first = w1.cluster.get(run.id)
    heartbeat = w1.cluster.start_heartbeat(0.1)
    try:
        wait_for(
            lambda: w1.cluster.get(run.id).expires_at > first.expires_at + 0.6,
            what="renewals past the first lease",
        )
        assert w2.cluster.claim(run.id) is None
        assert w1.cluster.is_live(run.id)
    finally:
        heartbeat.stop()
    assert wait_for(lambda: w2.cluster.claim(run.id), what="the lease to expire").token > (
        first.token
    )


def test_only_active_runs_are_claimed(open_journal):
    admin, w2 = open_journal(), open_journal("w2")
    done = admin.admit("a", "in-a", sha("a")).run
    admin.set_run_status(done.id, "completed")
    held = admin.admit("b", "in-b", sha("b")).run
    admin.mark_needs_attention(held.id, "test")
    active = admin.admit("c", "in-c", sha("c")).run  # admitted without a worker: unclaimed
    assert w2.cluster.claim(done.id) is None and w2.cluster.claim(held.id) is None
    assert [c.run_id for c in w2.cluster.sweep(limit=10)] == [active.id]
    assert w2.cluster.claim("no-such-run") is None


def test_a_takeover_waits_for_a_write_in_flight_which_commits_first(
    open_journal, postgres_server, pg_namespace
):
    """The fenced write holds the run's row: a takeover racing it comes after it."""
    w1 = open_journal("w1", lease_seconds=0.3)
    run = w1.admit("chat", "in-1", sha("x")).run
    wait_for(lambda: not w1.cluster.is_live(run.id), what="the lease to run out")
    inside, go_on = threading.Event(), threading.Event()

    def slow_write(tx):
        inside.set()
        assert go_on.wait(30)
        tx.events.insert("chat", run.id, "slow", {}, 0.0, digest({}))

    writer = threading.Thread(target=lambda: w1.execute(run_write(slow_write, run_id=run.id)))
    writer.start()
    assert inside.wait(30)
    w2 = open_journal("w2")
    result: list[object] = []
    claimer = threading.Thread(target=lambda: result.append(w2.cluster.claim(run.id)))
    claimer.start()
    claimer.join(0.5)
    assert claimer.is_alive(), "the takeover should wait for the write holding the run's row"
    go_on.set()
    writer.join(30)
    claimer.join(30)
    assert result and result[0] is not None
    types = [e.type for e in w2.list_events(run_id=run.id)]
    assert types.index("slow") < len(types) - 1 and types[-1] == "claim"


def test_a_write_racing_a_takeover_commit_is_refused(open_journal, postgres_server, pg_namespace):
    """A takeover that locked the run first: the late write waits, then finds the new
    token and commits nothing."""
    w1 = open_journal("w1", lease_seconds=0.3)
    run = w1.admit("chat", "in-1", sha("x")).run
    wait_for(lambda: not w1.cluster.is_live(run.id), what="the lease to run out")
    with postgres_server.connect() as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_namespace)))
        conn.execute("BEGIN")
        taken = PostgresTx(conn).claims.claim_run(run.id, "w2", 30.0)  # not committed yet
        assert taken is not None
        errors: list[BaseException] = []

        def late():
            try:
                w1.write_checkpoint(run.id, CheckpointData({"late": True}, {}))
            except BaseException as exc:
                errors.append(exc)

        writer = threading.Thread(target=late)
        writer.start()
        writer.join(0.5)
        assert writer.is_alive(), "the write should wait for the takeover's row lock"
        conn.execute("COMMIT")
        writer.join(30)
    assert len(errors) == 1 and isinstance(errors[0], FencingLost)
    assert errors[0].current_token == taken.token
    assert w1.latest_checkpoint(run.id) is None
