"""Importing the knowledge folders into memory, with progress (docs/memory.md).

One import at a time per process. For each file: its digest is compared with the one
recorded; a new or changed file is read, chunked, embedded and stored with its record in
ONE transaction (durability/memory/_knowledge.py), replacing its old chunks; a recorded
file that is gone has its chunks deleted. A file that cannot be read or embedded is
reported in the status and left as it was (its old chunks stay); the others go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from durability.errors import DurabilityError
from durability.memory import Chunk
from python.durable._memory_host import BackgroundWork, JobState
from python.helpers import knowledge as folders
from python.helpers.models import ModelError

if TYPE_CHECKING:  # pragma: no cover
    from python.durable._memory_host import MemoryHost

logger = logging.getLogger("a0.memory")
MAX_ERRORS = 50


class KnowledgeImport(BackgroundWork):
    """``start``: an import in the background (the start-up one)."""

    task_name = "knowledge-import"

    def __init__(self, service: MemoryHost) -> None:
        super().__init__(service, {"state": JobState.IDLE, "runs": 0})
        self._lock = asyncio.Lock()

    async def _quiet(self) -> None:
        with contextlib.suppress(Exception):
            await self.run("start-up")

    async def run(self, reason: str) -> dict[str, Any]:
        """Import every knowledge folder now (waits for an import already running); the
        final status."""
        async with self._lock:
            try:
                await self._run(reason)
            except Exception as exc:
                self._status.update(state=JobState.FAILED, error=f"{type(exc).__name__}: {exc}")
                logger.warning("knowledge import failed: %s", type(exc).__name__)
                raise
            finally:
                self._status.update(current="", finished_at=time.time())
            return self.status()

    async def _run(self, reason: str) -> None:
        service = self.service
        settings = dict(service.settings)
        subdir = service.memory_subdir()
        self._status = {
            "state": JobState.SCANNING,
            "reason": reason,
            "runs": int(self._status.get("runs", 0)) + 1,
            "memory_subdir": subdir,
            "started_at": time.time(),
            "finished_at": None,
            "files_total": 0,
            "files_done": 0,
            "imported": 0,
            "unchanged": 0,
            "removed": 0,
            "chunks": 0,
            "current": "",
            "errors": [],
            "error": "",
        }
        files = await asyncio.to_thread(self._scan, settings)
        recorded = {row.path: row for row in await service.run(service.knowledge.files, subdir)}
        self._status.update(state=JobState.IMPORTING, files_total=len(files))
        for file in files:
            self._status["current"] = file.rel
            old = recorded.pop(file.rel, None)
            try:
                await self._one(subdir, file, old.digest if old is not None else None)
            except (folders.KnowledgeFileError, ModelError, DurabilityError, OSError) as exc:
                self._error(file.rel, exc)
            self._status["files_done"] += 1
        for path, row in recorded.items():
            self._status["current"] = path
            try:
                await service.run(service.knowledge.remove_file, subdir, path, row.digest)
                self._status["removed"] += 1
            except DurabilityError as exc:
                self._error(path, exc)
        self._status["state"] = JobState.DONE

    def _scan(self, settings: dict[str, Any]) -> list[folders.KnowledgeFile]:
        folders.ensure_folders(self.service.usr, settings)
        return folders.scan(self.service.usr, settings)

    async def _one(self, subdir: str, file: folders.KnowledgeFile, old: str | None) -> None:
        service = self.service
        digest = await asyncio.to_thread(folders.file_digest, file.path)
        if digest == old:
            self._status["unchanged"] += 1
            return
        found = await asyncio.to_thread(folders.chunks_of, file)
        masker = service.journal.masker
        texts = [masker.mask(text) for text, _ in found]
        embedder = service.search_embedder()
        vectors = await embedder.embed(texts) if texts else []
        chunks = [
            Chunk(text, meta, vector)
            for text, (_, meta), vector in zip(texts, found, vectors, strict=True)
        ]
        written = await service.run(
            service.knowledge.import_file,
            subdir,
            file.rel,
            file.area,
            digest,
            chunks,
            model=embedder.model_id,
        )
        if written:
            self._status["imported"] += 1
            self._status["chunks"] += len(chunks)
        else:
            self._status["unchanged"] += 1

    def _error(self, path: str, exc: BaseException) -> None:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        errors = self._status["errors"]
        if len(errors) < MAX_ERRORS:
            errors.append({"path": path, "message": self.service.journal.masker.mask(message)})
        logger.warning("knowledge file %s not imported: %s", path, type(exc).__name__)
