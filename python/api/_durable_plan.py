"""Shared pieces of the durable_plan_* endpoints: the journal, the chat id, conflict rows."""

from __future__ import annotations

from typing import Any

from durability.documents import PLAN_KIND
from durability.records import fields_of
from python.api._chat import require_context
from python.server.runtime import Runtime


async def require_chat_id(runtime: Runtime, input: dict[str, Any]) -> str:
    """The ``context_id`` of an existing chat (400 when missing, 404 when unknown or purged)."""
    return (await require_context(runtime, input, "context_id", "context", "ctxid")).id


def conflict_row(conflict: Any) -> dict[str, Any]:
    return fields_of(
        conflict,
        *("id", "context_id", "kind", "expected_revision", "actual_revision", "proposed"),
        *("actor", "created_at", "resolved_at", "resolution", "resolved_by"),
    )


async def plan_conflicts(journal: Any, ctx_id: str) -> list[dict[str, Any]]:
    """The chat's unresolved plan conflicts, oldest first."""
    conflicts = await journal.aio.list_conflicts(ctx_id)
    return [conflict_row(c) for c in conflicts if c.kind == PLAN_KIND]
