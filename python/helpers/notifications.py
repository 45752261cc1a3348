"""Notifications: short messages for the person at the UI (toasts and a history), kept in
memory by the server process, as upstream Agent Zero keeps them.

One manager per process (``manager()``; the ``Runtime`` starts a fresh one). It keeps the
newest ``MAX_ITEMS``; nothing is journaled: a restart gives a new ``guid`` and the UI
clears its list (docs/ui.md says why that is enough). The poll carries the items changed
since the update index the UI already has (``output(start)``), like the chat log.
"""

from __future__ import annotations

import math
import threading
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from python.helpers.errors import BadRequest

TYPES = ("info", "success", "warning", "error", "progress")
NORMAL = 10
HIGH = 20
PRIORITIES = {"normal": NORMAL, "high": HIGH}
MAX_ITEMS = 100
DEFAULT_DISPLAY_TIME = 3.0  # seconds, upstream's default for notification_create
MAX_DISPLAY_TIME = 24 * 3600.0
MAX_TEXT = 10_000  # characters of a title, message or detail


class NotificationError(BadRequest):
    """A notification that cannot be made (an unknown type or priority)."""


@dataclass
class Notification:
    no: int
    id: str
    type: str
    priority: int
    title: str
    message: str
    detail: str
    timestamp: str
    display_time: float
    read: bool = False
    group: str = ""

    def output(self) -> dict[str, Any]:
        return asdict(self)


def check_type(value: Any) -> str:
    kind = str(value if value is not None else "info").strip().lower() or "info"
    if kind not in TYPES:
        raise NotificationError(f"Unknown notification type '{kind}': use {', '.join(TYPES)}.")
    return kind


def check_priority(value: Any, default: int = NORMAL) -> int:
    """10 (normal) or 20 (high); the words normal/high are taken too."""
    if value is None or value == "":
        return default
    if isinstance(value, str) and value.strip().lower() in PRIORITIES:
        return PRIORITIES[value.strip().lower()]
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if isinstance(value, bool) or number not in (NORMAL, HIGH):
        raise NotificationError("The priority must be 10 (normal) or 20 (high).")
    return number


def display_time_of(value: Any, default: float = DEFAULT_DISPLAY_TIME) -> float:
    """Seconds a toast stays; anything unusable becomes ``default`` (as upstream). 0 keeps
    the toast until it is closed."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    if isinstance(value, bool) or not math.isfinite(number) or number < 0:
        return default
    return min(number, MAX_DISPLAY_TIME)


def _text(value: Any) -> str:
    text = "" if value is None else str(value)
    return text[:MAX_TEXT]


class NotificationManager:
    """The newest ``MAX_ITEMS`` notifications and the update list the poll reads from."""

    def __init__(self) -> None:
        self.guid = uuid.uuid4().hex
        self.items: list[Notification] = []
        self.updates: list[str] = []  # notification ids, one per change, in order
        self._next_no = 0
        self._lock = threading.Lock()

    @property
    def version(self) -> int:
        return len(self.updates)

    def add(
        self,
        message: str,
        *,
        type: str = "info",
        priority: int = NORMAL,
        title: str = "",
        detail: str = "",
        display_time: float = DEFAULT_DISPLAY_TIME,
        group: str = "",
        id: str = "",
    ) -> Notification:
        """A new notification, or (``id`` of a kept one) that one replaced and unread."""
        kind = check_type(type)
        with self._lock:
            found = next((n for n in self.items if id and n.id == id), None)
            if found is None:
                found = Notification(
                    no=self._next_no,
                    id=id or str(uuid.uuid4()),
                    type=kind,
                    priority=priority,
                    title="",
                    message="",
                    detail="",
                    timestamp="",
                    display_time=display_time,
                )
                self._next_no += 1
                self.items.append(found)
                del self.items[:-MAX_ITEMS]
            found.type, found.priority, found.display_time = kind, priority, display_time
            found.title, found.message, found.detail = _text(title), _text(message), _text(detail)
            found.group, found.read = _text(group), False
            found.timestamp = datetime.now(UTC).isoformat()
            self.updates.append(found.id)
            return found

    def output(self, start: int = 0) -> list[dict[str, Any]]:
        """The kept items changed since update index ``start`` (all for 0), oldest first."""
        with self._lock:
            start = max(0, int(start or 0))
            if start == 0 or start > len(self.updates):
                return [n.output() for n in self.items]
            changed = set(self.updates[start:])
            return [n.output() for n in self.items if n.id in changed]

    def history(self) -> list[dict[str, Any]]:
        with self._lock:
            return [n.output() for n in self.items]

    def mark_read(self, ids: list[str] | None = None, *, all: bool = False) -> int:
        """Mark the named items (or every item) read; returns how many were unread."""
        wanted = set(ids or [])
        count = 0
        with self._lock:
            for item in self.items:
                if (all or item.id in wanted) and not item.read:
                    item.read = True
                    count += 1
                    self.updates.append(item.id)
        return count

    def clear(self) -> None:
        """Forget every item; a new guid tells the UI to clear its list."""
        with self._lock:
            self.guid = uuid.uuid4().hex
            self.items = []
            self.updates = []


_manager = NotificationManager()


def manager() -> NotificationManager:
    """The process's notifications (the tools and the endpoints share it)."""
    return _manager


def fresh_manager() -> NotificationManager:
    """A new, empty manager for a starting server (a new guid, as after a restart)."""
    global _manager
    _manager = NotificationManager()
    return _manager
