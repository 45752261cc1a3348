"""Chunks of documents, embedded through the journaled embedding seam and ranked.

Chunks are upstream's size (1,000 characters, 100 overlapping), cut at a line break or a
space where one is near. Every embedding request goes through the chat's session
(``session.embedding_call``: journaled, reused after a crash) and through
python/helpers/embeddings.py's ``EmbeddingModel`` with the journal's embedding cache, so a
chunk embedded before with the same model costs no request. Relevance is upstream's
``(1 + cosine) / 2``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from durability.canonical import digest
from durability.memory import StoredEmbeddingCache
from python.helpers.embeddings import EmbeddingModel, Vector, embedding_config, text_digest

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent

CHUNK_CHARS = 1000
OVERLAP_CHARS = 100
THRESHOLD = 0.5  # upstream's document_query threshold (relevance, 0..1)


@dataclass(frozen=True)
class Chunk:
    source: str
    index: int  # position in its document, from 0
    text: str


def split_text(text: str, size: int = CHUNK_CHARS, overlap: int = OVERLAP_CHARS) -> list[str]:
    """Windows of at most ``size`` characters overlapping by about ``overlap``; a window
    ends at the last line break (else space) in its second half when there is one."""
    text = text.strip()
    if len(text) <= size:
        return [text] if text else []
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            window = text[start:end]
            cut = max(window.rfind("\n", size // 2), window.rfind(" ", size // 2))
            if cut > 0:
                end = start + cut
        piece = text[start:end].strip()
        if piece:
            pieces.append(piece)
        if end >= len(text):
            break
        start = max(end - overlap, start + 1)
        space = text.find(" ", start, end)  # begin the next window at a word
        if 0 <= space < end - 1:
            start = space + 1
    return pieces


def relevance(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 0.0 if norm == 0 else max(0.0, min(1.0, (1 + dot / norm) / 2))


def rank(
    query: Vector, chunks: Sequence[Chunk], vectors: Sequence[Vector], limit: int
) -> list[tuple[float, Chunk]]:
    """The best ``limit`` chunks at or above the threshold, best first (ties: in order)."""
    scored = [(relevance(query, v), i) for i, v in enumerate(vectors)]
    hits = sorted((s for s in scored if s[0] >= THRESHOLD), key=lambda s: (-s[0], s[1]))
    return [(score, chunks[i]) for score, i in hits[:limit]]


def embedding_model(agent: Agent) -> EmbeddingModel:
    from python.helpers import settings as settings_mod

    config = embedding_config(agent.config.settings)
    cache = StoredEmbeddingCache(agent.context.session.journal)
    return EmbeddingModel(config, settings_mod.get_api_key(config.provider), cache=cache)


async def embed(agent: Agent, model: EmbeddingModel, texts: list[str]) -> list[Vector]:
    """Vectors of ``texts`` through the journaled embedding seam. A reused journal entry
    reads the vectors from the cache (no request); should the cache have lost them (the
    model's vectors were forgotten), they are asked again, which changes nothing."""
    got: dict[str, list[Vector]] = {}

    async def effect() -> dict[str, Any]:
        vectors = await model.embed(texts)
        got["vectors"] = vectors
        return {
            "model": model.model_id,
            "count": len(vectors),
            "dim": len(vectors[0]) if vectors else 0,
            "vectors_digest": digest([[round(x, 6) for x in v] for v in vectors]),
        }

    args = {
        "provider": model.config.provider,
        "model": model.config.name,
        "kind": "embedding",
        "count": len(texts),
        "texts_digest": hashlib.sha256(
            "\n".join(text_digest(t) for t in texts).encode()
        ).hexdigest(),
    }
    await agent.context.session.embedding_call(agent, args, effect)
    if "vectors" in got:
        return got["vectors"]
    return await model.embed(texts)  # reused: from the cache
