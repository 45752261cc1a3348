"""The journal's asynchronous facade: ``await journal.aio.<method>(...)``.

Every operation of the journal is a method here too, with the same arguments: both come
from one declaration (durability/journal/_operation.py). A write on an engine with native
asynchronous writes (SQLite's group-commit writer) is prepared on the event loop
(argument checks, masking, canonical JSON: microseconds for the calls the loop makes) and
handed to the store's writer as a transaction; the loop is never blocked on the disk and
no thread is taken per call. A call whose payload is large (long text, many containers:
see ``_validation.is_light``) is prepared in the journal's pool instead, so the loop stays
responsive. Reads, and writes on other engines (PostgreSQL's blocking driver, or a shared
worker's fenced writes), run whole in the journal's own thread pool
(``Journal.async_workers`` threads, started as needed): unlike asyncio's default pool
(``min(32, cores + 4)`` threads) it is sized for every run to have a call in flight.
"""

from __future__ import annotations

import asyncio

from durability.journal._operation import AsyncBase, JournalBase
from durability.journal._operations import Operations


class AsyncJournal(Operations, AsyncBase):
    """``await journal.aio.admit(...)``: the journal's operations for code on an event loop."""

    def __init__(self, journal: JournalBase) -> None:
        self._journal = journal

    @property
    def journal(self) -> JournalBase:
        return self._journal

    async def flush(self) -> None:
        """Return once every write deferred so far is committed (or refused)."""
        await self._journal.store.flush_async()

    async def integrity_check(self, full: bool = False) -> list[str]:
        loop = asyncio.get_running_loop()
        store = self._journal.store
        return await loop.run_in_executor(self._journal.executor(), store.integrity_check, full)
