"""POST /api/upload_work_dir_files: files (multipart field ``files``) into a work folder."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.datastructures import UploadFile

from python.api._work_dir import listing, resolve, save_upload, work_root
from python.server.api import ApiError, ApiHandler, bad_request, get_str


class UploadWorkDirFiles(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        files = input.get("files", input.get("files[]"))
        if not isinstance(files, list) or not all(isinstance(f, UploadFile) for f in files):
            raise bad_request("send the files as multipart field 'files'", field="files")
        if not files:
            raise bad_request("send the files as multipart field 'files'", field="files")
        root = await work_root(self.runtime, input)
        folder = resolve(root, get_str(input, "path"))
        if folder.real.exists() and not folder.real.is_dir():
            raise ApiError("not_a_directory", f"'{folder.rel}' is a file, not a folder.")
        await asyncio.to_thread(folder.real.mkdir, parents=True, exist_ok=True)
        uploaded = [await save_upload(folder, upload) for upload in files]
        return {"uploaded": uploaded, **await asyncio.to_thread(listing, folder)}
