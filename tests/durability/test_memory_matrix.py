"""The process's copy of the memories' vectors (durability/memory/_matrix.py): the same
results as the exact search in SQL, and never stale (writes through another journal handle,
deletes, moved vectors, a rolled-back write transaction)."""

from __future__ import annotations

import random
import sqlite3

import pytest

from durability.journal import Journal
from durability.memory import Memories
from durability.memory._matrix import cache_of
from durability.memory._search import search_in
from durability.store.sqlite import _sha256_text, migrations

pytestmark = pytest.mark.unit

MODEL = "test/embedder"
DIM = 24


def _vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1.0, 1.0) for _ in range(DIM)]


@pytest.fixture
def journal(tmp_path):
    journal = Journal.open_sqlite(tmp_path / "j.sqlite")
    yield journal
    journal.close()


def _in_sql(memories: Memories, query_vector, **options):
    """The same search ranked by sqlite-vec in SQL (no matrix)."""
    query = memories._query(
        "default",
        MODEL,
        query_vector,
        options.get("threshold", 0.7),  # the defaults of Memories.search
        options.get("limit", 10),
        options.get("areas"),
        options.get("filter"),
    )
    store = memories.journal.store
    return store.read(lambda tx: search_in(tx, "sqlite-vec", "", query))


def _matrix(memories: Memories):
    return cache_of(memories.journal.store)._matrices.get(("default", MODEL, DIM))


def _loaded(memories: Memories) -> bool:
    matrix = _matrix(memories)
    return matrix is not None and matrix.state is not None and matrix.n > 0


def _same(found, expected) -> None:
    assert [m.id for m, _ in found] == [m.id for m, _ in expected]
    for (_, score), (_, wanted) in zip(found, expected, strict=True):
        assert score == pytest.approx(wanted, abs=1e-6)


def test_the_matrix_ranks_exactly_as_sql_does(journal):
    rng = random.Random(19)
    memories = Memories(journal)
    for i in range(600):
        area = ("main", "fragments", "solutions")[i % 3]
        memories.save("default", area, f"m{i}", {"n": i}, _vector(rng), model=MODEL)
    # distinct vectors with one duplicate: equal scores come by id, as in SQL
    twin = _vector(rng)
    memories.save("default", "main", "twin a", {}, twin, model=MODEL)
    memories.save("default", "main", "twin b", {}, twin, model=MODEL)
    cases = [
        {"limit": 10},
        {"limit": 1},
        {"limit": 50, "threshold": 0.6},
        {"limit": 600, "threshold": 0.0},
        {"limit": 10, "areas": ["fragments", "solutions"]},
        {"limit": 10, "areas": "nowhere"},
        {"limit": 7, "filter": "n % 5 == 0"},
        {"limit": 10, "threshold": 0.99},
    ]
    for query_vector in [_vector(rng) for _ in range(5)] + [twin]:
        for options in cases:
            found = memories.search("default", query_vector, model=MODEL, **options)
            assert _loaded(memories)  # ranked in the matrix, not in SQL
            _same(found, _in_sql(memories, query_vector, **options))
    twins = memories.search("default", twin, model=MODEL, limit=2)
    assert {m.text for m, _ in twins} == {"twin a", "twin b"}
    assert [m.id for m, _ in twins] == sorted(m.id for m, _ in twins)
    # forget ranks in a write transaction: the same memories go as a search finds
    doomed = memories.search("default", twin, model=MODEL, threshold=0.9, limit=1000)
    assert memories.forget("default", twin, model=MODEL, threshold=0.9) == len(doomed) >= 2


def test_a_write_through_another_journal_handle_is_seen_by_the_next_search(tmp_path):
    rng = random.Random(7)
    path = tmp_path / "shared.sqlite"
    first, second = Journal.open_sqlite(path), Journal.open_sqlite(path)
    try:
        here, there = Memories(first), Memories(second)
        for i in range(50):
            here.save("default", "main", f"m{i}", {}, _vector(rng), model=MODEL)
        target = _vector(rng)
        before = here.search("default", target, model=MODEL, threshold=0.0, limit=3)
        assert _loaded(here) and before[0][1] < 0.999
        # saved through the other handle: the next search here finds it first
        new_id = there.save("default", "main", "new", {}, target, model=MODEL)
        found = here.search("default", target, model=MODEL, threshold=0.0, limit=3)
        assert found[0][0].id == new_id and found[0][1] == pytest.approx(1.0)
        _same(found, _in_sql(here, target, threshold=0.0, limit=3))
        # moved through the other handle: its old vector no longer matches
        there.update("default", new_id, text="moved", vector=_vector(rng), model=MODEL)
        found = here.search("default", target, model=MODEL, threshold=0.0, limit=3)
        assert new_id not in [m.id for m, _ in found]
        _same(found, _in_sql(here, target, threshold=0.0, limit=3))
        # deleted through the other handle: gone from here too (masked, not reloaded)
        loads = _matrix(here).loads
        best = found[0][0].id
        assert there.delete("default", [best]) == 1
        found = here.search("default", target, model=MODEL, threshold=0.0, limit=3)
        assert best not in [m.id for m, _ in found]
        _same(found, _in_sql(here, target, threshold=0.0, limit=3))
        assert _matrix(here).loads == loads and _matrix(here).dead == 1
        # the newest memory deleted and its seq given again to a new one there
        newest = there.save("default", "main", "newest", {}, _vector(rng), model=MODEL)
        here.search("default", target, model=MODEL, threshold=0.0, limit=3)
        assert there.delete("default", [newest]) == 1
        reused = there.save("default", "main", "reused", {}, target, model=MODEL)
        seqs = second.store.read(
            lambda tx: tx.sql.conn.execute(
                "SELECT seq FROM memories WHERE id = ?", (reused,)
            ).fetchone()
        )
        assert seqs[0] == _matrix(here).state[3]  # the same seq as the deleted newest
        found = here.search("default", target, model=MODEL, threshold=0.0, limit=3)
        assert found[0][0].id == reused
        _same(found, _in_sql(here, target, threshold=0.0, limit=3))
        # and an area moved there is filtered by its new area here
        moved = found[0][0].id
        there.update("default", moved, area="solutions")
        found = here.search("default", target, model=MODEL, threshold=0.0, limit=3, areas="main")
        assert moved not in [m.id for m, _ in found]
    finally:
        first.close()
        second.close()


def test_a_rolled_back_write_never_reaches_the_matrix(journal):
    """A write transaction sees its own uncommitted memory; if the matrix took it, a later
    commit reaching the same change state would leave a phantom memory in every search."""
    rng = random.Random(3)
    memories = Memories(journal)
    for i in range(20):
        memories.save("default", "main", f"m{i}", {}, _vector(rng), model=MODEL)
    phantom_vector = _vector(rng)
    memories.search("default", phantom_vector, model=MODEL)  # the matrix is loaded
    _, save_op = memories.save_write("default", "main", "phantom", {}, phantom_vector, model=MODEL)
    forget_op = memories.forget_write("default", _vector(rng), model=MODEL, threshold=1.0)

    class Undo(Exception):
        pass

    def op(tx):
        save_op(tx)
        forget_op(tx)  # ranks inside the same transaction, then it all rolls back
        raise Undo

    with pytest.raises(Undo):
        journal.store.write(op)
    other = memories.save("default", "main", "committed", {}, _vector(rng), model=MODEL)
    found = memories.search("default", phantom_vector, model=MODEL, threshold=0.0, limit=25)
    texts = [m.text for m, _ in found]
    assert "phantom" not in texts and "committed" in texts
    assert other in [m.id for m, _ in found]
    _same(found, _in_sql(memories, phantom_vector, threshold=0.0, limit=25))


def test_a_lookup_by_ids_uses_the_id_index(journal):
    """A 10-id lookup used to walk every memory of the subdir (the planner took the subdir
    index): now it searches the id index."""
    ids = ",".join("?" * 10)
    plan = journal.store.read(
        lambda tx: tx.sql.conn.execute(
            f"EXPLAIN QUERY PLAN SELECT id FROM memories WHERE {tx.memories._BY_IDS}"
            f" AND id IN ({ids})",
            ["default", *"abcdefghij"],
        ).fetchall()
    )
    assert "(id=?)" in plan[0][3], plan


def test_schema_9_memories_keep_their_order_in_seq(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.create_function("a0_sha256", 1, _sha256_text, deterministic=True)
    for number, script in migrations():
        if number <= 9:
            text = script.read_text(encoding="utf-8")
            conn.executescript(f"BEGIN;\n{text}\nPRAGMA user_version={number};\nCOMMIT;")
    vector = bytes(4 * DIM)[:-4] + b"\x00\x00\x80\x3f"  # (0, ..., 0, 1)
    for memory_id in ("zz", "aa", "mm"):
        conn.execute(
            "INSERT INTO memories (id, subdir, area, text, metadata, model, dim, vector,"
            " created_at, updated_at) VALUES (?, 'default', 'main', ?, '{}', ?, ?, ?, 1, 1)",
            (memory_id, f"text {memory_id}", MODEL, DIM, vector),
        )
    conn.close()
    with Journal.open_sqlite(path) as journal:
        rows = journal.store.read(
            lambda tx: tx.sql.conn.execute("SELECT seq, id FROM memories ORDER BY seq").fetchall()
        )
        assert rows == [(1, "zz"), (2, "aa"), (3, "mm")]
        found = Memories(journal).search("default", [0.0] * (DIM - 1) + [1.0], model=MODEL)
        assert [m.id for m, _ in found] == ["aa", "mm", "zz"]  # ties by id, as in SQL


def test_deletes_are_masked_then_compacted(journal, monkeypatch):
    from durability.memory import _matrix as matrix_module

    monkeypatch.setattr(matrix_module, "_MIN_ROWS", 4)
    rng = random.Random(11)
    memories = Memories(journal)
    ids = [
        memories.save("default", "main", f"m{i}", {}, _vector(rng), model=MODEL) for i in range(40)
    ]
    target = _vector(rng)
    memories.search("default", target, model=MODEL, threshold=0.0, limit=40)
    matrix = _matrix(memories)
    assert memories.delete("default", ids[:5]) == 5  # 5 of 40: masked
    found = memories.search("default", target, model=MODEL, threshold=0.0, limit=40)
    assert (matrix.n, matrix.dead, len(found)) == (40, 5, 35)
    _same(found, _in_sql(memories, target, threshold=0.0, limit=40))
    assert memories.delete("default", ids[5:20]) == 15  # 20 of 40: compacted
    found = memories.search("default", target, model=MODEL, threshold=0.0, limit=40)
    assert (matrix.n, matrix.dead, len(found), matrix.loads) == (20, 0, 20, 1)
    _same(found, _in_sql(memories, target, threshold=0.0, limit=40))
    added = memories.save("default", "main", "after", {}, target, model=MODEL)
    found = memories.search("default", target, model=MODEL, threshold=0.0, limit=40)
    assert found[0][0].id == added and matrix.loads == 1
    _same(found, _in_sql(memories, target, threshold=0.0, limit=40))
