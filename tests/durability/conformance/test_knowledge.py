"""Knowledge files and embedding-model moves in the journal's database
(durability/memory/_knowledge.py, _models.py), on every engine."""

from __future__ import annotations

import pytest

from durability.memory import Chunk, EmbeddingModels, Knowledge, Memories
from tests.support.model_server import scripted_vector

pytestmark = pytest.mark.unit

OLD, NEW = "test/old", "test/new"


def vec(text: str, dim: int = 32) -> list[float]:
    return scripted_vector(text, dim)


def chunks(*texts: str) -> list[Chunk]:
    return [Chunk(t, {"knowledge_source": True, "source_file": "a.md"}, vec(t)) for t in texts]


@pytest.fixture
def memories(journal) -> Memories:
    return Memories(journal)


@pytest.fixture
def knowledge(memories) -> Knowledge:
    return Knowledge(memories)


def texts(memories: Memories, subdir: str = "default") -> list[str]:
    return sorted(m.text for m in memories.list_memories(subdir, limit=1000))


def test_a_file_is_imported_once_per_digest(knowledge, memories):
    ids, op = knowledge.import_file_write(
        "default", "knowledge/custom/main/a.md", "main", "d1", chunks("one", "two"), model=OLD
    )
    assert memories.journal.store.write(op) is True
    assert texts(memories) == ["one", "two"]
    again = knowledge.import_file(
        "default", "knowledge/custom/main/a.md", "main", "d1", chunks("one", "two"), model=OLD
    )
    assert again is False  # the same content: nothing written, no duplicates
    assert texts(memories) == ["one", "two"]
    (row,) = knowledge.files("default")
    assert (row.path, row.digest, sorted(row.ids)) == (
        "knowledge/custom/main/a.md",
        "d1",
        sorted(ids),
    )
    first = memories.get("default", ids[0])
    assert first.metadata["knowledge_source"] is True and first.area == "main"


def test_a_changed_file_replaces_its_chunks_and_a_removed_one_loses_them(knowledge, memories):
    path = "knowledge/custom/solutions/b.txt"
    knowledge.import_file("default", path, "solutions", "d1", chunks("old a", "old b"), model=OLD)
    other = "knowledge/custom/main/keep.md"
    knowledge.import_file("default", other, "main", "k1", chunks("kept"), model=OLD)
    assert knowledge.import_file("default", path, "solutions", "d2", chunks("new"), model=OLD)
    assert texts(memories) == ["kept", "new"]
    assert memories.counts("default") == {"main": 1, "solutions": 1}
    assert knowledge.remove_file("default", path, "d1") == 0  # a stale digest removes nothing
    assert knowledge.remove_file("default", path, "d2") == 1
    assert texts(memories) == ["kept"]
    assert [r.path for r in knowledge.files("default")] == [other]


def test_knowledge_of_one_subdir_leaves_the_others_alone(knowledge, memories):
    knowledge.import_file("default", "k/a.md", "main", "d1", chunks("here"), model=OLD)
    knowledge.import_file("projects/p", "k/a.md", "main", "d1", chunks("there"), model=OLD)
    assert knowledge.remove_file("default", "k/a.md", "d1") == 1
    assert texts(memories, "projects/p") == ["there"]
    assert texts(memories) == []


def test_models_are_remembered_and_memories_move_to_a_new_one(memories):
    models = EmbeddingModels(memories)
    models.remember(OLD, {"provider": "other", "name": "old", "api_base": "http://x/v1"})
    assert models.config_of(OLD) == {"provider": "other", "name": "old", "api_base": "http://x/v1"}
    assert models.config_of(NEW) is None
    a = memories.save("default", "main", "alpha", {}, vec("alpha"), model=OLD)
    b = memories.save("default", "main", "beta", {}, vec("beta"), model=OLD)
    assert models.stored_models() == {OLD: 2}
    listed = models.texts(OLD)
    assert sorted(i for i, _, _ in listed) == sorted([a, b])
    moved = [(i, t, vec(t, 48)) for i, _, t in listed]
    memories.update("default", b, text="beta changed", vector=vec("beta changed"), model=OLD)
    assert models.swap(OLD, NEW, moved) == 1  # the edited memory keeps its own vector
    assert models.stored_models() == {NEW: 1, OLD: 1}
    found = memories.search("default", vec("alpha", 48), model=NEW, threshold=0.99)
    assert [m.id for m, _ in found] == [a]
    assert memories.get("default", a).model == NEW


def test_behaviour_rules_rows_are_no_memories_to_list_count_or_re_embed(memories):
    """behaviour_adjustment keeps a subdir's rules in a row of model RULES_MODEL: the
    dashboard's listing and counts and the re-embedding's model census leave it out."""
    from durability.memory import RULES_MODEL

    memories.save("default", "main", "a fact", {}, vec("a fact"), model=OLD)
    memories.save("default", "behaviour", "- be brief", {}, vec("rules"), model=RULES_MODEL)
    assert texts(memories) == ["a fact"]
    assert memories.counts("default") == {"main": 1}
    assert EmbeddingModels(memories).stored_models() == {OLD: 1}
