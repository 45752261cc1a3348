"""What the knowledge import and the re-embed need from the memory service
(python/durable/memory_service.py), as a protocol so neither imports the service."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from durability import Journal
    from durability.memory import EmbeddingModels, Knowledge
    from python.helpers.embeddings import EmbeddingModel


class MemoryHost(Protocol):
    journal: Journal
    usr: Path
    knowledge: Knowledge
    models: EmbeddingModels

    @property
    def settings(self) -> Mapping[str, Any]: ...

    def memory_subdir(self) -> str: ...

    def embedder(self) -> EmbeddingModel: ...

    def search_embedder(self) -> EmbeddingModel: ...

    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]: ...

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...
