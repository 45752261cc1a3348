"""POST /api/knowledge_path_get {ctxid}: the custom knowledge folder (upstream's answer
``{ok, path}``); ``path`` is relative to the app folder as upstream's ``/a0/...`` is."""

from __future__ import annotations

import asyncio
from typing import Any

from python.helpers import knowledge as folders
from python.helpers.files import BASE_DIR
from python.server.api import ApiHandler


class KnowledgePathGet(ApiHandler):
    methods = ("GET", "POST")

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        settings = self.runtime.settings
        usr = self.runtime.usr
        await asyncio.to_thread(folders.ensure_folders, usr, settings)
        folder = folders.custom_dir(usr, settings).resolve()
        try:
            shown = folder.relative_to(BASE_DIR.resolve()).as_posix()
        except ValueError:
            shown = str(folder)
        return {"ok": True, "path": shown, "absolute_path": str(folder)}
