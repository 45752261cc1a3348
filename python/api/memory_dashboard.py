"""POST /api/memory_dashboard {action, ...}: list, search, edit and delete memories
(upstream's actions: get_memory_subdirs, get_current_memory_subdir, search, delete,
bulk_delete, update; plus ``status``). Errors are the usual ``{"error": {code, ...}}``."""

from __future__ import annotations

from typing import Any

from python.api._memory import MAX_LIMIT, ids_of, memory_view, subdir_of
from python.server.api import ApiHandler, bad_request, get_dict, get_int, get_number, get_str

ACTIONS = (
    "get_memory_subdirs",
    "get_current_memory_subdir",
    "search",
    "delete",
    "bulk_delete",
    "update",
    "status",
)


class MemoryDashboard(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        action = get_str(input, "action", required=True)
        if action not in ACTIONS:
            raise bad_request(
                f"unknown action '{action}' (one of {', '.join(ACTIONS)})", field="action"
            )
        service = self.runtime.memory
        memories = service.memories
        if action == "status":
            return {"success": True, **service.status()}
        if action == "get_memory_subdirs":
            return {"success": True, "subdirs": await memories.run_async(memories.subdirs)}
        if action == "get_current_memory_subdir":
            return {"success": True, "memory_subdir": service.memory_subdir()}
        subdir = subdir_of(input, service.memory_subdir())
        if action == "search":
            return await self._search(input, subdir)
        if action == "delete":
            memory_id = get_str(input, "memory_id", required=True)
            deleted = await memories.run_async(memories.delete, subdir, [memory_id])
            return {"success": True, "deleted": deleted}
        if action == "bulk_delete":
            ids = ids_of(input, "memory_ids")
            deleted = await memories.run_async(memories.delete, subdir, ids)
            return {"success": True, "deleted": deleted}
        return await self._update(input, subdir)

    async def _search(self, input: dict[str, Any], subdir: str) -> dict[str, Any]:
        service = self.runtime.memory
        memories = service.memories
        area = get_str(input, "area")
        text = get_str(input, "search").strip()
        limit = min(get_int(input, "limit", default=100, minimum=1), MAX_LIMIT)
        threshold = get_number(input, "threshold", default=0.6)
        areas = [area] if area else None
        if text:
            embedder = service.search_embedder()
            vector = await embedder.embed_query(service.journal.masker.mask(text))
            found = await memories.run_async(
                memories.search,
                subdir,
                vector,
                model=embedder.model_id,
                threshold=threshold,
                limit=limit,
                areas=areas,
            )
            views = [memory_view(m, score) for m, score in found]
        else:
            listed = await memories.run_async(
                memories.list_memories, subdir, areas=areas, limit=limit
            )
            views = [memory_view(m) for m in listed]
        counts = await memories.run_async(memories.counts, subdir)
        files = await service.run(service.knowledge.files, subdir)
        total = sum(counts.values())
        knowledge = sum(len(f.ids) for f in files)
        return {
            "success": True,
            "memories": views,
            "total_count": len(views),
            "total_db_count": total,
            "knowledge_count": knowledge,
            "conversation_count": max(0, total - knowledge),
            "area_counts": counts,
            "search_query": text,
            "area_filter": area,
            "memory_subdir": subdir,
        }

    async def _update(self, input: dict[str, Any], subdir: str) -> dict[str, Any]:
        service = self.runtime.memory
        memories = service.memories
        original = get_dict(input, "original")
        memory_id = get_str(original, "id") or get_str(input, "memory_id")
        if not memory_id:
            raise bad_request("name the memory: 'original.id'", field="original")
        edited = get_dict(input, "edited")
        current = await memories.run_async(memories.get, subdir, memory_id)
        text = edited.get("content_full")
        if text is not None and not isinstance(text, str):
            raise bad_request("'edited.content_full' must be a text", field="edited")
        changes: dict[str, Any] = {}
        if "metadata" in edited:
            metadata = get_dict(edited, "metadata")
            area = metadata.get("area")
            if isinstance(area, str) and area.strip() and area != current.area:
                changes["area"] = area.strip()
            changes["metadata"] = {
                k: v for k, v in metadata.items() if k not in ("id", "area", "timestamp")
            }
        if text is not None and text != current.text:
            masked = service.journal.masker.mask(text)
            embedder = service.search_embedder()
            changes.update(
                text=text, vector=await embedder.embed_query(masked), model=embedder.model_id
            )
        memory = await memories.run_async(memories.update, subdir, memory_id, **changes)
        return {"success": True, "memory": memory_view(memory)}
