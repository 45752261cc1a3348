"""GET|POST /api/download_work_dir_file: one file of the work folder, as an attachment."""

from __future__ import annotations

from typing import Any

from starlette.responses import FileResponse

from python.api._work_dir import not_found, require_path, resolve, work_root
from python.server.api import ApiError, ApiHandler


class DownloadWorkDirFile(ApiHandler):
    methods = ("GET", "POST")

    async def process(self, input: dict[str, Any], request) -> FileResponse:
        root = await work_root(self.runtime, input)
        target = resolve(root, require_path(input))
        if not target.real.exists():
            raise not_found(target.rel)
        if not target.real.is_file():
            raise ApiError("is_a_directory", f"'{target.rel}' is not a file.")
        return FileResponse(
            target.real,
            filename=target.lexical.name,
            content_disposition_type="attachment",
            headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
        )
