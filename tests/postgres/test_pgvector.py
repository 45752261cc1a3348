"""pgvector ranking on a PostgreSQL journal (durability/store/postgres_vectors.py).

Debian 12's PostgreSQL has no pgvector package, so on such a server the ranking tests skip
(the one skip docs/testing.md allows, in CI too); the exact path they fall back to is
tested on every run, here and by the conformance suite."""

from __future__ import annotations

import pytest

from durability.memory import EmbeddingModels, Memories, encode
from durability.store.postgres_vectors import vector_text
from tests.support.model_server import scripted_vector

pytestmark = pytest.mark.postgres

MODEL = "test/embedder"


def vec(text: str, dim: int = 32) -> list[float]:
    return scripted_vector(text, dim)


def test_vector_text_is_pgvector_input():
    assert vector_text(encode([1.0, -0.5, 0.25])) == "[1.0,-0.5,0.25]"


def test_the_backend_follows_the_server(open_journal):
    journal = open_journal()
    store = journal.store
    if store.pgvector:
        assert (store.memory_search_backend, store.pgvector_schema) != ("exact", "")
    else:  # no extension: exact on the worker, and no pgvector column was added
        assert (store.memory_search_backend, store.memory_search_problem) == ("exact", "")
        columns = store.read(
            lambda tx: tx.sql.scalars(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_name = 'memories' AND table_schema = current_schema()"
            )
        )
        assert "embedding" not in columns


def test_pgvector_ranks_like_the_exact_search(open_journal):
    journal = open_journal()
    if not journal.store.pgvector_schema:
        pytest.skip(
            "this PostgreSQL server has no pgvector extension (Debian 12 ships none); "
            "the exact path is what runs here"
        )
    assert journal.store.memory_search_backend == "pgvector"
    memories = Memories(journal)
    texts = ["the cat likes fish", "the dog likes fish too", "quarterly tax filing", "cat nap"]
    ids = {t: memories.save("default", "main", t, {}, vec(t), model=MODEL) for t in texts}
    found = memories.search("default", vec("cat fish"), model=MODEL, threshold=0.5, limit=3)
    exact = _exact_ranking(texts, vec("cat fish"))
    assert [m.id for m, _ in found] == [ids[t] for t in exact[:3] if t in ids][: len(found)]
    # a re-embed's swap keeps the pgvector column in step
    models = EmbeddingModels(memories)
    moved = [(i, t, vec(t, 16)) for i, _, t in models.texts(MODEL)]
    assert models.swap(MODEL, "test/new", moved) == 4
    again = memories.search("default", vec("cat nap", 16), model="test/new", threshold=0.99)
    assert [m.id for m, _ in again] == [ids["cat nap"]]


def _exact_ranking(texts: list[str], query: list[float]) -> list[str]:
    def cosine(a: list[float], b: list[float]) -> float:
        dot = sum(x * y for x, y in zip(a, b, strict=True))
        return dot / ((sum(x * x for x in a) ** 0.5) * (sum(y * y for y in b) ** 0.5))

    scored = [(t, cosine(vec(t), query)) for t in texts if (1 + cosine(vec(t), query)) / 2 >= 0.5]
    return [t for t, _ in sorted(scored, key=lambda p: -p[1])]
