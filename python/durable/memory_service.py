"""The memory of one server process: its embedding models, and the background work that
keeps memory in step with the folders and settings (docs/memory.md).

- ``embedder()``: the embedding model of the settings; ``search_embedder()``: the model
  whose vectors search compares with now (the old one while a re-embed runs: search keeps
  using the old vectors until every memory has its new one).
- Knowledge import (python/durable/_knowledge_import.py) after the server serves and
  through ``import_knowledge``; re-embedding after a change of embedding model
  (python/durable/_reembed.py). Both report their progress in ``status()``, which
  ``/api/memory_status`` and the web UI's Memory view show.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from durability.memory import EmbeddingModels, Knowledge, Memories, StoredEmbeddingCache
from python.durable._knowledge_import import KnowledgeImport
from python.durable._reembed import Reembed
from python.helpers import embeddings
from python.helpers.embeddings import EmbeddingModel, embedding_config
from python.helpers.models import ModelConfig

if TYPE_CHECKING:  # pragma: no cover
    from durability import Journal

logger = logging.getLogger("a0.memory")

DEFAULT_SUBDIR = "default"


def config_record(config: ModelConfig) -> dict[str, Any]:
    """What ``memory_models`` keeps of a model: how to reach it, never its key."""
    return {
        "provider": config.provider,
        "name": config.name,
        "api_base": config.api_base,
        "kwargs": dict(config.kwargs),
    }


class MemoryService:
    def __init__(
        self, journal: Journal, usr: Path, settings: Callable[[], Mapping[str, Any]]
    ) -> None:
        self.journal = journal
        self.usr = usr
        self._settings = settings
        self.memories = Memories(journal)
        self.knowledge = Knowledge(self.memories)
        self.models = EmbeddingModels(self.memories)
        self.cache = StoredEmbeddingCache(journal)
        self.importer = KnowledgeImport(self)
        self.reembed = Reembed(self)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._model_id = ""
        self._closed = False
        # the memory tools embed with the model search uses now (the old one mid re-embed)
        embeddings.search_config_override = lambda: self.reembed.search_config

    # settings and models -------------------------------------------------------------------
    @property
    def settings(self) -> Mapping[str, Any]:
        return self._settings()

    def memory_subdir(self) -> str:
        """The memory subdir of the settings (upstream's ``agent_memory_subdir``)."""
        return str(self.settings.get("agent_memory_subdir") or DEFAULT_SUBDIR).strip() or (
            DEFAULT_SUBDIR
        )

    def model_config(self) -> ModelConfig:
        return embedding_config(self.settings)

    def embedder_for(self, config: ModelConfig) -> EmbeddingModel:
        from python.helpers import settings as settings_mod

        key = settings_mod.get_api_key(config.provider, self.usr)
        return EmbeddingModel(config, key, cache=self.cache)

    def embedder(self) -> EmbeddingModel:
        """The embedding model of the settings (what new vectors are made with)."""
        return self.embedder_for(self.model_config())

    def search_embedder(self) -> EmbeddingModel:
        """The model a query (and a new memory) is embedded with now: the old one while a
        re-embed runs and its configuration is known, else the settings' model."""
        old = self.reembed.search_config
        return self.embedder_for(old) if old is not None else self.embedder()

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A blocking journal call in the journal's pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.journal.executor(), lambda: fn(*args, **kwargs))

    # background work -----------------------------------------------------------------------
    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def start(self) -> None:
        """After the server serves: note the current model, re-embed what needs it, and
        import the knowledge folders (each in the background, with progress)."""
        if self._closed:
            return
        self.spawn(self._start(), "memory-start")

    async def _start(self) -> None:
        try:
            await self._note_model()
        except Exception as exc:  # the status says it; the server keeps serving
            logger.warning("embedding model not recorded: %s", type(exc).__name__)
        self.reembed.start()
        self.importer.start()

    async def _note_model(self) -> None:
        config = self.model_config()
        model_id = self.embedder_for(config).model_id
        await self.run(self.models.remember, model_id, config_record(config))
        self._model_id = model_id

    def settings_changed(self) -> None:
        """Settings were saved: a new embedding model starts a re-embed in the background."""
        if self._closed:
            return
        with contextlib.suppress(Exception):
            if self.embedder().model_id == self._model_id:
                return
        self.spawn(self._model_changed(), "memory-model-changed")

    async def _model_changed(self) -> None:
        try:
            await self._note_model()
        except Exception as exc:
            logger.warning("embedding model not recorded: %s", type(exc).__name__)
        await self.reembed.restart()

    def status(self) -> dict[str, Any]:
        store = self.journal.store
        current = ""
        with contextlib.suppress(Exception):
            current = self.embedder().model_id
        return {
            "search_backend": store.memory_search_backend,
            "search_problem": store.memory_search_problem,
            "pgvector": str(getattr(store, "pgvector", "") or ""),
            "memory_subdir": self.memory_subdir(),
            "embedding_model": current,
            "search_model": self.reembed.search_model or current,
            "reembed": self.reembed.status(),
            "knowledge": self.importer.status(),
        }

    async def close(self) -> None:
        self._closed = True
        embeddings.search_config_override = None
        self.reembed.stop()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
