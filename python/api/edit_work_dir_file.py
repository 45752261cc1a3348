"""POST /api/edit_work_dir_file: read a text file of the work folder, or save new text into
one (upstream's endpoint name).

Without ``content`` the file's text is returned; with ``content`` the file is written whole
through a temporary file (a new file is made when the name is free; its folder must exist).
Only UTF-8 text up to MAX_EDIT_BYTES is edited here; anything else is downloaded instead.
"""

from __future__ import annotations

import asyncio
from typing import Any

from python.api._work_dir import WorkPath, listing, not_found, require_path, resolve, work_root
from python.helpers import files
from python.server.api import ApiError, ApiHandler, bad_request

MAX_EDIT_BYTES = 1024 * 1024


def _read(target: WorkPath) -> dict[str, Any]:
    if not target.real.exists():
        raise not_found(target.rel)
    if not target.real.is_file():
        raise ApiError("is_a_directory", f"'{target.rel}' is not a file.")
    info = target.real.stat()
    if info.st_size > MAX_EDIT_BYTES:
        raise ApiError("payload_too_large", f"'{target.rel}' is larger than 1 MiB: download it.")
    try:
        text = target.real.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ApiError(
            "not_a_text_file", f"'{target.rel}' is not UTF-8 text: download it."
        ) from None
    size, modified = info.st_size, info.st_mtime
    return {"path": target.rel, "content": text, "size": size, "modified": modified}


def _write(target: WorkPath, content: str) -> dict[str, Any]:
    if target.real.is_dir():
        raise ApiError("is_a_directory", f"'{target.rel}' is a folder; not replaced.")
    if not target.real.parent.is_dir():
        raise not_found(str(target.lexical.parent.relative_to(target.root)))
    files.write_atomic(target.real, content)
    parent = resolve(target.root, str(target.lexical.parent))
    return {"saved": target.rel, "size": target.real.stat().st_size, **listing(parent)}


class EditWorkDirFile(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        root = await work_root(self.runtime, input)
        target = resolve(root, require_path(input))
        if not target.rel:
            raise bad_request("'path' must name a file, not the work folder", field="path")
        content = input.get("content")
        if content is None:
            return await asyncio.to_thread(_read, target)
        if not isinstance(content, str):
            raise bad_request("'content' must be text", field="content")
        if len(content.encode("utf-8", "surrogatepass")) > MAX_EDIT_BYTES:
            raise ApiError("payload_too_large", "The text is larger than 1 MiB.")
        return await asyncio.to_thread(_write, target, content)
