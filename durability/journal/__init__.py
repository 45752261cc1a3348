"""The journal: ``Journal`` (synchronous, thread-safe) and its asynchronous facade
``AsyncJournal`` (``journal.aio``). See durability/journal/_core.py for the layout."""

from durability.journal._async import AsyncJournal
from durability.journal._core import Journal

__all__ = ["AsyncJournal", "Journal"]
