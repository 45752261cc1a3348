"""The chat log the UI shows: typed items that can be updated and streamed into.

``version`` counts changes. ``output(start)`` returns every item changed since version
``start`` (the Agent Zero poll protocol: the UI sends the version it last saw as
``log_from`` and merges items by ``no``); ``output(0)`` is the whole log.

This fork: an item that shows a journaled call names it (``call_id``), and an item rebuilt
from the journal instead of shown live says so (``restored``: ``journal`` for a call with a
committed result, ``uncertain`` for a call whose outcome is unknown). Both are left out of
``output()`` while unset, so live items keep upstream's shape.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

#: ``LogItem.restored``: "" (shown live), or how the item was rebuilt from the journal
RESTORED_STATES = ("", "journal", "uncertain")
LOG_TYPES = (
    "user",
    "agent",
    "response",
    "tool",
    "code_exe",
    "warning",
    "error",
    "info",
    "util",
    "hint",
    "progress",
    "browser",  # a browser_agent step (its URL and screenshot in kvps)
)
_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}")


class Masker(Protocol):
    def mask(self, value: Any) -> Any: ...


@dataclass
class LogItem:
    log: Log = field(repr=False)
    no: int
    type: str
    heading: str = ""
    content: str = ""
    kvps: dict[str, Any] = field(default_factory=dict)
    agentno: int = 0
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    timestamp: float = field(default_factory=time.time)
    call_id: str = ""  # the journaled call this item shows (this fork)
    restored: str = ""  # one of RESTORED_STATES (this fork)

    def mark(self, *, call_id: str | None = None, restored: str | None = None) -> LogItem:
        """Name the journaled call the item shows and how it was rebuilt."""
        if call_id is not None:
            self.call_id = str(call_id)
        if restored is not None:
            self.restored = _check_restored(restored)
        self.log._changed(self)
        return self

    def update(
        self,
        heading: str | None = None,
        content: str | None = None,
        kvps: Mapping[str, Any] | None = None,
        type: str | None = None,
    ) -> LogItem:
        """Replace the given fields (kvps are merged in)."""
        if type is not None:
            self.type = _check_type(type)
        if heading is not None:
            self.heading = self.log._mask(str(heading))
        if content is not None:
            self.content = self.log._mask(str(content))
        if kvps is not None:
            self.kvps = {**self.kvps, **self.log._mask(dict(kvps))}
        self.log._changed(self)
        return self

    def stream(
        self, content: str = "", heading: str = "", kvps: Mapping[str, Any] | None = None
    ) -> LogItem:
        """Append text to content and heading, and to string kvps values (the whole text is
        masked again, so a secret split across two pieces is masked too)."""
        self.content = self.log._mask(self.content + str(content))
        self.heading = self.log._mask(self.heading + str(heading))
        for key, value in self.log._mask(dict(kvps or {})).items():
            old = self.kvps.get(key)
            joined = old + value if isinstance(old, str) and isinstance(value, str) else value
            self.kvps[key] = self.log._mask(joined)
        self.log._changed(self)
        return self

    def output(self) -> dict[str, Any]:
        out = {
            "no": self.no,
            "id": self.id,
            "type": self.type,
            "heading": self.heading,
            "content": self.content,
            "kvps": dict(self.kvps),
            "agentno": self.agentno,
            "timestamp": self.timestamp,
        }
        if self.call_id:
            out["call_id"] = self.call_id
        if self.restored:
            out["restored"] = self.restored
        return out


def _check_type(value: str) -> str:
    if not isinstance(value, str) or not _TYPE.fullmatch(value):
        raise ValueError(f"invalid log item type {value!r}")
    return value


def _check_restored(value: str) -> str:
    if value not in RESTORED_STATES:
        raise ValueError(f"invalid restored state {value!r}")
    return value


class Log:
    """One chat's log. ``guid`` changes on reset so the UI knows to start over."""

    def __init__(self, masker: Masker | None = None) -> None:
        self.masker = masker
        self.guid = uuid.uuid4().hex
        self.items: list[LogItem] = []
        self.updates: list[int] = []  # item numbers, one per change
        self.progress = ""
        self.progress_no = 0
        self.progress_active = False

    @property
    def version(self) -> int:
        return len(self.updates)

    def _mask(self, value: Any) -> Any:
        return self.masker.mask(value) if self.masker is not None else value

    def _changed(self, item: LogItem) -> None:
        self.updates.append(item.no)

    def log(
        self,
        type: str,
        heading: str = "",
        content: str = "",
        kvps: Mapping[str, Any] | None = None,
        agentno: int = 0,
        id: str | None = None,
        *,
        call_id: str = "",
        restored: str = "",
    ) -> LogItem:
        """Add an item; heading, content and kvps pass through the masker first."""
        item = LogItem(
            log=self,
            no=len(self.items),
            type=_check_type(type),
            heading=self._mask(str(heading or "")),
            content=self._mask(str(content or "")),
            kvps=self._mask(dict(kvps or {})),
            agentno=int(agentno or 0),
            call_id=str(call_id or ""),
            restored=_check_restored(restored or ""),
        )
        if id:
            item.id = str(id)
        self.items.append(item)
        self._changed(item)
        if heading and type != "progress":
            self.set_progress(str(item.heading), item.no)
        return item

    def output(self, start: int = 0) -> list[dict[str, Any]]:
        """Items changed since version ``start`` (all items for 0), ordered by ``no``."""
        start = max(0, int(start or 0))
        if start == 0:
            return [item.output() for item in self.items]
        changed = sorted(set(self.updates[start:]))
        return [self.items[no].output() for no in changed]

    def set_progress(self, text: str, no: int = 0, active: bool = True) -> None:
        """The one-line status the UI shows under the chat."""
        self.progress = self._mask(text)
        self.progress_no = no
        self.progress_active = active

    def reset(self) -> None:
        """Forget every item; a new guid tells the UI to clear its view."""
        self.guid = uuid.uuid4().hex
        self.items = []
        self.updates = []
        self.set_progress("", 0, False)
