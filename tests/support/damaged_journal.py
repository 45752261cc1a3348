"""A SQLite journal that opens but fails its integrity check: the leaves of its events,
near the end of the file, overwritten."""

from __future__ import annotations

from pathlib import Path

from durability import Journal


def damage_journal(path: Path) -> None:
    """Write a journal of 300 events at ``path``, then overwrite bytes of the pages near
    its end (the events' leaves): the file still opens, its quick check fails."""
    with Journal.open_sqlite(path) as journal:
        for i in range(300):
            journal.append_event("chat", "log", {"i": i, "text": "x" * 200})
    data = bytearray(path.read_bytes())
    size = len(data)
    for page in range(size - 20 * 1024 + 100, size - 10 * 1024, 1024):
        for offset in range(page, page + 600, 3):
            data[offset] = 0xA5
    path.write_bytes(bytes(data))
