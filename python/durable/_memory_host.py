"""What the knowledge import and the re-embed need from the memory service
(python/durable/memory_service.py), as a protocol so neither imports the service."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from enum import StrEnum
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


class JobState(StrEnum):
    """A background job's ``state`` in its status (``/api/memory_status``)."""

    IDLE = "idle"  # nothing ran yet, or nothing was left to do
    SCANNING = "scanning"  # the knowledge import reads its folders
    IMPORTING = "importing"  # the knowledge import embeds what changed
    RUNNING = "running"  # the re-embed moves memories to the new model
    DONE = "done"
    FAILED = "failed"


class BackgroundWork:
    """A job of the memory service that runs at most once at a time in the background
    (the knowledge import, the re-embed): ``start`` spawns ``_quiet`` unless it runs."""

    #: The background task's name.
    task_name = ""

    def __init__(self, service: MemoryHost, status: dict[str, Any]) -> None:
        self.service = service
        self._status = status
        self._task: asyncio.Task[Any] | None = None

    def status(self) -> dict[str, Any]:
        return dict(self._status)

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = self.service.spawn(self._quiet(), self.task_name)

    async def _quiet(self) -> None:
        raise NotImplementedError
