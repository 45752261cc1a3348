"""The PostgreSQL backend itself: schema in its namespace, migrations, errors, passwords."""

from __future__ import annotations

import logging
import threading

import psycopg
import pytest
from psycopg import sql

from durability import InvalidArgument, Journal, SchemaTooNew, StorageError
from durability.records import DecisionRequest
from durability.store.postgres import PostgresStore, migrations
from tests.postgres.conftest import sha

pytestmark = pytest.mark.postgres


def _tables(server, namespace: str) -> set[str]:
    with server.connect() as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (namespace,),
        ).fetchall()
    return {r[0] for r in rows}


def test_the_schema_lives_in_its_namespace_and_is_migrated_once(postgres_server, pg_namespace):
    with Journal.open_postgres(postgres_server.dsn, namespace=pg_namespace) as journal:
        assert journal.store.schema_version == migrations()[-1][0]
        journal.admit("chat", "in-1", sha("x"))
    assert {"runs", "calls", "claims", "resource_files", "schema_migrations"} <= _tables(
        postgres_server, pg_namespace
    )
    assert not {"runs", "calls"} & _tables(postgres_server, "public")
    with Journal.open_postgres(postgres_server.dsn, namespace=pg_namespace) as again:
        assert len(again.list_runs()) == 1  # reopening migrates nothing and keeps the rows
    with postgres_server.connect() as conn:
        versions = conn.execute(
            sql.SQL("SELECT version FROM {}.schema_migrations ORDER BY version").format(
                sql.Identifier(pg_namespace)
            )
        ).fetchall()
    assert [v[0] for v in versions] == [n for n, _ in migrations()]


def test_workers_starting_together_migrate_once(postgres_server, pg_namespace):
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []
    stores: list[PostgresStore] = []

    def start():
        barrier.wait(timeout=30)
        try:
            stores.append(PostgresStore(postgres_server.dsn, namespace=pg_namespace, pool_size=1))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for store in stores:
        store.close()
    assert errors == [] and len(stores) == 4


def test_namespaces_do_not_see_each_other(postgres_server, pg_namespace):
    other = postgres_server.new_namespace()
    try:
        with (
            Journal.open_postgres(postgres_server.dsn, namespace=pg_namespace) as a,
            Journal.open_postgres(postgres_server.dsn, namespace=other) as b,
        ):
            a.admit("chat", "in-1", sha("x"))
            assert b.list_runs() == [] and b.input_context("in-1") is None
            b.admit("chat", "in-1", sha("other content"))  # no conflict across namespaces
    finally:
        postgres_server.drop_namespace(other)


@pytest.mark.parametrize("namespace", ["Agent", "a-b", "pg_x", "", "x;drop"])
def test_bad_namespaces_are_refused(postgres_server, namespace):
    with pytest.raises(InvalidArgument):
        Journal.open_postgres(postgres_server.dsn, namespace=namespace)


def test_a_newer_schema_is_refused(postgres_server, pg_namespace):
    Journal.open_postgres(postgres_server.dsn, namespace=pg_namespace).close()
    with postgres_server.connect() as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.schema_migrations (version, name, applied_at) VALUES (999, 'x', 0)"
            ).format(sql.Identifier(pg_namespace))
        )
    with pytest.raises(SchemaTooNew) as info:
        Journal.open_postgres(postgres_server.dsn, namespace=pg_namespace)
    assert info.value.schema_version == 999


def test_the_password_never_shows(postgres_server, pg_namespace, caplog):
    password = postgres_server.password or "not-used"
    caplog.set_level(logging.DEBUG)
    # a database that does not exist fails with or without a password check
    missing = postgres_server.dsn_with(dbname="no_such_database_here")
    with pytest.raises(StorageError) as info:
        Journal.open_postgres(missing, namespace=pg_namespace, connect_timeout=3)
    texts = [str(info.value), repr(info.value), str(info.value.to_dict()), caplog.text]
    if postgres_server.own:  # a wrong password, against the private cluster's scram auth
        wrong = postgres_server.dsn_with(password="wrong-" + password)
        with pytest.raises(StorageError) as info2:
            Journal.open_postgres(wrong, namespace=pg_namespace, connect_timeout=3)
        texts += [str(info2.value.to_dict()), caplog.text]
        assert "password" in str(info2.value.to_dict()).lower()  # it says what failed
    with Journal.open_postgres(postgres_server.dsn, namespace=pg_namespace) as journal:
        texts += [repr(journal.store), repr(journal.store.dsn), str(journal.store.dsn)]
    for text in texts:
        assert password not in text
        assert "wrong-" + password not in text


def test_a_value_postgres_cannot_store_is_a_clear_refusal(postgres_server, pg_namespace):
    with Journal.open_postgres(postgres_server.dsn, namespace=pg_namespace) as journal:
        run = journal.admit("chat", "in-1", sha("x")).run
        held = journal.mark_needs_attention(run.id, "test")
        with pytest.raises(InvalidArgument):  # NUL is not allowed in PostgreSQL text
            journal.decide(
                DecisionRequest(run.id, "stop", version=held.version, actor="me", note="a\x00b")
            )
        assert journal.get_run(run.id).status == "needs_attention"


def test_a_killed_session_before_commit_is_retried_on_a_new_connection(
    postgres_server, pg_namespace
):
    with Journal.open_postgres(postgres_server.dsn, namespace=pg_namespace, pool_size=1) as j:
        run = j.admit("chat", "in-1", sha("x")).run
        with postgres_server.connect() as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'agent-zero' AND datname = current_database()"
                " AND pid <> pg_backend_pid()"
            ).fetchall()
        assert killed, "the journal's pooled connection should have been found"
        call = j.record_intent(
            run.id, agent_no=0, seq=0, kind="tool", name="t", args={}, policy="hold"
        )
        assert j.get_call(call.id).state == "open"


def test_concurrent_writers_serialise_on_one_chat(postgres_server, pg_namespace):
    """Two processes' worth of connections (two stores) racing: SERIALIZABLE plus retries
    give the single-writer outcome."""
    with (
        Journal.open_postgres(postgres_server.dsn, namespace=pg_namespace) as a,
        Journal.open_postgres(postgres_server.dsn, namespace=pg_namespace) as b,
    ):
        barrier = threading.Barrier(8)
        outcomes: list[object] = []

        def admit(journal, i):
            barrier.wait(timeout=30)
            try:
                outcomes.append(journal.admit("chat", f"in-{i}", sha(str(i))))
            except Exception as exc:
                outcomes.append(exc)

        threads = [threading.Thread(target=admit, args=(a if i % 2 else b, i)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        created = [o for o in outcomes if not isinstance(o, Exception)]
        assert len(created) == 1, outcomes
        assert all(
            getattr(o, "code", None) == "active_run_exists" for o in outcomes if o not in created
        )
        assert not any(isinstance(o, psycopg.Error) for o in outcomes)
