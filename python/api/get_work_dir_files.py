"""GET|POST /api/get_work_dir_files: one folder of the chat's work folder."""

from __future__ import annotations

import asyncio
from typing import Any

from python.api._work_dir import listing, resolve, work_root
from python.server.api import ApiHandler, get_str


class GetWorkDirFiles(ApiHandler):
    methods = ("GET", "POST")

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        root = await work_root(self.runtime, input)
        target = resolve(root, get_str(input, "path"))
        return await asyncio.to_thread(listing, target)
