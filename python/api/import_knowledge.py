"""POST /api/import_knowledge: files (multipart ``files[]`` or ``files``) saved into the
custom knowledge folder's ``main`` area, then imported (answers when the import is done)."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.datastructures import UploadFile

from python.api._work_dir import write_upload
from python.api.knowledge_reindex import _message
from python.helpers import knowledge as folders
from python.server.api import ApiHandler, bad_request

MAX_UPLOAD_BYTES = folders.MAX_FILE_BYTES


class ImportKnowledge(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        files = input.get("files[]", input.get("files"))
        if isinstance(files, UploadFile):
            files = [files]
        if not isinstance(files, list) or not files:
            raise bad_request("send the files as multipart field 'files[]'", field="files")
        if not all(isinstance(f, UploadFile) for f in files):
            raise bad_request("send the files as multipart field 'files[]'", field="files")
        settings, usr = self.runtime.settings, self.runtime.usr
        await asyncio.to_thread(folders.ensure_folders, usr, settings)
        folder = folders.custom_dir(usr, settings) / "main"
        names = [await _save(folder, upload) for upload in files]
        status = await self.runtime.memory.importer.run("upload")
        return {
            "message": _message(status),
            "filenames": names[:5],
            "status": status,
        }


async def _save(folder: Any, upload: UploadFile) -> str:
    name = folders.safe_upload_name(upload.filename or "")
    kind = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if kind not in folders.KINDS:
        raise bad_request(
            f"'{name}' is not a knowledge file ({', '.join(folders.KINDS)})", field="files"
        )
    await write_upload(upload, folder / name, name, MAX_UPLOAD_BYTES, "50 MiB")
    return name
