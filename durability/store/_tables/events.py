"""The events table."""

from __future__ import annotations

from typing import Any

from durability.records import Event
from durability.store._shapes import Shape, dump
from durability.store._sql import Table

EVENTS = Shape(Event, json=("payload",))


class EventTable(Table):
    def insert(
        self,
        context_id: str,
        run_id: str | None,
        type: str,
        payload: object,
        now: float,
        digest: str,
    ) -> int:
        """Append an event; ``digest`` (SHA-256 of the payload's canonical JSON) is stored
        with it and comes back as ``Event.digest``."""
        return self.sql.insert_id(
            "INSERT INTO events (context_id, run_id, type, payload, created_at, digest)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (context_id, run_id, type, dump(payload), now, digest),
        )

    def list(
        self, context_id: str | None, run_id: str | None, after_id: int, limit: int
    ) -> list[Event]:
        where: list[str] = ["id > ?"]
        args: list[Any] = [after_id]
        if context_id is not None:
            where.append("context_id = ?")
            args.append(context_id)
        if run_id is not None:
            where.append("run_id = ?")
            args.append(run_id)
        return self.sql.all(
            EVENTS,
            f"SELECT {EVENTS.select} FROM events WHERE {' AND '.join(where)} ORDER BY id LIMIT ?",
            [*args, limit],
        )

    def last_of(self, types: tuple[str, ...]) -> dict[tuple[str, str], float]:
        """When each chat last had an event of each of ``types``: by (chat, type)."""
        marks = ", ".join("?" for _ in types)
        rows = self.sql.run(
            f"SELECT context_id, type, MAX(created_at) FROM events WHERE type IN ({marks})"
            " GROUP BY context_id, type",
            types,
        ).fetchall()
        return {(str(c), str(t)): float(at) for c, t, at in rows}
