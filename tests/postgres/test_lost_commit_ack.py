"""A lost commit acknowledgement on a shared worker's journal (issue #17, point 12): a
proxy between the journal and a real PostgreSQL drops the connection right after the
server committed (or right before COMMIT reaches it). The write is settled on a fresh
connection, never failed while an answer can be had, never written twice."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

import pytest

from durability import CheckpointData, FencingLost, Journal, StorageError
from durability.store import _lost_commit
from tests.postgres.conftest import sha, wait_for
from tests.support.pg_proxy import PgProxy, pg_proxy

pytestmark = pytest.mark.postgres

LOGGER = "a0.durability.postgres"


@pytest.fixture
def proxy(postgres_server) -> Iterator[PgProxy]:
    with pg_proxy(postgres_server.dsn) as started:
        yield started


@pytest.fixture
def proxied(postgres_server, pg_namespace, proxy) -> Iterator[Callable[..., Journal]]:
    """``proxied(worker_id, lease_seconds=30)``: a worker's journal through the proxy."""
    opened: list[Journal] = []

    def make(worker_id: str = "w1", lease_seconds: float = 30.0) -> Journal:
        journal = Journal.open_postgres(
            proxy.dsn(postgres_server.dsn),
            namespace=pg_namespace,
            worker_id=worker_id,
            lease_seconds=lease_seconds,
            pool_size=2,
            connect_timeout=5,
        )
        opened.append(journal)
        return journal

    yield make
    for journal in opened:
        journal.close()


def intent(journal: Journal, run_id: str, seq: int = 0, args: object = None):
    return journal.record_intent(
        run_id, agent_no=0, seq=seq, kind="tool", name="pay", args=args or {"n": seq}, policy="hold"
    )


def rows(postgres_server, namespace: str, query: str, *params: object) -> list[tuple]:
    with postgres_server.connect() as conn:
        conn.execute(f'SET search_path TO "{namespace}"')
        return conn.execute(query, params).fetchall()


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_a_result_whose_commit_ack_is_lost_is_committed_once_and_returned(
    proxied, proxy, postgres_server, pg_namespace, caplog
):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    journal = proxied()
    run = journal.admit("chat", "in-1", sha("x")).run
    call = intent(journal, run.id)
    proxy.arm(b"paid-4711")
    done = journal.commit_result(call.id, {"out": "paid-4711"})
    assert proxy.lost == 1  # the server committed; the worker never heard so
    assert done.state == "completed" and done.result == {"out": "paid-4711"}
    found = rows(
        postgres_server, pg_namespace, "SELECT state, result FROM calls WHERE run_id = %s", run.id
    )
    assert len(found) == 1 and found[0][0] == "completed"
    lines = warnings(caplog)
    assert any("journal write commit_result" in x and "try 1 of 5" in x for x in lines), lines
    assert any("had committed" in x for x in lines), lines
    assert postgres_server.password not in caplog.text
    # the run goes on: the next call at the next position, on the same claim
    assert intent(journal, run.id, seq=1).state == "open"


def test_an_intent_whose_commit_ack_is_lost_is_the_new_call_not_an_old_one(
    proxied, proxy, postgres_server, pg_namespace, caplog
):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    journal = proxied()
    run = journal.admit("chat", "in-1", sha("x")).run
    proxy.arm(b"intent-0815")
    call = intent(journal, run.id, args={"ask": "intent-0815"})
    assert proxy.lost == 1
    assert call.state == "open" and call.attempt == 1
    found = rows(postgres_server, pg_namespace, "SELECT id FROM calls WHERE run_id = %s", run.id)
    assert found == [(call.id,)]  # the call returned is the one committed, once
    assert any("journal write record_intent" in x for x in warnings(caplog))
    assert journal.commit_result(call.id, "ok").state == "completed"


def test_a_checkpoint_whose_commit_ack_is_lost_is_stored_once(
    proxied, proxy, postgres_server, pg_namespace
):
    journal = proxied()
    run = journal.admit("chat", "in-1", sha("x")).run
    version = journal.get_run(run.id).version
    proxy.arm(b"state-3141")
    ref = journal.write_checkpoint(run.id, CheckpointData({"mark": "state-3141"}, {}))
    assert proxy.lost == 1
    found = rows(
        postgres_server, pg_namespace, "SELECT id FROM checkpoints WHERE run_id = %s", run.id
    )
    assert found == [(ref.id,)]
    assert journal.get_run(run.id).version == version + 1  # bumped once, not twice


def test_a_commit_that_never_reached_the_server_is_run_again(
    proxied, proxy, postgres_server, pg_namespace, caplog
):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    journal = proxied()
    run = journal.admit("chat", "in-1", sha("x")).run
    call = intent(journal, run.id)
    proxy.arm(b"paid-2718", request=True)  # the COMMIT is lost: the server rolls back
    done = journal.commit_result(call.id, {"out": "paid-2718"})
    assert proxy.lost == 1 and done.state == "completed"
    found = rows(postgres_server, pg_namespace, "SELECT state FROM calls WHERE run_id = %s", run.id)
    assert found == [("completed",)]
    lines = warnings(caplog)
    assert any("the write runs again" in x for x in lines), lines


def test_with_the_database_gone_the_write_fails_as_outcome_unknown_after_the_bound(
    proxied, proxy, postgres_server, pg_namespace, caplog
):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    journal = proxied()
    run = journal.admit("chat", "in-1", sha("x")).run
    call = intent(journal, run.id)
    proxy.arm(b"paid-1618", then_down=True)  # lost, then every connection refused
    with pytest.raises(StorageError) as info:
        journal.commit_result(call.id, {"out": "paid-1618"})
    error = info.value
    assert error.code == "storage_error" and error.outcome_unknown is True
    assert error.operation == "commit_result" and 1 <= error.tries <= _lost_commit.TRIES
    tries = [x for x in warnings(caplog) if "asking PostgreSQL on a fresh connection" in x]
    assert len(tries) == error.tries, tries
    assert postgres_server.password not in str(error.to_dict()) + caplog.text
    proxy.restore()
    # it had committed: once the database is back, the recorded result is there
    found = rows(postgres_server, pg_namespace, "SELECT state FROM calls WHERE id = %s", call.id)
    assert found == [("completed",)]
    assert journal.commit_result(call.id, {"out": "paid-1618"}).state == "completed"


def test_a_repeat_refused_by_the_fence_is_a_fencing_loss_not_a_retry(
    proxied, proxy, open_journal, postgres_server, pg_namespace, monkeypatch, caplog
):
    """The COMMIT never reached the server; before A asks again, its lease ran out and B
    claimed the run. A's repeat carries A's token: refused, nothing committed."""
    caplog.set_level(logging.WARNING)
    monkeypatch.setattr(_lost_commit, "FIRST_WAIT", 4.0)  # room for B to claim
    a = proxied("wa", lease_seconds=1.0)
    b = open_journal("wb")  # straight to the server
    run = a.admit("chat", "in-1", sha("x")).run
    call = intent(a, run.id)
    proxy.arm(b"paid-1414", request=True)

    def take_over() -> None:
        proxy.lost_event.wait(60)
        wait_for(lambda: b.cluster.claim(run.id), timeout=30, what="B to claim the run")

    thread = threading.Thread(target=take_over, daemon=True)
    thread.start()
    with pytest.raises(FencingLost) as info:
        a.commit_result(call.id, {"out": "paid-1414"})
    thread.join(30)
    assert info.value.reason == "superseded"
    assert b.get_call(call.id).state == "open"  # nothing of A's write committed
    assert any("fenced write refused" in r.getMessage() for r in caplog.records)
    assert len([x for x in warnings(caplog) if "asking PostgreSQL" in x]) == 1


def test_a_repeat_carries_the_token_of_the_first_attempt(open_journal):
    """The fence pins the token of a write's first attempt: a repeat under a newer claim
    of the same worker is refused too (the write was meant for the old one), and nothing
    of the repeat commits (its statements may have run: they are rolled back)."""
    w1 = open_journal("w1")
    run = w1.admit("chat", "in-1", sha("x")).run
    first = w1.cluster.get(run.id).token

    def op(tx):
        tx.sql.run("UPDATE runs SET version = version + 1 WHERE id = ?", (run.id,))
        return tx.sql.scalar("SELECT version FROM runs WHERE id = ?", (run.id,))

    fenced = w1.cluster.fenced(op, run.id, None)
    version = w1.store.write(fenced)
    assert w1.get_run(run.id).version == version
    w1.cluster.release(run.id)
    assert w1.cluster.claim(run.id).token > first
    with pytest.raises(FencingLost) as info:
        w1.store.write(fenced)  # the same write again
    assert info.value.reason == "superseded" and info.value.held_token == first
    assert w1.get_run(run.id).version == version
