"""The agent's view of its memory: the chat's journal, the embedding model and the subdir.

``AgentMemory.of(agent)`` gives the memory an agent reads and writes (docs/memory.md): the
memories of setting ``agent_memory_subdir`` in the journal's own database
(durability/memory), embedded with the ``embed_model_*`` model (python/helpers/embeddings.py,
its vectors cached in the same database). Reads run at once; writes are only *built* here
(transaction functions) and handed to the journal by the caller, so they commit in the same
transaction as the result of the call that made them (the ``journal_atomic`` replay class).

Every text is masked (the chat's secrets, then the journal's) before it is embedded or
stored, so a secret value never reaches the embedding provider, the database or a search
result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from durability.memory import RULES_MODEL, Memories, Memory, MemoryWrite, StoredEmbeddingCache
from python.helpers.embeddings import EmbeddingModel, search_config
from python.helpers.models import ModelError

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent
    from durability import Journal

#: Where behaviour_adjustment keeps a subdir's rules: one row of the memories table whose
#: model is ``RULES_MODEL`` (no embedding model has it, so no search ever ranks the row).
RULES_AREA = "behaviour"
#: ``agent.data`` key of the rules the system prompt shows (checkpointed with the agent).
RULES_DATA_KEY = "behaviour_rules"


def setting(agent: Agent, name: str) -> Any:
    """A setting of the agent's configuration, else its default."""
    from python.helpers.settings import DEFAULTS

    settings = agent.config.settings or {}
    return settings.get(name, DEFAULTS.get(name))


def rules_id(subdir: str) -> str:
    """The id of ``subdir``'s behaviour rules row."""
    return "rules-" + hashlib.sha256(subdir.encode("utf-8")).hexdigest()[:16]


def format_hits(hits: Sequence[tuple[Memory, float]]) -> str:
    """Upstream's memory_load text: each hit's metadata as ``key: value`` lines, then
    ``Content: <text>``; hits separated by a blank line."""
    blocks = []
    for memory, _ in hits:
        meta = {"id": memory.id, "area": memory.area, "timestamp": memory.timestamp}
        meta.update({k: v for k, v in memory.metadata.items() if k not in meta})
        lines = [f"{key}: {value}" for key, value in meta.items()]
        blocks.append("\n".join([*lines, f"Content: {memory.text}"]))
    return "\n\n".join(blocks)


@dataclass
class AgentMemory:
    """One agent's memory: ``memories`` of ``subdir``, embedded by ``embedder``."""

    agent: Agent
    journal: Journal
    memories: Memories
    embedder: EmbeddingModel
    subdir: str

    @classmethod
    def of(cls, agent: Agent) -> AgentMemory:
        from python.helpers.settings import get_api_key

        journal = agent.context.session.journal
        config = search_config({**_embed_defaults(), **(agent.config.settings or {})})
        cache = StoredEmbeddingCache(journal)
        embedder = EmbeddingModel(config, get_api_key(config.provider), cache=cache)
        subdir = str(setting(agent, "agent_memory_subdir") or "default").strip() or "default"
        return cls(agent, journal, Memories(journal), embedder, subdir)

    @property
    def model(self) -> str:
        return self.embedder.model_id

    def usable(self) -> bool:
        """Whether the embedding model is configured (an API base and a key, when its
        provider needs one); nothing is sent to find out."""
        try:
            self.embedder._endpoint()
        except ModelError:
            return False
        return True

    def mask(self, value: Any) -> Any:
        return self.agent.mask_value(value)

    async def embed(self, text: str) -> list[float]:
        return await self.embedder.embed_query(self.mask(text))

    async def search(
        self,
        query: str,
        *,
        threshold: float,
        limit: int,
        areas: Sequence[str] | str | None = None,
        filter: str | None = None,
    ) -> list[tuple[Memory, float]]:
        vector = await self.embed(query)
        return await self.memories.run_async(
            self.memories.search,
            self.subdir,
            vector,
            model=self.model,
            threshold=threshold,
            limit=limit,
            areas=areas,
            filter=filter,
        )

    async def save_write(
        self, text: str, area: str = "", metadata: Mapping[str, Any] | None = None
    ) -> tuple[str, MemoryWrite]:
        """(the new memory's id, its write): ``text`` masked and embedded now."""
        masked = self.mask(text)
        vector = await self.embedder.embed_query(masked)
        return self.memories.save_write(
            self.subdir, area, masked, self.mask(dict(metadata or {})), vector, model=self.model
        )

    def delete_write(self, ids: Sequence[str]) -> MemoryWrite:
        return self.memories.delete_write(self.subdir, list(ids))

    async def forget_write(
        self, query: str, *, threshold: float, filter: str | None = None, area: str | None = None
    ) -> MemoryWrite:
        vector = await self.embed(query)
        return self.memories.forget_write(
            self.subdir, vector, model=self.model, threshold=threshold, filter=filter, areas=area
        )

    # behaviour rules ---------------------------------------------------------------------
    async def rules(self) -> str:
        """The subdir's behaviour rules ("" when there are none)."""
        wanted = rules_id(self.subdir)

        def read(tx: Any) -> str:
            rows = tx.memories.get(self.subdir, [wanted])
            return rows[0].text if rows else ""

        loop_journal = self.journal

        def run() -> str:
            loop_journal.store.flush()
            return str(loop_journal.store.read(read))

        return await self.memories.run_async(run)

    def rules_writes(self, text: str) -> list[MemoryWrite]:
        """The writes that make ``text`` the subdir's rules (replacing the old ones)."""
        wanted = rules_id(self.subdir)
        _, save = self.memories.save_write(
            self.subdir,
            RULES_AREA,
            self.mask(text),
            {},
            [1.0],
            model=RULES_MODEL,
            memory_id=wanted,
        )
        return [self.delete_write([wanted]), save]


def _embed_defaults() -> dict[str, Any]:
    from python.helpers.settings import DEFAULTS

    return {k: v for k, v in DEFAULTS.items() if k.startswith("embed_model_")}
