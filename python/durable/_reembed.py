"""Re-embedding every memory after a change of embedding model, in the background.

Phase 1 embeds the text of every memory made by an old model with the new one, in
batches; the vectors land in the embedding cache (so a restart resumes where it was: a
cached text costs no request). Phase 2 gives every such memory its new vector in ONE
transaction (durability/memory/_models.py), so search never sees half the memories moved.
Until then, search embeds its query with the old model (its configuration is kept in
``memory_models``) and compares with the old vectors; the status says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from python.durable._memory_host import BackgroundWork, JobState
from python.helpers.embeddings import text_digest
from python.helpers.models import ModelConfig

if TYPE_CHECKING:  # pragma: no cover
    from python.durable._memory_host import MemoryHost

logger = logging.getLogger("a0.memory")
BATCH = 256
ROUNDS = 5  # memories saved with the old model while a swap was built: a few more rounds


class Reembed(BackgroundWork):
    task_name = "memory-reembed"

    def __init__(self, service: MemoryHost) -> None:
        super().__init__(service, {"state": JobState.IDLE})
        #: while running: the old model search still uses, and how to reach it
        self.search_model = ""
        self.search_config: ModelConfig | None = None

    async def restart(self) -> None:
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._task = None
        self.start()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _quiet(self) -> None:
        try:
            await self.run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            self._status.update(
                state=JobState.FAILED,
                error=self.service.journal.masker.mask(message),
                finished_at=time.time(),
            )
            logger.warning("re-embedding failed: %s", type(exc).__name__)

    async def run(self) -> None:
        service = self.service
        new = service.embedder()
        stored = await service.run(service.models.stored_models)
        old_models = sorted((m for m in stored if m != new.model_id), key=lambda m: -stored[m])
        if not old_models:
            self._status = {"state": JobState.IDLE, "to_model": new.model_id}
            return
        primary = old_models[0]
        known = await service.run(service.models.config_of, primary)
        self.search_model = primary if known is not None else ""
        self.search_config = _config(known) if known is not None else None
        self._status = {
            "state": JobState.RUNNING,
            "from_models": old_models,
            "to_model": new.model_id,
            "search_model": self.search_model or new.model_id,
            "total": sum(stored[m] for m in old_models),
            "done": 0,
            "moved": 0,
            "started_at": time.time(),
            "error": "",
        }
        for old in old_models:  # a failure leaves search on the old vectors (status: failed)
            for _ in range(ROUNDS):
                if not await self._move(old, new):
                    break
        self.search_model, self.search_config = "", None
        self._status.update(state=JobState.DONE, search_model=new.model_id, finished_at=time.time())

    async def _move(self, old: str, new: Any) -> int:
        """Embed then swap every memory of ``old``; how many moved (0: none were left)."""
        service = self.service
        rows: list[tuple[str, str]] = []
        after = ""
        while True:
            batch = await service.run(service.models.texts, old, after, BATCH)
            if not batch:
                break
            await new.embed([text for _, _, text in batch])  # lands in the cache
            rows += [(memory_id, text) for memory_id, _, text in batch]
            after = batch[-1][0]
            self._status["done"] = min(self._status["total"], self._status["done"] + len(batch))
        if not rows:
            return 0
        vectors = await service.run(self._cached, new.model_id, rows)
        moved = int(await service.run(service.models.swap, old, new.model_id, vectors))
        self._status["moved"] += moved
        return moved or len(rows)

    def _cached(self, model: str, rows: list[tuple[str, str]]) -> list[tuple[str, str, bytes]]:
        store = self.service.journal.store
        found: dict[str, bytes] = {}
        digests = [text_digest(text) for _, text in rows]
        for start in range(0, len(digests), 1000):
            wanted = digests[start : start + 1000]
            got: dict[str, tuple[int, bytes]] = store.read(
                lambda tx, w=wanted: tx.embedding_cache.get(model, w)  # type: ignore[misc]
            )
            found.update((d, data) for d, (_, data) in got.items())
        return [
            (memory_id, text, found[digest])
            for (memory_id, text), digest in zip(rows, digests, strict=True)
            if digest in found
        ]


def _config(record: dict[str, Any]) -> ModelConfig:
    return ModelConfig(
        provider=str(record.get("provider") or ""),
        name=str(record.get("name") or ""),
        api_base=str(record.get("api_base") or ""),
        kwargs=dict(record.get("kwargs") or {}),
    )
