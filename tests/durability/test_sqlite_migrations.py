"""Schemas 2-4: upgrading a schema-1 file; the pages a journaled step writes."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import replace

import pytest

from durability import CheckpointData, Journal
from durability.store.sqlite import PAGE_SIZE, migrations
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit

FRAME = PAGE_SIZE + 24  # one WAL frame: a page (1 KiB in a new journal) and its header


def index_columns(path, name):
    conn = sqlite3.connect(path)
    try:
        return [r[2] for r in conn.execute(f"PRAGMA index_info({name})")]
    finally:
        conn.close()


def test_a_schema_1_file_is_upgraded_with_its_data(tmp_path):
    path = tmp_path / "journal.sqlite"
    first = dict(migrations())[1].read_text(encoding="utf-8")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(f"BEGIN;\n{first}\nPRAGMA user_version=1;\nCOMMIT;")
    conn.execute("INSERT INTO contexts (id, created_at) VALUES ('chat', 1.0)")
    conn.execute(
        "INSERT INTO runs (id, context_id, input_id, input_digest, status, version,"
        " created_at, updated_at) VALUES ('r1', 'chat', 'in-1', ?, 'active', 7, 1.0, 2.0)",
        (sha("x"),),
    )
    body = '{"histories":{},"run_id":"r1","seq":null,"state":{"old":true},"v":1}'
    conn.execute(
        "INSERT INTO checkpoints (run_id, context_id, seq, body, digest, created_at)"
        " VALUES ('r1', 'chat', NULL, ?, ?, 1.5)",
        (body, sha(body)),
    )
    conn.close()
    assert index_columns(path, "runs_by_status") == ["status", "updated_at"]
    with Journal.open_sqlite(path) as journal:
        assert journal.store.schema_version == migrations()[-1][0] >= 2
        run = journal.get_run("r1")
        assert (run.status, run.version) == ("active", 7)
        journal.record_intent("r1", agent_no=0, seq=0, kind="tool", name="t", args={}, policy="p")
        assert journal.get_run("r1").version == 8
    assert index_columns(path, "runs_by_status") == ["status"]
    assert index_columns(path, "calls_open") == []  # dropped by 0003
    assert index_columns(path, "checkpoints_by_context") == []  # dropped by 0004
    with Journal.open_sqlite(path) as journal:
        assert [c.seq for c in journal.open_intents("r1")] == [0]
        old = journal.latest_context_checkpoint("chat")
        assert (old.id, old.state) == (1, {"old": True})
        ref = journal.write_checkpoint("r1", CheckpointData({"new": True}, {}))
        assert ref.id == 2 and journal.latest_context_checkpoint("chat").state == {"new": True}
    conn = sqlite3.connect(path)
    try:
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'checkpoints'").fetchone()
        assert "AUTOINCREMENT" not in sql[0]
    finally:
        conn.close()


def test_a_version_bump_rewrites_only_the_runs_page(tmp_path):
    path = tmp_path / "journal.sqlite"
    with Journal.open_sqlite(path) as journal:
        run = journal.admit("chat", "in-1", sha("x")).run
        for i in range(3):  # other runs in other chats share the table and indexes
            journal.admit(f"other{i}", f"in-o{i}", sha(str(i)))
        wal = f"{path}-wal"

        def bump(tx):
            current = tx.runs.get(run.id)
            tx.runs.update(
                replace(current, version=current.version + 1, updated_at=current.updated_at + 1)
            )

        before = os.path.getsize(wal)
        journal.store.write(bump)
        assert os.path.getsize(wal) - before == FRAME  # the runs leaf, no index page
        assert journal.get_run(run.id).version == run.version + 1

        def hold(tx):
            current = tx.runs.get(run.id)
            tx.runs.update(replace(current, status="needs_attention", reason="test"))

        journal.store.write(hold)  # a real change still updates the indexes it touches
        assert [r.id for r in journal.list_runs("needs_attention")] == [run.id]
        assert journal.active_run("chat").status == "needs_attention"


def test_a_journaled_step_writes_four_pages_per_commit(tmp_path):
    """Intent: the call row and its two indexes, the run row. Result and checkpoint: the
    call row, the run row, the checkpoint row and its index (no new history to store).
    Counted in a file of 4 KiB pages (an existing file keeps its page size): in 1 KiB pages
    a leaf fills after a few rows, and a split or the file's growth adds pages now and then."""
    path = tmp_path / "journal.sqlite"
    wal = f"{path}-wal"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size=4096")
    conn.execute("VACUUM")  # an empty file of 4 KiB pages
    conn.close()
    frame = 4096 + 24
    with Journal.open_sqlite(path) as journal:
        assert journal.store._writer_conn.execute("PRAGMA page_size").fetchone()[0] == 4096
        run = journal.admit("chat", "in-1", sha("x")).run
        data = CheckpointData({"i": 0}, {"0": ["same history"]})
        journal.write_checkpoint(run.id, data)
        for seq in range(3):
            before = os.path.getsize(wal)
            call = journal.record_intent(
                run.id, agent_no=0, seq=seq, kind="tool", name="t", args={"n": seq}, policy="p"
            )
            middle = os.path.getsize(wal)
            journal.commit_result(call.id, {"ok": seq}, checkpoint=data)
            after = os.path.getsize(wal)
            assert (middle - before, after - middle) == (4 * frame, 4 * frame), seq


def test_events_written_before_schema_5_get_the_digest_of_their_payload(tmp_path):
    path = tmp_path / "journal.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for number, script in migrations():
        if number > 4:
            break
        conn.executescript(f"BEGIN;\n{script.read_text(encoding='utf-8')}\nCOMMIT;")
    conn.execute("PRAGMA user_version=4")
    conn.execute("INSERT INTO contexts (id, created_at) VALUES ('chat', 1.0)")
    conn.execute(
        "INSERT INTO events (context_id, run_id, type, payload, created_at)"
        " VALUES ('chat', NULL, 'note', ?, 1.0)",
        ('{"n":1,"text":"caf\u00e9"}',),
    )
    conn.close()
    with Journal.open_sqlite(path) as journal:
        (event,) = journal.list_events(context_id="chat")
        assert event.payload == {"n": 1, "text": "caf\u00e9"}
        assert event.digest == sha('{"n":1,"text":"caf\u00e9"}')
        assert journal.verify_records().ok
