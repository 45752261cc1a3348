"""A journaled chat not rebuilt since start-up, as the chat list shows it (issue #24).

Start-up reads one ``IdleChat`` per idle chat from its newest checkpoint row
(python/durable/rebuild.py: ``idle_chats``) in a thread of its own (``IdleSummaries``),
begun once the chats with an open run are known: the server answers ``/api/health``
without waiting for them. ``DurableChats`` keeps them until a request names the chat,
which rebuilds it; whatever needs them (``poll``, a request naming a chat, a new chat's
default name) waits for that read first."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass

logger = logging.getLogger("a0.durable")


@dataclass(frozen=True, slots=True)
class IdleChat:
    """A journaled chat not rebuilt yet, as the chat list shows it."""

    name: str | None
    created_at: float  # its first run's time: the chat list's order
    log_length: int  # as its newest checkpoint has it


IdleMap = Mapping[str, IdleChat | None]


class IdleSummaries:
    """The idle chats' summaries, read by ``read`` in a daemon thread begun now."""

    def __init__(self, read: Callable[[], IdleMap]) -> None:
        self._read = read
        self._future: Future[IdleMap] = Future()
        self._future.set_running_or_notify_cancel()  # nobody cancels it
        threading.Thread(target=self._run, name="idle-chats", daemon=True).start()

    def _run(self) -> None:
        started = time.monotonic()
        try:
            found = self._read()
        except BaseException as exc:  # ``result`` reads again, and raises what it meets
            logger.warning("idle chats not read: %s", type(exc).__name__)
            self._future.set_exception(exc)
            return
        logger.info("idle chats listed: %d (%.3f s)", len(found), time.monotonic() - started)
        self._future.set_result(found)

    def result(self) -> IdleMap:
        """The summaries, waiting for the thread; a read that failed is tried again here
        (its error raised), so no chat is dropped from the list by one failed read."""
        try:
            return self._future.result()
        except Exception:
            return self._read()

    async def wait(self) -> None:
        """Wait for the thread without blocking the event loop (``result`` gives what it
        read, or raises)."""
        with contextlib.suppress(Exception):
            await asyncio.wrap_future(self._future)
