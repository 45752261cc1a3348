"""Memory in the journal's own database (durability/memory): save, search, filters,
masking, the embedding cache, and a call's result committed with its memory writes in one
transaction (every engine)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from durability import InvalidArgument, Masker, ResultConflict
from durability.errors import MemoryNotFound
from durability.failpoints import ATOMIC_POINTS, CRASH_AT_ENV
from durability.memory import Memories, StoredEmbeddingCache
from tests.durability.conftest import sha
from tests.support.model_server import scripted_vector

pytestmark = pytest.mark.unit

MODEL = "test/embedder"
CHILD = Path(__file__).resolve().parents[1] / "_memory_crash_child.py"


def vec(text: str) -> list[float]:
    return scripted_vector(text, 64)


@pytest.fixture
def memories(journal) -> Memories:
    return Memories(journal)


def save(memories: Memories, text: str, area: str = "main", subdir: str = "default", **meta):
    return memories.save(subdir, area, text, meta, vec(text), model=MODEL)


def test_backend_is_chosen_at_open_and_reported(memories, backend):
    pgvector = bool(getattr(memories.journal.store, "pgvector_schema", ""))
    expected = "sqlite-vec" if backend.name == "sqlite" else "pgvector" if pgvector else "exact"
    assert (memories.search_backend, memories.search_problem) == (expected, "")


def test_save_then_search_ranks_by_relevance_with_threshold_and_limit(memories):
    cat = save(memories, "the cat likes fish")
    save(memories, "quarterly tax return filing", area="solutions")
    dog = save(memories, "the dog likes fish too")
    found = memories.search("default", vec("cat fish"), model=MODEL, threshold=0.5, limit=10)
    ids = [m.id for m, _ in found]
    assert ids[:2] == [cat, dog]
    scores = [s for _, s in found]
    assert scores == sorted(scores, reverse=True) and all(0.5 <= s <= 1 for s in scores)
    assert [m.id for m, _ in memories.search("default", vec("cat fish"), model=MODEL, limit=1)] == [
        cat
    ]
    exact = memories.search("default", vec("the cat likes fish"), model=MODEL, threshold=0.99)
    assert [(m.id, round(s, 4)) for m, s in exact] == [(cat, 1.0)]
    assert memories.search("default", vec("cat"), model=MODEL, threshold=1.0, limit=5) == []


def test_areas_subdirs_and_models_are_separate(memories):
    main = save(memories, "alpha beta")
    sol = save(memories, "alpha beta", area="solutions")
    other = save(memories, "alpha beta", subdir="projects/p1")
    memories.save("default", "main", "alpha beta", {}, vec("alpha beta"), model="other/model")
    query = vec("alpha beta")

    def ids(**kw):
        kw.setdefault("threshold", 0.9)
        return {m.id for m, _ in memories.search("default", query, model=MODEL, **kw)}

    assert ids() == {main, sol}
    assert ids(areas=["solutions"]) == {sol}
    assert ids(areas="main") == {main}
    in_project = memories.search("projects/p1", query, model=MODEL)
    assert [m.id for m, _ in in_project] == [other]
    assert memories.counts("default") == {"main": 2, "solutions": 1}
    assert memories.subdirs() == ["default", "projects/p1"]


def test_filter_is_a_safe_expression_over_metadata(memories):
    keep = save(memories, "deploy notes", source="ops", tags=["prod"])
    save(memories, "deploy notes", source="dev")
    save(memories, "deploy notes")  # no source: the filter fails on it and excludes it

    def ids(expression):
        found = memories.search(
            "default", vec("deploy notes"), model=MODEL, threshold=0.9, filter=expression
        )
        return [m.id for m, _ in found]

    assert ids("source == 'ops'") == [keep]
    assert ids("'prod' in tags and area == 'main'") == [keep]
    assert len(ids("timestamp.startswith('20')")) == 3
    assert ids("__import__('os').system('true')") == []  # never eval: it excludes everything
    with pytest.raises(InvalidArgument) as info:
        ids("source ==")
    assert info.value.fields["field"] == "filter"


def test_delete_forget_update_get_and_list(memories):
    # forget searches inside a write: on SQLite that runs sqlite-vec in the group-commit
    # writer's connection, search alone in a reader's
    a = save(memories, "red apple pie")
    b = save(memories, "red apple juice")
    c = save(memories, "blue ocean waves")
    assert memories.delete("default", [a, "unknown"]) == 1
    assert memories.delete("default", [a]) == 0
    assert memories.forget("default", vec("red apple"), model=MODEL, threshold=0.75) == 1
    assert [m.id for m in memories.list_memories("default")] == [c]
    with pytest.raises(MemoryNotFound):
        memories.get("default", b)
    changed = memories.update(
        "default", c, text="calm ocean", vector=vec("calm ocean"), model=MODEL, metadata={"k": 1}
    )
    assert (changed.id, changed.text, changed.metadata) == (c, "calm ocean", {"k": 1})
    assert memories.get("default", c).text == "calm ocean"
    top = memories.search("default", vec("calm ocean"), model=MODEL, threshold=0.99)
    assert [m.id for m, _ in top] == [c]
    with pytest.raises(MemoryNotFound):
        memories.update("default", "nope", area="fragments")
    assert memories.list_memories("default", filter="k == 1")[0].id == c


def test_list_is_newest_first_with_areas_and_offset(journal):
    clock = iter(range(100, 200))
    memories = Memories(journal, clock=lambda: float(next(clock)))
    ids = [save(memories, f"note {i}", area="fragments" if i % 2 else "main") for i in range(5)]
    assert [m.id for m in memories.list_memories("default")] == ids[::-1]
    assert [m.id for m in memories.list_memories("default", areas=["fragments"])] == [
        ids[3],
        ids[1],
    ]
    assert [m.id for m in memories.list_memories("default", limit=2, offset=1)] == [ids[3], ids[2]]


def test_bad_input_is_refused_with_a_field(memories):
    cases = [
        lambda: memories.save("default", "main", "", {}, vec("x"), model=MODEL),
        lambda: memories.save("default", "main", "x", {}, [0.0, 0.0], model=MODEL),
        lambda: memories.save("default", "main", "x", {}, [float("nan")], model=MODEL),
        lambda: memories.save("default", "main", "x", {1: 2}, vec("x"), model=MODEL),
        lambda: memories.save("", "main", "x", {}, vec("x"), model=MODEL),
        lambda: memories.search("default", vec("x"), model=MODEL, threshold=1.5),
        lambda: memories.search("default", vec("x"), model=MODEL, limit=0),
    ]
    for case in cases:
        with pytest.raises(InvalidArgument):
            case()
    assert memories.list_memories("default") == []


def test_text_and_metadata_are_masked_before_they_are_stored(backend):
    journal = backend.open(masker=Masker({"API_KEY_X": "sk-very-secret-1"}))
    try:
        memories = Memories(journal)
        memory_id = save(memories, "my key is sk-very-secret-1", note="sk-very-secret-1")
        stored = memories.get("default", memory_id)
        assert "sk-very-secret-1" not in stored.text + str(stored.metadata)
        assert "§§secret(API_KEY_X)" in stored.text
        found = memories.search("default", vec("my key is"), model=MODEL, threshold=0.5)
        assert "sk-very-secret-1" not in repr(found)
    finally:
        journal.close()


async def test_embedding_cache_by_model_and_digest(journal):
    cache = StoredEmbeddingCache(journal)
    assert await cache.get_many("m1", [sha("a")]) == {}
    await cache.put_many("m1", {sha("a"): [0.5, 0.25], sha("b"): [1.0, 2.0]})
    await cache.put_many("m1", {sha("a"): [9.0, 9.0]})  # first vector stays
    assert await cache.get_many("m1", [sha("a"), sha("c")]) == {sha("a"): [0.5, 0.25]}
    assert await cache.get_many("m2", [sha("a")]) == {}
    assert cache.forget_model("m1") == 2


# a call's result and its memory writes: one transaction ----------------------------------
def open_call(journal, name="memory_save"):
    run = journal.admit("chat-m", f"in-{name}", sha(name)).run
    return journal.record_intent(
        run.id,
        agent_no=0,
        seq=1,
        kind="tool",
        name=name,
        args={"text": "x"},
        policy="journal_atomic",
    )


def test_commit_result_with_writes_both_and_runs_writes_once(journal, memories):
    call = open_call(journal)
    memory_id, write = memories.save_write("default", "main", "kept", {}, vec("kept"), model=MODEL)
    done = journal.commit_result_with(call.id, {"id": memory_id}, [write])
    assert done.applied and done.outputs == (memory_id,) and done.call.state == "completed"
    again = journal.commit_result_with(call.id, {"id": memory_id}, [write])
    assert not again.applied and again.outputs == (None,)
    assert [m.id for m in memories.list_memories("default")] == [memory_id]  # saved exactly once
    _, other = memories.save_write("default", "main", "no", {}, vec("no"), model=MODEL)
    with pytest.raises(ResultConflict):
        journal.commit_result_with(call.id, {"id": "different"}, [other])
    assert [m.id for m in memories.list_memories("default")] == [memory_id]


def test_a_failing_write_leaves_the_call_open(journal, memories):
    call = open_call(journal, "memory_update")
    with pytest.raises(MemoryNotFound):
        journal.commit_result_with(
            call.id, {"ok": True}, [memories.update_write("default", "nope", area="x")]
        )
    assert journal.get_call(call.id).state == "open"


async def test_commit_result_with_from_the_loop(journal, memories):
    call = open_call(journal, "memory_delete")
    kept = save(memories, "to delete")
    done = await journal.aio.commit_result_with(
        call.id, {"memories_deleted": "1"}, [memories.delete_write("default", [kept])]
    )
    assert done.outputs == (1,) and memories.list_memories("default") == []


def _child_args(backend) -> list[str]:
    if backend.name == "sqlite":
        return ["sqlite", str(backend.path)]
    return ["postgres", backend.dsn]


def test_sigkill_inside_the_transaction_leaves_neither(journal, memories, backend, request):
    if backend.name == "postgres":
        backend.dsn = request.getfixturevalue("postgres_server").dsn  # type: ignore[attr-defined]
    call = open_call(journal)
    journal.store.flush()
    args = [*_child_args(backend), call.id, "MemOnce001"]
    if backend.name == "postgres":
        args.append(backend.namespace)  # type: ignore[attr-defined]
    env = {**os.environ, CRASH_AT_ENV: ATOMIC_POINTS[0]}
    child = subprocess.run(
        [sys.executable, str(CHILD), *args], env=env, capture_output=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    assert b"COMMITTED" not in child.stdout
    # neither the memory nor the result: the call runs again, nothing to hold
    assert memories.list_memories("default") == []
    assert journal.get_call(call.id).state == "open"
    env.pop(CRASH_AT_ENV)
    again = subprocess.run(
        [sys.executable, str(CHILD), *args], env=env, capture_output=True, timeout=120
    )
    assert again.returncode == 0 and b"COMMITTED" in again.stdout, again.stderr.decode()[-2000:]
    assert [m.id for m in memories.list_memories("default")] == ["MemOnce001"]
    assert journal.get_call(call.id).state == "completed"
