"""POST /api/knowledge_reindex {ctxid}: import the knowledge folders again now (only what
changed is re-read); answers when done, with the import's status."""

from __future__ import annotations

from typing import Any

from python.server.api import ApiHandler


class KnowledgeReindex(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        status = await self.runtime.memory.importer.run("reindex")
        return {"ok": True, "message": _message(status), "status": status}


def _message(status: dict[str, Any]) -> str:
    errors = len(status.get("errors", []))
    text = (
        f"{status.get('imported', 0)} file(s) imported, {status.get('unchanged', 0)} unchanged,"
        f" {status.get('removed', 0)} removed"
    )
    return text + (f"; {errors} could not be imported" if errors else "")
